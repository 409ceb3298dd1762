"""Exception types.

Errors *inside* the sandbox (a failing command, a timeout) are observations for the agent and
never raise. The exceptions here are for mistakes of the user and failures of the
infrastructure; each message says what went wrong and what to do about it.

``InfraError`` subclasses mark failures that are nobody's fault in the episode: trainers mask
them and runners retry them, never scoring them as the agent's failure.
"""

from __future__ import annotations


class TerminalEnvError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(TerminalEnvError, ValueError):
    """The user's input (a config, an action, an option) is invalid. Not retried."""


class InfraError(TerminalEnvError):
    """The infrastructure failed (engine, container, image). Retry; never score as the agent's."""


class EngineUnavailableError(InfraError):
    """The Docker engine cannot be reached."""


class ImageNotFoundError(InfraError):
    """An image is missing locally and cannot be pulled or built."""


class ImageBuildError(InfraError):
    """Building an image failed; the message carries the tail of the build log."""


class SandboxError(InfraError):
    """A sandbox container could not be created, or died under the episode."""


class SandboxGoneError(SandboxError):
    """The sandbox container stopped or was removed while an episode was using it."""


class SessionError(InfraError):
    """The terminal session could not be started or recovered."""
