"""The recipe's five stages on one CPU: Base, RSR-1, RPR-1, RSR-2, RPR-2 with the tiny model on a
generated curriculum, chosen on validation, scored once on test.

Usage: python benchmarks/loop_toy.py [--train 24] [--validation 16] [--test 32] [--seed 0] [--loop-seed 0]
                                     [--rsr-attempts 3] [--sft-epochs 4] [--sft-lr 3e-4] [--mix-previous 4]
                                     [--base DIR] [--warmup-tasks 48] [--warmup-epochs 16]
                                     [--warmup-min-epochs 6] [--warmup-target 0.25] [--warmup-lr 3e-3]
                                     [--hidden 64] [--layers 2] [--concurrency 4]
                                     [--ppo-iterations 4] [--ppo-lr 5e-4] [--keep DIR] [--out FILE]

Nothing is downloaded. The model is the tests' tiny Llama (``tests/tiny_lm.py``), widened and given
a 4,096-token context; the tasks are the ``count-letters`` toy family
(:func:`terminal_env.tasks.toy.write_toy_family`) with train, validation and test splits (no word
in two tasks). Every episode is a real episode in Docker (no network) scored by the task's
protected verifier.

**Warm-up (pre-training outside the loop).** A model that knows nothing solves nothing, and
self-rewrite needs successes. Before Base, the model is fine-tuned on the oracle's episodes of
``--warmup-tasks`` tasks of the family that are in none of the loop's splits (a scripted agent
typing the reference command under the generic harness), epoch by epoch, until it solves ``--warmup-target`` of the train tasks at temperature 1
(checked after each epoch from ``--warmup-min-epochs`` on; at most ``--warmup-epochs``): short of
what it takes to solve them all, so that Base solves some train tasks by itself and leaves the rest
to the loop. Its wall time is reported apart
from the loop's.

**The loop** (:mod:`terminal_env.train.loop`, the config is written to ``loop.toml`` in the run's
directory and printed in the JSON): RSR stages collect under two harnesses (generic and
tool-calling; the warm-up taught the generic format alone, so tool-calling's successes are counted,
not expected), with the stand-in planner, reviewer (the leak checks) and executor (replay): the
tiny model cannot write or judge a playbook (``benchmarks/README.md``, the self funnel), so the
records are the policy's own verified commands, rewritten and re-run. RPR stages recalibrate the
critic (actor frozen) and run PPO, with RPR-2's actor learning rate a fifth of RPR-1's. Validation
is Mean@2 at 0.6, the final test Mean@3 at 0.6.

Prints one JSON document (also written to ``--out``): the loop's manifest summary (each stage's
kept candidate, validation and test scores with intervals, paired test intervals), the warm-up,
the RSR funnels and the newly solved train tasks of RSR-2, wall times, and ``claims``:

1. validation and test rise from Base to the last stage;
2. the paired test interval of Base vs the last stage excludes zero;
3. RSR-2 collects successes on train tasks RSR-1 could not solve.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tiny model of the tests

from _common import emit, log  # noqa: E402

from terminal_env.models.base import SamplingParams  # noqa: E402
from terminal_env.models.simple import ScriptedBackend  # noqa: E402
from terminal_env.scale.rollout import RolloutPool  # noqa: E402
from terminal_env.tasks.toy import COUNT_LENGTHS, write_toy_family  # noqa: E402

MAX_TURNS = 3
NEW_TOKENS = 48
COMMAND_TIMEOUT = 15.0


def oracle_command(task: Path) -> str:
    return (task / "solution" / "solve.sh").read_text().strip().splitlines()[-1]


def oracle_records(tasks: list[Path], concurrency: int) -> list[dict[str, Any]]:
    """The oracle command typed under the generic harness, one episode per task: chat records of
    the verified ones."""
    import asyncio

    async def main() -> list[Any]:
        async with RolloutPool(max_concurrency=concurrency, env_config={"command_timeout": COMMAND_TIMEOUT}) as pool:
            return list(await asyncio.gather(*(
                pool.rollout(ScriptedBackend.of_actions([oracle_command(t)], name="oracle-command"), t, "generic",
                             params=SamplingParams(), max_turns=MAX_TURNS, seed=0) for t in tasks)))

    return [t.to_chat() for t in asyncio.run(main()) if t.strict_success and not t.masked]


def warm_up(args: argparse.Namespace, root: Path, warmup: list[Path], train: list[Path]) -> dict[str, Any]:
    """Fine-tune the tiny model on the oracle's episodes of the warm-up tasks until it solves
    ``--warmup-target`` of the train split at temperature 1; save it as ``root/base``."""
    from tiny_lm import make_model, make_tokenizer

    from terminal_env.models.hf_backend import HFChatTokenizer
    from terminal_env.train.data import sft_samples
    from terminal_env.train.models import Pair
    from terminal_env.train.sft import SFT, SFTConfig
    from terminal_env.train.generators import LocalGenerator
    from terminal_env.train.trainer import PlaySettings, evaluate

    t0 = time.perf_counter()
    tokenizer = make_tokenizer()
    pair = Pair.start(make_model(tokenizer, seed=args.seed, context=4096, hidden=args.hidden,
                                 layers=args.layers), tokenizer)
    records = oracle_records(warmup, args.concurrency)
    samples = sft_samples(records, HFChatTokenizer(tokenizer, "actor"))
    trainer = SFT(pair, samples, SFTConfig(lr=args.warmup_lr, batch_size=2, seed=args.seed))
    play = PlaySettings(max_turns=MAX_TURNS, temperature=1.0, max_new_tokens=NEW_TOKENS,
                        concurrency=args.concurrency, command_timeout=COMMAND_TIMEOUT)
    checks = []
    while trainer.epochs_done < args.warmup_epochs:
        trainer.epoch()
        if trainer.epochs_done < args.warmup_min_epochs or (trainer.epochs_done - args.warmup_min_epochs) % 2:
            continue
        # stop once the model solves part of the train split by itself (rollout temperature)
        generator = LocalGenerator(pair, f"warmup-{trainer.epochs_done}", max_batch=args.concurrency)
        try:
            rate = evaluate(generator.backend, train, play, k=1, temperature=1.0, seed=123_000)["mean"]
        finally:
            generator.close()
        checks.append({"epoch": trainer.epochs_done, "train_strict_success": rate})
        log(f"warm-up epoch {trainer.epochs_done}: loss {trainer.losses[-1]:.3f}, train strict success {rate}")
        if rate >= args.warmup_target:
            break
    report = trainer.report()
    pair.save(root / "base", stage="base", metrics={"warmup": {**report, "tasks": args.warmup_tasks,
                                                                "task_names": [t.name for t in warmup]}})
    out = {"tasks": args.warmup_tasks, "verified_oracle_episodes": len(records), "epochs": trainer.epochs_done,
           "loss": [round(x, 4) for x in report["loss"]], "target": args.warmup_target, "checks": checks,
           "seconds": round(time.perf_counter() - t0, 1)}
    log(f"warm-up: {len(records)} oracle records, loss {out['loss']} ({out['seconds']} s)")
    return out


def loop_toml(args: argparse.Namespace) -> str:
    def rsr(first: bool) -> str:
        return f"""harnesses = ["generic", "tool-calling"]
