"""What the agent loop costs per turn beyond the model and the terminal.

Usage: python benchmarks/agent_overhead.py [--turns 200] [--harness generic]

One episode of the `harbor-sum` test task, played by a scripted model on a loopback
OpenAI-compatible server (terminal_env.models.scripted_server) through the official `openai`
client: every turn runs `true`, the last one submits. Each turn is split into

* model: the backend call (HTTP round trip through the openai client to the loopback server);
* env:   the harness actions run through TerminalEnv.step;
* loop:  everything else: context fitting, parsing, compiling, messages, and saving the
         trajectory (it is written after every turn, so a killed run keeps it).

Baselines measured in the same run on the same container: a bare `env.step("true")` (the
terminal's own cost) and a bare `client.chat.completions.create` against the same server (the
model call's floor). Prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from functools import partial
from pathlib import Path

from _common import stats

from terminal_env import TerminalEnv
from terminal_env.agent import run_agent
from terminal_env.harness import get_harness
from terminal_env.models.registry import make_backend
from terminal_env.models.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "data" / "tasks" / "harbor-sum"
REPLY = {
    "generic": ("```bash\ntrue\n```", "```bash\n#!submit\n```"),
    "react": ("<thought>t</thought><action>true</action>", "<action>#!submit</action>"),
}

#: seconds in, {n, median_ms, p90_ms, mean_ms} out
ms_stats = partial(stats, fields=("n", "median", "p90", "mean"), scale=1000, digits=3, suffix="_ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--harness", default="generic", choices=sorted(REPLY))
    args = ap.parse_args()
    work, done = REPLY[args.harness]

    def script(body: dict) -> str:
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return work if turn < args.turns else done

    env = TerminalEnv(str(TASK), max_steps=args.turns + 5)
    with ScriptedServer(script) as server, tempfile.TemporaryDirectory() as tmp:
        backend = make_backend("openai:bench", base_url=server.base_url)
        traj = run_agent(env, get_harness(args.harness), backend, max_turns=args.turns + 5,
                         trajectory_path=Path(tmp) / "trajectory.json")
        traj_bytes = (Path(tmp) / "trajectory.json").stat().st_size
        turns = [t for t in traj.turns[: args.turns] if t.completion is not None]
        model = [t.model_seconds for t in turns]
        envs = [t.env_seconds for t in turns]
        totals = [turns[i + 1].started - turns[i].started for i in range(len(turns) - 1)]
        loop = [tot - m - e for tot, m, e in zip(totals, model, envs)]
        # baselines on the same container and server
        env.reset()
        bare_step = []
        for _ in range(args.turns):
            t0 = time.perf_counter()
            env.step("true")
            bare_step.append(time.perf_counter() - t0)
        oa = backend._client  # the same openai.OpenAI client the backend uses
        bare_http = []
        for _ in range(args.turns):
            t0 = time.perf_counter()
            oa.chat.completions.create(model="bench", messages=[{"role": "user", "content": "x"}])
            bare_http.append(time.perf_counter() - t0)
    env.close()
    print(json.dumps({
        "harness": args.harness, "turns": len(turns), "termination": traj.termination,
        "outcome": traj.outcome,
        "per_turn": {"total": ms_stats(totals), "model": ms_stats(model), "env": ms_stats(envs),
                     "loop": ms_stats(loop)},
        "baselines": {"bare_env_step_true": ms_stats(bare_step),
                      "bare_openai_create": ms_stats(bare_http)},
        "trajectory_bytes_at_end": traj_bytes,
        "note": "loop = turn wall time - model call - env steps; includes the per-turn trajectory save, "
                "whose cost grows with the trajectory",
    }, indent=1))


if __name__ == "__main__":
    main()
