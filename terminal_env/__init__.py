"""terminal-env: sandboxed, verifiable terminal tasks for agents, RL and benchmarks."""

__version__ = "0.1.0"  # first: modules below may read it while the package initialises

from importlib.util import find_spec as _find_spec

from .actions import Command, Keys, Submit, parse_action
from .env import EnvConfig, TerminalEnv
from .errors import (
    ConfigError,
    EngineUnavailableError,
    ImageNotFoundError,
    InfraError,
    SandboxError,
    SandboxGoneError,
    SessionError,
    TerminalEnvError,
)
from .prepare import PreparedTask, prepare_task
from .registration import ENV_ID, register_envs
from .sandbox import Sandbox, SandboxConfig
from .session import SessionConfig, ShellSession, StepOutput
from .task import TaskSpec

register_envs()

#: what the ``verifiers`` package's evaluation command (``vf-eval terminal-env``) finds here: it
#: loads a taskset and its environment from a top-level module's ``__all__``. Listed only where
#: that package (v1) is installed, and imported only when asked for (see :func:`__getattr__`).
_VERIFIERS = ("TerminalTaskset", "TerminalVerifiersEnv")


def _has_verifiers() -> bool:
    try:
        return _find_spec("verifiers.v1") is not None
    except (ImportError, ValueError):
        return False

__all__ = [
    "Command", "Keys", "Submit", "parse_action", "EnvConfig", "TerminalEnv", "ConfigError",
    "EngineUnavailableError", "ImageNotFoundError", "InfraError", "SandboxError",
    "SandboxGoneError", "SessionError", "TerminalEnvError", "ENV_ID", "register_envs", "Sandbox",
    "SandboxConfig", "SessionConfig", "ShellSession", "StepOutput", "TaskSpec", "PreparedTask",
    "prepare_task",
]
if _has_verifiers():
    __all__ += list(_VERIFIERS)


def __getattr__(name: str):
    if name in _VERIFIERS:
        from .integrations import verifiers as _vf  # the optional extra: the verifiers package, in its own venv

        value = getattr(_vf, name, None)
        if value is not None:
            return value
        raise AttributeError(f"terminal_env.{name} needs the verifiers package: {_vf.HOW}")
    raise AttributeError(f"module 'terminal_env' has no attribute {name!r}")
