"""scripts/gpu-check.sh on a machine without a GPU: it says so and exits 0, measuring nothing
(on a machine with one it serves a model with vLLM and runs PPO: benchmarks/gpu_ppo.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_without_a_gpu_the_check_says_so_and_exits_0():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check would run for real (minutes, a model directory needed)")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), "/nonexistent-model"],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                             "PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gpu-check: no CUDA device here") and "nothing measured" in done.stdout
