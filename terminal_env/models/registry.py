"""Model specs as the CLI writes them, ``KIND:REST``, turned into backends.

>>> {"hf", "openai"} <= set(BACKEND_KINDS)
True
>>> make_backend("nope:x")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
terminal_env.errors.ConfigError: unknown model kind 'nope' in 'nope:x'; known kinds: hf, ...openai...

Kinds:

- ``openai:MODEL``: an OpenAI-compatible server; the base URL is the ``base_url`` option, else
  ``$OPENAI_BASE_URL``, else OpenAI's own; other options go to :class:`OpenAIBackend`;
- ``hf:PATH_OR_DIR``: a local ``transformers`` model (:class:`TransformersBackend`);
- ``oracle``, ``nop``, ``human``: the task's reference solution, an agent that submits at once,
  you at the keyboard (:mod:`terminal_env.models.simple`);
- ``typed-oracle``: the reference solution typed command by command as the agent's own, in any
  harness (:mod:`terminal_env.models.typed`; the self-rewrite pipeline's collecting policy);
- ``replay:TRAJECTORY.json``: the completions of a saved trajectory, in its harness;
- ``scripted:FILE.json``: a JSON list of replies (strings, or objects with ``tool_calls``).

More kinds are added with :func:`register_backend`: a factory ``(rest, **options) -> backend``.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..protocols import ModelBackend
from . import simple
from .simple import ReplayBackend, ScriptedBackend
from .typed import TypedOracleBackend

__all__ = ["BACKEND_KINDS", "check_options", "make_backend", "parse_spec", "register_backend"]

Factory = Callable[..., ModelBackend]

#: kind -> factory(rest, **options)
BACKEND_KINDS: dict[str, Factory] = {}
#: kinds written without a colon (``oracle``, ``nop``, ``human``, ``typed-oracle``)
BARE_KINDS: set[str] = set()


def register_backend(kind: str, factory: Factory, *, replace: bool = False) -> None:
    """Make ``KIND:...`` specs build backends with ``factory(rest, **options)``."""
    if not kind or not kind.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"a backend kind is a short word, not {kind!r}")
    kind = kind.lower()
    if kind in BACKEND_KINDS and not replace and BACKEND_KINDS[kind] is not factory:
        raise ConfigError(f"the backend kind {kind!r} is already registered")
    BACKEND_KINDS[kind] = factory


def parse_spec(spec: str) -> tuple[str, str]:
    """``"openai:qwen3-8b"`` -> ``("openai", "qwen3-8b")``. Only the first colon splits, so
    the rest may hold colons (``hf:C:/models/x``, ``openai:llama3:8b``).

    >>> parse_spec("openai:llama3.1:8b")
    ('openai', 'llama3.1:8b')
    """
    kind, sep, rest = (spec or "").strip().partition(":")
    if not sep and kind.lower() in BARE_KINDS:
        return kind.lower(), ""
    if not sep or not kind:
        raise ConfigError(f"a model spec is KIND:NAME (e.g. openai:MODEL, hf:DIR), not {spec!r}; "
                          f"known kinds: {_known()}")
    return kind.lower(), rest


def make_backend(spec: str, **options: Any) -> ModelBackend:
    """Build the backend a spec names; ``options`` go to its factory."""
    kind, rest = parse_spec(spec)
    factory = BACKEND_KINDS.get(kind)
    if factory is None:
        raise ConfigError(f"unknown model kind {kind!r} in {spec!r}; known kinds: {_known()}")
    return factory(rest, **options)


def check_options(kind: str, target: Callable[..., Any], options: dict[str, Any]) -> None:
    """Raise a :class:`ConfigError` listing what ``target`` (a class or function) accepts when
    ``options`` has a keyword it does not take. For factories to call before building."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise ConfigError(f"the {kind!r} model kind takes no option {', '.join(unknown)}; "
                          f"it takes: {', '.join(sorted(names - {'model'})) or 'none'}")


def _known() -> str:
    return ", ".join(sorted(BACKEND_KINDS)) or "(none)"


def _openai(rest: str, **options: Any) -> ModelBackend:
    from .openai_backend import OpenAIBackend  # here: it needs the optional extra [openai]

    if not rest:
        raise ConfigError("openai:MODEL needs the model name the server serves, "
                          "e.g. openai:Qwen/Qwen3-8B")
    check_options("openai", OpenAIBackend, options)
    options["base_url"] = options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or None
    return OpenAIBackend(rest, **options)


def _hf(rest: str, **options: Any) -> ModelBackend:
    from .hf_backend import TransformersBackend  # here: it needs the optional extra [hf]

    if not rest:
        raise ConfigError("hf:PATH needs a model directory, e.g. hf:./checkpoints/step-100")
    check_options("hf", TransformersBackend, options)
    return TransformersBackend(rest, **options)


register_backend("openai", _openai)
register_backend("hf", _hf)


def _no_options(kind: str, rest: str, options: dict[str, Any]) -> None:
    if rest:
        raise ConfigError(f"the {kind!r} model kind takes nothing after it, got {kind}:{rest}")
    if options:
        raise ConfigError(f"the {kind!r} model kind takes no options, got {', '.join(sorted(options))}")


def _simple(kind: str) -> Factory:
    def factory(rest: str, **options: Any) -> ModelBackend:
        _no_options(kind, rest, options)
        cls = {"oracle": simple.OracleBackend, "nop": simple.NopBackend, "human": simple.HumanBackend,
               "typed-oracle": TypedOracleBackend}[kind]
        return cls()

    return factory


def _replay(rest: str, **options: Any) -> ModelBackend:
    if not rest:
        raise ConfigError("replay:FILE needs a saved trajectory.json, e.g. replay:runs/x/trials/t/1/trajectory.json")
    _no_options("replay", "", options)
    return ReplayBackend(rest)


def _scripted(rest: str, **options: Any) -> ModelBackend:
    _no_options("scripted", "", options)
    path = Path(rest)
    try:
        replies = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"scripted:{rest}: no such file") from None
    except ValueError as exc:
        raise ConfigError(f"scripted:{rest}: not valid JSON ({exc})") from None
    if not isinstance(replies, list) or not all(isinstance(r, (str, dict)) for r in replies):
        raise ConfigError(f"scripted:{rest}: expected a JSON list of replies (strings or objects)")
    return ScriptedBackend(replies, name=f"scripted:{path.name}")


for _kind in ("oracle", "nop", "human", "typed-oracle"):
    register_backend(_kind, _simple(_kind))
    BARE_KINDS.add(_kind)
register_backend("replay", _replay)
register_backend("scripted", _scripted)
