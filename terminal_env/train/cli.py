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

The settings of ``critic`` and ``ppo`` default to None, which means the field's default in
``CriticConfig`` and ``PPOConfig`` (one source of truth: the parser cannot import them without the
extra, and a second copy of the numbers drifted 10x from them before).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..rewards import reward_arg
from ..tasks.load import split_tasks


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
    _lora(s)
    s.set_defaults(func=cmd_sft)

    c = steps.add_parser("critic", help="recalibrate the critic on the actor's episodes; the actor stays frozen")
    _common(c)
    _episodes(c)
    c.add_argument("--epochs", type=int, default=None, help="epochs at most (default: CriticConfig.epochs)")
    c.add_argument("--lr", type=float, default=None,
                   help="the critic body's learning rate, 0 freezes it (default: CriticConfig.lr)")
    c.add_argument("--head-lr", type=float, default=None, help="the value head's learning rate (default: --lr)")
    c.add_argument("--normalize-returns", action="store_true", default=None,
                   help="fit standardised returns (the values still come out in reward units)")
    c.add_argument("--holdout", type=float, default=None,
                   help="the share of the episodes held out to measure the critic on; their returns must vary "
                        "(default: CriticConfig.holdout)")
    c.add_argument("--batch-size", type=int, default=None, help="(default: CriticConfig.batch_size)")
    c.add_argument("--gamma", type=float, default=None, help="the returns' discount (default: CriticConfig.gamma)")
    c.add_argument("--target-explained-variance", type=float, default=None,
                   help="stop once the held-out explained variance reaches this "
                        "(default: CriticConfig.target_explained_variance)")
    c.set_defaults(func=cmd_critic)

    p = steps.add_parser("ppo", help="PPO on the actor (and, with GAE, the critic): one update on stored episodes "
                                     "(--trajectories), or a run of --iterations with rollouts (--tasks)")
    _common(p)
    _episodes(p, required=False)
    run = p.add_argument_group("a run of iterations (terminal_env.train.trainer.PPORun): --out is its directory")
    run.add_argument("--tasks", nargs="+", help="train task folders the actor plays each iteration (instead of "
                                                 "--trajectories)")
    run.add_argument("--validation", nargs="+", default=[], help="validation task folders (Mean@k every "
                                                                  "--validate-every steps)")
    run.add_argument("--iterations", type=int, default=4)
    run.add_argument("--validate-every", type=int, default=2, help="0: never")
    run.add_argument("--tasks-per-iteration", type=int, default=8)
    run.add_argument("--attempts", type=int, default=2, help="episodes per task and iteration (a group for GRPO)")
    run.add_argument("--schedule", default="constant", choices=["constant", "linear", "cosine"],
                     help="the learning rates' schedule over the iterations")
    run.add_argument("--warmup", type=int, default=0, help="iterations of linear learning-rate warm-up")
    run.add_argument("--harness", default="generic")
    run.add_argument("--max-turns", type=int, default=20)
    run.add_argument("--max-new-tokens", type=int, default=8192)
    run.add_argument("--temperature", type=float, default=1.0, help="the rollouts' sampling temperature")
    run.add_argument("--concurrency", type=int, default=2, help="episodes played at a time")
    run.add_argument("--command-timeout", type=float, default=None, help="seconds one command may run")
    run.add_argument("--validation-k", type=int, default=3)
    run.add_argument("--validation-temperature", type=float, default=0.6)
    run.add_argument("--resume", action="store_true", help="go on with the run in --out after a stop or a kill")
    p.add_argument("--epochs", type=int, default=None, help="(default: PPOConfig.epochs)")
    p.add_argument("--batch-size", type=int, default=None, help="(default: PPOConfig.batch_size)")
    p.add_argument("--actor-lr", type=float, default=None, help="(default: PPOConfig.actor_lr)")
    p.add_argument("--critic-lr", type=float, default=None,
                   help="the critic body's learning rate, 0 freezes it (default: PPOConfig.critic_lr)")
    p.add_argument("--critic-head-lr", type=float, default=None,
                   help="the value head's learning rate (default: --critic-lr)")
    p.add_argument("--gamma", type=float, default=None, help="the discount (default: PPOConfig.gamma)")
    p.add_argument("--actor-lam", type=float, default=None,
                   help="GAE's lambda for the actor's advantages (default: PPOConfig.actor_lam)")
    p.add_argument("--critic-lam", type=float, default=None,
                   help="GAE's lambda for the critic's targets (default: PPOConfig.critic_lam)")
    p.add_argument("--estimator", default=None,
                   help="the advantages: gae (the critic), or critic-free grpo, dr_grpo, rloo, reinforce_pp over "
                        "the episodes grouped by task (default: PPOConfig.estimator)")
    p.add_argument("--loss-agg", default=None,
                   help="the policy loss over tokens: token_mean, seq_mean_token_mean, seq_mean_token_sum_norm "
                        "(default: PPOConfig.loss_agg)")
    p.add_argument("--loss-agg-norm", type=float, default=None,
                   help="seq_mean_token_sum_norm's constant, e.g. the generation budget (default: the batch's "
                        "longest sequence)")
    p.add_argument("--kl-coef", type=float, default=None, help="KL to --reference (default: PPOConfig.kl_coef)")
    p.add_argument("--reference", help="a checkpoint whose actor is the KL reference")
    p.add_argument("--min-explained-variance", type=float, default=None,
                   help="refuse a critic that explains less of the returns (default: "
                        "PPOConfig.min_explained_variance)")
    p.add_argument("--force", action="store_true",
                   help="start even from a critic without a calibration record of its own")
    p.add_argument("--old-logprobs", default=None, choices=["auto", "recompute", "rollout"],
                   help="the ratio's old log-probs: the trainer's (recompute), the sampler's (rollout), or "
                        "recompute for episodes a server sampled (auto; default: PPOConfig.old_logprobs)")
    p.add_argument("--tis-cap", type=float, default=None,
                   help="truncated importance sampling against the generator's log-probs, weights capped here "
                        "(e.g. 2.0; default: off)")
    _lora(p, critic=True)
    p.set_defaults(func=cmd_ppo)

    lp = steps.add_parser("loop", help="the recipe: Base, RSR-1, RPR-1, RSR-2, RPR-2, chosen on validation, "
                                       "scored on test (terminal_env.train.loop)")
    lp.add_argument("--config", required=True, help="the loop's TOML config (examples/loop/*.toml)")
    lp.add_argument("--out", required=True, help="the loop's directory (manifests, checkpoints, report.html)")
    lp.add_argument("--resume", action="store_true", help="go on with the loop in --out after a stop or a kill")
    lp.add_argument("--json", action="store_true", help="print the manifest as JSON at the end")
    lp.set_defaults(func=cmd_loop)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pair", required=True, help="the checkpoint to start from")
    p.add_argument("--out", required=True, help="the new checkpoint's directory (must not hold one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _scale(p)


def _scale(p: argparse.ArgumentParser) -> None:
    """Where and how a step trains: device, precision, memory (terminal_env.train.memory)."""
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N (default auto: under torchrun cuda:LOCAL_RANK, else cuda:0 where "
                        "CUDA is, else cpu)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                   help="compute precision; the weights stay float32 (default: bf16 on CUDA, fp32 on CPU)")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute each decoder layer in the backward pass instead of keeping its activations")
    p.add_argument("--max-tokens-per-micro-batch", type=int, default=None,
                   help="cut each batch into micro-batches of at most this many padded tokens (gradients "
                        "accumulate; the step is the same)")
    p.add_argument("--logprob-chunk", type=int, default=1024,
                   help="the LM head and log-softmax run on this many trained tokens at a time (default 1024)")


def _lora(p: argparse.ArgumentParser, critic: bool = False) -> None:
    """LoRA instead of full fine-tuning (terminal_env.train.lora; the extra [lora])."""
    p.add_argument("--lora", type=int, default=None, metavar="RANK",
                   help="train a LoRA adapter of this rank on the actor instead of every weight (extra [lora]); "
                        "the checkpoint holds the merged weights, and the adapter in actor/adapter")
    p.add_argument("--lora-alpha", type=float, default=None, help="the adapter's alpha: scale alpha/rank "
                                                                   "(default 2 * rank)")
    p.add_argument("--lora-targets", default="all-linear",
                   help="comma-separated names of the linear layers to adapt, e.g. q_proj,v_proj (default "
                        "all-linear: every linear layer but the output layer)")
    if critic:
        p.add_argument("--critic-lora", type=int, default=None, metavar="RANK",
                       help="an adapter of this rank on the critic's body too (its value head always trains)")


def _add_lora(args: argparse.Namespace, pair: Any) -> None:
    actor_rank, critic_rank = getattr(args, "lora", None), getattr(args, "critic_lora", None)
    if not actor_rank and not critic_rank:
        return
    from .lora import LoraSettings, add_lora  # the optional extra [train] (and [lora])

    targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    if actor_rank:
        add_lora(pair.actor, LoraSettings(actor_rank, args.lora_alpha, targets))
    if critic_rank:
        add_lora(pair.critic.model, LoraSettings(critic_rank, args.lora_alpha, targets))


def _device(requested: str) -> str:
    import torch  # the optional extra [train]

    local = os.environ.get("LOCAL_RANK", "0")
    if requested == "auto":
        return f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    return f"cuda:{local}" if requested == "cuda" else requested


def _load_pair(args: argparse.Namespace) -> Any:
    """The checkpoint of ``--pair`` in float32 on ``--device``; under torchrun each rank joins the
    process group and shards both halves (in bf16 compute with ``--precision bf16``)."""
    from . import distributed  # the optional extra [train]
    from .models import Pair  # the optional extra [train]

    device = _device(args.device)
    args.precision = args.precision or ("bf16" if device.startswith("cuda") else "fp32")
    sharded = distributed.init_from_env()
    pair = Pair.load(args.pair)
    pair.actor.to(device)
    pair.critic.to(device)
    _add_lora(args, pair)  # before sharding: FSDP wraps the adapters with their layers
    if sharded:
        distributed.shard(pair.actor, mixed_precision=args.precision == "bf16")
        distributed.shard(pair.critic, mixed_precision=args.precision == "bf16")
    return pair


def _memory(args: argparse.Namespace, logprobs: bool = True) -> dict[str, Any]:
    """The configs' precision and memory settings; a sharded pair computes in bf16 through FSDP's
    mixed precision, not autocast."""
    from . import distributed  # the optional extra [train]

    precision = "fp32" if distributed.is_distributed() else args.precision
    out = {"precision": precision, "activation_checkpointing": args.activation_checkpointing,
           "max_tokens_per_micro_batch": args.max_tokens_per_micro_batch}
    return {**out, "logprob_chunk": args.logprob_chunk} if logprobs else out


def _episodes(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--trajectories", nargs="+", required=required, help="run directories or trajectory.json files")
    p.add_argument("--reward", default="strict_success_first", type=reward_arg,
                   help="binary, partial_progress, strict_success_first, metric:NAME (a metric of the task's reward.json) or metrics:NAME=W,NAME=W (a weighted mean of them)")
    p.add_argument("--multi-segment", default="refuse", choices=["refuse", "accept", "drop"],
                   help="episodes whose prompt could not be extended (default: refuse)")
    p.add_argument("--any-weights", action="store_true",
                   help="accept turns sampled by other weights than the pair's actor (its id, or <id>@0: "
                        "its weights pushed unchanged into a server, weight_sync.pair_version)")


def _fresh(out: str) -> None:
    if (Path(out) / "pair.json").exists():
        raise ConfigError(f"{out} already holds a checkpoint; give --out a new directory")


def _report(args: argparse.Namespace, stage: str, report: dict[str, Any], out: Path) -> int:
    from .distributed import rank  # the optional extra [train]

    if rank() != 0:  # under torchrun: one report
        return 0
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
    from .sft import SFTConfig, sft  # the optional extra [train]

    _fresh(args.out)
    pair = _load_pair(args)
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
    report = sft(pair, samples, SFTConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, seed=args.seed,
                                             **_memory(args)))
    return _report(args, "sft", report, pair.save(args.out, stage="sft", metrics={"sft": report}))


def _load_episodes(args: argparse.Namespace, pair: Any) -> list[Any]:
    from .data import episodes, load_trajectories  # the optional extra [train]

    found, skipped = episodes(load_trajectories(args.trajectories), reward=args.reward,
                              multi_segment=args.multi_segment,
                              weights=None if args.any_weights else pair.meta.get("actor"))
    if skipped:
        print("left out: " + ", ".join(f"{n} {why}" for why, n in skipped.items()))
    return found


def _settings(config: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of the dataclass ``config`` that the command line set (a flag left out is None:
    the field keeps its default)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(config)
            if getattr(args, f.name, None) is not None}


def _critic_config(args: argparse.Namespace) -> Any:
    from .critic import CriticConfig  # the optional extra [train]

    return CriticConfig(**{**_settings(CriticConfig, args), **_memory(args, logprobs=False)})


def _ppo_config(args: argparse.Namespace) -> Any:
    from .ppo import PPOConfig  # the optional extra [train]

    return PPOConfig(**{**_settings(PPOConfig, args), **_memory(args)})


def cmd_critic(args: argparse.Namespace) -> int:
    from .critic import recalibrate  # the optional extra [train]

    _fresh(args.out)
    pair = _load_pair(args)
    report = recalibrate(pair, _load_episodes(args, pair), _critic_config(args))
    # the record names the critic it measured; saved, it names it by its saved id (Pair.save)
    return _report(args, "critic", report, pair.save(args.out, stage="critic", metrics={"critic": report}))


def cmd_ppo(args: argparse.Namespace) -> int:
    from .models import Pair  # the optional extra [train]
    from .ppo import PPO  # the optional extra [train]

    if bool(args.tasks) == bool(args.trajectories):
        raise ConfigError("train ppo takes either --trajectories (one update on stored episodes) or --tasks (a run "
                          "of --iterations with rollouts), not both and not neither")
    if args.tasks:
        return _ppo_run(args)
    _fresh(args.out)
    pair = _load_pair(args)
    reference = Pair.load(args.reference).actor.to(_device(args.device)) if args.reference else None
    trainer = PPO(pair, _ppo_config(args), reference=reference, force=args.force)
    report = trainer.update(_load_episodes(args, pair))
    # no calibration record is carried over: it measured the critic before this update (which trained
    # it, with GAE), and the next PPO step asks for a recalibration of the critic as saved here
    out = pair.save(args.out, stage="ppo", metrics={"ppo": report})
    return _report(args, "ppo", report, out)


def _ppo_run(args: argparse.Namespace) -> int:
    from .models import Pair  # the optional extra [train]
    from .trainer import PlaySettings, PPORun, RunSettings  # the optional extra [train]

    out = Path(args.out)
    if (out / "run.json").is_file() and not args.resume:
        raise ConfigError(f"{out} holds a PPO run already: add --resume to go on with it, or give another --out")
    train = split_tasks(args.tasks, "train", "--tasks")
    validation = split_tasks(args.validation, "validation", "--validation") if args.validation else []
    pair = _load_pair(args)
    reference = Pair.load(args.reference).actor.to(_device(args.device)) if args.reference else None
    play = PlaySettings(harness=args.harness, max_turns=args.max_turns, temperature=args.temperature,
                        max_new_tokens=args.max_new_tokens, reward=args.reward, concurrency=args.concurrency,
                        command_timeout=args.command_timeout)
    settings = RunSettings(iterations=args.iterations, tasks_per_iteration=args.tasks_per_iteration,
                           attempts=args.attempts, validate_every=args.validate_every, schedule=args.schedule,
                           warmup=args.warmup, seed=args.seed, play=play, validation_k=args.validation_k,
                           validation_temperature=args.validation_temperature)
    summary = PPORun(out, pair, _ppo_config(args), settings, train_tasks=train, validation_tasks=validation,
                     reference=reference, force=args.force,
                     log=lambda m: print(m, file=sys.stderr, flush=True)).run()
    last = summary["metrics"][-1] if summary["metrics"] else {}
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        scores = ", ".join(f"step {v['step']}: {v['mean']}" for v in summary["validation"])
        print(f"ppo: {summary['steps']} steps in {out} (last mean reward {last.get('mean_reward')}); "
              f"validation Mean@{args.validation_k}: {scores or 'not run'}")
    return 0


def cmd_loop(args: argparse.Namespace) -> int:
    from .loop import Loop, load_config  # the optional extra [train]

    loop = Loop(load_config(args.config), args.out, resume=args.resume,
                log=lambda m: print(m, file=sys.stderr, flush=True))
    manifest = loop.run()
    if args.json:
        print(json.dumps(manifest, indent=1, default=str))
        return 0
    for stage in manifest["stages"]:
        kept = stage["kept"]
        test = (manifest["final"] or {}).get("scores", {}).get(stage["name"], {})
        print(f"{stage['name']:>8}: kept {kept['candidate']} ({kept['id'][:12]}), validation {kept['validation']['mean']}"
              f", test {test.get('mean')} [{test.get('ci_low')}, {test.get('ci_high')}]")
    for pair in (manifest["final"] or {}).get("paired", []):
        print(f"{pair['a']} -> {pair['b']}: {pair['mean_diff']} [{pair['ci_low']}, {pair['ci_high']}]")
    print(f"loop: wrote {Path(args.out) / 'loop.json'} and {Path(args.out) / 'report.html'}")
    return 0
