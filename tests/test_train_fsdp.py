"""The scale path: SFT, critic recalibration and PPO under ``torchrun`` with FSDP2, two processes
on CPU (gloo, loopback), against the same steps in this process without a process group.

Every stage starts from the same saved weights and data. The distributed run is this file run
by torchrun (``python -m torch.distributed.run --nproc-per-node 2 ... tests/test_train_fsdp.py
OUT``); rank 0 writes the reported losses, the gradients left on the parameters by the last step
(after FSDP's reduce-scatter and the clipping, gathered full) and the parameters after it.

Tolerance: losses and gradients within ``ATOL`` 1e-5 absolute (and ``RTOL`` 1e-4) on float32
values of order 1e-3 to 10. By design the two runs compute the same sum over the same tokens
(:func:`~terminal_env.train.distributed.loss_scale` makes FSDP's average of the ranks' gradients
the single-process gradient), so what is left is float32 rounding: each rank pads its share to its
own width, and the sums are taken in another order (per rank, then across ranks). The measured
differences are below 1e-7, so 1e-5 has a margin of 100 yet would catch any normalisation error
(averaging the two ranks' token means instead moves the SFT gradient by 47% of its norm, up to
3e-2 in one entry, here: 29 trained tokens on one rank, 72 on the other). The weights after the step are
compared within ``WEIGHT_ATOL``, a tenth of the learning rate: Adam's first step moves a weight
by ``lr * g / (|g| + 1e-8)``, which for a gradient within rounding of zero can move by a sizeable
fraction of ``lr`` (measured: 1.7e-5 at lr 1e-3).

The sharded run also uses the memory mechanics (``MEMORY``: activation checkpointing, token-budget
micro-batches whose count differs between the ranks, log-probs in chunks of 8 action tokens), which
are exact, so the same tolerances hold. Then a PPO update with FSDP's mixed precision (bf16
gathered weights and compute, float32 gradient reduction and master weights; gloo all-gathers and
reduce-scatters bf16 on CPU) is compared with the float32 single process: its loss terms within
``MIXED_ATOL`` and each gradient within ``MIXED_RTOL`` of the reference's norm (relative L2 error).
Measured: the loss terms within 4.4e-3 (the value loss; the policy loss 1.8e-4), the gradients'
relative error at most 0.015 (the median 0.009); the bounds are about twice those.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from tiny_lm import make_model, make_tokenizer  # noqa: E402

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.train import distributed  # noqa: E402
from terminal_env.train.critic import CriticConfig, recalibrate  # noqa: E402
from terminal_env.train.data import Episode, Sequence  # noqa: E402
from terminal_env.train.models import Critic, Pair, sampled_logprobs  # noqa: E402
from terminal_env.train.ppo import PPO, PPOConfig  # noqa: E402
from terminal_env.train.sft import SFTConfig, sft  # noqa: E402

ATOL, RTOL = 1e-5, 1e-4
WEIGHT_ATOL = 1e-4  # a tenth of the largest learning rate below
ROOT = Path(__file__).resolve().parent.parent
#: SFT: one step on all six samples; their trained tokens fall very unevenly on the two ranks
SFT_LENGTHS = [(4, 40), (3, 2), (6, 25), (2, 3), (5, 30), (4, 1)]  # (prompt, answer) tokens
SFT = SFTConfig(epochs=1, lr=1e-3, batch_size=6)
#: critic: 8 episodes, 2 held out, 6 trained in minibatches of 4 and 2
CRITIC = CriticConfig(epochs=1, lr=1e-3, batch_size=4, target_explained_variance=1.0)
#: PPO: 5 episodes in minibatches of 4 and 1 (rank 0 has nothing of the second: it runs a filler)
PPO_CONFIG = PPOConfig(epochs=1, batch_size=4, actor_lr=1e-4, critic_lr=1e-4, actor_lam=0.9, critic_lam=0.9)
#: the sharded run's memory settings (exact: the single process runs without them)
MEMORY = {"activation_checkpointing": True, "max_tokens_per_micro_batch": 40}
MIXED_ATOL, MIXED_RTOL = 1e-2, 0.03


# -- the stages, run the same way by the test and by each torchrun worker ---------------------------


def make_pair(weights: dict[str, Any]) -> Pair:
    tokenizer = make_tokenizer()
    actor = make_model(tokenizer)
    actor.load_state_dict(weights["actor"])
    critic = Critic(make_model(tokenizer))
    critic.load_state_dict(weights["critic"])
    return Pair(actor, critic, tokenizer)


def full(t: torch.Tensor) -> torch.Tensor:
    """A tensor whole: a sharded (DTensor) one gathered (a collective: every rank calls it)."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


