"""Generated task families of the long-horizon category, continued (see :mod:`.base` for what a
family is; the first ones are in :mod:`.long_horizon`)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import h4_conf, h4_jobs, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ conf-migrate
# A small expense-report project reads its settings from an INI file (plain, with a DEFAULT section
# or with interpolation). Migrate it to JSON or TOML: new file with typed values, loader, default
# path, optional environment override, its own test suite green, the INI gone. The tests run the
# project's report with hidden settings in the new format.

_SETTINGS_INI = '''"""Settings of the expense report, read from config/__PROJ__.ini."""
import configparser
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "config" / "__PROJ__.ini"


def load(path=None):
    cp = configparser.ConfigParser()
    with open(path or DEFAULT, encoding="utf-8") as fh:
        cp.read_file(fh)
    r, f = cp["report"], cp["format"]
    return {"report": {"title": r["title"], "threshold": r.getint("threshold"),
                       "categories": [c.strip() for c in r["categories"].split(",") if c.strip()]},
            "format": {"uppercase": f.getboolean("uppercase"), "scale": f.getfloat("scale"),
                       "digits": f.getint("digits"), "currency": f["currency"]}}
'''

_SETTINGS_NEW = '''"""Settings of the expense report, read from config/__PROJ__.__EXT__."""
import json
import os
import tomllib
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "config" / "__PROJ__.__EXT__"


def load(path=None):
    path = path or os.environ.get("__ENV__") or DEFAULT
    with open(path, "rb") as fh:
        return json.load(fh) if "__EXT__" == "json" else tomllib.load(fh)
'''

_REPORT = '''"""The expense report: python3 -m __PKG__.report INPUT.csv [--config FILE]"""
import argparse
import csv
import sys

from . import settings


def render(cfg, rows):
    r, f = cfg["report"], cfg["format"]
    out = [r["title"]]
    for cat in r["categories"]:
        total = sum(a for c, a in rows if c == cat and a >= r["threshold"])
        name = cat.upper() if f["uppercase"] else cat
        out.append(f"{name}: {total * f['scale']:.{f['digits']}f} {f['currency']}")
    return "\\n".join(out) + "\\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m __PKG__.report")
    p.add_argument("input")
    p.add_argument("--config")
    a = p.parse_args(argv)
    with open(a.input, newline="") as fh:
        rows = [[r["category"], int(r["amount"])] for r in csv.DictReader(fh)]
    sys.stdout.write(render(settings.load(a.config), rows))


if __name__ == "__main__":
    main()
'''

_SUITE = '''import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from __PKG__ import settings  # noqa: E402

EXPECTED = __EXPECTED__


def test_settings_are_typed():
    cfg = settings.load()
    assert isinstance(cfg["report"]["threshold"], int)
    assert isinstance(cfg["format"]["uppercase"], bool)
    assert cfg == settings.load(ROOT / "config" / "__PROJ__.ini")


def test_sample_report():
    r = subprocess.run([sys.executable, "-m", "__PKG__.report", str(ROOT / "data" / "sample.csv")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.stdout == EXPECTED
'''

_CONF_TESTS = '''"""Checks the migrated settings file and runs the project's report with hidden settings written
in the new format."""

import json
import os
import random
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest

from h4_conf import make_cfg, make_rows, report, rows_csv, to_json, to_toml

E = json.loads(Path(__file__).with_name("expected.json").read_text())
ROOT, PKG, EXT, ENV = Path(E["root"]), E["pkg"], E["ext"], E["env"]


def write_cfg(cfg):
    p = Path(tempfile.mkdtemp()) / f"hidden.{EXT}"
    p.write_text(to_json(cfg) if EXT == "json" else to_toml(cfg))
    return p


def run(rows, *args, env=None, cwd=None):
    d = Path(tempfile.mkdtemp())
    (d / "in.csv").write_text(rows_csv(rows))
    r = subprocess.run(["python3", "-m", f"{PKG}.report", str(d / "in.csv"), *args], capture_output=True,
                       text=True, timeout=60, cwd=str(ROOT), env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stderr[-600:]
    return r.stdout


@pytest.mark.weight(2)
def test_new_settings_file():
    text = (ROOT / "config" / f"{E['proj']}.{EXT}").read_bytes()
    got = json.loads(text) if EXT == "json" else tomllib.loads(text.decode())
    assert got == E["cfg"], "the new settings file does not hold the old settings (values and types)"


@pytest.mark.weight(2)
def test_report_reads_new_format():
    rng = random.Random(31)
    for _ in range(3):
        cfg, rows = make_cfg(rng), make_rows(rng, 40)
        assert run(rows, "--config", str(write_cfg(cfg))) == report(cfg, rows), "report with hidden settings"
    rows = make_rows(rng, 30)
    assert run(rows) == report(E["cfg"], rows), "report with the default settings file"


@pytest.mark.weight(1)
def test_ini_gone_suite_green():
    assert not list(ROOT.rglob("*.ini")), "the INI file is still there"
    assert "configparser" not in (ROOT / PKG / "settings.py").read_text(), "settings.py still uses configparser"
    r = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")],
                       capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert r.returncode == 0 and " passed" in r.stdout, f"the project's tests fail: {r.stdout[-600:]}"


@pytest.mark.weight(1)
@pytest.mark.skipif(not ENV, reason="no environment override in this instance")
def test_environment_override():
    rng = random.Random(32)
    cfg, rows = make_cfg(rng), make_rows(rng, 40)
    assert run(rows, env={ENV: str(write_cfg(cfg))}) == report(cfg, rows), f"{ENV} is not honoured"
    other = make_cfg(rng)
    assert run(rows, "--config", str(write_cfg(other)), env={ENV: str(write_cfg(cfg))}) == report(other, rows), \\
        "--config must win over the environment"
'''


def _conf_migrate(rng: random.Random, index: int) -> Instance:
    ext = rng.choice(["json", "toml"])
    style = rng.choice(["plain", "defaults", "interp"])
    use_env = rng.random() < 0.5
    proj = rng.choice(["spendy", "costly", "outlay", "tally"])
    pkg = proj + "_app"
    env = f"{proj.upper()}_CONFIG" if use_env else ""
    cfg = h4_conf.make_cfg(rng)
    rows = h4_conf.make_rows(rng, 25)
    root = f"/app/{proj}"
    sub = {"__PROJ__": proj, "__PKG__": pkg, "__EXT__": ext, "__ENV__": env or "UNSET_NO_ENV",
           "__EXPECTED__": repr(h4_conf.report(cfg, rows))}

    def fill(text: str) -> str:
        for k, v in sub.items():
            text = text.replace(k, v)
        return text

    files = {f"{proj}/config/{proj}.ini": h4_conf.to_ini(cfg, style, rng),
             f"{proj}/{pkg}/__init__.py": "", f"{proj}/{pkg}/settings.py": fill(_SETTINGS_INI),
             f"{proj}/{pkg}/report.py": fill(_REPORT), f"{proj}/tests/test_report.py": fill(_SUITE),
             f"{proj}/data/sample.csv": h4_conf.rows_csv(rows)}
    target = ("JSON (`config/{0}.json`: an object with the objects `report` and `format`)" if ext == "json" else
              "TOML (`config/{0}.toml`: the tables `[report]` and `[format]`, read with `tomllib`)").format(proj)
    env_text = (f"\n- When `--config` is not given, the environment variable `{env}`, if set and not empty, "
                f"names the settings file to use instead of the default (`--config` wins over it)."
                if use_env else "")
    instruction = f"""\
