# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""wordfreq project: one check per step, each later step relying on the earlier ones."""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = "/app/wordfreq"
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

REFERENCE_CORE = '''
import re
_RUN = re.compile(r"[a-z']+")
def tokenize(text):
    out = []
    for run in _RUN.findall(text.lower()):
        run = run.strip("'")
        if run:
            out.append(run)
    return out
def count_words(text, min_length=1, stopwords=()):
    stop = {s.lower() for s in stopwords}
    counts = {}
    for w in tokenize(text):
        if len(w) >= min_length and w not in stop:
            counts[w] = counts.get(w, 0) + 1
    return counts
def top_n(counts, n):
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
'''
MUTANTS = {
    "no-lowercase": ("_RUN.findall(text.lower())", "_RUN.findall(text)"),
    "no-apostrophe-strip": ('run = run.strip("\'")', "pass"),
    "min-length-boundary": ("len(w) >= min_length", "len(w) > min_length"),
    "stopwords-ignored": ("and w not in stop", "and True"),
    "tie-order": ("key=lambda kv: (-kv[1], kv[0])", "key=lambda kv: -kv[1], reverse=False"),
}
ref = {}
exec(REFERENCE_CORE, ref)


def hidden_text(seed, n=300):
    rng = random.Random(seed)
    vocab = ["Lantern", "harbour", "ship's", "'tis", "ROPE", "rope", "gull", "o'er", "sail", "Sail", "tide",
             "keel", "naïve", "x9y", "anchor", "anchors'", "it's", "mast", "the", "And", "of", "a", "an",
             "night-watch", "fo'c'sle", "''", "storm", "Storm", "deck"]
    words = [rng.choice(vocab) for _ in range(n)]
    seps = [" ", " ", ", ", "; ", "\n", " -- ", "!", "?? ", "\t", "1", "_", "é"]
    return "".join(w + rng.choice(seps) for w in words)


def py(code, timeout=30):
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=ENV)
    assert proc.returncode == 0, proc.stderr[-800:]
    return proc.stdout


def run_cli(args, timeout=30):
    return subprocess.run([sys.executable, "-m", "wordfreq", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def test_1_layout():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        meta = tomllib.load(fh)
    assert meta["project"]["name"] == "wordfreq" and meta["project"]["version"] == "0.3.0", meta.get("project")
    out = py("import wordfreq; print(wordfreq.__version__); print(wordfreq.__file__)")
    version, path = out.split()
    assert version == "0.3.0"
    assert os.path.realpath(path) == os.path.realpath(os.path.join(ROOT, "wordfreq", "__init__.py")), path


def test_2_core_module():
    cases = []
    for seed in (1, 2, 3):
        cases.append((hidden_text(seed), seed % 3 + 1, ["the", "AND", "of"] if seed != 2 else []))
    code = ("import json, sys; from wordfreq.core import tokenize, count_words, top_n\n"
            "cases = json.loads(sys.stdin.read()) if False else json.loads(%r)\n"
            "out = []\n"
            "for text, ml, stop in cases:\n"
            "    c = count_words(text, min_length=ml, stopwords=stop)\n"
            "    out.append([tokenize(text), c, [list(p) for p in top_n(c, 7)], count_words(text)])\n"
            "print(json.dumps(out))" % json.dumps(cases))
    got = json.loads(py(code))
    for (text, ml, stop), (toks, counts, top, plain) in zip(cases, got):
        assert toks == ref["tokenize"](text), "tokenize differs from the specification"
        assert counts == ref["count_words"](text, ml, stop), f"count_words(min_length={ml}, stopwords={stop})"
        assert plain == ref["count_words"](text), "count_words with default arguments"
        assert [tuple(p) for p in top] == ref["top_n"](ref["count_words"](text, ml, stop), 7), "top_n"


def test_3_cli():
    d = tempfile.mkdtemp(dir="/tmp")
    try:
        text = hidden_text(11, 500)
        src, stop = os.path.join(d, "in.txt"), os.path.join(d, "stop.txt")
        open(src, "w", encoding="utf-8").write(text)
        open(stop, "w").write("# hidden stopwords\n  the \n\nAND\nof\n#storm\n")
        want = ref["top_n"](ref["count_words"](text, 3, ["the", "AND", "of"]), 6)
        proc = run_cli([src, "--top", "6", "--min-length", "3", "--stopwords", stop])
        assert proc.returncode == 0, proc.stderr[-500:]
        got = [tuple(l.split("\t")) for l in proc.stdout.splitlines() if l.strip()]
        assert got == [(w, str(c)) for w, c in want], got
        proc = run_cli([src])
        got = [tuple(l.split("\t")) for l in proc.stdout.splitlines() if l.strip()]
        assert got == [(w, str(c)) for w, c in ref["top_n"](ref["count_words"](text), 10)], "default options"
        proc = run_cli([os.path.join(d, "missing.txt")])
        assert proc.returncode == 2 and proc.stderr.strip(), f"missing file: exit {proc.returncode}"
    finally:
        shutil.rmtree(d)


def run_suite_with(core_source):
    d = tempfile.mkdtemp(dir="/tmp")
    try:
        dst = os.path.join(d, "proj")
        shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
        if core_source is not None:
            with open(os.path.join(dst, "wordfreq", "core.py"), "w") as fh:
                fh.write(core_source)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=dst,
                              capture_output=True, text=True, timeout=90, env=ENV)
        return proc
    finally:
        shutil.rmtree(d)


def test_4_test_suite():
    assert os.path.isfile(os.path.join(ROOT, "tests", "test_core.py"))
    proc = run_suite_with(None)
    assert proc.returncode == 0, "the suite fails on the project itself:\n" + proc.stdout[-800:]
    assert re.search(r"\b(\d+) passed", proc.stdout), proc.stdout[-300:]
    proc = run_suite_with(REFERENCE_CORE)
    assert proc.returncode == 0, "the suite fails on a correct core.py:\n" + proc.stdout[-800:]
    survivors = []
    for name, (old, new) in MUTANTS.items():
        assert old in REFERENCE_CORE
        if run_suite_with(REFERENCE_CORE.replace(old, new)).returncode == 0:
            survivors.append(name)
    assert len(survivors) <= 1, f"the suite does not notice these bugs: {survivors}"


def test_5_report():
    text = open("/app/data/corpus.txt", encoding="utf-8").read()
    stop = [l.strip() for l in open("/app/data/stopwords.txt") if l.strip() and not l.strip().startswith("#")]
    counts = ref["count_words"](text, 4, stop)
    with open("/app/reports/top_words.tsv") as fh:
        got = [tuple(l.rstrip("\n").split("\t")) for l in fh if l.strip()]
    assert got == [(w, str(c)) for w, c in ref["top_n"](counts, 15)], "top_words.tsv"
    with open("/app/reports/summary.json") as fh:
        summary = json.load(fh)
    assert summary == {"version": "0.3.0", "total_words": sum(counts.values()), "unique_words": len(counts)}, summary
