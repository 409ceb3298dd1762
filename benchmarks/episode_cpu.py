"""Where the CPU of one verified episode goes, phase by phase, and the floor it is measured against.

Usage: python benchmarks/episode_cpu.py [--n 10] [--task DIR] [--runtime runc] [--out FILE]

Each of n oracle episodes of a small task (default: the fixture `word-stats`) is cut into phases:
reset, steps (the oracle's command), the protected verifier's own phases (freeze, tamper_check,
copy_tests, tests, read_back, as it reports them through ``ProtectedVerifier.on_phase``), the rest
of the submit (verify_rest), and teardown. At every phase boundary four CPU counters are read, and
the phase is charged what each grew by:

- ``self``: this process and the children it reaped (``os.times``);
- ``engine``: the engine's daemons, dockerd, containerd and the containerd shims (user + system,
  with the children they reaped: every ``runc exec`` ends up here; a shim's counters leave with
  it, so teardown can read below zero here);
- ``sandbox``: the sandbox container's cgroup (``cpu.stat``): the agent's and the tests' processes;
- ``machine``: every core's busy time (``/proc/stat``): the one number that misses nothing, and
  counts everything else the machine did meanwhile (run this on an otherwise idle machine).

The floor, measured in the same run with the same counters: a bare container created, started and
removed (docker-py, the sandbox's image, ``sleep``), plus a bare run of the same tests in a
container that already holds them (``docker exec`` of the test command). ``ratio`` is the
episode's machine CPU over the floor's. Prints one JSON document (median per phase and counter).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import tarfile
import sys
import time
from pathlib import Path

from _common import emit, log, stats

from terminal_env import TerminalEnv
from terminal_env.models.simple import OracleBackend
from terminal_env.sandbox.cgroups import cgroup_files
from terminal_env.sandbox.engine import get_client
from terminal_env.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TASK = ROOT / "tests" / "data" / "protected" / "word-stats"
TICK = os.sysconf("SC_CLK_TCK")
#: /proc/PID/comm of the engine's daemons (comm is cut at 15 characters)
ENGINE = ("dockerd", "containerd", "containerd-shim", "containerd-shi", "runc", "docker-proxy")


def engine_seconds() -> float:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        comm = raw[raw.index(b"(") + 1:raw.rindex(b")")].decode(errors="replace")
        if comm.startswith(ENGINE):
            fields = raw[raw.rindex(b")") + 2:].split()
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return total / TICK


def machine_seconds() -> float:
    with open("/proc/stat") as fh:
        values = [int(x) for x in fh.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / TICK


def sandbox_seconds(container_id: str | None) -> float:
    if not container_id:
        return 0.0
    paths = [p for controller in ("cpuacct", "cpu,cpuacct", "cpu")
             for p in cgroup_files(container_id, controller, "cpuacct.usage", "cpu.stat")]
    for path in dict.fromkeys(paths):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        if path.endswith("cpu.stat"):
            return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
        return int(text) / 1e9
    return 0.0


class Profile:
    """CPU counters read at each phase boundary; each phase is charged what they grew by."""

    COUNTERS = ("self", "engine", "sandbox", "machine", "wall")

    def __init__(self) -> None:
        self.container: str | None = None  # the sandbox whose cgroup is read
        self.phases: dict[str, dict[str, float]] = {}
        self._last = self._read()

    def _read(self) -> dict[str, float]:
        t = os.times()
        return {"self": t.user + t.system + t.children_user + t.children_system, "engine": engine_seconds(),
                "sandbox": sandbox_seconds(self.container),
                "machine": machine_seconds(), "wall": time.perf_counter()}

    def mark(self, phase: str) -> None:
        now = self._read()
        spent = self.phases.setdefault(phase, dict.fromkeys(self.COUNTERS, 0.0))
        for k in self.COUNTERS:
            # a sandbox's cgroup counts from its own start: a new or gone one is read as it is
            grew = now[k] - self._last[k]
            spent[k] += grew if k != "sandbox" else max(0.0, grew)
        self._last = now

    def restart(self) -> None:
        self._last = self._read()


def episode(task_dir: Path, runtime: str | None) -> dict[str, dict[str, float]]:
    prof = Profile()
    env = TerminalEnv(task_dir, reward="binary", max_steps=5, runtime=runtime)
    try:
        prof.restart()
        env.reset()
        prof.container = env.sandbox.id
        prof._last["sandbox"] = 0.0  # the cgroup counted the keeper's start: charged to reset
        prof.mark("reset")
        oracle = OracleBackend()
        oracle.start_episode(env, None)
        reply = re.fullmatch(r"(`{3,})bash\n(.*)\n\1", oracle.complete([]).text, re.S)
        env.step(reply.group(2))  # the oracle's one command (its solution, within its timeout)
        prof.mark("steps")
        env.verifier.on_phase = prof.mark
        _, reward, _, _, info = env.step("#!submit")
        prof.mark("verify_rest")
        if reward != 1.0:
            raise SystemExit(f"the oracle's episode scored {reward}: {info['verification'].message}")
        prof.container = None
    finally:
        env.close()
    prof.mark("teardown")
    return prof.phases


def floor(task, image: str, runtime: str | None) -> dict[str, dict[str, float]]:
    client = get_client()
    prof = Profile()
    extra = {"runtime": runtime} if runtime else {}
    c = client.containers.create(image, ["sleep", "infinity"], network_mode="none", labels={"terminal-env.bench": "1"},
                                 **extra)
    c.start()
    c.remove(force=True)
    prof.mark("container")
    keep = client.containers.create(image, ["sleep", "infinity"], network_mode="none",
                                    labels={"terminal-env.bench": "1"}, **extra)
    try:
        keep.start()
        keep.exec_run(["mkdir", "-p", "/tests", "/logs/verifier"])
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, src in task.verifier_files().items():
                data = src if isinstance(src, bytes) else Path(src).read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
        keep.put_archive("/tests", buf.getvalue())
        prof.container = keep.id
        prof.restart()
        keep.exec_run(list(task.test_command), workdir=task.workdir or "/")
        prof.mark("tests")
    finally:
        prof.container = None
        keep.remove(force=True)
    return prof.phases


def median_table(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    phases = list(dict.fromkeys(p for run in runs for p in run))
    return {p: {k: round(stats([run.get(p, {}).get(k, 0.0) for run in runs], fields=("median",))["median"], 4)
                for k in Profile.COUNTERS} for p in phases}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--task", type=Path, default=DEFAULT_TASK)
    ap.add_argument("--runtime", default=None, help="OCI runtime (default: the engine's)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    task = load_task(args.task)
    episodes, floors = [], []
    image = None
    for i in range(args.n):
        episodes.append(episode(args.task, args.runtime))
        if image is None:
            env = TerminalEnv(args.task)
            image = env.task.image
            env.close()
        floors.append(floor(task, image, args.runtime))
        total = sum(v["machine"] for v in episodes[-1].values())
        log(f"episode {i}: machine CPU {total:.3f} s; floor {sum(v['machine'] for v in floors[-1].values()):.3f} s")
    per_episode = [sum(v["machine"] for v in run.values()) for run in episodes]
    per_floor = [sum(v["machine"] for v in run.values()) for run in floors]
    ratio = stats(per_episode, fields=("median",))["median"] / max(1e-9, stats(per_floor, fields=("median",))["median"])
    emit({"benchmark": "episode_cpu", "task": task.name, "n": args.n, "runtime": args.runtime or "default",
          "cpus": os.cpu_count(), "episode_by_phase_s": median_table(episodes), "floor_by_phase_s": median_table(floors),
          "episode_machine_cpu_s": stats(per_episode), "floor_machine_cpu_s": stats(per_floor),
          "ratio_episode_to_floor": round(ratio, 3)}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
