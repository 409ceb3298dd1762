"""``terminal-env train init | sft | critic | ppo``: each step reads a checkpoint of an actor and
its critic and writes a new one (never over an old one), with what it measured in ``pair.json``.

    terminal-env train init   --actor MODEL_DIR --out ckpt/base
    terminal-env train sft    --pair ckpt/base  --data rsr.jsonl        --out ckpt/rsr-1
    terminal-env train critic --pair ckpt/rsr-1 --trajectories runs/r1  --out ckpt/rpr-1-critic
    terminal-env train ppo    --pair ckpt/rpr-1-critic --trajectories runs/r2 --out ckpt/rpr-1

``sft`` reads chat JSONL (``terminal-env export --format chat``, the self-rewrite dataset) or run
directories of token-exact trajectories; ``critic`` and ``ppo`` read run directories (or
``trajectory.json`` files) played by the pair's actor (served by the local backend from
``DIR/actor``: each turn records the actor's id). The parser is built without the extra; the
commands need ``[train]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..rewards import REWARDS


def add_train_parser(sub: Any) -> None:
    t = sub.add_parser("train", help="the reference trainer: SFT, critic recalibration, PPO (extra [train])")
    steps = t.add_subparsers(dest="train_command", required=True, metavar="STEP")

    i = steps.add_parser("init", help="a first checkpoint: an actor and a critic initialised from it")
    i.add_argument("--actor", required=True, help="a Hugging Face causal LM directory")
    i.add_argument("--out", required=True, help="the new checkpoint's directory")
    i.set_defaults(func=cmd_init)

    s = steps.add_parser("sft", help="fine-tune the actor on verified data; the critic stays frozen")
    _common(s)
    s.add_argument("--data", nargs="+", required=True,
                   help="chat JSONL files, or run directories / trajectory.json files with token records")
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--lr", type=float, default=1e-5)
    s.add_argument("--batch-size", type=int, default=4)
    s.set_defaults(func=cmd_sft)

    c = steps.add_parser("critic", help="recalibrate the critic on the actor's episodes; the actor stays frozen")
    _common(c)
    _episodes(c)
    c.add_argument("--epochs", type=int, default=20)
    c.add_argument("--lr", type=float, default=1e-4, help="the critic body's learning rate (0 freezes it)")
    c.add_argument("--head-lr", type=float, default=None, help="the value head's learning rate (default: --lr)")
    c.add_argument("--normalize-returns", action="store_true",
                   help="fit standardised returns (the values still come out in reward units)")
    c.add_argument("--holdout", type=float, default=0.25,
                   help="the share of the episodes held out to measure the critic on (default 0.25)")
    c.add_argument("--batch-size", type=int, default=8)
    c.add_argument("--target-explained-variance", type=float, default=0.5,
                   help="stop once the held-out explained variance reaches this (default 0.5)")
    c.set_defaults(func=cmd_critic)

    p = steps.add_parser("ppo", help="one PPO update of the actor and the critic on the actor's episodes")
    _common(p)
    _episodes(p)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--actor-lr", type=float, default=1e-6)
    p.add_argument("--critic-lr", type=float, default=1e-5, help="the critic body's learning rate (0 freezes it)")
    p.add_argument("--critic-head-lr", type=float, default=None,
                   help="the value head's learning rate (default: --critic-lr)")
    p.add_argument("--kl-coef", type=float, default=0.0, help="KL to --reference (default 0: none)")
    p.add_argument("--reference", help="a checkpoint whose actor is the KL reference")
    p.add_argument("--min-explained-variance", type=float, default=0.2,
                   help="refuse a critic that explains less of the returns (default 0.2)")
    p.add_argument("--force", action="store_true", help="start even from an uncalibrated critic")
    p.set_defaults(func=cmd_ppo)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pair", required=True, help="the checkpoint to start from")
    p.add_argument("--out", required=True, help="the new checkpoint's directory (must not hold one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _episodes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trajectories", nargs="+", required=True, help="run directories or trajectory.json files")
    p.add_argument("--reward", default="strict_success_first", choices=sorted(REWARDS))
    p.add_argument("--multi-segment", default="refuse", choices=["refuse", "accept", "drop"],
                   help="episodes whose prompt could not be extended (default: refuse)")
    p.add_argument("--any-weights", action="store_true",
                   help="accept turns sampled by other weights than the pair's actor")


def _fresh(out: str) -> None:
    if (Path(out) / "pair.json").exists():
        raise ConfigError(f"{out} already holds a checkpoint; give --out a new directory")


def _report(args: argparse.Namespace, stage: str, report: dict[str, Any], out: Path) -> int:
    if args.json:
        print(json.dumps({"stage": stage, "checkpoint": str(out), **report}, indent=1, default=str))
    else:
        brief = {k: v for k, v in report.items() if not isinstance(v, (list, dict))}
        print(f"{stage}: wrote {out}  " + "  ".join(f"{k}={v}" for k, v in brief.items()))
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from .models import Pair  # the optional extra [train]

    _fresh(args.out)
    out = Pair.start(args.actor).save(args.out, stage="base")
    print(f"init: wrote {out} (actor {args.actor}, critic initialised from it)")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from ..models.hf_backend import HFChatTokenizer  # the optional extra [train]
    from .data import load_trajectories, read_chat_jsonl, sft_samples, stand_in_note  # the optional extra [train]
    from .models import Pair  # the optional extra [train]
    from .sft import SFTConfig, sft  # the optional extra [train]

    _fresh(args.out)
    pair = Pair.load(args.pair)
    records: list[Any] = []
    for source in args.data:
        if str(source).endswith(".jsonl"):
            records.extend(read_chat_jsonl(source))
        else:
            records.extend(t for t in load_trajectories([source]) if t.strict_success and not t.masked)
    note = stand_in_note(records)
    if note:
        print(f"sft: note: {note}", file=sys.stderr)
    samples = sft_samples(records, HFChatTokenizer(pair.tokenizer, "actor"))
    report = sft(pair, samples, SFTConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, seed=args.seed))
    return _report(args, "sft", report, pair.save(args.out, stage="sft", metrics={"sft": report}))


def _load_episodes(args: argparse.Namespace, pair: Any) -> list[Any]:
    from .data import episodes, load_trajectories  # the optional extra [train]

    found, skipped = episodes(load_trajectories(args.trajectories), reward=args.reward,
                              multi_segment=args.multi_segment,
                              weights=None if args.any_weights else pair.meta.get("actor"))
    if skipped:
        print("left out: " + ", ".join(f"{n} {why}" for why, n in skipped.items()))
    return found


def cmd_critic(args: argparse.Namespace) -> int:
    from .critic import CriticConfig, recalibrate  # the optional extra [train]
    from .models import Pair  # the optional extra [train]

    _fresh(args.out)
    pair = Pair.load(args.pair)
    report = recalibrate(pair, _load_episodes(args, pair), CriticConfig(
        epochs=args.epochs, lr=args.lr, head_lr=args.head_lr, normalize_returns=args.normalize_returns,
        holdout=args.holdout, batch_size=args.batch_size, seed=args.seed,
        target_explained_variance=args.target_explained_variance))
    return _report(args, "critic", report, pair.save(args.out, stage="critic", metrics={"critic": report}))


def cmd_ppo(args: argparse.Namespace) -> int:
    from .models import Pair  # the optional extra [train]
    from .ppo import PPO, PPOConfig  # the optional extra [train]

    _fresh(args.out)
    pair = Pair.load(args.pair)
    reference = Pair.load(args.reference).actor if args.reference else None
    trainer = PPO(pair, PPOConfig(epochs=args.epochs, batch_size=args.batch_size, actor_lr=args.actor_lr,
                                  critic_lr=args.critic_lr, critic_head_lr=args.critic_head_lr,
                                  kl_coef=args.kl_coef, seed=args.seed,
                                  min_explained_variance=args.min_explained_variance),
                  reference=reference, force=args.force)
    report = trainer.update(_load_episodes(args, pair))
    critic = (pair.meta.get("metrics") or {}).get("critic")  # trained along with the actor since
    out = pair.save(args.out, stage="ppo", metrics={"ppo": report, **({"critic": critic} if critic else {})})
    return _report(args, "ppo", report, out)
