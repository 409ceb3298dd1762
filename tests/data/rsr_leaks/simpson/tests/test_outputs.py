import subprocess

import numpy as np
import pytest


def printed():
    res = subprocess.run(["python3", "/app/integrate.py"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_printed_value():
    assert float(printed()) == pytest.approx(0.800852, abs=1e-6)


def test_six_decimals():
    assert len(printed().split(".")[1]) == 6


def test_saved_value():
    with open("/app/result.txt") as fh:
        np.testing.assert_allclose(float(fh.read()), 0.800851727, rtol=1e-6)
