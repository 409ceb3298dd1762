"""Score a model on bundled tasks, the way `terminal-env run` does, from Python.

With no arguments a scripted stand-in model on loopback plays the role of your server, so the
example runs anywhere (Docker engine and base images needed: `bash scripts/setup.sh`):

    python examples/score_a_model.py
    python examples/score_a_model.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B

Then open RUN_DIR/report/index.html.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from terminal_env.models.scripted_server import ScriptedServer
from terminal_env.report import write_report
from terminal_env.runner.config import RunConfig
from terminal_env.runner.run import Runner
from terminal_env.runner.table import print_summary

TASK = str(Path(__file__).resolve().parent.parent / "tests/data/tasks/harbor-sum")


def stand_in(body: dict) -> str:
    """A 'model' that writes the program on its first turn and submits on its second."""
    turn = sum(m["role"] == "assistant" for m in body["messages"])
    if turn == 0:
        return "```bash\nprintf 'import sys\\nprint(sum(int(a) for a in sys.argv[1:]))\\n' > /app/sum.py\n```"
    return "```bash\n#!submit\n```"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url")
    ap.add_argument("--model", default="stand-in")
    ap.add_argument("--tasks", nargs="+", default=[TASK])
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="terminal-env-run-"))
    args = ap.parse_args()

    def run(base_url: str) -> None:
        config = RunConfig(tasks=args.tasks, harness="generic", model=f"openai:{args.model}",
                           model_options={"base_url": base_url}, attempts=3, concurrency=2)
        summary = Runner(config, args.out).run()
        print_summary(summary)
        print(json.dumps({"mean_at_3": summary["mean_at_k"], "report": str(write_report(args.out))}, indent=1))

    if args.base_url:
        run(args.base_url)
    else:
        with ScriptedServer(stand_in) as server:
            run(server.base_url)


if __name__ == "__main__":
    main()
