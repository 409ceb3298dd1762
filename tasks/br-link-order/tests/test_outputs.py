# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Builds a clean copy of /app/textkit; checks wordfreq and the library API on hidden text."""

import random
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

SRC = Path("/app/textkit")
_CACHE: dict[str, Path] = {}


def built() -> Path:
    if "d" not in _CACHE:
        d = Path(tempfile.mkdtemp(prefix="tk-")) / "textkit"
        shutil.copytree(SRC, d, symlinks=True, ignore=shutil.ignore_patterns("build", "wordfreq"))
        for p in list(d.rglob("*")):
            if p.is_file() and p.suffix in (".o", ".a", ".d"):
                p.unlink()
        r = subprocess.run(["make"], cwd=d, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"make failed:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
        _CACHE["d"] = d
    return _CACHE["d"]


def hidden_text(seed: int, n_words: int) -> str:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randint(1, 9)))
             for _ in range(300)]
    seps = [" ", "  ", ", ", ". ", "\n", "\t", "-", "'", "!? ", " (", ") ", "\u00e9", "_", "/"]
    parts = []
    for _ in range(n_words):
        w = vocab[min(int(rng.paretovariate(1.2)) - 1, 299)]
        style = rng.random()
        if style < 0.15:
            w = w.upper()
        elif style < 0.3:
            w = w.capitalize()
        parts.append(w + rng.choice(seps))
    return "".join(parts)


def expected(text: str, k: int) -> str:
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", text)]
    c = Counter(words)
    top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:k]
    return f"words {len(words)} distinct {len(c)}\n" + "".join(f"{n} {w}\n" for w, n in top)


def wordfreq(text: str, *args: str) -> str:
    r = subprocess.run([str(built() / "wordfreq"), *args], input=text.encode(), capture_output=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr[-500:]
    return r.stdout.decode(errors="replace")


def test_build():
    d = built()
    for rel in ("build/libtkcore.a", "build/libtkstats.a", "wordfreq"):
        assert (d / rel).is_file(), f"{rel} was not built"
    flags = (d / "Makefile").read_text()
    assert "-O0" in flags and "-std=c99" in flags, "the compiler flags were changed"


def test_wordfreq_hidden_text():
    for seed, n in ((31, 2000), (32, 40000)):
        text = hidden_text(seed, n)
        assert wordfreq(text) == expected(text, 10)


def test_top_n_option():
    text = hidden_text(33, 5000)
    for k in (1, 3, 25, 1000):
        assert wordfreq(text, "-n", str(k)) == expected(text, k), f"-n {k}"
    assert wordfreq("", "-n", "5") == "words 0 distinct 0\n"


API_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tk/core.h"
#include "tk/stats.h"

static void sum(const char *key, long value, void *ctx) { (void)key; *(long *)ctx += value; }

int main(int argc, char **argv) {
    int wc = 0;
    for (int c = 0; c < 256; c++) wc += tk_is_word_char(c);
    char w[] = "MiXeD42Case";
    tk_normalize(w);
    printf("wordchars %d normalized %s\n", wc, w);
    tk_table *t = tk_table_new();
    for (int i = 0; i < 5000; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i % 1234);
        (*tk_table_slot(t, key)) += i % 7;
    }
    long total = 0;
    tk_table_each(t, sum, &total);
    printf("table %zu %ld\n", tk_table_size(t), total);
    tk_table_free(t);
    FILE *f = fopen(argv[1], "r");
    char buf[TK_WORD_MAX];
    int n = 0;
    while (tk_read_word(f, buf, sizeof buf) >= 0) n++;
    rewind(f);
    size_t distinct;
    long words;
    tk_wordcount *top = tk_count_words(f, &distinct, &words);
    printf("read %d counted %ld distinct %zu first %s %ld\n", n, words, distinct, top[0].word, top[0].count);
    free(top);
    fclose(f);
    return 0;
}
"""


def test_library_api():
    d = built()
    work = Path(tempfile.mkdtemp(prefix="tkapi-"))
    (work / "api.c").write_text(API_PROGRAM)
    text = hidden_text(34, 3000)
    (work / "in.txt").write_text(text, encoding="utf-8")
    r = subprocess.run(["gcc", "-std=c99", "-O0", "-I", str(d / "include"), str(work / "api.c"),
                        str(d / "build/libtkstats.a"), str(d / "build/libtkcore.a"), "-o", str(work / "api")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"a program using the public API does not link:\n{r.stderr[-1500:]}"
    r = subprocess.run([str(work / "api"), str(work / "in.txt")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr[-500:]
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", text)]
    c = Counter(words)
    top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    want_total = sum(i % 7 for i in range(5000))
    assert r.stdout.splitlines() == [
        "wordchars 62 normalized mixed42case",
        f"table 1234 {want_total}",
        f"read {len(words)} counted {len(words)} distinct {len(c)} first {top[0]} {top[1]}",
    ]
