# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
import random
from collections import defaultdict

UAS = ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
       'curl/8.4.0', 'Go-http-client/1.1', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) "quoted"',
       'python-requests/2.31.0', '-']
REFS = ['-', 'https://example.org/page?a=1&b=2', 'https://search.test/?q=some thing']
MONTHS = ["Jan", "Feb", "Mar", "Apr"]


def make_log(seed, paths, methods=("GET", "POST", "PUT", "DELETE"), n=(300, 600), malformed=False):
    rng = random.Random(seed)
    lines, agg = [], defaultdict(lambda: [0, 0])
    err_rate = {(m, p): rng.choice([0, 0, 0.02, 0.1, 0.3, 0.6]) for m in methods for p in paths}
    for _ in range(rng.randint(*n)):
        ip = rng.choice([f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                         f"2001:db8::{rng.randint(1, 0xffff):x}"])
        user = rng.choice(["-", "-", "alice", "bob"])
        t = f"[{rng.randint(1, 28):02d}/{rng.choice(MONTHS)}/2024:{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} +0000]"
        tail = f'{rng.randint(0, 90000)} "{rng.choice(REFS)}" "{rng.choice(UAS)}"'
        if malformed and rng.random() < 0.12:
            req = rng.choice(['-', 'GET', '\\x16\\x03\\x01', 'GET /x HTTP/1.1 extra', 'BREW /pot'])
            lines.append(f'{ip} - {user} {t} "{req}" {rng.choice([400, 408, 500, 503])} 0 "-" "-"')
            continue
        m = rng.choice(methods)
        p = rng.choice(paths)
        target = p
        r = rng.random()
        if r < 0.3:
            target += f"?id={rng.randint(1, 999)}&sort=asc"
        elif r < 0.35:
            target += "?"
        elif r < 0.4:
            target += "?next=/other?x=1"
        bad = rng.random() < err_rate[(m, p)]
        status = rng.choice([500, 502, 503, 504]) if bad else rng.choice([200, 200, 201, 204, 301, 304, 400, 401, 404, 499])
        lines.append(f'{ip} - {user} {t} "{m} {target} HTTP/1.{rng.randint(0, 1)}" {status} {tail}')
        agg[(m, p)][0] += 1
        agg[(m, p)][1] += status >= 500
    return "\n".join(lines) + "\n", dict(agg)
