"""Harbor itself and terminal-env on the same task copies, oracle and nop, side by side.

    python scripts/harbor_parity.py                                  # 8 bundled tasks, 2 rounds
    python scripts/harbor_parity.py --tasks pool --rounds 1 --json runs/parity/parity.json

Not part of the test suite (it installs Harbor and takes minutes per task). What it does, all of it
under ``--work`` (default ``runs/parity``; nothing is written elsewhere):

1. Harbor 0.26 in a virtual environment of its own, made with a Python >= 3.12 (``--python``, else
   the first ``python3.13``/``python3.12`` on PATH or under pyenv); ``pip`` installs it once.
2. Docker Compose v2, which Harbor drives its engine with: the host's ``docker compose`` when it
   works, else the plugin taken out of Debian 13's ``docker-compose`` package (fetched with apt
   into the work folder, never installed) and given to Harbor through ``DOCKER_CONFIG``.
3. Two copies of each task: one run by this project unchanged, one run by Harbor where
   ``network_mode = "no-network"`` reads ``"public"`` (``--harbor-network as-declared`` keeps
   it). Harbor 0.26 enforces every mode but ``public`` on Docker with a sidecar image it builds
   from Docker Hub's ``gogost/gost``; where that cannot be pulled, its whole job aborts. The oracle
   and nop agents use no network, so their rewards do not depend on it; this is said in the output.
4. ``--rounds`` alternating rounds: for each agent (oracle, nop), one Harbor job and one
   ``terminal-env run`` (one attempt, one trial at a time, both), over every task.
5. A table per trial pair (rewards, per-check results, trial times) and a summary (pairs with
   equal rewards and equal checks, median trial time of each), printed and written to ``--json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARBOR = "harbor==0.26.*"
#: one of each kind of bundled task, quick to build (the default set)
DEFAULT_TASKS = ["br-make-calc", "dbg-dates", "git-split-commit", "ia-pyrepl-ledger", "perf-prefix-sum",
                 "sci-newton-root", "sec-ssh-key-permissions", "td-jq-pipeline-report"]
AGENTS = ("oracle", "nop")


def say(msg: str) -> None:
    print(f"parity: {msg}", file=sys.stderr, flush=True)


def guarded(work: Path) -> Path:
    """The work folder, refused when it is the filesystem's root or the checkout itself."""
    work = work.resolve()
    if work == Path("/") or work == ROOT or work == Path.home():
        raise SystemExit(f"parity: refusing to work in {work}: give a folder of its own (--work)")
    work.mkdir(parents=True, exist_ok=True)
    return work