`{root}/` is a small Python project: `python3 -m {pkg}.report INPUT.csv [--config FILE]` (run from
`{root}`) prints an expense report, with its settings read by `{pkg}/settings.py` from
`config/{proj}.ini`. Its tests are in `{root}/tests/` (`python3 -m pytest tests`).

Migrate the project's settings from INI to {target}:
- Write the new file with exactly the settings the INI file means today (after whatever INI
  features it uses), as native typed values: integers, floats, booleans, strings and a list of
  strings for `categories`, under the same section and key names.
- `settings.load(path=None)` reads the new format and returns the same nested dictionary as
  before; the default file becomes `config/{proj}.{ext}`, and `--config FILE` takes a file in the
  new format.{env_text}
- Remove the INI file and every use of `configparser`; update the project's tests to the new file
  and keep them passing.

The report will be run with other settings files in the new format and other inputs.
"""
    new_cfg = h4_conf.to_json(cfg) if ext == "json" else h4_conf.to_toml(cfg)
    suite = fill(_SUITE).replace(f'"{proj}.ini"', f'"{proj}.{ext}"')
    solution = (f"cd {root}\ncat > config/{proj}.{ext} <<'CFG_EOF'\n{new_cfg}CFG_EOF\n"
                f"cat > {pkg}/settings.py <<'PY_EOF'\n{fill(_SETTINGS_NEW)}PY_EOF\n"
                f"cat > tests/test_report.py <<'PY_EOF'\n{suite}PY_EOF\n"
                f"rm config/{proj}.ini\npython3 -m pytest -q -p no:cacheprovider tests\n")
    expected = {"root": root, "pkg": pkg, "ext": ext, "env": env, "proj": proj, "cfg": cfg}
    knowledge = int(ext == "toml")
    traps = int(style != "plain")
    total = 2 + knowledge + traps
    return Instance(
        instruction=instruction, tests=_CONF_TESTS, solution=solution,
        difficulty="easy" if total <= 2 else "medium" if total <= 4 else "hard",
        variant=f"ini-{style}/{ext}" + ("/env" if use_env else ""), files=files,
        test_files={"expected.json": json.dumps(expected), "h4_conf.py": source(h4_conf)},
        tags=("config", "migration", ext), oracle_turns=5,
    )


FAMILIES.append(Family("conf-migrate", "long-horizon", "train",
                       "migrate a project's INI settings (plain, DEFAULT section, interpolation) to JSON "
                       "or TOML: file, loader, env override, tests green; hidden settings", _conf_migrate))

# ------------------------------------------------------------------ job-runner
# A runner for a graph of shell jobs (JSON or INI spec): dependency order with ties by name, a
# failure policy (stop, or skip the dependents), cycles and unknown deps refused; then the sample
# graph run. The tests run the runner on hidden graphs and read the trace the jobs leave.

_POLICY = {
    "stop": "When a job fails, run nothing more: the log ends with its `failed` line.",
    "skip": "When a job fails, keep going: a job any of whose dependencies failed or was skipped is "
            "not run; it takes its turn in the order like any other job, and its log line is "
            "`NAME skipped`.",
}

_JOB_TESTS = '''"""Runs the agent's job runner on hidden job graphs; checks which jobs ran, in which order, the
log and the exit status."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h4_jobs import make_graph, simulate, to_ini, to_json, to_txt

