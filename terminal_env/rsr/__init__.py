"""Recursive Self-Rewrite: a policy's verified successes under several harnesses become
harness-neutral supervised data (:mod:`.pipeline`: collect, plan, review, execute, build).

Every role works with any model backend (prompts in ``prompts/``), the policy itself with
``--self`` (:mod:`.config`), and also has a deterministic, model-free stand-in: the planner
extracts and normalises the commands (:mod:`.plan`), the reviewer runs the leak checks
(:mod:`.review`), the executor replays the steps. :mod:`.dataset` builds the records.
"""

from .config import HARNESSES, ROLES, BuildConfig, Role, RSRConfig
from .pipeline import RECORD_KIND, STAGES, RSRRun
from .plan import DeterministicPlanner, ModelPlanner
from .playbook import Playbook, PlaybookStep, Verdict
from .review import LeakChecks, ModelReviewer, review

__all__ = [
    "HARNESSES", "RECORD_KIND", "ROLES", "STAGES", "BuildConfig", "DeterministicPlanner", "LeakChecks",
    "ModelPlanner", "ModelReviewer", "Playbook", "PlaybookStep", "RSRConfig", "RSRRun", "Role", "Verdict", "review",
]
