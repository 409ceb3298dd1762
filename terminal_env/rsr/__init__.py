"""Recursive Self-Rewrite: a policy's verified successes under several harnesses become
harness-neutral supervised data (:mod:`.pipeline`: collect, plan, review, execute, build).

Every role works with any model backend (prompts in ``prompts/``) and also has a deterministic,
model-free implementation: the planner extracts and normalises the commands (:mod:`.plan`), the
reviewer runs the leak checks (:mod:`.review`), the executor replays the steps.
"""

from .pipeline import HARNESSES, RECORD_KIND, STAGES, RSRConfig, RSRRun
from .plan import DeterministicPlanner, ModelPlanner
from .playbook import Playbook, PlaybookStep, Verdict
from .review import LeakChecks, ModelReviewer, review

__all__ = [
    "HARNESSES", "RECORD_KIND", "STAGES", "DeterministicPlanner", "LeakChecks", "ModelPlanner", "ModelReviewer",
    "Playbook", "PlaybookStep", "RSRConfig", "RSRRun", "Verdict", "review",
]
