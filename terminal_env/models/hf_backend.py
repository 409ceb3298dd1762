"""A backend that runs a Hugging Face ``transformers`` causal LM in this process.

Made for training loops and small local experiments. It is a token-level backend
(:class:`terminal_env.protocols.TokenBackend`): ``complete_tokens(prompt_ids)`` samples from a
prompt given as token ids, and ``complete(messages)`` is the same after the chat template. Each
completion carries exactly what was sampled (``token_ids``, the final end-of-turn token
included, as vLLM reports them), the prompt as the model saw it (``prompt_token_ids``), and two
log-probs per sampled token:

* ``logprobs``: ``log_softmax(logits)[token]`` over the model's raw logits, temperature 1, no
  top-p: the model's own probability of the token;
* ``sampling_logprobs``: ``log_softmax(logits / T)[token]`` at the sampling temperature T,
  before top-p: the distribution the token was drawn from (None for greedy decoding). **The
  trainer uses these** for importance ratios, re-scoring its own policy the same way (logits
  divided by the same T), so that old and new log-probs are of the same distribution.

A forward pass over ``prompt_token_ids + token_ids`` reproduces both up to float error (tests:
``atol=1e-4`` for one episode at a time).

**Batching.** Requests from concurrent episodes are served by one generation thread that decodes
up to ``max_batch`` of them together, one forward pass per step for all; a request joins the
running batch at its next step, and a row that finishes leaves at once, so its episode goes on
while the others decode (continuous batching). Each prompt is prefilled from the longest
remembered prefix of it (the last turn of the same episode), so a token-exact episode only runs
its new tokens (:mod:`terminal_env.models.hf_sampling`). ``max_batch=1`` is one request at a
time. Each row samples with a generator of its own seeded from ``SamplingParams.seed`` (random
when None), so a seeded request gives the same tokens whatever else is in its batch, up to float
differences of padded batched arithmetic. Running rows that start with the same 64 tokens or
more (one system prompt, one task) keep those keys and values once and read them once per step;
for that, a model attending with SDPA on transformers 5.x gets the attention implementation
``terminal_env_sdpa_shared_prefix`` (SDPA whenever no shared prefix is passed; the setting is
not saved with the model).

**Weights.** ``load_weights(checkpoint_dir_or_state_dict, version=...)`` swaps the weights
between requests without rebuilding the backend (it waits for the running requests);
``weights_version`` names the weights now loaded, and every completion records it (``weights``);
a checkpoint written by the trainer (:mod:`terminal_env.train.models`) is named by its id.

**Text.** ``text`` is the decoding of the sampled tokens without special tokens, minus any
``<think>`` block (moved to ``reasoning``) and minus a matched stop string and what followed it
(as OpenAI servers do; the tokens that formed the stop string stay in ``token_ids``). When tools
are given and the model writes Hermes/Qwen-style ``<tool_call>{...}</tool_call>`` blocks, they
become ``tool_calls``.

**Sampling.** Only ``SamplingParams`` decide: temperature (0 means greedy), top-p, the seed, the
stop strings, ``max_new_tokens``; the model's ``generation_config`` sampling defaults are not
used. Prompts longer than ``max_input_tokens`` (or than the model's context) raise
:class:`ContextOverflowError`: trimming a conversation is the agent loop's job, not the backend's.

torch and transformers are imported lazily; install them with ``pip install torch`` (pinned to
the build for your hardware) first, then ``pip install 'terminal-env[hf]'``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import threading
import time
from typing import Any

from ..errors import ConfigError
from .base import (
    Completion,
    ContextOverflowError,
    SamplingParams,
    ToolCall,
    Usage,
    parse_tool_call_blocks,
    split_reasoning,
)
from .hf_sampling import BatchSampler, Sampled, SampleRequest

__all__ = ["HFChatTokenizer", "TransformersBackend"]

_INSTALL_HINT = (
    "the transformers backend needs torch and transformers: install torch first (pinned to the "
    "build for your hardware, e.g. `pip install torch`), then `pip install 'terminal-env[hf]'`"
)


def _import_hf() -> tuple[Any, Any]:
    try:
        import torch  # the optional extra [hf]
        import transformers  # the optional extra [hf]
    except ImportError as e:
        raise ConfigError(f"{_INSTALL_HINT} ({e})") from e
    return torch, transformers


class HFChatTokenizer:
    """A Hugging Face tokenizer as a :class:`terminal_env.protocols.ChatTokenizer`: the chat
    template rendered to text, text to ids without added special tokens (the template writes
    them), ids back to text with the special tokens kept. Thread-safe (a fast tokenizer is not)."""

    def __init__(self, tokenizer: Any, name: str = "model", eos_token_ids: list[int] | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"the tokenizer of {name!r} has no chat_template; set "
                              f"tokenizer.chat_template to a Jinja template for chat messages")
        self.tokenizer = tokenizer
        self.name = name
        eos = list(eos_token_ids or [])
        if getattr(tokenizer, "eos_token_id", None) is not None and int(tokenizer.eos_token_id) not in eos:
            eos.append(int(tokenizer.eos_token_id))
        self.eos_token_ids = eos
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "HFChatTokenizer":
        """The tokenizer saved in a model directory (e.g. of the model a vLLM server serves)."""
        try:
            import transformers  # the optional extra [hf]; torch is not needed for a tokenizer
        except ImportError as e:
            raise ConfigError(f"{_INSTALL_HINT} ({e})") from e
        try:
            tok = transformers.AutoTokenizer.from_pretrained(os.fspath(path))
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot load the tokenizer {os.fspath(path)!r}: {e}") from e
        return cls(tok, name=os.path.basename(os.fspath(path).rstrip("/")))

    def chat_text(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                  add_generation_prompt: bool, thinking: bool = False) -> str:
        kwargs: dict[str, Any] = {"add_generation_prompt": add_generation_prompt, "tokenize": False,
                                  "enable_thinking": thinking}
        if tools:
            kwargs["tools"] = tools
        msgs = [_for_template(m) for m in messages]
        try:
            with self._lock:
                return self.tokenizer.apply_chat_template(msgs, **kwargs)
        except Exception as e:  # jinja errors (e.g. a template that wants alternating roles)
            raise ConfigError(f"the chat template of {self.name!r} rejected the messages: "
                              f"{type(e).__name__}: {e}") from e

    def encode(self, text: str) -> list[int]:
        with self._lock:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        with self._lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def text(self, ids: list[int]) -> str:
        """The decoding without special tokens (what a completion's text is made of)."""
        with self._lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=True)


