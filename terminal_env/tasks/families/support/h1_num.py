"""Reference numerics for the scientific families root-solve, ode-states and curve-fit: case
generators and reference answers (standard library only)."""

import math

# ------------------------------------------------------------------ root-solve


def npv(rate, flows):
    return sum(c / (1 + rate) ** t for t, c in enumerate(flows))


def bisect(f, lo, hi, iters=200):
    flo = f(lo)
    for _ in range(iters):
        mid = (lo + hi) / 2
        fm = f(mid)
        if fm == 0:
            return mid
        if (fm < 0) == (flo < 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return (lo + hi) / 2


def norm_cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2))


def root_answer(kind, case):
    if kind == "irr":
        return bisect(lambda r: npv(r, case["flows"]), -0.99, 10.0)
    if kind == "kepler":
        m, e = case["M"], case["e"]
        return bisect(lambda x: x - e * math.sin(x) - m, m - 1.0, m + 1.0)
    if kind == "quantile":
        p, mu, s = case["p"], case["mu"], case["sigma"]
        if p < 0.5:
            z = bisect(lambda z: math.log(norm_cdf(z)) - math.log(p), -30.0, 0.0)
        else:
            z = -bisect(lambda z: math.log(norm_cdf(z)) - math.log(1 - p), -30.0, 0.0)
        return mu + s * z
    a, b, c, d = case["coef"]
    f = lambda x: ((a * x + b) * x + c) * x + d
    disc = b * b - 3 * a * c
    bound = 1 + max(abs(b), abs(c), abs(d)) / abs(a)
    pts = [-bound]
    if disc > 0:
        r = math.sqrt(disc)
        pts += sorted([(-b - r) / (3 * a), (-b + r) / (3 * a)])
    pts.append(bound)
    roots = []
    for lo, hi in zip(pts, pts[1:]):
        if f(lo) == 0:
            roots.append(lo)
        elif f(lo) * f(hi) < 0:
            roots.append(bisect(f, lo, hi))
    return roots


def root_cases(kind, rng, n, hard=False):
    out = []
    for i in range(n):
        if kind == "irr":
            k = rng.randint(2, 30 if hard else 8)
            rate = rng.uniform(-0.5, 0.8) if hard else rng.uniform(0.01, 0.3)
            inflows = [round(rng.uniform(10, 500), 2) for _ in range(k)]
            out.append({"flows": [-round(npv(rate, [0] + inflows), 2)] + inflows})
        elif kind == "kepler":
            e = rng.uniform(0.9, 0.995) if hard and i % 2 else rng.uniform(0.0, 0.7)
            m = rng.uniform(-20, 20) if hard else rng.uniform(0, 2 * math.pi)
            out.append({"M": round(m, 6), "e": round(e, 4)})
        elif kind == "quantile":
            if hard and i % 2:
                p = 10 ** -rng.uniform(6, 13)
                p = 1 - p if rng.random() < 0.5 else p
            else:
                p = rng.uniform(0.001, 0.999)
            out.append({"p": p, "mu": round(rng.uniform(-50, 50), 3),
                        "sigma": round(rng.uniform(0.1, 20), 3)})
        else:
            roots = sorted(round(rng.uniform(-9, 9), 3) for _ in range(3))
            a = rng.choice([1, -1, 2, 0.5, -3])
            if rng.random() < 0.5:  # one real root: (x - r)(x^2 + px + q) with p^2 < 4q
                r, p = roots[0], rng.uniform(-4, 4)
                q = p * p / 4 + rng.uniform(0.5, 9)
                coef = [a, a * (p - r), a * (q - p * r), -a * q * r]
            elif roots[1] - roots[0] < 0.05 or roots[2] - roots[1] < 0.05:
                continue
            else:
                r1, r2, r3 = roots
                coef = [a, -a * (r1 + r2 + r3), a * (r1 * r2 + r1 * r3 + r2 * r3), -a * r1 * r2 * r3]
            out.append({"coef": [round(x, 9) for x in coef]})
    return out


# ------------------------------------------------------------------ ode-states


def ode_rhs(kind, p):
    if kind == "decay-chain":
        return lambda t, y: [-p["k1"] * y[0], p["k1"] * y[0] - p["k2"] * y[1], p["k2"] * y[1]]
    if kind == "damped-spring":
        return lambda t, y: [y[1], -2 * p["zeta"] * p["omega"] * y[1] - p["omega"] ** 2 * y[0]
                             + p["force"] * math.cos(p["drive"] * t)]
    if kind == "predator-prey":
        return lambda t, y: [p["a"] * y[0] - p["b"] * y[0] * y[1], p["d"] * y[0] * y[1] - p["c"] * y[1]]
    return lambda t, y: [y[1], -p["g"] / p["L"] * math.sin(y[0]) - p["damp"] * y[1]]


