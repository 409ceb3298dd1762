"""The ``verifiers`` package's evaluation command plays terminal tasks: ``vf-eval terminal-env``.

    python examples/verifiers_eval.py                         # tiny in-process model, two toy tasks (~40 s)
    python examples/verifiers_eval.py --model /models/qwen3-0.6b --tasks pool:train -n 5 -r 2

Needs ``.venv-verifiers`` (``bash scripts/setup.sh`` makes it: the verifiers package pins
openai<3, so it lives in a virtual environment of its own), the ``[hf]`` extra here and a Docker
engine.

What it shows: the gateway (an OpenAI-compatible server on 127.0.0.1, in front of a model of this
process) answers the package's model calls and records their exact tokens; the package's own
``vf-eval`` loads the project's taskset and environment by the name ``terminal-env``, plays each
task in a sandbox on this machine, and the protected verifier scores it. The rewards, per-check
results and actions are in the run's ``traces.jsonl``. The tiny default model was never trained,
so it mostly writes nonsense and scores 0: the point is the plumbing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VF_EVAL = Path(os.environ.get("TERMINAL_ENV_VERIFIERS_VENV", ROOT / ".venv-verifiers")) / "bin" / "vf-eval"
try:
    from terminal_env.integrations.gateway import Gateway
    from terminal_env.models.hf_backend import TransformersBackend
except ImportError as exc:
    sys.exit(f"this example needs the [hf] extra: pip install 'terminal-env[hf]' ({exc})")

from terminal_env.tasks.toy import write_toy_family


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a local Hugging Face model folder (default: the tiny in-process model)")
    ap.add_argument("--tasks", help="what `terminal-env run --tasks` takes (default: two generated toy tasks)")
    ap.add_argument("-n", type=int, default=2, help="tasks to evaluate (default 2)")
    ap.add_argument("-r", type=int, default=1, help="rollouts per task (default 1)")
    args = ap.parse_args()
    if not VF_EVAL.exists():
        sys.exit(f"{VF_EVAL} is missing: bash scripts/setup.sh makes it")
    if args.model:
        backend = TransformersBackend(args.model)
    else:
        from terminal_env.train.tiny import make_model, make_tokenizer

        tok = make_tokenizer()
        backend = TransformersBackend(make_model(tok, context=8192, hidden=64), tok, name="tiny")
    with tempfile.TemporaryDirectory() as tmp:
        tasks = args.tasks or str(write_toy_family(Path(tmp) / "toy", n_train=2, n_validation=0, seed=21)[0].parent)
        env = {**os.environ, "PATH": f"{VF_EVAL.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        with Gateway(backend) as gw:
            proc = subprocess.run(
                [str(VF_EVAL), "terminal-env", "--env.taskset.tasks", json.dumps([tasks]),
                 "--env.taskset.reward", "partial_progress", "--env.taskset.max-turns", "3",
                 "-m", gw.model, "--client.base-url", gw.url, "-n", str(args.n), "-r", str(args.r),
                 "--sampling.max-tokens", "256", "--no-push", "--no-rich", "-o", str(Path(tmp) / "out")],
                cwd=tmp, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
            return 1
        [run] = [p for p in (Path(tmp) / "out").iterdir() if p.is_dir()]
        episodes = [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]
    for episode in episodes:
        for trace in episode["traces"]:
            info = trace["info"].get("terminal_env", {})
            print(f"{info.get('task')}: reward {trace['rewards'].get('terminal_env', {}).get('score')} "
                  f"({info.get('outcome')}), actions {info.get('actions')}")
    exact = sum(c.exact for c in gw.calls)
    print(f"vf-eval: {len(episodes)} episodes; gateway: {len(gw.calls)} calls recorded, {exact} token-exact")
    return 0 if episodes and all(e["ok"] for e in episodes) and exact == len(gw.calls) else 1


if __name__ == "__main__":
    sys.exit(main())