attempts = {args.rsr_attempts}
self = false
{"" if first else f"mix_previous = {args.mix_previous}{chr(10)}"}sft = {{ epochs = {args.sft_epochs}, lr = {args.sft_lr}, batch_size = 2 }}
"""
    critic = ("critic = { attempts = 2, epochs = 8, lr = 1e-3, normalize_returns = true, holdout = 0.33, "
              "target_explained_variance = 0.9, batch_size = 4 }")

    def ppo(lr: float) -> str:
        return (f"ppo = {{ iterations = {args.ppo_iterations}, tasks_per_iteration = 8, attempts = 2, validate_every = 2, "
                f"epochs = 2, batch_size = 4, actor_lr = {lr}, critic_lr = 1e-3, kl_coef = 0.1, "
                f"min_explained_variance = 0.05, fallback_estimator = \"grpo\" }}")

    # RPR-2's actor learning rate is a fifth of RPR-1's, as in the recipe
    stages = "\n".join(f'[[stages]]\nkind = "{kind}"\nname = "{name}"\n' + (rsr(name == "rsr-1") if kind == "rsr" else f"{critic}\n{ppo(lr)}\n")
                       for kind, name, lr in (("rsr", "rsr-1", 0), ("rpr", "rpr-1", args.ppo_lr), ("rsr", "rsr-2", 0),
                                              ("rpr", "rpr-2", args.ppo_lr / 5)))
    return f"""# the toy loop of benchmarks/loop_toy.py (written by it)
