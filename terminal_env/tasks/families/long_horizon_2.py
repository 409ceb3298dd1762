"""Generated task families of the long-horizon category, continued (see :mod:`.base` for what a
family is; the first ones are in :mod:`.long_horizon`)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import h4_conf, source

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