def rk4(f, t, y, t_end, h):
    while t < t_end - 1e-15:
        s = min(h, t_end - t)
        k1 = f(t, y)
        k2 = f(t + s / 2, [a + s / 2 * b for a, b in zip(y, k1)])
        k3 = f(t + s / 2, [a + s / 2 * b for a, b in zip(y, k2)])
        k4 = f(t + s, [a + s * b for a, b in zip(y, k3)])
        y = [a + s / 6 * (b1 + 2 * b2 + 2 * b3 + b4) for a, b1, b2, b3, b4 in zip(y, k1, k2, k3, k4)]
        t += s
    return y


def ode_answer(kind, case, h=1e-3):
    f = ode_rhs(kind, case["params"])
    t, y, out = 0.0, list(case["y0"]), {}
    for tt in sorted(set(case["times"])):
        y = rk4(f, t, y, tt, h)
        t = tt
        out[tt] = y
    return [out[tt] for tt in case["times"]]


def ode_case(kind, rng, shuffled=False):
    u = lambda a, b: round(rng.uniform(a, b), 3)
    if kind == "decay-chain":
        params, y0 = {"k1": u(0.2, 2), "k2": u(0.05, 1)}, [u(50, 200), 0.0, 0.0]
    elif kind == "damped-spring":
        params = {"omega": u(1, 4), "zeta": u(0.02, 0.4), "force": rng.choice([0.0, u(0.5, 2)]),
                  "drive": u(0.5, 3)}
        y0 = [u(-2, 2), u(-1, 1)]
    elif kind == "predator-prey":
        params = {"a": u(0.8, 1.2), "b": u(0.02, 0.05), "c": u(0.8, 1.2), "d": u(0.01, 0.03)}
        y0 = [u(20, 60), u(5, 20)]
    else:
        params, y0 = {"g": 9.81, "L": u(0.5, 3), "damp": u(0.0, 0.3)}, [u(-2.5, 2.5), u(-1, 1)]
    times = sorted({u(0.1, 10) for _ in range(rng.randint(3, 6))})
    if shuffled:
        times = times + [0.0, times[0]]
        rng.shuffle(times)
    return {"params": params, "y0": y0, "times": times}


# ------------------------------------------------------------------ curve-fit


def solve(a, b):
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(kind, xs, ys, ws=None):
    """Least-squares coefficients; x is centred and scaled before the normal equations are built."""
    if kind == "exp":
        a, b = fit("line", xs, [math.log(y) for y in ys])
        return [math.exp(a), b]
    ws = ws or [1.0] * len(xs)
    if kind == "origin":
        return [sum(w * x * y for w, x, y in zip(ws, xs, ys)) / sum(w * x * x for w, x in zip(ws, xs))]
    deg = 2 if kind == "quadratic" else 1
    c = sum(xs) / len(xs)
    s = max(abs(x - c) for x in xs) or 1.0
    us = [(x - c) / s for x in xs]
    ata = [[sum(w * u ** (i + j) for w, u in zip(ws, us)) for j in range(deg + 1)] for i in range(deg + 1)]
    aty = [sum(w * u ** i * y for w, u, y in zip(ws, us, ys)) for i in range(deg + 1)]
    q = solve(ata, aty)  # coefficients in u = (x - c) / s; expand back to powers of x
    if deg == 1:
        return [q[0] - q[1] * c / s, q[1] / s]
    return [q[0] - q[1] * c / s + q[2] * c * c / (s * s), q[1] / s - 2 * q[2] * c / (s * s), q[2] / (s * s)]


def fit_data(kind, rng, n, offset=0.0):
    if kind == "exp":  # keeps A*exp(B*x) within floating-point range
        offset = offset / 1000
    xs = sorted(round(offset + rng.uniform(0, 50), 3) for _ in range(n))
    a, b, c = rng.uniform(-20, 20), rng.uniform(-3, 3), rng.uniform(-0.2, 0.2)
    noise = lambda: rng.gauss(0, 0.5)
    if kind == "exp":
        b = rng.uniform(-0.08, 0.08)
        ys = [round(abs(a) + 1) * math.exp(b * (x - offset)) * math.exp(rng.gauss(0, 0.02)) for x in xs]
    elif kind == "quadratic":
        ys = [a + b * (x - offset) + c * (x - offset) ** 2 + noise() for x in xs]
    elif kind == "origin":
        ys = [b * x + noise() for x in xs]
    else:
        ys = [a + b * (x - offset) + noise() for x in xs]
    ws = [rng.choice([0.5, 1.0, 2.0, 4.0]) for _ in xs]
    return xs, [round(y, 4) for y in ys], ws
