import gzip
from lfgen import make
a = make(11, ["/cart", "/login", "/products/list"], 200, traps=True)[0]
b = make(12, ["/cart", "/login", "/products/list", "/ping"], 150, traps=True)[0]
open("/app/logs/api-1.log", "w").write(a)
with gzip.open("/app/logs/api-2.log.gz", "wt") as f:
    f.write(b)
