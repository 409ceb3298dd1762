"""Peak memory of one PPO update on CPU, with and without activation checkpointing and chunked
log-probs on the action tokens (terminal_env/train/memory.py).

Each configuration runs in a fresh subprocess (``--one NAME``), which builds the model, runs one
update and reports two numbers read from the kernel: ``VmRSS`` from ``/proc/self/status`` just
before the update (the model, the critic, the optimizers' empty state) and ``ru_maxrss`` from
``resource.getrusage`` after it (the process's high-water mark). Their difference is the update's
peak above rest. ``tracemalloc`` does not see torch's CPU allocations, so it is not used; large
torch tensors are allocated with ``mmap`` by glibc and returned when freed, so RSS tracks them.

The model is a Llama of vocabulary 32,000, hidden 256, intermediate 1,024, 4 layers (20.4M
parameters: most of them the untied embedding and LM head), trained on a minibatch of 2
episodes of 2,048 tokens of which a quarter are action tokens (4 turns of 128 sampled tokens
after observations), one epoch. ``full`` is the trainer as it was before: the logits of every
token (``sampled_logprobs(..., with_logits=True)``) and the entropy over them.

    python benchmarks/train_memory.py --out train_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import emit

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {  # name: (log-probs, activation checkpointing, precision)
    "full": ("full", False, "fp32"),
    "full+checkpointing": ("full", True, "fp32"),
    "chunked": ("chunked", False, "fp32"),
    "chunked+checkpointing": ("chunked", True, "fp32"),
    "chunked+checkpointing+bf16": ("chunked", True, "bf16"),
}
VOCAB, HIDDEN, LAYERS, TOKENS, EPISODES, CHUNK = 32_000, 256, 4, 2048, 2, 256


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def one(name: str) -> dict:
    import torch
    import transformers

    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from tiny_lm import make_tokenizer

    import terminal_env.train.ppo as ppo_module
    from terminal_env.train.data import Episode, Sequence
    from terminal_env.train.models import Pair, sampled_logprobs

    logprobs, checkpointing, precision = CONFIGS[name]
    torch.set_num_threads(2)
    tokenizer = make_tokenizer()
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=4 * HIDDEN,
                                      num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=TOKENS, pad_token_id=0, bos_token_id=None,
                                      eos_token_id=None)
    torch.manual_seed(0)
    actor = transformers.LlamaForCausalLM(config).eval()
    pair = Pair.start(actor, tokenizer)
    gen = torch.Generator().manual_seed(1)
    episodes = []
    for e in range(EPISODES):
        ids = torch.randint(3, VOCAB, (TOKENS,), generator=gen).tolist()
        mask = ([0] * 384 + [1] * 128) * (TOKENS // 512)  # observation, then the turn's sampled tokens
        old = (-torch.rand(TOKENS, generator=gen) * 10).tolist()
        episodes.append(Episode(f"e{e}", "bench", [Sequence(ids, mask, [o * m for o, m in zip(old, mask)])],
                                float(e), 1.0))

    if logprobs == "full":  # the trainer before: logits for every token, entropy over all of them
        def full(actor, batch, temperature=1.0, chunk=None):
            lp, logits = sampled_logprobs(actor, batch, temperature, with_logits=True)
            logp = torch.log_softmax(logits.float() / temperature, -1)
            return lp, -(logp.exp() * logp).sum(-1)
        ppo_module.action_logprobs = full

    trainer = ppo_module.PPO(pair, ppo_module.PPOConfig(
        epochs=1, batch_size=EPISODES, actor_lr=1e-6, critic_lr=1e-5, precision=precision,
        activation_checkpointing=checkpointing, logprob_chunk=CHUNK, old_logprobs="rollout"), force=True)
    rest = rss_mb()
    start = time.perf_counter()
    report = trainer.update(episodes)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"config": name, "logprobs": logprobs, "activation_checkpointing": checkpointing, "precision": precision,
            "rss_before_update_mb": round(rest, 1), "peak_rss_mb": round(peak, 1),
            "update_peak_above_rest_mb": round(peak - rest, 1), "update_seconds": round(seconds, 2),
            "policy_loss": report["policy_loss"], "value_loss": report["value_loss"],
            "parameters_actor": sum(p.numel() for p in pair.actor.parameters())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=sorted(CONFIGS))
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return 0
    results = []
    for name in args.configs:
        run = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "2"})
        if run.returncode != 0:
            raise SystemExit(f"{name} failed:\n{run.stderr[-4000:]}")
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr)
    baseline = next((r for r in results if r["config"] == "full"), results[0])
    for r in results:
        r["peak_vs_full"] = round(r["update_peak_above_rest_mb"] / baseline["update_peak_above_rest_mb"], 3)
    emit({"benchmark": "train_memory", "model": {"vocab": VOCAB, "hidden": HIDDEN, "layers": LAYERS,
                                                  "tokens_per_episode": TOKENS, "episodes": EPISODES,
                                                  "action_tokens_per_episode": TOKENS // 4,
                                                  "logprob_chunk": CHUNK},
          "measure": "ru_maxrss (getrusage) minus VmRSS before the update, one fresh process per configuration",
          "baseline": baseline["config"], "results": results}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