def grads_and_weights(prefix: str, module: Any) -> dict[str, torch.Tensor]:
    out = {}
    for name, p in module.named_parameters():
        if p.grad is not None:
            out[f"{prefix}.grad.{name}"] = full(p.grad)
        out[f"{prefix}.weight.{name}"] = full(p)
    return out


def run_stages(weights: dict[str, Any], data: dict[str, Any], prepare: Callable[[Pair], None],
               save_to: Path, memory: dict[str, Any] | None = None) -> dict[str, Any]:
    """One SFT step, one critic epoch, one PPO update, each from ``weights``; ``prepare`` shards
    the pair (or not); the pair after SFT is saved to ``save_to``. Returns the reports and every
    gradient and weight after each stage."""
    samples = [Sequence(**s) for s in data["samples"]]
    episodes = [Episode(e["id"], "toy", [Sequence(**s) for s in e["sequences"]], e["reward"], 1.0)
                for e in data["episodes"]]
    out: dict[str, Any] = {}

    pair = make_pair(weights)
    prepare(pair)
    out["sft"] = sft(pair, samples, replace(SFT, **(memory or {}), logprob_chunk=8))["loss"]
    out.update(grads_and_weights("sft.actor", pair.actor))
    pair.save(save_to, stage="sft")  # sharded: every rank calls it, rank 0 writes
    out["saved_id"] = pair.meta["id"]

    pair = make_pair(weights)
    prepare(pair)
    report = recalibrate(pair, episodes[:8], replace(CRITIC, **(memory or {})))
    out["critic"] = report["epochs"][-1]["train_loss"]
    out["critic_measured"] = [report["explained_variance"], report["correlation"]]  # rounded to 4 digits
    out.update(grads_and_weights("critic.critic", pair.critic))

    pair = make_pair(weights)
    prepare(pair)
    out.update(ppo_stage(pair, episodes, replace(PPO_CONFIG, **(memory or {}), logprob_chunk=8), "ppo"))
    return out


def ppo_stage(pair: Pair, episodes: list[Episode], config: PPOConfig, name: str) -> dict[str, Any]:
    report = PPO(pair, config, force=True).update(episodes[:5])
    out: dict[str, Any] = {name: {k: report[k] for k in ("policy_loss", "entropy", "value_loss", "clip_fraction",
                                                        "approx_kl", "first_logprob_gap", "steps")}}
    out.update(grads_and_weights(f"{name}.actor", pair.actor))
    out.update(grads_and_weights(f"{name}.critic", pair.critic))
    return out


def shard_pair(pair: Pair) -> None:
    distributed.shard(pair.actor)
    distributed.shard(pair.critic)
    assert distributed.is_sharded(pair.actor) and distributed.is_sharded(pair.critic)  # so saving gathers


def worker(out: Path) -> None:
    """A torchrun worker: the stages on a sharded pair; rank 0 writes what it gathered."""
    torch.set_num_threads(1)
    assert distributed.init_from_env() and distributed.world_size() == 2
    weights = torch.load(out / "weights.pt", weights_only=True)
    data = json.loads((out / "data.json").read_text())
    with pytest.raises(ConfigError, match="needs the models sharded"):
        sft(make_pair(weights), [Sequence(**s) for s in data["samples"]], SFT)
    result = run_stages(weights, data, shard_pair, out / "sharded", MEMORY)
    pair = make_pair(weights)  # PPO again, in FSDP's mixed precision
    distributed.shard(pair.actor, mixed_precision=True)
    distributed.shard(pair.critic, mixed_precision=True)
    episodes = [Episode(e["id"], "toy", [Sequence(**s) for s in e["sequences"]], e["reward"], 1.0)
                for e in data["episodes"]]
    mixed = ppo_stage(pair, episodes, PPO_CONFIG, "mixed")
    assert all(p.dtype == torch.float32 for p in pair.actor.parameters())  # the shards: the master weights
    if distributed.rank() == 0:
        torch.save(result, out / "fsdp.pt")
        torch.save(mixed, out / "mixed.pt")
    distributed.finish()
    # leave without Python's shutdown, where a gloo worker thread still releasing the last
    # collective's tensors rarely aborts the process (here 1 run in 200; see finish())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# -- the test --------------------------------------------------------------------------------------


