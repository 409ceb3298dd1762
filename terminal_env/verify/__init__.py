"""Verification results: what a verifier concluded, parsed from what it wrote.

:mod:`.result` holds the model every consumer reads (:class:`VerifierResult`); :mod:`.parse`
builds one from the files of ``/logs/verifier`` (:func:`parse_results`). Running the verifier in
the sandbox is a separate concern and lives elsewhere.
"""

from .parse import MAX_FILE_BYTES, parse_results
from .result import Check, Outcome, VerifierResult, check_progress, classify

__all__ = [
    "Check", "Outcome", "VerifierResult", "check_progress", "classify", "parse_results",
    "MAX_FILE_BYTES",
]
