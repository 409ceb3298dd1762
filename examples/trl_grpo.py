"""TRL's GRPOTrainer on terminal tasks, through ``terminal_env.integrations.trl``.

    python examples/trl_grpo.py                       # tiny in-process model, 2 toy tasks, 2 steps (~1 min)
    python examples/trl_grpo.py --model Qwen/Qwen3-0.6B --tasks pool:generated:train --steps 50

Needs the extra ``[trl]`` (``pip install 'terminal-env[trl]'``) and a Docker engine.

What it shows: TRL drives the episode. For each rollout it resets a ``TerminalToolEnv`` with a
dataset row (the row's ``task`` is a task directory), shows the model two tools (``bash`` and
``keys``), runs the tool calls the model makes in the task's sandbox, and when the model answers
without a tool call it asks the environment for the reward: the task's protected verifier, run
once. Every episode is also handed to ``on_episode``, which this example prints.

Without ``--model`` the model is the project's tiny in-process Llama (no download), given
Qwen 2.5's chat template (which renders tool calls) and taught for a few steps to answer with a
bash tool call, so that its rollouts are a mix of right, wrong and malformed calls. With a real
model, drop ``--teach`` (0) and give it tasks it can solve.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from functools import partial
from pathlib import Path

try:
    import datasets
    import transformers
    import trl
except ImportError as exc:
    sys.exit(f"this example needs the [trl] extra: pip install 'terminal-env[trl]' ({exc})")

from terminal_env.integrations.trl import TerminalToolEnv, task_rows
from terminal_env.tasks.toy import write_toy_family
from terminal_env.train.tiny import make_model, make_tokenizer, teach


def tiny_policy(rows: list[dict], steps: int) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase]:
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    tok = make_tokenizer(template)
    tok.padding_side = "left"
    model = make_model(tok, seed=0, context=4096, hidden=64)
    pairs = []
    with TerminalToolEnv() as env:
        for row in rows:
            # the first message as TRL will build it: the row's prompt and what reset() adds
            messages = [{"role": "user", "content": row["prompt"][-1]["content"] + env.reset(**row)}]
            prompt = tok.apply_chat_template(messages, tools=[env.bash, env.keys], add_generation_prompt=True,
                                             tokenize=False)
            command = (Path(row["task"]) / "solution" / "solve.sh").read_text().splitlines()[-1]
            pairs.append((prompt, '<tool_call>\n{"name": "bash", "arguments": {"command": "' + command
                          + '"}}\n</tool_call><|im_end|>'))
    if steps:
        teach(model, tok, pairs, steps=steps)
    return model, tok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a Hugging Face model (name or folder) with a tool-calling chat template; "
                    "default: the tiny in-process model")
    ap.add_argument("--tasks", nargs="*", help="what `terminal-env run --tasks` takes; default: 2 generated toy tasks")
    ap.add_argument("--steps", type=int, default=2, help="GRPO optimizer steps (default 2)")
    ap.add_argument("--generations", type=int, default=2, help="rollouts per task and step (default 2)")
    ap.add_argument("--reward", default="partial_progress", help="a reward of terminal_env.rewards")
    ap.add_argument("--teach", type=int, default=60, help="supervised steps teaching the tiny model the tool call")
    args = ap.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    with tempfile.TemporaryDirectory() as tmp:
        tasks = args.tasks or [str(p) for p in write_toy_family(Path(tmp) / "toy", n_train=2, n_validation=0, seed=3)]
        rows = task_rows(tasks)
        if args.model:
            model = transformers.AutoModelForCausalLM.from_pretrained(args.model)
            tok = transformers.AutoTokenizer.from_pretrained(args.model, padding_side="left")
        else:
            model, tok = tiny_policy(rows, args.teach)
        episodes = []

        def show(record) -> None:
            episodes.append(record)
            what = "dropped (" + str(record.error) + ")" if record.masked else f"reward {record.reward}"
            print(f"  episode {len(episodes)}: {record.task}: {len(record.actions) - 1} command(s), {what}")

        config = trl.GRPOConfig(
            output_dir=str(Path(tmp) / "out"), use_cpu=not args.model, report_to=[], logging_steps=1,
            save_strategy="no", max_steps=args.steps, per_device_train_batch_size=args.generations,
            num_generations=args.generations, max_completion_length=256, max_tool_calling_iterations=8,
            temperature=1.0, learning_rate=1e-3 if not args.model else 1e-6, seed=0,
        )
        trainer = trl.GRPOTrainer(
            model=model, processing_class=tok, args=config, train_dataset=datasets.Dataset.from_list(rows),
            environment_factory=partial(TerminalToolEnv, reward=args.reward, on_episode=show),
        )
        trainer.train()
        scored = [e.reward for e in episodes if e.reward is not None]
        print(f"GRPO: {trainer.state.global_step} optimizer steps, {len(episodes)} episodes verified, "
              f"mean reward {sum(scored) / max(1, len(scored)):.3f}, {len(episodes) - len(scored)} dropped")
    return 0 if trainer.state.global_step == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
