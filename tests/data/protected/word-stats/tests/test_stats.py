"""Hidden inputs: the agent never sees these texts."""

import random
import subprocess

random.seed(20261129)
WORDS = ["alpha", "be", "gamma", "delta", "epsilonic", "z", "omega", "kappa"]
TEXT = "\n".join(" ".join(random.choice(WORDS) for _ in range(random.randint(1, 9))) for _ in range(37)) + "\n"
TEXT += "the supercalifragilistic word\n"


def run(text: str) -> list[str]:
    out = subprocess.run(["/app/stats.sh"], input=text, capture_output=True, text=True, timeout=20)
    return out.stdout.splitlines()


def test_lines():
    assert run(TEXT)[0] == f"lines {TEXT.count(chr(10))}"


def test_words():
    assert run(TEXT)[1] == f"words {len(TEXT.split())}"


def test_longest():
    assert run(TEXT)[2] == "longest supercalifragilistic"
    assert run("aa bbb ccc\n")[2] == "longest bbb"
