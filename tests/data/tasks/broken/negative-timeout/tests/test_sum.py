"""Hidden checks of /app/sum.py (inputs the instruction does not show)."""

import subprocess


def run(*args: str) -> str:
    proc = subprocess.run(["python3", "/app/sum.py", *args], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_no_arguments():
    assert run() == "0"


def test_positive_numbers():
    assert run("17", "25") == "42"
    assert run("123456789", "987654321", "1") == "1111111111"


def test_negative_numbers():
    assert run("-5", "3") == "-2"
    assert run("-1", "-2", "-3", "10") == "4"
