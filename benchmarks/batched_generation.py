"""Concurrent episodes on one local model: batched generation against one request at a time.

Usage: python benchmarks/batched_generation.py [--episodes 8] [--rounds 2] [--turns 6]
                                               [--new-tokens 96] [--threads N] [--out FILE]

``--episodes`` threads each play ``--rounds`` episodes through the agent loop (generic harness,
a real TerminalEnv on this host's Docker engine, ``--turns`` model turns of up to
``--new-tokens`` tokens at temperature 0.8, seeded), all sharing one TransformersBackend on the
tiny CPU model of the tests (tests/tiny_lm.py: 2 layers, hidden size 32). Four ways to serve
them, on the same weights, in the same run, alternating:

* ``generate`` (**the baseline**: the backend before batching, which the issue names): one
  request at a time behind a lock, each a batch-1 ``model.generate`` over the whole prompt, with
  a logits processor reading off each sampled token's log-prob and a stopping criterion for stop
  strings, as ``TransformersBackend`` did before continuous batching;
* ``serial``: this backend's own sampler with ``max_batch=1, prefix_cache_tokens=0``: one request
  at a time, each prompt run in full, but on the sampler's loop (keys and values written in
  place, no logits in the prefill);
* ``serial_prefix``: ``max_batch=1`` with the prefix cache (each turn runs only its new tokens);
* ``batched``: ``max_batch=--episodes`` with the prefix cache: every waiting request shares each
  decoding step.

Reports episodes per minute for each, the speed-up of ``batched`` over ``generate`` (the target
is at least 3), over ``serial`` and over ``serial_prefix`` (what batching alone gives), and the
mean batch size the batched backend saw. Prints one JSON document on stdout.
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
    tokens = {"prompt": 0, "generated": 0}

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
            for turn in traj.turns:  # the work each mode did, to compare like with like
                if turn.completion is not None:
                    tokens["prompt"] += turn.completion.usage.prompt_tokens
                    tokens["generated"] += turn.completion.usage.completion_tokens

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
            "episodes_per_minute": round(60 * len(done) / elapsed, 2), "prompt_tokens": tokens["prompt"],
            "generated_tokens": tokens["generated"], "errors": errors[:3]}


class GenerateSampler:
    """The backend before batching, for the baseline: one ``model.generate`` at a time (batch 1,
    the whole prompt each time) behind a lock, a logits processor first in the chain keeping
    each sampled token's raw log-prob, and a stopping criterion for stop strings. It answers the
    sampler's requests, so the backend around it (prompts, token records) is unchanged."""

    def __init__(self, torch, transformers, model, tokenizer, eos: list[int]):
        self.torch, self.transformers, self.model, self.tokenizer = torch, transformers, model, tokenizer
        self.eos = eos
        self.lock = threading.Lock()
        self.stats = {"requests": 0, "prompt_tokens": 0}
        self.weights_version = None

    def sample(self, request):
        from terminal_env.models.hf_sampling import Sampled

        torch, transformers = self.torch, self.transformers
        values: list[float] = []
        row: list = [None]

        class Recorder(transformers.LogitsProcessor):
            def __call__(self, input_ids, scores):
                if row[0] is not None:
                    values.append(float(row[0][int(input_ids[0, -1])]))
                row[0] = torch.log_softmax(scores[0].float(), dim=-1)
                return scores

        tokenizer, n = self.tokenizer, len(request.prompt)

        class Stops(transformers.StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                window = 2 * max(len(s) for s in request.stops) + 8
                text = tokenizer.decode(input_ids[0, max(n, input_ids.shape[1] - window):].tolist())
                return torch.full((1,), any(s in text for s in request.stops), dtype=torch.bool)

        gen = {"max_new_tokens": request.max_new, "eos_token_id": self.eos, "pad_token_id": self.eos[0],
               "return_dict_in_generate": True, "do_sample": request.temperature > 0,
               "logits_processor": transformers.LogitsProcessorList([Recorder()])}
        if request.temperature > 0:
            gen.update(temperature=request.temperature, top_p=request.top_p, top_k=0)
        if request.stops:
            gen["stopping_criteria"] = transformers.StoppingCriteriaList([Stops()])
        ids = torch.tensor([request.prompt])
        with self.lock, torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(request.seed)
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **gen)
            self.stats["requests"] += 1
            self.stats["prompt_tokens"] += n
        tokens = out.sequences[0, n:].tolist()
        if row[0] is not None and len(values) < len(tokens):
            values.append(float(row[0][tokens[-1]]))
        finish = "stop" if tokens and tokens[-1] in self.eos else "length"
        return Sampled(token_ids=tokens, logprobs=values[:len(tokens)], sampling_logprobs=None,
                       finish=finish, weights=self.weights_version, stops=request.stops)

    def close(self) -> None:
        pass


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
    import transformers  # the optional extra [hf]
    from tiny_lm import make_model, make_tokenizer

    from terminal_env.models.hf_backend import TransformersBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = make_tokenizer()
    model = make_model(tokenizer, context=16384, hidden=args.hidden, layers=args.layers)
    params = SamplingParams(max_new_tokens=args.new_tokens, temperature=0.8)
    modes = {"generate": {"max_batch": 1, "prefix_cache_tokens": 0},
             "serial": {"max_batch": 1, "prefix_cache_tokens": 0}, "serial_prefix": {"max_batch": 1},
             "batched": {"max_batch": args.episodes}}
    results: dict[str, list[dict]] = {mode: [] for mode in modes}
    counters: dict[str, dict] = {}
    for rep in range(2):  # alternate, so that drift of the machine hits every mode
        for mode, options in modes.items():
            backend = TransformersBackend(model, tokenizer, name="tiny", **options)
            if mode == "generate":  # the backend before batching
                backend._sampler.close()
                backend._sampler = GenerateSampler(torch, transformers, model, tokenizer, backend.eos_token_ids)
                backend._sampler.weights_version = backend.weights_version
            try:
                res = play(backend, args.episodes, args.rounds, args.turns, params)
            finally:
                backend.close()
            counters[mode] = backend.stats()
            log(f"{mode} #{rep + 1}: {res['episodes']} episodes, {res['turns']} turns in {res['seconds']} s: "
                f"{res['episodes_per_minute']} episodes/min, {res['prompt_tokens']} prompt and "
                f"{res['generated_tokens']} generated tokens; {counters[mode]}")
            results[mode].append(res)
    best = {mode: max(r["episodes_per_minute"] for r in runs) for mode, runs in results.items()}
    speedup = best["batched"] / best["generate"] if best["generate"] else None
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
        "speedup_over_serial": round(best["batched"] / best["serial"], 2),
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
