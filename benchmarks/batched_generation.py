"""Concurrent episodes on one local model: batched generation against one request at a time.

Usage: python benchmarks/batched_generation.py [--episodes 8] [--rounds 2] [--turns 6]
                                               [--new-tokens 96] [--out FILE]

``--episodes`` threads each play ``--rounds`` episodes through the agent loop (generic harness,
a real TerminalEnv on this host's Docker engine, ``--turns`` model turns of up to
``--new-tokens`` tokens at temperature 0.8, seeded), all sharing one TransformersBackend on the
tiny CPU model of the tests (tests/tiny_lm.py: 2 layers, hidden size 32). Two backends on the
same weights, in the same run, alternating:

* ``serial``: ``max_batch=1, prefix_cache_tokens=0``: one request at a time, each prompt run in full,
  as the backend worked before (the baseline);
* ``serial_prefix``: ``max_batch=1`` with the prefix cache (each turn runs only its new tokens);
* ``batched``: ``max_batch=--episodes`` with the prefix cache: every waiting request shares each
  decoding step.

Reports episodes per minute for each, the speed-up of ``batched`` over ``serial`` (the target is
at least 3), over ``serial_prefix`` (what batching alone gives), and the mean batch size the
batched backend saw. Prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tiny model of the tests

from _common import emit, log  # noqa: E402

from terminal_env import TaskSpec, TerminalEnv  # noqa: E402
from terminal_env.agent import run_agent  # noqa: E402
from terminal_env.harness import get_harness  # noqa: E402
from terminal_env.models.base import SamplingParams  # noqa: E402
from terminal_env.sandbox.images import BASE_IMAGE  # noqa: E402


def play(backend, episodes: int, rounds: int, turns: int, params: SamplingParams) -> dict:
    spec = TaskSpec(name="batching", instruction="list the files in /app", image=BASE_IMAGE)
    envs = [TerminalEnv(spec, max_steps=50, time_limit=None) for _ in range(episodes)]
    done: list[int] = []
    errors: list[str] = []

    def worker(i: int) -> None:
        for r in range(rounds):
            try:
                traj = run_agent(envs[i], get_harness("generic"), backend, params=params, max_turns=turns,
                                 seed=1000 * r + i)
            except Exception as e:  # noqa: BLE001 - counted as an error of the run
                errors.append(f"{type(e).__name__}: {e}")
                continue
            if traj.termination in ("model_error", "infra_error"):
                errors.append(traj.error or traj.termination)
            done.append(len(traj.turns))

    try:
        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(episodes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
    finally:
        for env in envs:
            env.close()
    return {"episodes": len(done), "turns": sum(done), "seconds": round(elapsed, 3),
            "episodes_per_minute": round(60 * len(done) / elapsed, 2), "errors": errors[:3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--hidden", type=int, default=32, help="the model's width (32: the tests' model)")
    ap.add_argument("--layers", type=int, default=2, help="the model's layers (2: the tests' model)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch  # the optional extra [hf]
    from tiny_lm import make_model, make_tokenizer

    from terminal_env.models.hf_backend import TransformersBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = make_tokenizer()
    model = make_model(tokenizer, context=16384, hidden=args.hidden, layers=args.layers)
    params = SamplingParams(max_new_tokens=args.new_tokens, temperature=0.8)
    modes = {"serial": {"max_batch": 1, "prefix_cache_tokens": 0}, "serial_prefix": {"max_batch": 1},
             "batched": {"max_batch": args.episodes}}
    results: dict[str, list[dict]] = {mode: [] for mode in modes}
    counters: dict[str, dict] = {}
    for rep in range(2):  # alternate, so that drift of the machine hits every mode
        for mode, options in modes.items():
            backend = TransformersBackend(model, tokenizer, name="tiny", **options)
            try:
                res = play(backend, args.episodes, args.rounds, args.turns, params)
            finally:
                backend.close()
            counters[mode] = backend.stats()
            log(f"{mode} #{rep + 1}: {res['episodes']} episodes, {res['turns']} turns in {res['seconds']} s: "
                f"{res['episodes_per_minute']} episodes/min; {counters[mode]}")
            results[mode].append(res)
    best = {mode: max(r["episodes_per_minute"] for r in runs) for mode, runs in results.items()}
    speedup = best["batched"] / best["serial"] if best["serial"] else None
    batched = counters["batched"]
    out = {
        "benchmark": "batched_generation",
        "concurrent_episodes": args.episodes, "rounds": args.rounds, "turns": args.turns,
        "max_new_tokens": args.new_tokens,
        "model": f"tests/tiny_lm.py ({args.layers} layers, hidden {args.hidden}), CPU, "
                 f"{torch.get_num_threads()} threads",
        "parameters": sum(p.numel() for p in model.parameters()),
        "runs": results, "episodes_per_minute": best,
        "speedup": round(speedup, 2) if speedup else None,
        "speedup_over_serial_prefix": round(best["batched"] / best["serial_prefix"], 2),
        "mean_batch": round(batched["row_steps"] / batched["steps"], 2) if batched.get("steps") else None,
        "last_counters": counters,
        "target_speedup": 3.0, "ok": bool(speedup and speedup >= 3.0
                                          and not any(r["errors"] for rs in results.values() for r in rs)),
    }
    emit(out, args.out)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
