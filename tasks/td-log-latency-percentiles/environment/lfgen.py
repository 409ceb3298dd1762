# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
import random
from collections import defaultdict


def lat(rng):
    r = rng.random()
    if r < 0.7:
        v = rng.uniform(0.2, 80)
    elif r < 0.95:
        v = rng.uniform(80, 900)
    else:
        v = rng.uniform(900, 30000)
    return rng.choice([f"{v:.3f}", f"{v:.1f}", f"{int(v)}", f"{v:.2f}"])


def make(seed, routes, n, traps=False):
    """Returns (text, {route: [latency floats]})."""
    rng = random.Random(seed)
    out, agg = [], defaultdict(list)
    for i in range(n):
        ts = f"2024-06-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
        route = rng.choice(routes)
        v = lat(rng)
        event = "http_request"
        if traps and rng.random() < 0.25:
            event = rng.choice(["db_query", "http_request_retry", "cache_miss", "http_requests"])
        pairs = [f"event={event}", f"route={route}", f"latency_ms={v}",
                 f"level={rng.choice(['info', 'warn', 'debug'])}", f"status={rng.choice([200, 200, 404, 500])}",
                 f"req_id={rng.getrandbits(48):012x}"]
        if traps and rng.random() < 0.4:
            fake = rng.choice(routes)
            pairs.append(rng.choice([
                f'msg="slow request route={fake} latency_ms={rng.randint(1, 99999)}"',
                f'msg="event=http_request route={fake}"',
                f'user_agent="probe latency_ms=0 event=http_request"',
            ]))
        elif rng.random() < 0.3:
            pairs.append('msg="request done"')
        rng.shuffle(pairs)
        out.append(ts + " " + " ".join(pairs))
        if event == "http_request":
            agg[route].append(float(v))
    return "\n".join(out) + "\n", dict(agg)


def nearest_rank(values, p):
    s = sorted(values)
    k = (p * len(s) + 99) // 100
    return s[max(k, 1) - 1]
