# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/normalize.sh on hidden inputs generated here and compares with a reference."""

import random
import re
import subprocess

SCRIPT = "/app/normalize.sh"
NAMES = ["Marie Curie", "Niels Bohr", "Lise Meitner", "Emmy Noether", "Srinivasa Ramanujan", "Hedy Lamarr"]
WORDS = ["office", "mobile", "Renewed", "VIP", "see notes", "A/B", "x#y", "id:42", "(n/a)", "50%", "&"]


def reference(text):
    out = []
    for line in text.split("\n")[:-1]:
        if re.match(r"[ \t]*#", line) or re.fullmatch(r"[ \t]*", line):
            continue
        line = re.sub(r"[ \t]+", " ", line.strip(" \t"))
        line = re.sub(r"([0-9]{2})/([0-9]{2})/([0-9]{4})", r"\3-\2-\1", line)
        line = re.sub(r"\(([0-9]{3})\) ([0-9]{3})-([0-9]{4})", r"+1-\1-\2-\3", line)
        line = re.sub(r"<([^>]*)>", lambda m: "<" + m.group(1).lower() + ">", line)
        out.append(line)
    return "".join(l + "\n" for l in out)


def run(text):
    out = subprocess.run([SCRIPT], input=text, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}"
    return out.stdout


def check(text):
    got, exp = run(text), reference(text)
    if got != exp:
        g, e = got.splitlines(), exp.splitlines()
        for i, (a, b) in enumerate(zip(g, e)):
            assert a == b, f"line {i + 1}: got {a!r}, expected {b!r}"
        assert len(g) == len(e), f"got {len(g)} lines, expected {len(e)}"
        assert got == exp


def rnd(rng, *parts):
    return " ".join(parts)


def date(rng):
    return f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1900, 2030)}"


def phone(rng):
    return f"({rng.randint(200, 999)}) {rng.randint(100, 999)}-{rng.randint(0, 9999):04d}"


def email(rng):
    n = rng.choice(NAMES).split()
    return f"<{n[0]}.{n[1]}@{rng.choice(['Example.COM', 'lab.Org', 'UNI.EDU'])}>"


def test_comments_and_blank_lines():
    rng = random.Random(1)
    lines = []
    for _ in range(60):
        r = rng.random()
        if r < 0.2:
            lines.append("#" + rng.choice(WORDS))
        elif r < 0.35:
            lines.append(rng.choice([" ", "\t", "  \t "]) + "# indented " + rng.choice(WORDS))
        elif r < 0.5:
            lines.append(rng.choice(["", " ", "\t\t", " \t "]))
        else:
            lines.append(rng.choice(NAMES) + " " + rng.choice(WORDS) + " # not a comment")
    check("\n".join(lines) + "\n")


def test_whitespace():
    rng = random.Random(2)
    sp = lambda: rng.choice([" ", "  ", "\t", " \t ", "\t\t"])
    lines = [rng.choice(["", " ", "\t"]) + sp().join(rng.sample(NAMES + WORDS, 4)) + rng.choice(["", " ", "\t", " \t"])
             for _ in range(50)]
    check("\n".join(lines) + "\n")


def test_dates():
    rng = random.Random(3)
    lines = [" ".join([rng.choice(NAMES), "born", date(rng), rng.choice(WORDS), date(rng), "and", date(rng)][: rng.randint(3, 7)])
             for _ in range(50)]
    lines += ["short 1/2/2024 stays", "version 12/34 stays"]
    check("\n".join(lines) + "\n")


def test_phones():
    rng = random.Random(4)
    lines = [" ".join([rng.choice(NAMES), "office", phone(rng), "mobile", phone(rng)][: rng.randint(3, 5)]) for _ in range(50)]
    lines += ["no space (555)123-4567 stays", "ext (12) 345-6789 stays"]
    check("\n".join(lines) + "\n")


def test_angle_groups():
    rng = random.Random(5)
    lines = [" ".join([rng.choice(NAMES), email(rng), rng.choice(["AND", "Or", "cc"]), email(rng), "END"][: rng.randint(2, 5)])
             for _ in range(50)]
    lines += ["Plain Text <TAG> Middle TEXT <Other> Tail"]
    check("\n".join(lines) + "\n")


def test_full_mixed():
    rng = random.Random(6)
    sp = lambda: rng.choice([" ", "  ", "\t", " \t"])
    lines = []
    for _ in range(200):
        r = rng.random()
        if r < 0.1:
            lines.append(rng.choice(["", " ", "\t"]) + "# " + rng.choice(WORDS))
        elif r < 0.15:
            lines.append(rng.choice(["", " \t"]))
        else:
            parts = [rng.choice(NAMES)] + [rng.choice([email(rng), phone(rng), date(rng), rng.choice(WORDS)]) for _ in range(rng.randint(1, 5))]
            lines.append(rng.choice(["", " ", "\t"]) + sp().join(parts) + rng.choice(["", " ", "\t "]))
    check("\n".join(lines) + "\n")
