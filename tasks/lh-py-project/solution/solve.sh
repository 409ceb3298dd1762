#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
mkdir -p /app/wordfreq/wordfreq /app/wordfreq/tests /app/reports
cd /app/wordfreq
cat > pyproject.toml <<'T'
[project]
name = "wordfreq"
version = "0.3.0"
description = "Word frequency counts"
requires-python = ">=3.11"
T
cat > wordfreq/__init__.py <<'P'
"""Word frequency counting."""

__version__ = "0.3.0"
P
cat > wordfreq/core.py <<'P'
import re

_RUN = re.compile(r"[a-z']+")


def tokenize(text):
    words = []
    for run in _RUN.findall(text.lower()):
        run = run.strip("'")
        if run:
            words.append(run)
    return words


def count_words(text, min_length=1, stopwords=()):
    stop = {s.lower() for s in stopwords}
    counts = {}
    for w in tokenize(text):
        if len(w) >= min_length and w not in stop:
            counts[w] = counts.get(w, 0) + 1
    return counts


def top_n(counts, n):
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
P
cat > wordfreq/__main__.py <<'P'
import argparse
import sys

from .core import count_words, top_n


def read_stopwords(path):
    words = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            s = line.strip()
            if s and not s.startswith("#"):
                words.append(s)
    return words


def main(argv=None):
    ap = argparse.ArgumentParser(prog="wordfreq")
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--min-length", type=int, default=1)
    ap.add_argument("--stopwords")
    a = ap.parse_args(argv)
    try:
        with open(a.file, encoding="utf-8") as fh:
            text = fh.read()
        stop = read_stopwords(a.stopwords) if a.stopwords else ()
    except OSError as e:
        print(f"wordfreq: {e}", file=sys.stderr)
        return 2
    for word, count in top_n(count_words(text, a.min_length, stop), a.top):
        print(f"{word}\t{count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
P
cat > tests/test_core.py <<'P'
from wordfreq.core import count_words, tokenize, top_n


def test_lowercase():
    assert tokenize("River RIVER river") == ["river"] * 3


def test_apostrophes():
    assert tokenize("'twas don't sacks' ''") == ["twas", "don't", "sacks"]


def test_separators():
    assert tokenize("mid-summer b52 café") == ["mid", "summer", "b", "caf"]


def test_min_length_boundary():
    assert count_words("aa bbb cccc", min_length=3) == {"bbb": 1, "cccc": 1}


def test_stopwords():
    assert count_words("The cat and THE dog", stopwords=["The", "and"]) == {"cat": 1, "dog": 1}


def test_top_n_ties():
    assert top_n({"b": 2, "a": 2, "c": 3, "d": 1}, 3) == [("c", 3), ("a", 2), ("b", 2)]
P
python3 -m pytest -q -p no:cacheprovider tests
python3 -m wordfreq /app/data/corpus.txt --top 15 --min-length 4 --stopwords /app/data/stopwords.txt > /app/reports/top_words.tsv
python3 - <<'P'
import json
from wordfreq import __version__
from wordfreq.__main__ import read_stopwords
from wordfreq.core import count_words
counts = count_words(open("/app/data/corpus.txt", encoding="utf-8").read(), 4, read_stopwords("/app/data/stopwords.txt"))
json.dump({"version": __version__, "total_words": sum(counts.values()), "unique_words": len(counts)},
          open("/app/reports/summary.json", "w"), indent=2)
P
