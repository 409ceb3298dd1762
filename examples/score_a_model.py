"""Score a model on bundled tasks, the way `terminal-env run` does, from Python.

    python examples/score_a_model.py                    # a scripted stand-in model, on loopback
    python examples/score_a_model.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B
    python examples/score_a_model.py --tasks td-csv-region-totals td-log-endpoint-errors

What it shows: a run is a ``RunConfig`` (tasks, harness, model, attempts, concurrency) played by a
``Runner`` into a run directory: every trial's trajectory and verdict, ``summary.json`` (Mean@k,
pass@k, with bootstrap intervals) and an HTML report. Tasks are directories or the names of
bundled tasks (``tasks/``); the default is ``td-csv-region-totals`` of the train split.

With no ``--base-url``, a scripted stand-in plays the role of your server: a real
OpenAI-compatible HTTP server on 127.0.0.1 (``ScriptedServer``) whose "model" answers in the
generic harness's format, one fenced ``bash`` block per turn, typing each task's reference
solution (``solution/solve.sh``, cut into commands) and then ``#!submit``. It must score 1.0; the
example exits 1 if it does not (with a real model: if no trial could be scored at all).

Needs the Docker engine and the base image (``bash scripts/setup.sh``). Then open
RUN_DIR/report/index.html.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from terminal_env.models.scripted_server import ScriptedServer
from terminal_env.models.simple import fenced
from terminal_env.models.typed import typed_commands
from terminal_env.report import write_report
from terminal_env.runner.config import RunConfig, resolve_tasks
from terminal_env.runner.run import Runner
from terminal_env.runner.table import print_summary

TASKS = ["td-csv-region-totals"]  # a bundled task, by name
ATTEMPTS = 3


def stand_in_for(task_specs: list[str]) -> Callable[[dict[str, Any]], str]:
    """A 'model' for the given tasks: it recognises the task by its instruction (in the first
    user message) and answers turn k with the k-th command of the task's reference solution."""
    solutions = {}
    for task in resolve_tasks(task_specs):
        script = (Path(task.path) / "solution" / "solve.sh").read_text()
        solutions[task.instruction.strip()] = typed_commands(script)

    def stand_in(body: dict[str, Any]) -> str:  # body: the JSON of a /v1/chat/completions request
        messages = body["messages"]
        task_text = next(m["content"] for m in messages if m["role"] == "user")
        commands = next((c for instruction, c in solutions.items() if instruction in task_text), [])
        turn = sum(m["role"] == "assistant" for m in messages)
        return fenced(commands[turn]) if turn < len(commands) else fenced("#!submit")

    return stand_in


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", help="an OpenAI-compatible server (default: the stand-in)")
    ap.add_argument("--model", default="stand-in", help="the model name the server serves")
    ap.add_argument("--tasks", nargs="+", default=TASKS,
                    help="task directories or names of bundled tasks")
    ap.add_argument("--out", help="the run directory (default: a new temporary one)")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="terminal-env-run-")

    def run(base_url: str) -> dict[str, Any]:
        config = RunConfig(tasks=args.tasks, harness="generic", model=f"openai:{args.model}",
                           model_options={"base_url": base_url}, attempts=ATTEMPTS, concurrency=2,
                           progress=False)
        summary = Runner(config, out).run()  # every sandbox is removed when it returns
        print_summary(summary, Console(width=120, highlight=False))
        return summary

    if args.base_url:
        summary = run(args.base_url)
    else:
        with ScriptedServer(stand_in_for(args.tasks)) as server:
            summary = run(server.base_url)

    mean = summary["mean_at_k"]["value"]
    print(json.dumps({f"mean_at_{ATTEMPTS}": mean, "outcomes": summary["outcomes"],
                      "report": str(write_report(out))}, indent=1))
    if args.base_url:
        return 0 if summary["n_scored_tasks"] > 0 else 1
    return 0 if mean == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
