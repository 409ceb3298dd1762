"""Reference semantics for the spec-cli family: three small record-keeping tools (stock, budget,
tickets), each a state machine over a JSON store driven by subcommands, and random command
sequences to drive them with."""

import copy
import re


class Fail(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


def _pos_int(text):
    if not re.fullmatch(r"[0-9]+", text) or int(text) == 0:
        raise Fail(2, "usage")
    return int(text)


def _cents(text):
    m = re.fullmatch(r"([0-9]+)(?:\.([0-9]{1,2}))?", text)
    if not m:
        raise Fail(2, "usage")
    return int(m[1]) * 100 + int((m[2] or "0").ljust(2, "0"))


def _money(c):
    sign = "-" if c < 0 else ""
    return f"{sign}{abs(c) // 100}.{abs(c) % 100:02d}"


def stock(st, argv):
    st.setdefault("qty", {})
    st.setdefault("log", [])
    cmd, args = argv[0], argv[1:]
    if cmd in ("receive", "ship") and len(args) == 2:
        sku, n = args[0], _pos_int(args[1])
        have = st["qty"].get(sku, 0)
        if cmd == "ship" and n > have:
            raise Fail(3, "insufficient stock")
        st["qty"][sku] = have + n if cmd == "receive" else have - n
        st["log"].append([sku, cmd, n])
        return f"{sku} {st['qty'][sku]}"
    if cmd == "stock" and not args:
        return "\n".join(f"{k} {v}" for k, v in sorted(st["qty"].items()) if v)
    if cmd == "history" and len(args) == 1:
        return "\n".join(f"{i} {c} {n}" for i, (k, c, n) in enumerate(st["log"], 1) if k == args[0])
    if cmd == "low" and len(args) == 1:
        t = _pos_int(args[0])
        return "\n".join(k for k, v in sorted(st["qty"].items()) if v < t)
    raise Fail(2, "usage")


def budget(st, argv):
    st.setdefault("limits", {})
    st.setdefault("spends", [])
    cmd, args = argv[0], argv[1:]
    spent = {}
    for cat, c, _ in st["spends"]:
        spent[cat] = spent.get(cat, 0) + c
    if cmd == "limit" and len(args) == 2:
        st["limits"][args[0]] = _cents(args[1])
        return f"{args[0]} {_money(st['limits'][args[0]])}"
    if cmd == "spend" and len(args) >= 3:
        cat, c = args[0], _cents(args[1])
        if cat not in st["limits"]:
            raise Fail(3, "no limit for category")
        st["spends"].append([cat, c, " ".join(args[2:])])
        return f"{cat} {_money(spent.get(cat, 0) + c)}/{_money(st['limits'][cat])}"
    if cmd == "status" and not args:
        out = []
        for cat, lim in sorted(st["limits"].items()):
            s = spent.get(cat, 0)
            out.append(f"{cat} {_money(s)} {_money(lim)} {_money(lim - s)}" + (" OVER" if s > lim else ""))
        return "\n".join(out)
    if cmd == "undo" and not args:
        if not st["spends"]:
            raise Fail(3, "nothing to undo")
        cat, c, note = st["spends"].pop()
        return f"undid {cat} {_money(c)} {note}"
    if cmd == "top" and len(args) == 1:
        n = _pos_int(args[0])
        order = sorted(range(len(st["spends"])), key=lambda i: (-st["spends"][i][1], i))[:n]
        return "\n".join(f"{_money(st['spends'][i][1])} {st['spends'][i][0]} {st['spends'][i][2]}"
                         for i in order)
    raise Fail(2, "usage")


def tickets(st, argv):
    st.setdefault("t", [])
    cmd, args = argv[0], argv[1:]

    def get(tid):
        m = re.fullmatch(r"T([0-9]+)", tid)
        if not m or not 1 <= int(m[1]) <= len(st["t"]):
            raise Fail(3, "no such ticket")
        return st["t"][int(m[1]) - 1]

    if cmd == "open" and args:
        st["t"].append({"title": " ".join(args), "user": "-", "state": "open"})
        return f"T{len(st['t'])}"
    if cmd == "assign" and len(args) == 2:
        t = get(args[0])
        if t["state"] != "open":
            raise Fail(3, "ticket is closed")
        t["user"] = args[1]
        return f"{args[0]} {args[1]}"
    if cmd == "close" and len(args) == 1:
        t = get(args[0])
        if t["state"] != "open":
            raise Fail(3, "ticket is closed")
        t["state"] = "closed"
        return f"{args[0]} closed"
    if cmd == "list" and args in ([], ["--all"]):
        return "\n".join(f"T{i} {t['state']} {t['user']} {t['title']}" for i, t in enumerate(st["t"], 1)
                         if args or t["state"] == "open")
    if cmd == "stats" and not args:
        users = {}
        for t in st["t"]:
            if t["state"] == "open" and t["user"] != "-":
                users[t["user"]] = users.get(t["user"], 0) + 1
        n_open = sum(t["state"] == "open" for t in st["t"])
        lines = [f"open {n_open}", f"closed {len(st['t']) - n_open}"]
        return "\n".join(lines + [f"{u} {n}" for u, n in sorted(users.items(), key=lambda x: (-x[1], x[0]))])
    raise Fail(2, "usage")


TOOLS = {"stock": stock, "budget": budget, "tickets": tickets}
EXTRA = {"stock": "low", "budget": "undo", "tickets": "stats"}


def apply(tool, st, argv):
    """(exit code, stdout text) of one command; st is changed only on success."""
    trial = copy.deepcopy(st)
    try:
        out = TOOLS[tool](trial, argv) if argv else (_ for _ in ()).throw(Fail(2, "usage"))
    except Fail as e:
        return e.code, ""
    st.clear()
    st.update(trial)
    return 0, out + "\n" if out else ""


def commands(tool, rng, n, extra, focus=None):
    """A random command sequence, valid and invalid, for one tool."""
    out = []
    words = ["red", "blue", "x-1", "zed", "Alpha", "beta"]
    for _ in range(n):
        if tool == "stock":
            sku = rng.choice(["A-100", "B-7", "c-22", "A-2", "Z9"])
            ch = rng.choice(["receive"] * 4 + ["ship"] * 4 + ["stock", "history", "bad"]
                            + (["low"] * 2 if extra else []))
            if focus and rng.random() < 0.5:
                ch = focus
            q = rng.choice([str(rng.randint(1, 40)), str(rng.randint(1, 9)), "0", "-3", "2.5"])
            out.append({"receive": [ch, sku, q], "ship": [ch, sku, q], "stock": [ch],
                        "history": [ch, sku], "low": [ch, str(rng.randint(1, 30))],
                        "bad": ["ship", sku]}[ch])
        elif tool == "budget":
            cat = rng.choice(["food", "rent", "travel", "books", "Tools"])
            amt = rng.choice([f"{rng.randint(0, 300)}.{rng.randint(0, 99):02d}", str(rng.randint(1, 90)),
                              f"{rng.randint(1, 50)}.5", "1.234", "-4", "abc"])
            ch = rng.choice(["limit"] * 2 + ["spend"] * 6 + ["status"] * 2 + ["top"] + (["undo"] * 2 if extra else []))
            if focus and rng.random() < 0.5:
                ch = focus
            note = rng.sample(words, rng.randint(1, 3))
            out.append({"limit": [ch, cat, amt], "spend": [ch, cat, amt, *note], "status": [ch],
                        "top": [ch, str(rng.randint(1, 5))], "undo": [ch]}[ch])
        else:
            ch = rng.choice(["open"] * 4 + ["assign"] * 3 + ["close"] * 2 + ["list", "list-all"]
                            + (["stats"] * 2 if extra else []))
            if focus and rng.random() < 0.5:
                ch = focus
            tid = f"T{rng.randint(0, 12)}"
            out.append({"open": ["open", *rng.sample(words, rng.randint(1, 3))],
                        "assign": ["assign", tid, rng.choice(["ana", "bo", "cy"])], "close": ["close", tid],
                        "list": ["list"], "list-all": ["list", "--all"], "stats": ["stats"]}[ch])
    return out
