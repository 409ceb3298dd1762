"""An agent this project did not write (mini-swe-agent, unmodified) plays a task in our sandbox,
its model calls answered through the token-recording gateway.

    python examples/miniswe_gateway.py                          # tiny in-process model, a toy task (~20 s)
    python examples/miniswe_gateway.py --model /models/qwen3-0.6b --task tasks/some-task --steps 30

Needs the extras ``[miniswe]`` and ``[hf]`` (``pip install 'terminal-env[miniswe,hf]'``) and a
Docker engine.

What it shows: ``Gateway`` is an OpenAI-compatible server on 127.0.0.1 in front of a backend of
this project (here a local ``transformers`` model); mini-swe-agent's own ``LitellmTextbasedModel``
is pointed at it like at any OpenAI endpoint, and its own ``DefaultAgent`` runs with its shipped
``mini_textbased.yaml``. Commands run through ``SandboxEnvironment``: the task's sandbox and our
session. At the end the protected verifier scores the sandbox, and every model call is in
``gw.calls`` with the prompt ids the model saw, the completion ids and their sampling log-probs.
The tiny default model was never trained, so it mostly writes nonsense: the point is the record.
Any other agent is pointed at ``gw.url`` the same way (``OPENAI_BASE_URL``, ``--api-base``, ...).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
try:
    import yaml
    from minisweagent import __file__ as minisweagent_file
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    from terminal_env.integrations.gateway import Gateway
    from terminal_env.integrations.miniswe import SandboxEnvironment
    from terminal_env.models.hf_backend import TransformersBackend
except ImportError as exc:
    sys.exit(f"this example needs the [miniswe] and [hf] extras: pip install 'terminal-env[miniswe,hf]' ({exc})")

from terminal_env.tasks.toy import write_toy_family


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a local Hugging Face model folder (default: the tiny in-process model)")
    ap.add_argument("--task", help="a task directory or bundled task name (default: a generated toy task)")
    ap.add_argument("--steps", type=int, default=3, help="the agent's step limit (default 3)")
    ap.add_argument("--record", help="also write the calls to this JSONL file")
    args = ap.parse_args()
    if args.model:
        backend = TransformersBackend(args.model)
    else:
        from terminal_env.train.tiny import make_model, make_tokenizer

        tok = make_tokenizer()
        backend = TransformersBackend(make_model(tok, context=8192, hidden=64), tok, name="tiny")
    config = yaml.safe_load((Path(minisweagent_file).parent / "config" / "mini_textbased.yaml").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        task = args.task or str(write_toy_family(Path(tmp) / "toy", n_train=1, n_validation=0, seed=21)[0])
        with Gateway(backend, record=args.record) as gw, SandboxEnvironment(task, reward="partial_progress") as env:
            model = LitellmTextbasedModel(
                model_name=f"openai/{gw.model}", cost_tracking="ignore_errors",
                model_kwargs={**config["model"].get("model_kwargs", {}), "api_base": gw.url, "api_key": "unused",
                              "temperature": 0.7, "max_tokens": 256},
                observation_template=config["model"]["observation_template"],
                format_error_template=config["model"]["format_error_template"],
            )
            agent_config = {k: v for k, v in config["agent"].items() if k != "mode"}
            agent = DefaultAgent(model, env, **{**agent_config, "step_limit": args.steps, "cost_limit": 0})
            result = agent.run(env.instruction)
            reward = env.finish()
            record = env.record
    exact = sum(c.exact for c in gw.calls)
    print(f"mini-swe-agent stopped: {result.get('exit_status')}; commands run in the sandbox: "
          f"{len(record.actions) - 1}; verified reward {reward} ({record.outcome})")
    print(f"gateway: {len(gw.calls)} calls recorded, {exact} token-exact, "
          f"{sum(len(c.completion_token_ids or []) for c in gw.calls)} completion tokens")
    return 0 if gw.calls and exact == len(gw.calls) and reward is not None else 1


if __name__ == "__main__":
    sys.exit(main())