def find_python(given: str | None) -> str:
    candidates = [given] if given else [
        shutil.which("python3.13"), shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")), reverse=True)]
    for c in filter(None, candidates):
        out = subprocess.run([c, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                             capture_output=True, text=True)
        if out.stdout.strip() == "True":
            return c
    raise SystemExit("parity: Harbor needs Python >= 3.12 and none was found; pass --python PATH")


def ensure_harbor(work: Path, python: str) -> Path:
    venv = work / "harbor-venv"
    harbor = venv / "bin" / "harbor"
    if not harbor.exists():
        say(f"installing {HARBOR} with {python} into {venv}")
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", HARBOR], check=True)
    return harbor


def compose_env(work: Path) -> dict[str, str]:
    """The environment Harbor runs in: one where ``docker compose`` (v2) works."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return env
    config = work / "docker-config"
    plugin = config / "cli-plugins" / "docker-compose"
    if not plugin.exists():
        say("the host has no `docker compose` (v2): taking the plugin from Debian 13's docker-compose package")
        apt = work / "apt"
        for sub in ("lists/partial", "cache/archives/partial", "etc"):
            (apt / sub).mkdir(parents=True, exist_ok=True)
        (apt / "etc" / "sources.list").write_text("deb http://deb.debian.org/debian trixie main\n")
        opts = [f"-oDir::Etc::SourceList={apt}/etc/sources.list", "-oDir::Etc::SourceParts=/nonexistent",
                f"-oDir::State::Lists={apt}/lists", f"-oDir::Cache={apt}/cache", "-oAPT::Get::List-Cleanup=0"]
        subprocess.run(["apt-get", *opts, "update", "-qq"], check=True)
        subprocess.run(["apt-get", *opts, "download", "docker-compose/trixie"], cwd=apt, check=True)
        [deb] = sorted(apt.glob("docker-compose_2*.deb"))
        unpacked = apt / "x"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        plugin.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(unpacked / "usr/libexec/docker/cli-plugins/docker-compose", plugin)
    env["DOCKER_CONFIG"] = str(config)
    return env


def copy_tasks(names: list[str], work: Path, harbor_network: str) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT))
    from terminal_env.runner.config import resolve_tasks

    tasks = resolve_tasks(names, allow_test=True)
    ours, theirs = work / "tasks-ours", work / "tasks-harbor"
    for folder in (ours, theirs):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
    for t in tasks:
        shutil.copytree(t.path, ours / t.path.name)
        shutil.copytree(t.path, theirs / t.path.name)
        if harbor_network == "public":
            toml = theirs / t.path.name / "task.toml"
            toml.write_text(re.sub(r'network_mode\s*=\s*"no-network"', 'network_mode = "public"', toml.read_text()))
    say(f"{len(tasks)} tasks copied into {ours} and {theirs}")
    return ours, theirs


def run_harbor(harbor: Path, env: dict[str, str], tasks: Path, agent: str, jobs: Path, name: str) -> list[dict]:
    rows = []
    for task in sorted(p for p in tasks.iterdir() if p.is_dir()):
        job = f"{name}-{task.name}"
        subprocess.run([str(harbor), "run", "-p", str(task), "-a", agent, "-o", str(jobs), "--job-name", job,
                        "-n", "1", "-y", "-q"], env=env, capture_output=True, text=True)
        results = glob.glob(str(jobs / job / "*" / "result.json"))
        if not results:
            rows.append({"task": task.name, "reward": None, "error": "Harbor wrote no trial result"})
            continue
        r = json.loads(Path(results[0]).read_text())
        checks_file = Path(results[0]).parent / "verifier" / "checks.json"
        checks = json.loads(checks_file.read_text())["checks"] if checks_file.exists() else []
        reward = ((r.get("verifier_result") or {}).get("rewards") or {}).get("reward")
        rows.append({"task": task.name, "reward": reward, "checks": {c["name"]: c["passed"] for c in checks},
                     "seconds": _seconds(r.get("started_at"), r.get("finished_at")),
                     "error": (r.get("exception_info") or {}).get("exception_type")})
    return rows


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    from datetime import datetime

    def parse(s: str) -> datetime:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def run_ours(tasks: Path, agent: str, out: Path) -> list[dict]:
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([str(ROOT / ".venv" / "bin" / "terminal-env"), "run", "-p", *sorted(str(p) for p in tasks.iterdir()),
                    "-m", agent, "-k", "1", "-n", "1", "--allow-test", "--out", str(out)],
                   capture_output=True, text=True)
    rows = []
    for result in sorted(glob.glob(str(out / "trials" / "*" / "*" / "result.json"))):
        r = json.loads(Path(result).read_text())
        verifier = Path(result).parent / "verifier.json"
        checks = json.loads(verifier.read_text()).get("checks", []) if verifier.exists() else []
        rows.append({"task": r["task"], "reward": r["reward"], "checks": {c["name"]: c["passed"] for c in checks},
                     "seconds": r["duration"], "error": r.get("error")})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS, help="what `terminal-env run --tasks` takes")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=str(ROOT / "runs" / "parity"))
    ap.add_argument("--python", help="a Python >= 3.12 for Harbor")
    ap.add_argument("--harbor-network", choices=("public", "as-declared"), default="public")
    ap.add_argument("--json", help="write the rows and the summary here")
    args = ap.parse_args()
    work = guarded(Path(args.work))
    harbor = ensure_harbor(work, find_python(args.python))
    env = compose_env(work)
    ours_tasks, harbor_tasks = copy_tasks(args.tasks, work, args.harbor_network)
    pairs = []
    for rnd in range(1, args.rounds + 1):
        for agent in AGENTS:
            t0 = time.time()
            theirs = {r["task"]: r for r in run_harbor(harbor, env, harbor_tasks, agent, work / "jobs", f"r{rnd}-{agent}")}
            t1 = time.time()
            ours = {r["task"]: r for r in run_ours(ours_tasks, agent, work / "ours" / f"r{rnd}-{agent}")}
            say(f"round {rnd}, {agent}: Harbor {t1 - t0:.0f} s, terminal-env {time.time() - t1:.0f} s")
            for task in sorted(set(theirs) | set(ours)):
                h, o = theirs.get(task, {}), ours.get(task, {})
                pairs.append({"round": rnd, "agent": agent, "task": task,
                              "harbor_reward": h.get("reward"), "ours_reward": o.get("reward"),
                              "rewards_equal": h.get("reward") is not None and h.get("reward") == o.get("reward"),
                              "checks_equal": bool(h.get("checks")) and h.get("checks") == o.get("checks"),
                              "harbor_seconds": h.get("seconds"), "ours_seconds": o.get("seconds"),
                              "harbor_error": h.get("error"), "ours_error": o.get("error")})
    print(f"{'round':>5} {'agent':6} {'task':28} {'Harbor':>7} {'ours':>7} {'same':>5} {'checks':>6} "
          f"{'Harbor s':>9} {'ours s':>7}")
    for p in pairs:
        print(f"{p['round']:>5} {p['agent']:6} {p['task'][:28]:28} {_num(p['harbor_reward']):>7} "
              f"{_num(p['ours_reward']):>7} {'yes' if p['rewards_equal'] else 'NO':>5} "
              f"{'yes' if p['checks_equal'] else 'no':>6} {_num(p['harbor_seconds']):>9} {_num(p['ours_seconds']):>7}")
    summary = {
        "pairs": len(pairs), "rewards_equal": sum(p["rewards_equal"] for p in pairs),
        "checks_equal": sum(p["checks_equal"] for p in pairs),
        "harbor_median_seconds": _median([p["harbor_seconds"] for p in pairs]),
        "ours_median_seconds": _median([p["ours_seconds"] for p in pairs]),
        # per agent and round: the first oracle round also pays for each image's first build
        "median_seconds_by_round": {
            f"r{rnd}-{agent}": {side: _median([p[f"{side}_seconds"] for p in pairs
                                               if p["round"] == rnd and p["agent"] == agent])
                                for side in ("harbor", "ours")}
            for rnd in range(1, args.rounds + 1) for agent in AGENTS},
        "harbor": HARBOR, "harbor_network": args.harbor_network,
        "note": ("Harbor ran copies whose network_mode 'no-network' reads 'public' (its Docker sidecar for the "
                 "other modes needs an image from Docker Hub); oracle and nop use no network"
                 if args.harbor_network == "public" else "Harbor ran the tasks as declared"),
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"summary": summary, "pairs": pairs}, indent=1) + "\n")
    return 0 if summary["rewards_equal"] == len(pairs) else 1


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(statistics.median(vals), 2) if vals else None


if __name__ == "__main__":
    sys.exit(main())
