"""Builds /app/stats deterministically: a linear history of a small statistics CLI."""
import os
import subprocess
from pathlib import Path

REPO = Path("/app/stats")
T0 = 1714550400  # 2024-05-01 08:00:00 UTC
STEP = [0]
PEOPLE = [("Ines Varga", "ines@stats.test"), ("Tomasz Lind", "tomasz@stats.test"),
          ("Akosua Mensah", "akosua@stats.test")]


def git(*args, who=PEOPLE[0]):
    STEP[0] += 1
    when = f"{T0 + STEP[0] * 4000} +0000"
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1], GIT_AUTHOR_DATE=when,
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1], GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


F = {}  # name -> source of one top-level block of stats.py, in insertion order
DOCS = ["# stats\n\nTiny statistics on the command line:\n\n    python3 stats.py COMMAND NUMBER...\n\nCommands:\n"]
CHANGES = ["# Changelog\n"]
N = [0]


def render():
    header = '"""stats.py: tiny descriptive statistics.  Usage: python3 stats.py COMMAND NUMBER..."""\nimport math\nimport sys\n'
    keys = [k for k in F if k not in ("main", "entry")] + ["main", "entry"]
    return header + "".join("\n\n" + F[k].strip("\n") + "\n" for k in keys)


def commit(msg, docs=None, change=None):
    N[0] += 1
    who = PEOPLE[N[0] % 3]
    if docs:
        DOCS.append(docs)
    if change:
        CHANGES.append(f"- {change}\n")
    (REPO / "stats.py").write_text(render())
    (REPO / "README.md").write_text("".join(DOCS))
    (REPO / "CHANGELOG.md").write_text("".join(CHANGES))
    git("add", "-A", who=who)
    git("commit", "-q", "-m", msg, who=who)


REPO.mkdir(parents=True)
git("init", "-q", "-b", "main")
git("config", "user.name", "Ines Varga")
git("config", "user.email", "ines@stats.test")

F["mean"] = '''def mean(xs):
    return sum(xs) / len(xs)'''
F["median"] = '''def median(xs):
    s = sorted(xs)
    n = len(s)
    if n % 2:
        return s[n // 2]
    return (s[n // 2 - 1] + s[n // 2]) / 2'''
F["main"] = '''def main(argv):
    cmd, xs = argv[0], [float(a) for a in argv[1:]]
    result = {"mean": mean, "median": median}[cmd](xs)
    print(round(result, 6))'''
F["entry"] = '''if __name__ == "__main__":
    main(sys.argv[1:])'''
commit("Initial stats CLI: mean and median", "- `mean`, `median`\n", "mean and median")
commit("README: usage", "\nNumbers are read as floats; results are rounded to 6 places.\n\n")
F["minmax"] = '''def minimum(xs):
    return min(xs)


def maximum(xs):
    return max(xs)'''
F["main"] = F["main"].replace('"median": median}', '"median": median, "min": minimum, "max": maximum}')
commit("Add min and max", "- `min`, `max`\n", "min and max")
F["range"] = '''def spread(xs):
    return maximum(xs) - minimum(xs)'''
F["main"] = F["main"].replace('"max": maximum}', '"max": maximum, "range": spread}')
commit("Add range", "- `range`\n", "range")
F["main"] = '''def main(argv):
    if len(argv) < 2:
        sys.exit("usage: python3 stats.py COMMAND NUMBER...")
    cmd, xs = argv[0], [float(a) for a in argv[1:]]
    result = {"mean": mean, "median": median, "min": minimum, "max": maximum, "range": spread}[cmd](xs)
    print(round(result, 6))'''
commit("Reject empty input with a usage message", change="usage message on empty input")
git("tag", "-a", "v1.0", "-m", "stats 1.0")
F["stdev"] = '''def stdev(xs):
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))'''
F["main"] = F["main"].replace('"range": spread}', '"range": spread, "stdev": stdev}')
commit("Add population standard deviation", "- `stdev` (population)\n", "stdev")
commit("Changelog: start 1.1 section", change="(1.1 in progress)")
F["variance"] = '''def variance(xs):
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)'''
F["stdev"] = '''def stdev(xs):
    return math.sqrt(variance(xs))'''
F["main"] = F["main"].replace('"stdev": stdev}', '"stdev": stdev, "var": variance}')
commit("Add variance; stdev reuses it", "- `var`\n", "variance")
F["main"] = '''COMMANDS = {
    "mean": mean,
    "median": median,
    "min": minimum,
    "max": maximum,
    "range": spread,
    "stdev": stdev,
    "var": variance,
}


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: python3 stats.py COMMAND NUMBER...")
    cmd, xs = argv[0], [float(a) for a in argv[1:]]
    if cmd not in COMMANDS:
        sys.exit(f"unknown command {cmd!r}; try one of: {', '.join(COMMANDS)}")
    print(round(COMMANDS[cmd](xs), 6))'''
