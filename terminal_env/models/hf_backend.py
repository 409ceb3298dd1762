"""A backend that runs a Hugging Face ``transformers`` causal LM in this process.

Made for training loops and small local experiments: it returns exactly what was sampled
(``token_ids``), the prompt as the model saw it (``prompt_token_ids``) and the per-token
log-probs, so a trainer can re-score the same tokens without re-tokenizing text.

**Log-probs.** ``Completion.logprobs[i]`` is ``log_softmax(logits)[token_ids[i]]`` over the
model's RAW logits at temperature 1, before temperature, top-p or any other sampling warper:
the policy's own log-probability, which is what PPO/GRPO importance ratios need. It is *not*
the log-probability under the sampling distribution (which temperature and top-p change). A
forward pass over ``prompt_token_ids + token_ids`` reproduces these values up to float error.

**Tokens and text.** ``token_ids`` are all the sampled tokens, the final end-of-sequence token
included (as vLLM reports them); ``text`` is their decoding without special tokens, minus any
``<think>`` block (moved to ``reasoning``) and minus a matched stop string and what followed it
(as OpenAI servers do; the tokens that formed the stop string stay in ``token_ids``). When tools
are given and the model writes Hermes/Qwen-style ``<tool_call>{...}</tool_call>`` blocks, they
become ``tool_calls``.

Log-probs are always returned (they cost one softmax per step), whatever ``params.logprobs``
says.

**Sampling.** Only ``SamplingParams`` decide: temperature (0 means greedy), top-p, the seed, the
stop strings, ``max_new_tokens``. The model's ``generation_config`` sampling defaults (top-k,
repetition penalty, min-p...) are neutralized so results match the params; pass
``generate_kwargs`` to add your own. Prompts longer than ``max_input_tokens`` (or than the
model's context) raise :class:`ContextOverflowError`: trimming a conversation is the harness's
job, not the backend's.

torch and transformers are imported lazily; install them with ``pip install torch`` (pinned to
the build for your hardware) first, then ``pip install 'terminal-env[hf]'``.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Any

from ..errors import ConfigError
from .base import Completion, ContextOverflowError, SamplingParams, ToolCall, Usage
from .openai_backend import _split_reasoning

__all__ = ["TransformersBackend"]

_INSTALL_HINT = (
    "the transformers backend needs torch and transformers: install torch first (pinned to the "
    "build for your hardware, e.g. `pip install torch`), then `pip install 'terminal-env[hf]'`"
)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _import_hf() -> tuple[Any, Any]:
    try:
        import torch  # the optional extra [hf]
        import transformers  # the optional extra [hf]
    except ImportError as e:
        raise ConfigError(f"{_INSTALL_HINT} ({e})") from e
    return torch, transformers


class TransformersBackend:
    """Generate with a local ``transformers`` model.

    ``model`` is a directory (or anything ``from_pretrained`` loads offline) or an already
    loaded ``PreTrainedModel``; ``tokenizer`` defaults to the one saved with the model.
    ``device`` defaults to ``"cpu"`` for a path and to the model's own device for a loaded
    model; ``dtype`` is a torch dtype or its name (``"bfloat16"``, ``"auto"``...).

    Calls are serialized by a lock (one ``generate`` at a time), so threads may share one backend.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        name: str | None = None,
        dtype: Any = None,
        generate_kwargs: dict[str, Any] | None = None,
    ):
        torch, transformers = _import_hf()
        self._torch = torch
        self._transformers = transformers
        if isinstance(dtype, str) and dtype != "auto":
            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ConfigError(f"unknown torch dtype {dtype!r} (try float32, bfloat16, float16)")
            dtype = getattr(torch, dtype)

        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            try:
                kwargs = {_dtype_keyword(transformers): dtype} if dtype is not None else {}
                loaded = transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
            except (OSError, ValueError) as e:
                raise ConfigError(f"cannot load a causal LM from {path!r}: {e}") from e
            loaded.to(device or "cpu")
            model = loaded
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
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(path)
            except (OSError, ValueError) as e:
                raise ConfigError(f"cannot load the tokenizer of {path!r}: {e}") from e
        elif isinstance(tokenizer, (str, os.PathLike)):
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(os.fspath(tokenizer))
            except (OSError, ValueError) as e:
                raise ConfigError(f"cannot load the tokenizer {tokenizer!r}: {e}") from e
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"the tokenizer of {default_name!r} has no chat_template; set "
                              f"tokenizer.chat_template to a Jinja template for chat messages")

        model.eval()
        self.model = model
        self.tokenizer = tokenizer
        self.name = name or default_name
        self.generate_kwargs = dict(generate_kwargs or {})
        self._lock = threading.RLock()

        eos: list[int] = []
        for source in (getattr(model.generation_config, "eos_token_id", None),
                       getattr(tokenizer, "eos_token_id", None)):
            for t in (source if isinstance(source, (list, tuple)) else [source]):
                if t is not None and int(t) not in eos:
                    eos.append(int(t))
        self.eos_token_ids = eos
        pad = getattr(model.generation_config, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = pad if pad is not None else (eos[0] if eos else 0)
        text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") \
            else model.config
        self.context_length: int | None = getattr(text_config, "max_position_embeddings", None)

    def __repr__(self) -> str:
        return f"TransformersBackend(name={self.name!r}, device={str(self.device)!r})"

    @property
    def device(self) -> Any:
        return self.model.device

    # -- prompt ---------------------------------------------------------------------------

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   *, thinking: bool = False) -> list[int]:
        """The token ids of the chat prompt, generation prompt included."""
        msgs = [_for_template(m) for m in messages]
        with self._lock:  # a fast tokenizer is not safe to share between threads
            return self._prompt_ids(msgs, tools, thinking)

    def _prompt_ids(self, msgs: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    thinking: bool) -> list[int]:
        kwargs: dict[str, Any] = {"add_generation_prompt": True, "tokenize": False,
                                  "enable_thinking": thinking}
        if tools:
            kwargs["tools"] = tools
        try:
            text = self.tokenizer.apply_chat_template(msgs, **kwargs)
        except Exception as e:  # jinja errors (e.g. a template that wants alternating roles)
            raise ConfigError(f"the chat template of {self.name!r} rejected the messages: "
                              f"{type(e).__name__}: {e}") from e
        # the template writes any BOS itself; adding special tokens again would double it
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- the call -------------------------------------------------------------------------

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        params = params or SamplingParams()
        start = time.monotonic()
        with self._lock:  # one generate at a time; the tokenizer is not thread-safe either
            return self._complete(messages, tools, params, start)

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  params: SamplingParams, start: float) -> Completion:
        torch = self._torch
        prompt = self.prompt_ids(messages, tools, thinking=params.thinking)
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

        recorder = _make_recorder(torch)
        stops = [s for s in (params.stop or []) if s]
        gen: dict[str, Any] = {
            "max_new_tokens": max_new,
            "eos_token_id": self.eos_token_ids or None,
            "pad_token_id": self.pad_token_id,
            "repetition_penalty": 1.0,
            "no_repeat_ngram_size": 0,
            "return_dict_in_generate": True,
        }
        if params.temperature > 0:
            gen.update(do_sample=True, temperature=params.temperature,
                       top_p=params.top_p if params.top_p is not None else 1.0,
                       top_k=0, min_p=0.0, typical_p=1.0, epsilon_cutoff=0.0, eta_cutoff=0.0)
        else:
            gen.update(do_sample=False)
        gen.update(self.generate_kwargs)
        transformers = self._transformers
        gen["logits_processor"] = transformers.LogitsProcessorList([recorder])
        if stops:
            gen["stopping_criteria"] = transformers.StoppingCriteriaList(
                [_make_stop_criterion(transformers, self.tokenizer, stops, len(prompt))])

        device = self.device
        input_ids = torch.tensor([prompt], dtype=torch.long, device=device)
        attention = torch.ones_like(input_ids)
        rng_devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=rng_devices, enabled=params.seed is not None):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            with torch.inference_mode():
                out = self.model.generate(input_ids=input_ids, attention_mask=attention, **gen)
        sequence = out.sequences[0, len(prompt):].tolist()
        logprobs = recorder.finish(sequence)

        raw_text = self.tokenizer.decode(sequence, skip_special_tokens=True)
        finish = "length"
        if sequence and sequence[-1] in self.eos_token_ids:
            finish = "stop"
        for s in stops:
            i = raw_text.find(s)
            if i >= 0:
                raw_text, finish = raw_text[:i], "stop"
        text, reasoning = _split_reasoning(raw_text)
        calls: list[ToolCall] = []
        if tools and "<tool_call>" in text:
            text, calls = _parse_tool_calls(text)
            if calls:
                finish = "tool_calls"
        return Completion(
            text=text,
            reasoning=reasoning,
            tool_calls=calls,
            finish_reason=finish,
            model=self.name,
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(sequence)),
            token_ids=sequence,
            logprobs=logprobs,
            prompt_token_ids=prompt,
            latency=time.monotonic() - start,
        )


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


