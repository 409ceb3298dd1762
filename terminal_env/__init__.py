"""terminal-env: sandboxed, verifiable terminal tasks for agents, RL and benchmarks."""

__version__ = "0.1.0"  # first: modules below may read it while the package initialises

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

__all__ = [
    "Command", "Keys", "Submit", "parse_action", "EnvConfig", "TerminalEnv", "ConfigError",
    "EngineUnavailableError", "ImageNotFoundError", "InfraError", "SandboxError",
    "SandboxGoneError", "SessionError", "TerminalEnvError", "ENV_ID", "register_envs", "Sandbox",
    "SandboxConfig", "SessionConfig", "ShellSession", "StepOutput", "TaskSpec", "PreparedTask",
    "prepare_task",
]