name = "loop-toy-seed-{args.seed}-loop-{args.loop_seed}"
seed = {args.loop_seed}
start = "base"
select_on = "validation"

[tasks]
train = ["tasks/train"]
validation = ["tasks/validation"]
test = ["tasks/test"]

[play]
harness = "generic"
max_turns = {MAX_TURNS}
max_new_tokens = {NEW_TOKENS}
reward = "partial_progress"
concurrency = {args.concurrency}
command_timeout = {COMMAND_TIMEOUT}
rollout_temperature = 1.0

[validation]
k = 2
temperature = 0.6

[evaluation]
k = 3
temperature = 0.6

{stages}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=24)
    ap.add_argument("--validation", type=int, default=16)
    ap.add_argument("--test", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-tasks", type=int, default=48,
                    help="tasks of the family, apart from the loop's splits, whose oracle episodes warm up Base")
    ap.add_argument("--warmup-epochs", type=int, default=16, help="at most this many warm-up epochs")
    ap.add_argument("--warmup-min-epochs", type=int, default=6,
                    help="epochs before the first check (then one every second epoch)")
    ap.add_argument("--warmup-target", type=float, default=0.25,
                    help="stop the warm-up once the model solves this share of the train tasks at temperature 1")
    ap.add_argument("--warmup-lr", type=float, default=3e-3)
    ap.add_argument("--loop-seed", type=int, default=0, help="the loop's seed (rollouts, SFT order, PPO)")
    ap.add_argument("--rsr-attempts", type=int, default=3, help="attempts per train task and harness in RSR")
    ap.add_argument("--sft-epochs", type=int, default=4)
    ap.add_argument("--sft-lr", type=float, default=3e-4)
    ap.add_argument("--mix-previous", type=float, default=4.0,
                    help="RSR-2 mixes in this many of RSR-1's records per record of its own (all of them, at 4)")
    ap.add_argument("--ppo-iterations", type=int, default=4)
    ap.add_argument("--ppo-lr", type=float, default=5e-4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--base", type=Path, help="skip the warm-up: start from this checkpoint (DIR/base of an earlier "
                                               "--keep run with the same --seed and split sizes)")
    ap.add_argument("--keep", type=Path, help="keep the run's directory here (default: a temporary one, removed)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.keep is not None and args.keep.exists():
        ap.error(f"--keep {args.keep} exists: give a new directory")
    for flag, n in (("--warmup-tasks", args.warmup_tasks), ("--train", args.train)):
        if n < len(COUNT_LENGTHS) or n % len(COUNT_LENGTHS):
            ap.error(f"{flag} must be a positive multiple of {len(COUNT_LENGTHS)} (every word length alike), not {n}")

    import torch  # the optional extra [train]

    from terminal_env.train.loop import Loop, load_config
    from terminal_env.train.models import Pair

    t_all = time.perf_counter()
    root = args.keep or Path(tempfile.mkdtemp(prefix="terminal-env-loop-toy-"))
    result: dict[str, Any] = {"benchmark": "loop_toy"}
    try:
        # one family, no word in two tasks; of its train tasks (every length alike) the warm-up
        # takes --warmup-tasks (outside the loop's splits), the same number of each length, and the
        # loop's train split the rest, every length alike again
        paths = write_toy_family(root / "family", n_train=args.warmup_tasks + args.train,
                                 n_validation=args.validation, n_test=args.test, seed=args.seed, kind="count-letters")
        for split in ("warmup", "train", "validation", "test"):  # one folder per split, as the config lists them
            (root / "tasks" / split).mkdir(parents=True)
        per_answer: dict[str, int] = {}
        for p in paths:  # the warm-up takes the first --warmup-tasks / 8 train tasks of each length
            split = p.name.split("-")[-2]
            if split == "train":
                answer = oracle_command(p).split()[1]
                per_answer[answer] = per_answer.get(answer, 0) + 1
                if per_answer[answer] <= args.warmup_tasks // len(COUNT_LENGTHS):
                    split = "warmup"
            p.rename(root / "tasks" / split / p.name)
        warmup = sorted((root / "tasks" / "warmup").iterdir())
        train = sorted((root / "tasks" / "train").iterdir())

        # -- warm-up: pre-training outside the loop -------------------------------------------
        t0 = time.perf_counter()
        if args.base is not None:  # a warmed-up Base of an earlier run (its --keep DIR/base), same family
            shutil.copytree(args.base, root / "base")
            result["warmup"] = {"from": str(args.base), **Pair.load(root / "base").meta["metrics"].get("warmup", {})}
            if result["warmup"].get("task_names") != [t.name for t in warmup]:
                raise SystemExit(f"--base {args.base}: warmed up on other tasks than this run's warm-up split "
                                 "(give the --seed, --warmup-tasks and --train of the run that made it)")
            log(f"warm-up: reused {args.base}")
        else:
            result["warmup"] = warm_up(args, root, warmup, train)

        # -- the loop ----------------------------------------------------------------------------
        (root / "loop.toml").write_text(loop_toml(args))
        t0 = time.perf_counter()
        manifest = Loop(load_config(root / "loop.toml"), root / "loop", log=log).run()
        result["loop_seconds"] = round(time.perf_counter() - t0, 1)
        result["loop_toml"] = (root / "loop.toml").read_text()
        final = manifest["final"]
        stages = manifest["stages"]
        result["stages"] = [{
            "name": s["name"], "kept": s["kept"]["candidate"],
            "validation": s["kept"]["validation"]["mean"],
            "validation_ci": [s["kept"]["validation"]["ci_low"], s["kept"]["validation"]["ci_high"]],
            "test": final["scores"][s["name"]]["mean"],
            "test_ci": [final["scores"][s["name"]]["ci_low"], final["scores"][s["name"]]["ci_high"]],
            "test_reward": final["reward"]["scores"][s["name"]]["mean"],
            "candidates": [(c["name"], c["validation"]["mean"]) for c in s["candidates"]],
            **({"funnel": {k: s["funnel"].get(k) for k in ("strict_successes", "unique_tasks_solved", "playbooks",
                                                          "rejected", "reruns_verified", "records")},
                "solved_train_tasks": len(s["solved_train_tasks"]),
                "newly_solved_vs_previous_rsr": s["newly_solved_vs_previous_rsr"]} if s["kind"] == "rsr" else {}),
            **({"critic": s["critic"], "gate": s["gate"], "estimator": s["hyperparameters"]["estimator_used"],
                "actor_lr_vs_previous_rpr": s["hyperparameters"]["actor_lr_vs_previous_rpr"]}
               if s["kind"] == "rpr" else {}),
            **({"note": s["note"]} if s.get("note") else {}),
        } for s in stages]
        result["paired_test"] = final["paired"]
        result["timings"] = json.loads((root / "loop" / "timings.json").read_text())
        first, last = stages[0], stages[-1]
        base_last = next(p for p in final["paired"] if p["a"] == first["name"] and p["b"] == last["name"])
        rsr2 = next((s for s in stages if s["name"] == "rsr-2"), None)
        result["claims"] = {
            "validation_rises_base_to_last": last["kept"]["validation"]["mean"] > first["kept"]["validation"]["mean"],
            "test_rises_base_to_last": final["scores"][last["name"]]["mean"] > final["scores"][first["name"]]["mean"],
            "paired_test_base_vs_last_excludes_zero": bool(base_last["excludes_zero"]) and base_last["mean_diff"] > 0,
            "rsr2_solves_tasks_rsr1_could_not": bool(rsr2 and rsr2["newly_solved_vs_previous_rsr"]),
        }
        result["ok"] = all(result["claims"].values())
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    result["wall_seconds"] = round(time.perf_counter() - t_all, 1)
    result["machine"] = {"python": platform.python_version(), "torch": torch.__version__,
                         "threads": torch.get_num_threads(), "cpus": __import__("os").cpu_count()}
    result["model"] = f"tests/tiny_lm.py Llama ({args.layers} layers, hidden {args.hidden}), CPU"
    result["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    emit(result, args.out)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
