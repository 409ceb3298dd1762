"""Configuration files (INI, dotenv, Java properties) for the conf-convert family: a generator
that knows the meaning of what it writes, and the expected conversion (computed from that
meaning, not by parsing the text)."""

import json

WORDS = ["alpha", "db", "cache", "host", "port", "mode", "level", "path", "user", "retry", "timeout",
         "name", "url", "limit", "color", "queue", "token", "region", "shard", "backup"]
SECTIONS = ["server", "database", "logging", "cache", "Auth", "paths", "worker.pool"]
TEXTS = ["localhost", "/var/lib/app data", "eu-west", "debug", "a=b", "x: y", "C:\\temp", "50%", "#notcomment",
         "hello world", "tab\there", "multi word value", "naïve café"]


def _value(rng, typed):
    r = rng.random()
    if typed and r < 0.3:
        return rng.randint(-50, 99999)
    if typed and r < 0.45:
        return rng.choice([True, False])
    return rng.choice(TEXTS)


def make(fmt, rng, n, messy):
    """(text, expected dict)."""
    if fmt == "ini":
        return _ini(rng, n, messy)
    if fmt == "env":
        return _env(rng, n, messy)
    return _props(rng, n, messy)


def _ini(rng, n, messy):
    lines, data = ["; generated"], {}
    for sec in rng.sample(SECTIONS, rng.randint(2, 4)):
        lines += ["", f"[{sec}]"]
        sd = data.setdefault(sec, {})
        keys = rng.sample(WORDS, rng.randint(2, max(3, n)))
        if messy:
            keys += rng.sample(keys, 1)  # a repeated key: the later one wins
        for k in keys:
            v = _value(rng, True)
            if isinstance(v, str) and "\t" in v:
                v = "tab here"
            sd[k] = v
            if isinstance(v, bool):
                text = rng.choice({True: ["true", "yes", "on", "True"], False: ["false", "no", "off", "NO"]}[v])
            elif isinstance(v, int):
                text = str(v)
            else:
                text = f'"{v}"' if messy and rng.random() < 0.3 else v
            sep = rng.choice([" = ", "=", ": "]) if messy else " = "
            lines.append(f"{'  ' if messy and rng.random() < 0.2 else ''}{k}{sep}{text}")
            if messy and rng.random() < 0.2:
                lines.append(rng.choice(["# note", "; disabled = 1"]))
    return "\n".join(lines) + "\n", data


def _env(rng, n, messy):
    lines, data = ["# environment"], {}
    for k in rng.sample(WORDS, min(len(WORDS), n + 3)):
        key = k.upper() + rng.choice(["", "_URL", "_DIR", "_NAME"])
        v = str(_value(rng, False))
        if "\t" in v:
            v = "tab here"
        style = rng.choice(["plain", "double", "single"]) if messy else ("double" if " " in v else "plain")
        if style == "plain" and (" " in v or v.startswith("#")):
            style = "double"
        if messy and data and rng.random() < 0.4 and style != "single":
            ref = rng.choice(sorted(data))
            text = "${" + ref + "}/" + v.replace("$", "")
            v = data[ref] + "/" + v.replace("$", "")
        else:
            text = v.replace("$", "")
            v = text
        if style == "double":
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        elif style == "single":
            text = "'" + text + "'"
        prefix = "export " if messy and rng.random() < 0.3 else ""
        tail = " # set by ops" if messy and rng.random() < 0.3 and style != "plain" or (
            messy and style == "plain" and rng.random() < 0.3) else ""
        data[key] = v
        lines.append(f"{prefix}{key}={text}{tail}")
        if messy and rng.random() < 0.15:
            lines.append("")
    return "\n".join(lines) + "\n", data


def _escape_prop(v, key=False):
    out = v.replace("\\", "\\\\").replace("\t", "\\t").replace("=", "\\=").replace(":", "\\:")
    out = "".join(c if ord(c) < 128 else "\\u%04x" % ord(c) for c in out)
    if key:
        out = out.replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    return out.replace("#", "\\#") if out.startswith("#") else out


def _props(rng, n, messy):
    lines, data = ["# properties"], {}
    for _ in range(n + 3):
        key = ".".join(rng.sample(WORDS, rng.randint(1, 3)))
        v = str(_value(rng, False))
        data[key] = v
        sep = rng.choice(["=", " = ", ": ", " "]) if messy else "="
        text = _escape_prop(v)
        if messy and len(text) > 8 and rng.random() < 0.4:
            cut = rng.randint(2, len(text) - 2)
            while cut > 1 and (text[cut - 1] == "\\" or text[cut] == " "):
                cut -= 1
            text = text[:cut] + "\\\n" + " " * rng.randint(1, 6) + text[cut:]
        lines.append(f"{'   ' if messy and rng.random() < 0.2 else ''}{key}{sep}{text}")
        if messy and rng.random() < 0.2:
            lines.append(rng.choice(["! legacy", "# comment = not a key", ""]))
    return "\n".join(lines) + "\n", data


def as_lines(fmt, data):
    """The `key=value` form: INI keys as `section.key`, booleans as true/false."""
    flat = {}
    if fmt == "ini":
        for sec, kv in data.items():
            for k, v in kv.items():
                flat[f"{sec}.{k}"] = json.dumps(v) if not isinstance(v, str) else v
    else:
        flat = dict(data)
    return "".join(f"{k}={flat[k]}\n" for k in sorted(flat))