def make_inputs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The initial weights (the critic's head made non-zero, so that its body gets gradients)
    and the data: supervised samples, and episodes whose old log-probs are the actor's own
    plus noise (so that some ratios are clipped)."""
    tokenizer = make_tokenizer()
    pair = Pair.start(make_model(tokenizer), tokenizer)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        pair.critic.head.weight.normal_(0, 0.3, generator=gen)
    vocab = len(tokenizer)

    def ids(n: int) -> list[int]:
        return torch.randint(3, vocab, (n,), generator=gen).tolist()

    samples = [{"token_ids": ids(p + a), "mask": [0] * p + [1] * a} for p, a in SFT_LENGTHS]
    episodes = []
    for i in range(8):
        p, a = 3 + i % 3, 4 + 5 * (i % 4)
        seq = Sequence(ids(p + a), [0] * p + [1] * a)
        with torch.no_grad():
            lp = sampled_logprobs(pair.actor, {"input_ids": torch.tensor([seq.token_ids]),
                                               "attention_mask": torch.ones(1, p + a, dtype=torch.long)})[0]
        noise = 0.3 * torch.randn(p + a, generator=gen)
        seq.old_logprobs = [0.0] * p + (lp + noise)[p:].tolist()
        episodes.append({"id": f"e{i}", "reward": i / 7, "sequences": [seq.__dict__]})
    weights = {"actor": pair.actor.state_dict(), "critic": pair.critic.state_dict()}
    return weights, {"samples": samples, "episodes": episodes}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fsdp_on_two_processes_matches_one_process(tmp_path):
    dist = torch.distributed
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no torch.distributed with the gloo backend")
    weights, data = make_inputs()
    torch.save(weights, tmp_path / "weights.pt")
    (tmp_path / "data.json").write_text(json.dumps(data))
    order = torch.randperm(6, generator=torch.Generator().manual_seed(SFT.seed)).tolist()
    tokens = [sum(sum(data["samples"][i]["mask"]) for i in distributed.rank_slice(order, r, 2)) for r in (0, 1)]
    assert abs(tokens[0] - tokens[1]) > 20, tokens  # a mean of the ranks' token means would be wrong

    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(free_port()), __file__, str(tmp_path)]
    run = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]

    assert not distributed.is_distributed()  # this process: the single-process reference
    expected = run_stages(weights, data, lambda pair: None, tmp_path / "single")
    got = torch.load(tmp_path / "fsdp.pt", weights_only=True)

    # the sharded pair, saved by its two ranks: whole, loadable, and the single process's weights
    sharded, single = Pair.load(tmp_path / "sharded"), Pair.load(tmp_path / "single")
    assert got.pop("saved_id") == sharded.meta["id"] and expected.pop("saved_id") == single.meta["id"]
    for a, b in ((sharded.actor, single.actor), (sharded.critic, single.critic)):
        theirs = b.state_dict()
        assert all(torch.allclose(v, theirs[k], atol=WEIGHT_ATOL) for k, v in a.state_dict().items())
    assert not any(hasattr(v, "full_tensor") for v in sharded.actor.state_dict().values())

    assert got.keys() == expected.keys()
    assert got["sft"] == pytest.approx(expected["sft"], abs=ATOL, rel=RTOL)
    assert got["critic"] == pytest.approx(expected["critic"], abs=ATOL, rel=RTOL)
    assert got["critic_measured"] == pytest.approx(expected["critic_measured"], abs=1.01e-4)  # one last digit
    assert got["ppo"] == pytest.approx(expected["ppo"], abs=ATOL, rel=RTOL)
    assert expected["ppo"]["steps"] == 2 and 0 < expected["ppo"]["clip_fraction"] < 1
    tensors = [k for k in expected if isinstance(expected[k], torch.Tensor)]
    grads = [k for k in tensors if ".grad." in k]
    assert {k.split(".")[0] for k in grads} == {"sft", "critic", "ppo"} and len(grads) > 40
    assert all(expected[k].abs().max() > 0 for k in grads)
    worst = {k: float((got[k] - expected[k]).abs().max()) for k in tensors}
    wrong = [k for k in grads if not torch.allclose(got[k], expected[k], atol=ATOL, rtol=RTOL)]
    assert wrong == [], {k: worst[k] for k in wrong}
    wrong = [k for k in tensors if k not in grads and not torch.allclose(got[k], expected[k], atol=WEIGHT_ATOL)]
    assert wrong == [], {k: worst[k] for k in wrong}

    # FSDP's mixed precision against the float32 single process
    mixed = torch.load(tmp_path / "mixed.pt", weights_only=True)
    report = mixed.pop("mixed")
    assert report.pop("steps") == 2
    reference = {k: v for k, v in expected["ppo"].items() if k != "steps"}
    assert report == pytest.approx(reference, abs=MIXED_ATOL), (report, reference)
    errors = {k: float((v - expected["ppo" + k[5:]]).norm() / expected["ppo" + k[5:]].norm())
              for k, v in mixed.items() if ".grad." in k}
    assert len(errors) == len([k for k in grads if k.startswith("ppo.")])
    assert max(errors.values()) < MIXED_RTOL, sorted(errors.items(), key=lambda kv: -kv[1])[:5]
    assert max(errors.values()) > 1e-4  # really computed in bf16
    print("mixed precision: terms", {k: abs(report[k] - reference[k]) for k in report},
          "gradients' relative error: max", max(errors.values()), "median", sorted(errors.values())[len(errors) // 2])


if __name__ == "__main__":
    worker(Path(sys.argv[1]))
