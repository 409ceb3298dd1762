"""One SkyRL-Gym episode of a terminal task, made and stepped the way SkyRL's generator does it.

    python examples/skyrl_episode.py                  # a generated toy task, scripted replies (~10 s)
    python examples/skyrl_episode.py --task tasks/ia-kv-shell --reply "ls" --reply "#!submit"

Needs the extra ``[skyrl]`` (``pip install 'terminal-env[skyrl]'``) and a Docker engine.

What it shows: importing ``terminal_env.integrations.skyrl`` registers the environment as
``terminal-env``; ``task_rows`` makes SkyRL dataset rows (``env_class`` is ``terminal-env``);
``skyrl_gym.make`` builds one environment per trajectory from a row; ``init`` returns the
harness's first messages and ``step`` takes the model's reply as text (here, replies written in
advance, each wrapped in a fenced bash block as the generic harness asks). The last step carries
the protected verifier's reward. In training, SkyRL's generator writes the replies with the policy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

try:
    import skyrl_gym
except ImportError as exc:
    sys.exit(f"this example needs the [skyrl] extra: pip install 'terminal-env[skyrl]' ({exc})")

from terminal_env.integrations import skyrl as te_skyrl
from terminal_env.tasks.toy import write_toy_family


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", help="a task directory or bundled task name (default: a generated toy task)")
    ap.add_argument("--reply", action="append", help="a reply's command, in order (default: the toy task's answer)")
    ap.add_argument("--reward", default="partial_progress", help="a reward of terminal_env.rewards")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        task = args.task or str(write_toy_family(Path(tmp) / "toy", n_train=1, n_validation=0, seed=11)[0])
        row = te_skyrl.task_rows(task, allow_test=True)[0]
        replies = args.reply or ["cat /app/answer.txt",
                                 (Path(row["task"]) / "solution" / "solve.sh").read_text().splitlines()[-1],
                                 "#!submit"]
        env = skyrl_gym.make("terminal-env", env_config={"reward": args.reward},
                             extras={**row, "max_turns": len(replies)})
        try:
            messages, _ = env.init(row["prompt"])
            print(f"task {row['extra_info']['name']}: {len(messages)} first messages "
                  f"({', '.join(m['role'] for m in messages)})")
            for reply in replies:
                out = env.step(f"```bash\n{reply}\n```")
                shown = (out["observations"][-1]["content"] if out["observations"] else "").strip()
                print(f"> {reply}\n{shown[:300]}")
                if out["done"]:
                    break
            print(f"done: reward {out['reward']}, outcome {out['metadata'].get('outcome')}, "
                  f"metrics {env.get_metrics()}")
        finally:
            env.close()
    return 0 if out["done"] else 1


if __name__ == "__main__":
    sys.exit(main())
