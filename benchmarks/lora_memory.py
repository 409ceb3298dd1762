"""LoRA against full fine-tuning on CPU: trainable parameters and peak memory of one SFT step and
one PPO update (terminal_env/train/lora.py), full fine-tuning the baseline of the same run.

Each configuration runs in a fresh subprocess (``--one NAME``) that builds the model, reads
``VmRSS`` from ``/proc/self/status`` just before the step (the weights, the critic, nothing
trained yet), runs it, and reads ``ru_maxrss`` from ``resource.getrusage`` after it (the
process's high-water mark, in the kernel's accounting). ``peak_above_rest_mb`` is their
difference: what the step itself needed (gradients, the optimizer's state, activations).
torch's CPU tensors are plain allocations that RSS sees; ``tracemalloc`` does not see them.
glibc's malloc, left to itself, raises its mmap threshold after the first large free, so later
tensors of a few MB come from the heap and their freed space stays counted: the high-water mark
then says more about fragmentation than about what was alive (measured here: LoRA seemed to
need *more* than full fine-tuning, 570 against 372 MB above rest for SFT, while the tensors it
saves for the backward are fewer). The subprocesses therefore run with the threshold fixed at
128 KiB (``MALLOC_MMAP_THRESHOLD_=131072``: larger blocks are mmapped and returned when freed);
``--malloc-default`` measures without it.

The model is the tests' tiny Llama (``tests/tiny_lm.py``, vocabulary 320) made wider and deeper
so that the weights, not the interpreter, dominate: hidden 512, intermediate 1,024, 8 layers
(``--hidden``, ``--layers``). LoRA: rank 16, alpha 32, every linear layer but the LM head; in
PPO the critic's body carries its own adapter of the same shape and its value head trains.
SFT: one step on 4 sequences of 256 tokens (192 trained). PPO: one epoch over 8 one-turn
episodes of 256 tokens (128 action tokens) in minibatches of 4, actor and critic.
The tests' own model (hidden 32, 2 layers) is counted too (parameters only).

    python benchmarks/lora_memory.py --out lora_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from _common import emit, log

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"sft-full": ("sft", False), "sft-lora": ("sft", True), "ppo-full": ("ppo", False), "ppo-lora": ("ppo", True)}
RANK, ALPHA, TOKENS, SAMPLES = 16, 32.0, 256, 8


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def counts(model, lora: bool) -> dict:
    import copy

    from terminal_env.train.lora import LoraSettings, add_lora

    model = copy.deepcopy(model)
    total = sum(p.numel() for p in model.parameters())
    if lora:
        add_lora(model, LoraSettings(RANK, ALPHA))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"parameters": total, "trainable": trainable}


def one(name: str, hidden: int, layers: int) -> dict:
    import torch

    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from tiny_lm import make_model, make_tokenizer

    from terminal_env.train.data import Episode, Sequence
    from terminal_env.train.lora import LoraSettings, add_lora
    from terminal_env.train.models import Pair
    from terminal_env.train.ppo import PPO, PPOConfig
    from terminal_env.train.sft import SFTConfig, sft

    torch.set_num_threads(1)
    stage, lora = CONFIGS[name]
    tokenizer = make_tokenizer()
    pair = Pair.start(make_model(tokenizer, context=TOKENS, hidden=hidden, layers=layers), tokenizer)
    settings = LoraSettings(RANK, ALPHA)
    if lora:
        add_lora(pair.actor, settings)
        if stage == "ppo":
            add_lora(pair.critic.model, settings)
    gen = torch.Generator().manual_seed(0)
    vocab = len(tokenizer)

    def ids() -> list[int]:
        return torch.randint(3, vocab, (TOKENS,), generator=gen).tolist()

    if stage == "sft":
        samples = [Sequence(ids(), [0] * 64 + [1] * (TOKENS - 64)) for _ in range(4)]
        rest = rss_mb()
        sft(pair, samples, SFTConfig(epochs=1, lr=1e-4, batch_size=4))
        trained = [pair.actor]
    else:
        half = TOKENS // 2
        episodes = [Episode(f"e{i}", "toy", [Sequence(ids(), [0] * half + [1] * half, [0.0] * half + [-5.0] * half)],
                            float(i % 2), 1.0) for i in range(SAMPLES)]
        trainer = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=1e-5, critic_lr=1e-5), force=True)
        rest = rss_mb()
        trainer.update(episodes)
        trained = [pair.actor, pair.critic]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    trainable = sum(p.numel() for m in trained for p in m.parameters() if p.requires_grad)
    return {"name": name, "stage": stage, "lora": lora, "trainable": trainable,
            "parameters": sum(p.numel() for m in trained for p in m.parameters()),
            "rest_rss_mb": round(rest, 1), "peak_rss_mb": round(peak, 1), "peak_above_rest_mb": round(peak - rest, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--malloc-default", action="store_true", help="leave glibc's mmap threshold dynamic")
    parser.add_argument("--one", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--counts", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.hidden, args.layers)))
        return
    if args.counts:
        sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
        from tiny_lm import make_model, make_tokenizer

        tok = make_tokenizer()
        tests_model = make_model(tok)
        print(json.dumps({"tests_model": {"full": counts(tests_model, False), "lora": counts(tests_model, True)}}))
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not args.malloc_default:
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
    runs = []
    for name in CONFIGS:
        log(f"{name} ...")
        done = subprocess.run([sys.executable, __file__, "--one", name, "--hidden", str(args.hidden), "--layers",
                               str(args.layers)], capture_output=True, text=True, env=env, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    done = subprocess.run([sys.executable, __file__, "--counts"], capture_output=True, text=True, env=env, check=True)
    by = {r["name"]: r for r in runs}
    comparison = {stage: {"trainable_ratio": round(by[f"{stage}-lora"]["trainable"] / by[f"{stage}-full"]["trainable"], 4),
                          "peak_above_rest_saved_mb": round(by[f"{stage}-full"]["peak_above_rest_mb"]
                                                            - by[f"{stage}-lora"]["peak_above_rest_mb"], 1),
                          "peak_rss_ratio": round(by[f"{stage}-lora"]["peak_rss_mb"] / by[f"{stage}-full"]["peak_rss_mb"], 3)}
                  for stage in ("sft", "ppo")}
    emit({"benchmark": "lora_memory", "memory": "ru_maxrss (resource.getrusage) in a fresh subprocess per "
          "configuration, minus VmRSS just before the step",
          "malloc_mmap_threshold": None if args.malloc_default else 131072, "model": {"hidden": args.hidden, "layers": args.layers,
          "intermediate": 2 * args.hidden, "vocab": 320}, "lora": {"rank": RANK, "alpha": ALPHA, "targets": "all-linear"},
          "runs": runs, "lora_vs_full": comparison, **json.loads(done.stdout.strip().splitlines()[-1])}, args.out)


if __name__ == "__main__":
    main()