def _parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    calls = []
    for i, block in enumerate(_TOOL_CALL.findall(text)):
        try:
            obj = json.loads(block)
        except ValueError:
            return text, []
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return text, []
        args = obj.get("arguments", obj.get("parameters", {}))
        calls.append(ToolCall(id=f"call_{i}", name=obj["name"],
                              arguments=args if isinstance(args, str) else json.dumps(args)))
    return _TOOL_CALL.sub("", text).strip(), calls


def _make_recorder(torch: Any) -> Any:
    """A logits processor, first in the chain (before temperature and top-p), that keeps the
    raw log-softmax row of the last step and reads off the chosen token's log-prob at the next
    step (whose ``input_ids`` end with it). Memory: one vocabulary row, not one per step."""
    import transformers  # the optional extra [hf]

    class RawLogprobRecorder(transformers.LogitsProcessor):
        def __init__(self) -> None:
            self.values: list[float] = []
            self._row = None

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if self._row is not None:
                self.values.append(float(self._row[int(input_ids[0, -1])]))
            self._row = torch.log_softmax(scores[0].float(), dim=-1)
            return scores

        def finish(self, sequence: list[int]) -> list[float]:
            if self._row is not None and len(self.values) < len(sequence):
                self.values.append(float(self._row[int(sequence[-1])]))
                self._row = None
            return self.values[: len(sequence)]

    return RawLogprobRecorder()


def _make_stop_criterion(transformers: Any, tokenizer: Any, stops: list[str], prompt_len: int) -> Any:
    """Stop once the generated text contains a stop string (checked on a tail of tokens)."""
    import torch  # the optional extra [hf]

    window = 2 * max(len(s) for s in stops) + 8

    class StopOnStrings(transformers.StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            tail = input_ids[0, max(prompt_len, input_ids.shape[1] - window):].tolist()
            text = tokenizer.decode(tail, skip_special_tokens=True)
            hit = any(s in text for s in stops)
            return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)

    return StopOnStrings()