E = json.loads(Path(__file__).with_name("expected.json").read_text())
FMT, POLICY, PROG = E["fmt"], E["policy"], E["prog"]


def run_graph(jobs, codes, seed):
    d = Path(tempfile.mkdtemp())
    spec = d / f"jobs.{FMT}"
    spec.write_text({"json": to_json, "ini": to_ini, "txt": to_txt}[FMT](jobs, codes, random.Random(seed)))
    r = subprocess.run(["python3", PROG, str(spec)], capture_output=True, text=True, timeout=120, cwd="/tmp")
    trace = (d / "trace.txt").read_text().split() if (d / "trace.txt").exists() else []
    log = (d / "run.log").read_text().splitlines() if (d / "run.log").exists() else None
    return r.returncode, trace, log


def check(jobs, codes, seed):
    want_log, want_code, want_ran = simulate(jobs, codes, POLICY)
    code, trace, log = run_graph(jobs, codes, seed)
    assert code == want_code, f"exit status {code}, expected {want_code} (graph {jobs}, codes {codes})"
    assert trace == want_ran, f"jobs ran {trace}, expected {want_ran}"
    if want_code != 2:
        assert log == want_log, f"run.log {log}, expected {want_log}"


@pytest.mark.weight(1)
def test_sample_log():
    want_log, _, _ = simulate(E["jobs"], E["codes"], POLICY)
    assert (Path(E["dir"]) / "run.log").read_text().splitlines() == want_log, "the sample's run.log"


@pytest.mark.weight(2)
def test_order_without_failures():
    rng = random.Random(61)
    for i in range(4):
        jobs, codes = make_graph(rng, rng.randint(5, 12), fail_rate=0)
        check(jobs, codes, i)


@pytest.mark.weight(2)
def test_failure_policy():
    rng = random.Random(62)
    for i in range(5):
        jobs, codes = make_graph(rng, rng.randint(6, 12), fail_rate=0.3)
        codes[sorted(jobs)[0]] = 0
        codes[rng.choice(sorted(jobs))] = 3
        check(jobs, codes, i)


@pytest.mark.weight(1)
def test_bad_graphs_run_nothing():
    rng = random.Random(63)
    jobs, codes = make_graph(rng, 7, fail_rate=0)
    check(jobs, codes, 0)
    jobs[sorted(jobs)[0]] = sorted(jobs)[:1]
    check(jobs, codes, 3)
    jobs, codes = make_graph(rng, 7, cycle=True, fail_rate=0)
    check(jobs, codes, 1)
    jobs, codes = make_graph(rng, 5, fail_rate=0)
    jobs[sorted(jobs)[2]] = jobs[sorted(jobs)[2]] + ["ghost"]
    check(jobs, codes, 2)
'''

_RUNNER = '''import configparser, heapq, json, subprocess, sys
from pathlib import Path
spec = Path(sys.argv[1])
if spec.suffix == ".json":
    jobs = {n: (j["cmd"], list(j.get("deps", []))) for n, j in json.loads(spec.read_text())["jobs"].items()}
elif spec.suffix == ".txt":
    jobs, name = {}, None
    for line in spec.read_text().splitlines():
        if line.startswith("\t") and name:
            jobs[name] = (line[1:], jobs[name][1])
        elif line.strip():
            name, _, deps = line.partition(":")
            jobs[name] = ("", deps.split())
else:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read_string(spec.read_text())
    jobs = {n: (cp[n]["cmd"], [d.strip() for d in cp[n].get("deps", "").split(",") if d.strip()]) for n in cp.sections()}
if any(d not in jobs for _, deps in jobs.values() for d in deps):
    print("unknown dependency", file=sys.stderr)
    sys.exit(2)
indeg = {n: len(set(d)) for n, (_, d) in jobs.items()}
users = {n: [] for n in jobs}
for n, (_, deps) in jobs.items():
    for d in set(deps):
        users[d].append(n)
order, ready = [], sorted(n for n, k in indeg.items() if k == 0)
heapq.heapify(ready)
while ready:
    n = heapq.heappop(ready)
    order.append(n)
    for u in users[n]:
        indeg[u] -= 1
        if indeg[u] == 0:
            heapq.heappush(ready, u)
if len(order) < len(jobs):
    print("cycle", file=sys.stderr)
    sys.exit(2)
state, failed = {}, False
with open(spec.parent / "run.log", "w") as log:
    for n in order:
        cmd, deps = jobs[n]
        if any(state[d] != "ok" for d in deps):
            state[n] = "skipped"
            log.write(f"{n} skipped\\n")
            continue
        code = subprocess.run(["sh", "-c", cmd], cwd=spec.parent).returncode
        state[n] = "ok" if code == 0 else "failed"
        log.write(f"{n} ok\\n" if code == 0 else f"{n} failed {code}\\n")
        if code:
            failed = True
            if __POLICY__ == "stop":
                break
sys.exit(1 if failed else 0)
'''


def _job_runner(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(["json", "ini", "txt"])
    policy = rng.choice(["stop", "skip"])
    where = rng.choice(["ci", "nightly", "deploy"])
    prog = f"/app/{where}/runjobs.py"
    jobs, codes = h4_jobs.make_graph(rng, rng.randint(7, 11), fail_rate=0.15)
    spec_text = {"json": h4_jobs.to_json, "ini": h4_jobs.to_ini, "txt": h4_jobs.to_txt}[fmt](jobs, codes, rng)
    fmt_text = {
        "json": '`{"jobs": {NAME: {"cmd": SHELL_COMMAND, "deps": [NAME, ...]}}}` (`deps` may be absent)',
        "ini": "INI: one section `[NAME]` per job with the keys `cmd` (a shell command) and, "
               "optionally, `deps` (names separated by commas); values are taken literally",
        "txt": "a make-like text: per job a line `NAME: DEP DEP ...` (no dependencies: `NAME:`) "
               "followed by one line holding its shell command after a tab; blank lines between "
               "jobs",
    }[fmt]
    instruction = f"""\
Write `{prog}`, a job runner (Python 3, standard library only): `python3 {prog} SPEC` reads a job
graph from the file SPEC, in {fmt_text}, and runs the jobs' commands with `sh -c`, each in the
directory that holds SPEC.

- Order: a job runs only after all its dependencies have run; whenever several jobs are ready,
  the one whose name comes first (plain string order) goes first.
- A job fails when its command exits with a non-zero status. {_POLICY[policy]}
- The runner writes `run.log` next to SPEC: one line per job that took its turn, in order: `NAME ok`
  or `NAME failed STATUS`{' or `NAME skipped`' if policy == 'skip' else ''}.
- Exit status: 0 when every job succeeded, 1 when a job failed. A dependency on a job that does
  not exist, or a dependency cycle, is an error: exit status 2, a message on standard error, and
  no job is run.

Then run it on `/app/{where}/jobs.{fmt}` so that `/app/{where}/run.log` is that graph's log. The
runner will also be run on other graphs.
"""
    solution = (f"cat > {prog} <<'PY_EOF'\n{_RUNNER.replace('__POLICY__', repr(policy))}PY_EOF\n"
                f"python3 {prog} /app/{where}/jobs.{fmt} || true\n")
    expected = {"fmt": fmt, "policy": policy, "prog": prog, "dir": f"/app/{where}", "jobs": jobs, "codes": codes}
    traps = int(policy == "skip") + int(fmt != "json")
    total = 2 + 1 + traps
    return Instance(
        instruction=instruction, tests=_JOB_TESTS, solution=solution,
        difficulty="medium" if total <= 4 else "hard",
        variant=f"{fmt}/{policy}", files={f"{where}/jobs.{fmt}": spec_text},
        test_files={"expected.json": json.dumps(expected), "h4_jobs.py": source(h4_jobs)},
        tags=("jobs", "dependencies", fmt), oracle_turns=2,
    )


FAMILIES.append(Family("job-runner", "long-horizon", "train",
                       "a dependency-ordered shell job runner (JSON, INI or make-like graph; stop or skip on "
                       "failure; cycles refused), run on hidden graphs", _job_runner))
