"""Records in three text layouts for the record-extract family: generator, renderers, and the
reference reading (the records themselves are the expected answer)."""

KEYS = ["id", "name", "city", "qty", "note"]
FIRST = ["Ann", "Bo", "Chiara", "Dmitri", "Eun-ji", "Femi", "Gael", "Hiro", "Ines", "Jonas"]
LAST = ["Lee", "Kowalczyk", "O'Neil", "Sato", "Moreau", "Okafor", "Berg", "Silva"]
CITIES = ["Oslo", "Lagos", "Kyoto", "Porto", "Quebec City", "San Jose", "Graz", ""]
WORDS = ["fragile", "handle with care", "ships Monday", "back-ordered", "call first", "gate code 41",
         "leave at desk", "signed: ok", "two boxes", "paid, invoice 7", "see ticket; urgent"]


def make_records(rng, n, messy=False):
    entries = []
    for i in range(n):
        note = ""
        if rng.random() < 0.7:
            note = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9 if messy else 3)))
        entries.append({"id": f"R{rng.randint(100, 99999)}-{i}", "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                     "city": rng.choice(CITIES), "qty": str(rng.randint(0, 5000)) if rng.random() < 0.9 else "",
                     "note": note})
    return entries


def _fold(text, width, rng):
    """Splits text into chunks of about ``width`` characters, at spaces."""
    words, lines, piece = text.split(" "), [], ""
    for w in words:
        if piece and len(piece) + 1 + len(w) > width:
            lines.append(piece)
            piece = w
        else:
            piece = f"{piece} {w}" if piece else w
    return lines + [piece]


def render(fmt, entries, rng, messy=False):
    out = []
    if fmt == "fixed-width":
        widths = [max([len(k)] + [len(r[k]) for r in entries]) + rng.randint(1, 3) for k in KEYS]
        out.append("".join(k.upper().ljust(w) for k, w in zip(KEYS, widths)).rstrip())
        out.append("".join(("-" * (w - 1)).ljust(w) for w in widths).rstrip())
        for r in entries:
            cells = [r[k].rjust(w - 1) + " " if k == "qty" else r[k].ljust(w) for k, w in zip(KEYS, widths)]
            out.append("".join(cells).rstrip() if messy else "".join(cells))
    elif fmt == "stanza":
        for r in entries:
            if messy and rng.random() < 0.3:
                out.append("# exported record")
            for k in KEYS:
                if not r[k]:
                    continue
                name = k.capitalize() if not messy else rng.choice([k.capitalize(), k.upper(), k])
                parts = _fold(r[k], 30, rng) if messy else [r[k]]
                out.append(f"{name}: {parts[0]}")
                out += [" " * rng.randint(1, 4) + p for p in parts[1:]]
            out.append("")
            if messy and rng.random() < 0.3:
                out.append("")
    else:
        for r in entries:
            out.append("BEGIN:RECORD")
            for k in KEYS:
                if not r[k]:
                    continue
                val = r[k].replace("\\", "\\\\").replace(",", "\\,").replace(";", "\\;")
                param = f";LANG={rng.choice(['en', 'fr'])}" if k in ("name", "note") and rng.random() < 0.5 else ""
                line = f"{k.upper()}{param}:{val}"
                if messy:
                    chunks = [line[i:i + 24] for i in range(0, len(line), 24)]
                    out.append(chunks[0])
                    out += [" " + c for c in chunks[1:]]
                else:
                    out.append(line)
            out.append("END:RECORD")
    text = "\n".join(out) + "\n"
    return text.replace("\n", "\r\n") if messy and fmt != "fixed-width" else text


def expected(entries):
    return [{k: r[k] for k in KEYS} for r in entries]