class TransformersBackend:
    """Generate with a local ``transformers`` model.

    ``model`` is a directory (or anything ``from_pretrained`` loads offline) or an already
    loaded ``PreTrainedModel``; ``tokenizer`` defaults to the one saved with the model.
    ``device`` defaults to ``"cpu"`` for a path and to the model's own device for a loaded
    model; ``dtype`` is a torch dtype or its name (``"bfloat16"``, ``"auto"``...). ``max_batch``
    bounds how many concurrent requests share a forward pass; ``prefix_cache_tokens`` how many
    tokens' keys and values are kept for the next turns of their episodes (0: none); see
    :mod:`terminal_env.models.hf_sampling`.

    Threads may share one backend: their requests meet in the generation thread.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        name: str | None = None,
        dtype: Any = None,
        max_batch: int = 8,
        prefix_cache_tokens: int = 32768,
        weights_version: str | None = None,
    ):
        torch, transformers = _import_hf()
        self._torch = torch
        if isinstance(dtype, str) and dtype != "auto":
            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ConfigError(f"unknown torch dtype {dtype!r} (try float32, bfloat16, float16)")
            dtype = getattr(torch, dtype)

        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            model = _load_model(transformers, path, dtype)
            model.to(device or "cpu")
            default_name = os.path.basename(path.rstrip("/")) or path
        else:
            if not hasattr(model, "generate"):
                raise ConfigError(f"model must be a path or a transformers PreTrainedModel, not "
                                  f"{type(model).__name__}")
            if device is not None:
                model.to(device)
            if dtype is not None and dtype != "auto":
                model.to(dtype)
            path = getattr(model, "name_or_path", None) or ""
            default_name = os.path.basename(path.rstrip("/")) if path else type(model).__name__

        if tokenizer is None:
            if not path:
                raise ConfigError("pass the tokenizer with an in-memory model (it has no path to "
                                  "load one from)")
            tokenizer = path
        if isinstance(tokenizer, (str, os.PathLike)):
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(os.fspath(tokenizer))
            except (OSError, ValueError) as e:
                raise ConfigError(f"cannot load the tokenizer of {os.fspath(tokenizer)!r}: {e}") from e

        model.eval()
        self.model = model
        self.tokenizer = tokenizer
        self.name = name or default_name
        eos: list[int] = []
        for source in (getattr(model.generation_config, "eos_token_id", None),
                       getattr(tokenizer, "eos_token_id", None)):
            for t in (source if isinstance(source, (list, tuple)) else [source]):
                if t is not None and int(t) not in eos:
                    eos.append(int(t))
        self.eos_token_ids = eos
        self.chat_tokenizer = HFChatTokenizer(tokenizer, self.name, eos)
        text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") \
            else model.config
        self.context_length: int | None = getattr(text_config, "max_position_embeddings", None)
        #: the weights answering now (see load_weights); recorded on every completion
        self.weights_version: str | None = weights_version or (_checkpoint_id(path) if path else None) or self.name
        self._swaps = itertools.count(1)
        self._sampler = BatchSampler(torch, model, eos_token_ids=eos,
                                     text=self.chat_tokenizer.text, max_batch=max_batch, name=self.name,
                                     prefix_cache_tokens=prefix_cache_tokens)
        self._sampler.weights_version = self.weights_version

    def __repr__(self) -> str:
        return f"TransformersBackend(name={self.name!r}, device={str(self.device)!r})"

    @property
    def device(self) -> Any:
        return self.model.device

    def close(self) -> None:
        """Stop the generation thread (requests still waiting fail)."""
        self._sampler.close()

    def stats(self) -> dict[str, float]:
        """Counters of the generation thread: requests, decoding steps and the rows they served
        (``row_steps / steps`` is the mean batch), prompt tokens prefilled, prompt tokens whose
        keys and values were reused from the prefix cache, and the seconds spent admitting
        requests (their prefill included) and decoding."""
        return dict(self._sampler.stats)

    # -- prompt ---------------------------------------------------------------------------

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   *, thinking: bool = False) -> list[int]:
        """The token ids of the chat prompt, generation prompt included."""
        ct = self.chat_tokenizer
        return ct.encode(ct.chat_text(messages, tools, add_generation_prompt=True, thinking=thinking))

    # -- weights --------------------------------------------------------------------------

    def load_weights(self, source: Any, *, version: str | None = None) -> str:
        """Swap in new weights: a checkpoint directory (Hugging Face format, as the trainer
        saves it) or an in-memory state dict of the same architecture. Waits for the running
        requests to finish (none is admitted meanwhile); the next requests use the new weights. Returns the new ``weights_version``
        (``version``, else the id of a checkpoint the trainer wrote, else the directory's name,
        else ``state-N``)."""
        torch = self._torch
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            _, transformers = _import_hf()
            state = _load_model(transformers, path, None).state_dict()
            label = version or _checkpoint_id(path) or os.path.basename(path.rstrip("/")) or path
        elif isinstance(source, dict):
            state, label = source, version or f"state-{next(self._swaps)}"
        else:
            raise ConfigError(f"load_weights takes a checkpoint directory or a state dict, not "
                              f"{type(source).__name__}")
        with self._sampler.exclusive():
            try:
                with torch.no_grad():
                    self.model.load_state_dict(state, strict=True)
            except RuntimeError as e:
                raise ConfigError(f"the weights do not fit {self.name!r}: {str(e)[:500]}") from e
            self._sampler.forget()  # keys and values of the old weights
            self.weights_version = self._sampler.weights_version = label
        return label

    # -- the calls ------------------------------------------------------------------------

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        params = params or SamplingParams()
        return self.complete_tokens(self.prompt_ids(messages, tools, thinking=params.thinking),
                                    tools=tools, params=params)

    def complete_tokens(
        self,
        prompt_ids: list[int],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        params = params or SamplingParams()
        start = time.monotonic()
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise ConfigError("the prompt has no tokens")
        if len(prompt) > params.max_input_tokens:
            raise ContextOverflowError(
                f"the prompt has {len(prompt)} tokens, over max_input_tokens="
                f"{params.max_input_tokens} for {self.name!r}")
        max_new = params.max_new_tokens
        if self.context_length:
            room = self.context_length - len(prompt)
            if room < 1:
                raise ContextOverflowError(
                    f"the prompt has {len(prompt)} tokens, and {self.name!r} has a context of "
                    f"{self.context_length}")
            max_new = min(max_new, room)
        seed = params.seed if params.seed is not None else random.SystemRandom().getrandbits(63)
        request = SampleRequest(prompt=prompt, temperature=params.temperature,
                           top_p=params.top_p if params.top_p is not None else 1.0, seed=seed,
                           max_new=max_new, stops=[s for s in (params.stop or []) if s])
        sampled = self._sampler.sample(request)
        return self._completion(prompt, sampled, tools, start)

    def _completion(self, prompt: list[int], sampled: Sampled, tools: list[dict[str, Any]] | None,
                    start: float) -> Completion:
        sequence = sampled.token_ids
        raw_text = self.chat_tokenizer.text(sequence)
        finish = sampled.finish
        for s in sampled.stops:
            i = raw_text.find(s)
            if i >= 0:
                raw_text, finish = raw_text[:i], "stop"
        text, reasoning = split_reasoning(raw_text)
        calls: list[ToolCall] = []
        if tools and "<tool_call>" in text:
            text, calls = parse_tool_call_blocks(text)
            if calls:
                finish = "tool_calls"
        return Completion(
            text=text, reasoning=reasoning, tool_calls=calls, finish_reason=finish, model=self.name,
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(sequence)),
            token_ids=sequence, logprobs=sampled.logprobs, sampling_logprobs=sampled.sampling_logprobs,
            prompt_token_ids=prompt, weights=sampled.weights, latency=time.monotonic() - start,
        )

def _checkpoint_id(path: str) -> str | None:
    """The id of the weights in a checkpoint the trainer wrote (``terminal_env.train.models``:
    ``terminal_env_checkpoint.json``), so that every turn names the exact weights that sampled it."""
    try:
        with open(os.path.join(path, "terminal_env_checkpoint.json")) as f:
            found = json.load(f).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return str(found) if found else None


def _load_model(transformers: Any, path: str, dtype: Any) -> Any:
    try:
        kwargs = {_dtype_keyword(transformers): dtype} if dtype is not None else {}
        return transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot load a causal LM from {path!r}: {e}") from e


def _dtype_keyword(transformers: Any) -> str:
    """``from_pretrained`` takes ``dtype`` since transformers 4.56, ``torch_dtype`` before."""
    version = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    return "dtype" if version >= (4, 56) else "torch_dtype"


def _for_template(message: dict[str, Any]) -> dict[str, Any]:
    """Chat templates expect tool-call arguments as a mapping; the OpenAI format has JSON text."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        fn = dict(call.get("function") or {})
        if isinstance(fn.get("arguments"), str):
            try:
                fn["arguments"] = json.loads(fn["arguments"] or "{}")
            except ValueError:
                pass
        fixed.append({**call, "function": fn})
    return {**message, "tool_calls": fixed}
