"""Small checks shared by this task's tests."""
import subprocess
from pathlib import Path


def check_file(path, *, equals=None, contains=()):
    body = Path(path).read_text()
    if equals is not None:
        assert body.strip() == equals.strip(), f"{path}: unexpected content"
    for part in contains:
        assert part in body, f"{path} lacks {part!r}"


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
