"""Reference of the conf-migrate family: the project's settings (nested, typed), its report, and
the settings written as INI (plain, with a DEFAULT section, with interpolation), JSON or TOML."""

import json

CATS = ["food", "rent", "travel", "books", "tools", "fees"]


def make_cfg(rng):
    return {"report": {"title": rng.choice(["Monthly spend", "Team costs", "Q2 outlay"]),
                       "threshold": rng.randint(5, 60), "categories": rng.sample(CATS, rng.randint(2, 4))},
            "format": {"uppercase": rng.random() < 0.5, "scale": rng.choice([1.0, 0.5, 1.25, 0.01]),
                       "digits": rng.randint(0, 3), "currency": rng.choice(["EUR", "USD", "CHF"])}}


def make_rows(rng, n):
    return [[rng.choice(CATS), rng.randint(1, 200)] for _ in range(n)]


def report(cfg, rows):
    r, f = cfg["report"], cfg["format"]
    out = [r["title"]]
    for cat in r["categories"]:
        total = sum(a for c, a in rows if c == cat and a >= r["threshold"])
        name = cat.upper() if f["uppercase"] else cat
        out.append(f"{name}: {total * f['scale']:.{f['digits']}f} {f['currency']}")
    return "\n".join(out) + "\n"


def rows_csv(rows):
    return "category,amount\n" + "".join(f"{c},{a}\n" for c, a in rows)


def to_ini(cfg, style, rng):
    r, f = cfg["report"], cfg["format"]
    yes = rng.choice([("yes", "no"), ("true", "false"), ("on", "off")])
    rep = {"title": r["title"], "threshold": str(r["threshold"]), "categories": ", ".join(r["categories"])}
    fmt = {"uppercase": yes[0] if f["uppercase"] else yes[1], "scale": repr(f["scale"]),
           "digits": str(f["digits"]), "currency": f["currency"]}
    head = ""
    if style == "defaults":
        head = f"[DEFAULT]\ncurrency = {f['currency']}\ndigits = {f['digits']}\n\n"
        del fmt["currency"], fmt["digits"]
    elif style == "interp":
        word, rest = r["title"].split(" ", 1)
        head = f"[DEFAULT]\nunit = {word}\ncode = {f['currency']}\n\n"
        rep["title"] = f"%(unit)s {rest}"
        fmt["currency"] = "%(code)s"
    body = "[report]\n" + "".join(f"{k} = {v}\n" for k, v in rep.items())
    body += "\n[format]\n" + "".join(f"{k} = {v}\n" for k, v in fmt.items())
    return "# settings of the expense report\n" + head + body


def to_json(cfg):
    return json.dumps(cfg, indent=2) + "\n"


def _tv(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_tv(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def to_toml(cfg):
    out = []
    for sec, vals in cfg.items():
        out.append(f"[{sec}]")
        out += [f"{k} = {_tv(v)}" for k, v in vals.items()]
        out.append("")
    return "\n".join(out)
