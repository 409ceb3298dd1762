"""What the trainer reads, and how it becomes tensors.

* **Episodes** for the critic and PPO come from token-exact trajectories
  (:class:`terminal_env.trajectory.Trajectory` with ``tokens``, as a token-level backend plays
  them): each segment's token ids, its action mask, and the log-probs the tokens were sampled with
  (``sampling_logprobs``: the distribution at the sampling temperature, which is the policy PPO's
  ratio is taken against; the trainer scores new log-probs at the same temperature). Nothing is
  re-tokenised. Infrastructure errors are dropped, never scored 0. An episode in several
  segments (its prompt could not be extended) is refused unless ``multi_segment="accept"``
  (its segments then train as separate sequences; the advantages still run over all its action
  tokens in order) or ``"drop"``.
  An episode sampled by a server (any backend but the local ``TransformersBackend``, e.g. vLLM
  through the OpenAI backend) is marked ``served``: its prompt ids are the trainer's own (the
  backend renders them with the trainer's tokenizer and the server echoes them, checked), its
  sampled ids the server's, and its log-probs the server's kernels' (only where they are the
  sampling distribution's: at temperature 1, see the OpenAI backend); PPO recomputes the old
  log-probs of served episodes with the trainer's weights. Episodes sampled with top-p below 1 or
  top-k are refused: the trainer's ratio would be against a distribution they were not drawn from.
* **Supervised samples** (SFT) come from chat records (``Trajectory.to_chat()``, the JSONL the
  runner exports and the self-rewrite stage writes) or from token-exact trajectories: token ids
  and a loss mask on the assistant's tokens only.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch

from ..errors import ConfigError
from ..models.base import Completion
from ..models.tokens import TokenRecorder, closing_text
from ..rewards import get_reward
from ..trajectory import Trajectory
from ..verify.result import VerifierResult
from .losses import gae, last_action_reward
from .weight_sync import versions_of

#: backends whose sampling log-probs are the trainer's own computation (same code, same weights)
LOCAL_SAMPLERS = ("TransformersBackend",)


@dataclass
class Sequence:
    """Token ids with a mask (1: trained on) and, for sampled episodes, the old log-probs (the
    sampler's, at the sampling temperature; empty where the sampler could not give them)."""

    token_ids: list[int]
    mask: list[int]
    old_logprobs: list[float] = field(default_factory=list)


@dataclass
class Episode:
    """One verified episode: its sequences (one per segment), its reward, and how it was sampled."""

    id: str
    task: str
    sequences: list[Sequence]
    reward: float
    temperature: float
    weights: list[str | None] = field(default_factory=list)
    #: sampled by a server (vLLM...), not by the trainer's own code: PPO recomputes its old log-probs
    served: bool = False


def load_trajectories(sources: Iterable[str | os.PathLike[str]]) -> list[Trajectory]:
    """Trajectories from files and run directories (every ``trajectory.json`` under them; for a
    self-rewrite run, the episodes it collected: the policy's own, reusable as critic data)."""
    found: list[Path] = []
    for source in sources:
        path = Path(source)
        if path.is_dir() and (path / "rsr.json").is_file():  # a self-rewrite run: its collected episodes
            files = sorted((path / "collect").glob("*/*.json"))
            if not files:
                raise ConfigError(f"{path}: a self-rewrite run with no collected episodes yet (run 'rsr collect')")
            found.extend(files)
        elif path.is_dir():
            files = sorted(path.rglob("trajectory.json"))
            if not files:
                raise ConfigError(f"{path}: no trajectory.json under it (pass a run directory or trajectory files)")
            found.extend(files)
        else:
            found.append(path)
    return [Trajectory.load(f) for f in found]


def episodes(trajectories: Iterable[Trajectory], *, reward: str = "strict_success_first",
             multi_segment: str = "refuse", weights: str | None = None) -> tuple[list[Episode], Counter]:
    """The trainable episodes of ``trajectories`` under ``reward``, and what was left out and why
    (``masked``: infrastructure errors; ``no_turns``: the model sampled nothing, e.g. its first
    prompt did not fit; ``multi_segment``: dropped with ``multi_segment="drop"``).

    ``weights``: the version of the weights being trained; a turn sampled by other weights is
    refused (PPO's old log-probs must be the current policy's). A pair's actor id also accepts
    ``<id>@0``, its weights pushed unchanged into a server (:func:`~terminal_env.train.weight_sync.pair_version`)."""
    if multi_segment not in ("refuse", "accept", "drop"):
        raise ConfigError(f"multi_segment must be refuse, accept or drop, not {multi_segment!r}")
    score = get_reward(reward)
    out: list[Episode] = []
    skipped: Counter = Counter()
    for traj in trajectories:
        where = f"trajectory {traj.id} (task {traj.task.name})"
        if traj.masked:
            skipped["masked"] += 1
            continue
        if traj.verification is None:
            raise ConfigError(f"{where} was not verified: only verified episodes train")
        if traj.tokens is None:
            raise ConfigError(f"{where} has no token record: play it with a token-level backend "
                              f"(the local transformers backend, or the OpenAI backend with token_ids=True)")
        if not traj.tokens.segments:  # the model sampled nothing (e.g. its first prompt overflowed)
            skipped["no_turns"] += 1
            continue
        if traj.tokens.num_segments > 1:
            if multi_segment == "drop":
                skipped["multi_segment"] += 1
                continue
            if multi_segment == "refuse":
                raise ConfigError(f"{where} has {traj.tokens.num_segments} token segments (its prompt could "
                                  f"not be extended: {[s.reason for s in traj.tokens.segments[1:]]}); "
                                  f"pass multi_segment='accept' or 'drop'")
        temperature = float(traj.model.params.get("temperature") or 0.0)
        if temperature <= 0:
            raise ConfigError(f"{where} was decoded greedily: PPO needs sampled turns (temperature > 0)")
        refuse_truncated(traj.model.params, where)
        served = traj.model.backend not in LOCAL_SAMPLERS
        sequences = []
        versions: list[str | None] = []
        for segment in traj.tokens.segments:
            if segment.sampling_logprobs is None and not served:
                raise ConfigError(f"{where} has turns without sampling log-probs (greedy, or a backend "
                                  f"that could not say): PPO needs them")
            sequences.append(Sequence(list(segment.token_ids), list(segment.action_mask),
                                      list(segment.sampling_logprobs or [])))  # served at T != 1: recomputed
            versions.extend(span.weights for span in segment.turns)
        accepted = {weights} if weights is None or "@" in weights else versions_of(weights)
        if weights is not None and any(v not in accepted for v in versions):
            other = next(v for v in versions if v not in accepted)
            raise ConfigError(f"{where} was sampled by the weights {other!r}, not {weights!r}: the old "
                              f"log-probs must come from the weights being trained")
        out.append(Episode(traj.id, traj.task.name, sequences, score(VerifierResult.model_validate(traj.verification)),
                           temperature, versions, served))
    return out, skipped


def refuse_truncated(params: dict[str, Any], where: str) -> None:
    """Refuse sampling settings that truncate the distribution (top-p below 1, top-k, min-p): PPO's
    ratio is taken against ``softmax(logits / T)``, which such tokens were not drawn from."""
    found = []
    if params.get("top_p") is not None and params["top_p"] < 1:
        found.append(f"top_p={params['top_p']}")
    if params.get("top_k") not in (None, 0, -1):  # 0 and -1 mean "off" to vLLM
        found.append(f"top_k={params['top_k']}")
    if params.get("min_p"):
        found.append(f"min_p={params['min_p']}")
    if found:
        raise ConfigError(f"{where} sampled with {', '.join(found)}: PPO's ratio is against the untruncated "
                          f"policy at the sampling temperature; play training rollouts with "
                          f"SamplingParams(top_p=None) (or 1.0) and no top_k/min_p")


def episode_targets(episode: Episode, values: list[torch.Tensor], gamma: float,
                    lam: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Advantages and returns of each sequence of ``episode`` (``values``: each sequence's
    :func:`~terminal_env.train.models.action_values`, unpadded): GAE over all the episode's action
    tokens in order, its reward on the last one."""
    mask = torch.cat([torch.tensor(s.mask, dtype=torch.float32) for s in episode.sequences])[None]
    v = torch.cat([x.detach().float().cpu() for x in values])[None]
    rewards = last_action_reward(mask, torch.tensor([episode.reward]))
    advantages, returns = gae(rewards, v, mask, gamma, lam)
    sizes = [len(s.token_ids) for s in episode.sequences]
    return list(advantages[0].split(sizes)), list(returns[0].split(sizes))


def sft_samples(records: Iterable[dict[str, Any] | Trajectory], chat_tokenizer: Any) -> list[Sequence]:
    """Supervised samples: chat records (``{"messages": [...], "tools": [...]}``) rendered by the
    chat template, the loss on each assistant message's tokens (its end-of-turn tokens included),
    or token-exact trajectories, the loss on their sampled tokens.

    ``chat_tokenizer`` is a :class:`terminal_env.protocols.ChatTokenizer` (e.g. the local
    backend's ``HFChatTokenizer``)."""
    out: list[Sequence] = []
    for i, record in enumerate(records):
        if isinstance(record, Trajectory):
            if record.tokens is None:
                record = record.to_chat()
            else:
                out.extend(Sequence(list(s.token_ids), list(s.action_mask)) for s in record.tokens.segments)
                continue
        out.extend(_chat_samples(record, chat_tokenizer, f"record {i}"))
    return out


def read_chat_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Chat records, one JSON object per line (blank lines skipped)."""
    records = []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ConfigError(f"{path}:{n}: not JSON ({e})") from None
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise ConfigError(f"{path}:{n}: a chat record needs a 'messages' list")
        records.append(record)
    return records


def stand_in_note(records: Iterable[dict[str, Any]]) -> str | None:
    """What ``train sft`` says of self-rewrite records that no model wrote in some role (a
    typed-oracle collector distils the tasks' reference solutions, not the policy's own runs)."""
    rows = [r for r in records if isinstance(r, dict) and r.get("kind") == "rsr-rendered"]
    made = Counter(s for r in rows for s in r.get("stand_ins") or [])
    if not made:
        return None
    n = sum(bool(r.get("stand_ins")) for r in rows)
    return (f"{n} of {len(rows)} self-rewrite records were made with model-free stand-ins ("
            + "; ".join(f"{s}: {c}" for s, c in sorted(made.items()))
            + "): not the policy's own self-rewrite data")


def _chat_samples(record: dict[str, Any], ct: Any, where: str) -> list[Sequence]:
    """Replay the conversation through a :class:`~terminal_env.models.tokens.TokenRecorder` as if
    the model had written each assistant message in its canonical tokens, its end-of-turn token
    after: the prompts are built by extension and tokenised as at inference, and the loss mask
    covers exactly the assistant's tokens. A template that rewrites earlier messages starts a new
    sequence, as it does in a rollout."""
    messages = record.get("messages") or []
    recorder = TokenRecorder(ct, tools=record.get("tools"))
    for n, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if message.get("tool_calls"):
            raise ConfigError(f"{where}: message {n} is a tool call, whose tokens depend on the model's own "
                              f"format: train on the token-exact trajectories of such episodes instead")
        recorder.prompt(messages[:n])
        answer = ct.encode(str(message.get("content") or "")) + _end_of_turn(ct, messages[:n], record.get("tools"))
        recorder.record(n, messages[:n], Completion(text=str(message.get("content") or ""), token_ids=answer,
                                                     logprobs=[0.0] * len(answer)))
    out = [Sequence(list(s.token_ids), list(s.action_mask)) for s in recorder.tokens.segments]
    if not out:
        raise ConfigError(f"{where}: no assistant message to train on")
    return out


def _end_of_turn(ct: Any, history: list[dict[str, Any]], tools: Any) -> list[int]:
    """The end-of-turn token a model samples after an assistant message: the end-of-sequence
    token the template's closing text starts with (else the first one)."""
    close = closing_text(ct, history, tools)
    for eos in ct.eos_token_ids:
        if close.startswith(ct.decode([eos])):
            return [eos]
    return list(ct.eos_token_ids[:1])


def pad_id(tokenizer: Any) -> int:
    """The id that pads a batch (never trained on: the mask is 0 there)."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    return 0


def pad(sequences: list[Sequence], pad_id: int, device: Any = "cpu") -> dict[str, torch.Tensor]:
    """Right-padded tensors of a batch: ``input_ids``, ``attention_mask``, ``mask`` (trained
    positions) and ``old_logprobs``."""
    width = max(len(s.token_ids) for s in sequences)

    def rows(get, fill, dtype):
        return torch.tensor([get(s) + [fill] * (width - len(s.token_ids)) for s in sequences], dtype=dtype,
                            device=device)

    return {
        "input_ids": rows(lambda s: s.token_ids, pad_id, torch.long),
        "attention_mask": rows(lambda s: [1] * len(s.token_ids), 0, torch.long),
        "mask": rows(lambda s: s.mask, 0, torch.float32),
        "old_logprobs": rows(lambda s: s.old_logprobs or [0.0] * len(s.token_ids), 0.0, torch.float32),
    }


def pad_rows(rows: list[torch.Tensor], width: int, device: Any = "cpu") -> torch.Tensor:
    """Per-token values of several sequences (returns, advantages...), right-padded with 0 to
    ``width`` and stacked as float32, aligned with :func:`pad`'s tensors."""
    return torch.stack([torch.nn.functional.pad(r.float(), (0, width - len(r))) for r in rows]).to(device)
