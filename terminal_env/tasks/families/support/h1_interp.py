"""Reference interpolation for the interp-table family (a test-split family: nothing here is
shared with the train families' references): table generators and reference values (standard
library only)."""

def merge_table(xs, ys):
    by = {}
    for x, y in zip(xs, ys):
        by.setdefault(x, []).append(y)
    keys = sorted(by)
    return keys, [sum(by[k]) / len(by[k]) for k in keys]


def spline_m(xs, ys):
    """Second derivatives of the natural cubic spline (Thomas algorithm)."""
    n = len(xs)
    if n < 3:
        return [0.0] * n
    h = [xs[i + 1] - xs[i] for i in range(n - 1)]
    diag, rhs, sup = [0.0] * n, [0.0] * n, [0.0] * n
    for i in range(1, n - 1):
        diag[i] = 2 * (h[i - 1] + h[i])
        sup[i] = h[i]
        rhs[i] = 6 * ((ys[i + 1] - ys[i]) / h[i] - (ys[i] - ys[i - 1]) / h[i - 1])
    m = [0.0] * n
    for i in range(2, n - 1):
        f = h[i - 1] / diag[i - 1]
        diag[i] -= f * sup[i - 1]
        rhs[i] -= f * rhs[i - 1]
    for i in range(n - 2, 0, -1):
        m[i] = (rhs[i] - sup[i] * m[i + 1]) / diag[i]
    return m


def interp(method, xs, ys, q):
    xs, ys = merge_table(xs, ys)
    if q <= xs[0] or q >= xs[-1]:
        return ys[0] if q <= xs[0] else ys[-1]
    i = max(j for j in range(len(xs) - 1) if xs[j] <= q)
    x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
    t = (q - x0) / (x1 - x0)
    if method == "linear":
        return y0 + t * (y1 - y0)
    if method == "spline":
        m, h = spline_m(xs, ys), x1 - x0
        return ((1 - t) * y0 + t * y1
                + h * h / 6 * (((1 - t) ** 3 - (1 - t)) * m[i] + (t ** 3 - t) * m[i + 1]))
    # monotone: Fritsch-Carlson slopes
    n = len(xs)
    d = [(ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j]) for j in range(n - 1)]
    s = [d[0]] + [0.0 if d[j - 1] * d[j] <= 0 else
                  3 * (xs[j + 1] - xs[j - 1]) / ((2 * xs[j + 1] - xs[j] - xs[j - 1]) / d[j - 1]
                                                  + (xs[j + 1] + xs[j] - 2 * xs[j - 1]) / d[j])
                  for j in range(1, n - 1)] + [d[-1]]
    h = x1 - x0
    return ((2 * t ** 3 - 3 * t ** 2 + 1) * y0 + (t ** 3 - 2 * t ** 2 + t) * h * s[i]
            + (-2 * t ** 3 + 3 * t ** 2) * y1 + (t ** 3 - t ** 2) * h * s[i + 1])


def interp_table(rng, n, dups=False, scrambled=False):
    xs = sorted({round(rng.uniform(0, 100), 2) for _ in range(n)})
    ys, y = [], rng.uniform(-10, 10)
    for _ in xs:
        y += rng.uniform(-5, 8)
        ys.append(round(y, 3))
    if dups:
        for _ in range(max(1, n // 6)):
            j = rng.randrange(len(xs))
            xs.append(xs[j])
            ys.append(round(ys[j] + rng.uniform(-2, 2), 3))
    if scrambled:
        pairs = list(zip(xs, ys))
        rng.shuffle(pairs)
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    return xs, ys


def bilinear(grid, q):
    xs, ys, z = grid["x"], grid["y"], grid["z"]
    qx = min(max(q[0], xs[0]), xs[-1])
    qy = min(max(q[1], ys[0]), ys[-1])
    i = min(max(j for j in range(len(xs)) if xs[j] <= qx), len(xs) - 2)
    k = min(max(j for j in range(len(ys)) if ys[j] <= qy), len(ys) - 2)
    tx = (qx - xs[i]) / (xs[i + 1] - xs[i])
    ty = (qy - ys[k]) / (ys[k + 1] - ys[k])
    return ((1 - tx) * (1 - ty) * z[k][i] + tx * (1 - ty) * z[k][i + 1]
            + (1 - tx) * ty * z[k + 1][i] + tx * ty * z[k + 1][i + 1])


def grid_data(rng):
    xs = sorted({round(rng.uniform(0, 50), 1) for _ in range(rng.randint(4, 7))})
    ys = sorted({round(rng.uniform(0, 50), 1) for _ in range(rng.randint(4, 7))})
    z = [[round(rng.uniform(-20, 40), 2) for _ in xs] for _ in ys]
    return {"x": xs, "y": ys, "z": z}
