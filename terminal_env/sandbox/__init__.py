"""Where an episode runs: one container (``container``), the engine it runs on (``engine``), the
project's base images made without a registry (``images``, ``hostroot``), removal of containers
whatever happens to their owner and the labels that make it possible (``cleanup``), the disk
guard (``disk``), stopping every process but the keeper (``sweep``, ``cgroups``), what differs
between OCI runtimes (``runtimes``: runc, gVisor's runsc), and the raw Docker streams
(``dockerio``).

This layer imports nothing above it (no session, tasks or verifier).
"""

from .cgroups import cgroup_files
from .cleanup import LABEL_MANAGED, LABEL_PREFIX
from .container import (
    ExecResult,
    FirstShellMode,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    default_first_shell,
    quote,
)

__all__ = [
    "LABEL_MANAGED", "LABEL_PREFIX", "ExecResult", "FirstShellMode", "Sandbox", "SandboxConfig", "SandboxLimits",
    "cgroup_files", "default_first_shell", "quote",
]
