"""PPO with vLLM on a GPU: served rollouts, recomputed old log-probs, weight pushes (JSON out).

Usage: python benchmarks/gpu_ppo.py --model DIR [--iterations 3] [--tasks 8] [--attempts 2]
                                    [--max-new-tokens 64] [--port 8011] [--gpu-memory 0.35]
                                    [--trainer-device cuda:0] [--out FILE]

Run it through ``scripts/gpu-check.sh``, which first checks that there is a GPU and vLLM and says
so, exiting 0, where there is not (this machine: no GPU). ``--model`` is a local Hugging Face
causal LM directory (nothing is downloaded; a small one, e.g. a 0.5B Qwen, fits beside the
trainer on one 24 GB GPU with ``--gpu-memory 0.35``).

What it does, each step with the project's own code:

1. starts ``vllm serve DIR`` on 127.0.0.1 with the weight-transfer routes
   (``VLLM_SERVER_DEV_MODE=1``, ``--weight-transfer-config '{"backend": "nccl"}'``) and waits for it;
2. writes ``--tasks`` toy tasks (``count-letters``, :func:`~terminal_env.tasks.toy.write_toy_family`)
   and loads the pair (``Pair.start``) on ``--trainer-device``, float32 master weights, bf16 compute;
3. per iteration: ``collect`` (the served model plays every task ``--attempts`` times in Docker,
   token-exact, at temperature 1 with neutral sampling), ``episodes``, ``PPO.update`` with the
   old log-probs recomputed by the trainer (``old_logprobs="recompute"``, truncated importance
   sampling at 2), then ``VLLMWeightSync.push`` of the actor (nccl), named ``pair_version(id, k)``.

Printed (JSON): per iteration, tokens generated per second (completion tokens over the collect
wall time), tokens trained per second (sequence tokens over the update's wall time), the push's
seconds, peak CUDA memory of the trainer (``torch.cuda.max_memory_allocated``), and the
rollout/trainer log-prob gap (``generator_gap_max`` and ``generator_gap_mean`` of the update:
the generator's log-probs against the trainer's recomputation, before any step). PPO is forced
past its critic gate (the critic is fresh): this measures the machinery, not learning.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import emit, log  # noqa: E402


def wait_for(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gpu_ppo: vllm serve exited with {proc.returncode} before it answered")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(2)
    raise SystemExit(f"gpu_ppo: vllm serve did not answer {url} within {timeout:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a local Hugging Face causal LM directory")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--attempts", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--gpu-memory", type=float, default=0.35, help="vLLM's --gpu-memory-utilization")
    ap.add_argument("--trainer-device", default="cuda:0")
    ap.add_argument("--out")
    args = ap.parse_args()

    import torch  # the optional extra [train]

    from terminal_env.models.base import SamplingParams
    from terminal_env.models.openai_backend import OpenAIBackend
    from terminal_env.tasks import load_task
    from terminal_env.tasks.toy import write_toy_family
    from terminal_env.train.data import episodes
    from terminal_env.train.models import Pair
    from terminal_env.train.ppo import PPO, PPOConfig
    from terminal_env.train.rollouts import collect
    from terminal_env.train.weight_sync import VLLMWeightSync, pair_version

    model = str(Path(args.model).resolve())
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name",
         "actor", "--host", "127.0.0.1", "--port", str(args.port), "--gpu-memory-utilization",
         str(args.gpu_memory), "--weight-transfer-config", '{"backend": "nccl"}'],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{args.port}/v1"
    doc: dict = {"benchmark": "gpu_ppo", "model": model, "device": torch.cuda.get_device_name(0),
                 "config": vars(args), "iterations": []}
    try:
        log(f"gpu_ppo: waiting for vllm serve on {base_url}")
        wait_for(f"{base_url}/models", server, 900)
        with tempfile.TemporaryDirectory(prefix="gpu-ppo-") as tmp:
            written = write_toy_family(tmp, n_train=args.tasks, n_validation=1, seed=0, kind="count-letters")
            tasks = [p for p in written if load_task(p).split == "train"]
            pair = Pair.start(model)
            pair.actor.to(args.trainer_device)
            pair.critic.to(args.trainer_device)
            trainer = PPO(pair, PPOConfig(precision="bf16", old_logprobs="recompute", tis_cap=2.0,
                                          activation_checkpointing=True, epochs=1, batch_size=8), force=True)
            backend = OpenAIBackend("actor", base_url=base_url, token_ids=True, chat_tokenizer=model,
                                    weights_version=pair_version(pair.meta.get("actor") or "base", 0))
            params = SamplingParams(temperature=1.0, logprobs=True, max_new_tokens=args.max_new_tokens)
            with VLLMWeightSync(base_url, transport="nccl", backends=[backend]) as sync:
                for k in range(args.iterations):
                    torch.cuda.reset_peak_memory_stats()
                    t0 = time.monotonic()
                    trajs = collect(backend, tasks, attempts=args.attempts, params=params, seed=1000 * k,
                                    max_turns=3)
                    t1 = time.monotonic()
                    batch, skipped = episodes(trajs, weights=backend.weights_version)
                    report = trainer.update(batch)
                    t2 = time.monotonic()
                    sync.push(pair.actor, pair_version(pair.meta.get("actor") or "base", k + 1))
                    t3 = time.monotonic()
                    generated = sum(t.completion.usage.completion_tokens or 0 for tr in trajs for t in tr.turns
                                    if t.completion is not None)
                    trained = sum(len(s.token_ids) for e in batch for s in e.sequences)
                    doc["iterations"].append({
                        "episodes": len(batch), "skipped": dict(skipped), "mean_reward": report["mean_reward"],
                        "generated_tokens_per_s": round(generated / (t1 - t0), 1),
                        "trained_tokens_per_s": round(trained / (t2 - t1), 1),
                        "push_seconds": round(t3 - t2, 2),
                        "trainer_peak_memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                        "generator_gap_max": report.get("generator_gap_max"),
                        "generator_gap_mean": report.get("generator_gap_mean"),
                        "tis_weight_mean": report.get("tis_weight_mean"),
                    })
                    log(f"gpu_ppo: iteration {k}: {doc['iterations'][-1]}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    emit(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