commit("Command table; friendly error for unknown commands", change="unknown commands are reported")
F["total"] = '''def total(xs):
    return math.fsum(xs)'''
F["main"] = F["main"].replace('    "var": variance,\n', '    "var": variance,\n    "sum": total,\n')
commit("Add sum (exact float summation)", "- `sum`\n", "sum")
F["mean"] = '''def mean(xs):
    return math.fsum(xs) / len(xs)'''
commit("mean: use fsum for accuracy")
F["percentile"] = '''def percentile(p, xs):
    """Nearest-rank percentile, p in (0, 100]."""
    s = sorted(xs)
    k = max(1, math.ceil(p / 100 * len(s)))
    return s[k - 1]'''
F["main"] = F["main"].replace('''    cmd, xs = argv[0], [float(a) for a in argv[1:]]
    if cmd''', '''    cmd, xs = argv[0], [float(a) for a in argv[1:]]
    if cmd == "pct":
        print(round(percentile(xs[0], xs[1:]), 6))
        return
    if cmd''')
commit("Add nearest-rank percentile: pct P NUMBER...", "- `pct P` (nearest rank)\n", "percentile")
(REPO / "examples.txt").write_text("mean 1 2 3 4\nmedian 5 1 3\npct 90 1 2 3 4 5 6 7 8 9 10\n")
commit("Add example invocations")
F["median"] = '''def median(xs):
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    if n % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2'''
commit("median: name the middle index")
F["sorted"] = '''def ordered(xs):
    return sorted(xs)'''
F["percentile"] = F["percentile"].replace("s = sorted(xs)", "s = ordered(xs)")
commit("Share one sorting helper")
commit("README: mention exact summation", "\n`sum` and `mean` use exact float summation.\n")
# the regression: looks like a harmless tidy-up
F["median"] = '''def median(xs):
    s = ordered(xs)
    n = len(s)
    mid = n // 2
    if n % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) // 2'''
F["minmax"] = '''def minimum(xs):
    return ordered(xs)[0]


def maximum(xs):
    return ordered(xs)[-1]'''
commit("Tidy: route min and max through the sorting helper")
F["mode"] = '''def mode(xs):
    counts = {}
    for x in xs:
        counts[x] = counts.get(x, 0) + 1
    best = max(counts.values())
    return min(x for x, c in counts.items() if c == best)'''
F["main"] = F["main"].replace('    "sum": total,\n', '    "sum": total,\n    "mode": mode,\n')
commit("Add mode (smallest of the most frequent)", "- `mode`\n", "mode")
commit("Changelog: 1.1 notes", change="1.1: stdev, var, sum, pct, mode")
F["iqr"] = '''def iqr(xs):
    return percentile(75, xs) - percentile(25, xs)'''
F["main"] = F["main"].replace('    "mode": mode,\n', '    "mode": mode,\n    "iqr": iqr,\n')
commit("Add interquartile range", "- `iqr`\n", "iqr")
F["median"] = F["median"].replace("    s = ordered(xs)\n    n = len(s)\n", "    s, n = ordered(xs), len(xs)\n")
commit("median: compact setup")
F["count"] = '''def count(xs):
    return len(xs)'''
F["main"] = F["main"].replace('    "iqr": iqr,\n', '    "iqr": iqr,\n    "count": count,\n')
commit("Add count", "- `count`\n", "count")
(REPO / "examples.txt").write_text("mean 1 2 3 4\nmedian 5 1 3\npct 90 1 2 3 4 5 6 7 8 9 10\niqr 1 2 3 4 5 6 7 8\n")
commit("Examples: iqr")
F["mean"] = '''def mean(xs):
    """Arithmetic mean (exact summation)."""
    return math.fsum(xs) / len(xs)'''
commit("Docstring for mean")
F["geomean"] = '''def geomean(xs):
    return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))'''
F["main"] = F["main"].replace('    "count": count,\n', '    "count": count,\n    "gmean": geomean,\n')
commit("Add geometric mean", "- `gmean` (positive numbers)\n", "geometric mean")
commit("Changelog: 1.2 in progress", change="(1.2 in progress)")
F["main"] = F["main"].replace("print(round(COMMANDS[cmd](xs), 6))", "result = COMMANDS[cmd](xs)\n    print(round(result, 6))")
commit("main: keep the result in a variable")
