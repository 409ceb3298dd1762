import gzip
from lfgen import make
a = make(11, ["/cart", "/login", "/products/list"], 200, traps=True)[0]
b = make(12, ["/cart", "/login", "/products/list", "/ping"], 150, traps=True)[0]
open("/app/logs/api-1.log", "w").write(a)
# mtime=0: the gzip header holds no build time, so every build is the same instance
with open("/app/logs/api-2.log.gz", "wb") as f:
    f.write(gzip.compress(b.encode(), mtime=0))
