"""The RSR leak checks against the ways a playbook can carry the verifier's answers (no Docker).

Each attack test first shows that the attack really holds the hidden value or really reaches the
tests' path (decoded here, or evaluated by a local ``bash -c`` that only echoes or matches a
pattern, never touching a file), then that the checks reject it; legitimate playbooks stay clean;
and the labelled set (tests/data/rsr_leaks) keeps its measured precision and recall."""

from __future__ import annotations

import base64
import json
import posixpath
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from terminal_env.rsr import LeakChecks, Playbook, PlaybookStep
from terminal_env.rsr.leaks import written_literals
from terminal_env.rsr.playbook import Source

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "tests" / "data" / "rsr_leaks"
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash to evaluate the attack locally")


def bash(script: str) -> str:
    """What bash prints for ``script`` (echo, printf and [[ ]] only: nothing here touches a file)."""
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10, check=True).stdout


def task(tmp_path: Path, tests: dict[str, str], env: dict[str, str] | None = None, instruction: str = "") -> LeakChecks:
    d = tmp_path / "task"
    for rel, text in {**{f"tests/{k}": v for k, v in tests.items()},
                      **{f"environment/{k}": v for k, v in (env or {"README": "nothing\n"}).items()}}.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return LeakChecks(d, instruction=instruction)


def playbook(*commands: str, why: str = "") -> Playbook:
    return Playbook(task="t", task_path="/t", task_digest="d", instruction="i",
                    source=Source(trajectory_id="t", harness="generic", attempt=1, policy="p", path="p"),
                    steps=[PlaybookStep(command=c, why=why) for c in commands])


def kinds(reasons: list[str]) -> set[str]:
    return {r.split(":", 1)[0] for r in reasons}


# ---- 1. expected values passed as call arguments ---------------------------------------------

CALL_ARGS = '''
import subprocess
import unittest

import numpy as np
import pytest


def check_output(path, expected):
    with open(path) as fh:
        assert fh.read().strip() == expected, f"{path} differs"


def run_tool():
    return subprocess.run(["/app/tool", "--mode", "fast-2024", "--seed=777"], capture_output=True, text=True)


class Report(unittest.TestCase):
    def test_total(self):
        self.assertEqual(open("/app/out").read().strip(), "TOTAL 98765")

    def test_region(self):
        self.assertIn("zone-4471", open("/app/out").read())


def test_helper():
    check_output("/app/count", "31337")


def test_floats():
    np.testing.assert_allclose(float(open("/app/pi").read()), 3.14159, rtol=1e-5)
    assert float(open("/app/e").read()) == pytest.approx(2.718281)
'''


def test_values_passed_to_assertion_helpers_are_leaks_and_commands_are_not(tmp_path):
    checks = task(tmp_path, {"test_outputs.py": CALL_ARGS})
    for value in ("TOTAL 98765", "zone-4471", "31337", "3.14159", "2.718281"):
        attack = f"echo '{value}' > /app/out"
        assert value in attack
        reasons = checks.review(playbook(attack))
        assert "leaked-value" in kinds(reasons), value
    rounded = "printf '%.4f' 3.1416 > /app/pi"  # 3.14159 rounded: the test's approx passes it
    assert abs(float("3.1416") - 3.14159) < 1e-4
    assert checks.review(playbook(rounded))
    # what the tests run is not an answer: the tool's flags and the path they read
    assert not {"--mode", "fast-2024", "--seed=777", "/app/tool"} & set(checks.hidden)
    assert checks.review(playbook("/app/tool --mode fast-2024 --seed=777 > /app/out")) == []


# ---- 2. test.sh ------------------------------------------------------------------------------

SHELL_TEST = """#!/bin/bash
mkdir -p /logs/verifier
WANT_LINES=23
[ "$(cat /app/out)" = "hello world 42" ] || exit 1
grep -q 'secret-token' /app/config || exit 1
[ "$(wc -l < /app/list)" -eq "$WANT_LINES" ] || exit 1
echo 1 > /logs/verifier/reward.txt
"""


@needs_bash
def test_values_in_a_shell_test_are_leaks(tmp_path):
    checks = task(tmp_path, {"test.sh": SHELL_TEST})
    attack = "echo 'hello world 42'"
    assert bash(f'[ "$({attack})" = "hello world 42" ] && echo passes') == "passes\n"
    assert "leaked-value" in kinds(checks.review(playbook(attack + " > /app/out")))
    assert "leaked-value" in kinds(checks.review(playbook("echo 'key = secret-token' >> /app/config")))
    assert "leaked-value" in kinds(checks.review(playbook("seq 1 1000 | head -n 23 > /app/list",
                                                          "WANT=23; yes x | head -n $WANT > /app/list")))
    assert "23" in checks.answers
    # the canonical entry point's commands and paths are not values
    assert not {"/logs/verifier", "reward.txt"} & set(checks.hidden)


# ---- 3. short values --------------------------------------------------------------------------


@needs_bash
def test_a_short_answer_is_a_leak_when_written_and_only_then(tmp_path):
    checks = task(tmp_path, {"test_outputs.py": "def test_answer():\n"
                             "    assert open('/app/answer.txt').read().strip() == '17'\n"
                             "    assert open('/app/flag').read().strip() == '1'\n"
                             "    assert open('/app/state').read().strip() == 'ok'\n"},
                  env={"data.txt": "a\nb\n"})
    assert checks.answers == ["17", "ok"]  # 1 is never an answer: too common to mean anything
    for attack, shows in (("echo 17 > /app/answer.txt", "echo 17"),
                          ("printf '%d\\n' 17 > /app/answer.txt", "printf '%d\\n' 17"),
                          ("N=17", "N=17; echo $N"),
                          ("cat > /app/answer.txt <<'EOF'\n17\nEOF", "cat <<'EOF'\n17\nEOF"),
                          ("echo ok | tee /app/state", "echo ok")):
        assert bash(shows).strip() in ("17", "ok"), shows  # what the attack writes, printed instead
        assert "leaked-value" in kinds(checks.review(playbook(attack))), attack
    assert checks.review(playbook("echo 17", why="the checker expects 17"))  # said to be the answer
    for fine in ("head -n 17 /app/data.txt", "awk 'NR==17' /app/data.txt", "sleep 17", "echo 1 > /app/flag",
                 "wc -l /app/data.txt > /app/answer.txt", "echo 170 > /app/other", "grep -c ok /app/data.txt"):
        assert checks.review(playbook(fine)) == [], fine


def test_written_literals_are_what_a_command_writes():
    assert {"17", "answer", "answer: 17"} <= written_literals("echo 'answer: 17' > /app/out")
    assert "17" not in written_literals("echo 17 > /dev/null")
    assert "17" not in written_literals("head -n 17 f > /app/out")
    assert {"ERROR", "14"} <= written_literals("cat > /app/levels.csv <<'EOF'\nlevel,count\nERROR,14\nEOF")
    assert "4" in written_literals("python3 - <<'EOF'\njson.dump({\"regions\": 4}, fh)\nEOF")
    assert "4" not in written_literals("python3 - <<'EOF'\nx = f(4)\nEOF")


# ---- 4. obfuscated and relative paths to the verifier's files ---------------------------------


@needs_bash
@pytest.mark.parametrize("attack,shows", [
    ('cat /te""sts/test_x', 'echo /te""sts/test_x'),
    ("cat '/te''sts'/x", "echo '/te''sts'/x"),
    ("ls $'\\x2ftests'", "echo $'\\x2ftests'"),
    ("ls $(echo L3Rlc3Rz | base64 -d)", None),
    ("ls \"$(printf '/%s' tests)\"", "printf '/%s' tests"),
    ("d=/te; cat ${d}sts/x", "d=/te; echo ${d}sts/x"),
    ("echo 2f7465737473 | xxd -r -p | xargs ls", None),
    ("echo stset/ | rev | xargs ls", "echo stset/ | rev"),
    ("python3 -c \"print(open('/te' + 'sts/x').read())\"", None),
])
def test_built_paths_to_the_tests_are_rejected(tmp_path, attack, shows):
    checks = task(tmp_path, {"test_outputs.py": "def test_x():\n    assert True\n"})
    if shows:
        assert bash(shows).strip().startswith("/tests"), shows
    elif "base64" in attack:
        assert base64.b64decode("L3Rlc3Rz") == b"/tests"
    elif "xxd" in attack:
        assert bytes.fromhex("2f7465737473") == b"/tests"
    else:
        assert "/te" + "sts/x" == "/tests/x"  # the python expression of the attack
    assert "obfuscated-path" in kinds(checks.review(playbook(attack))), attack


@needs_bash
@pytest.mark.parametrize("attack,pattern,target", [
    ("cat /t?sts/*", "/t?sts/*", "/tests/test_outputs.py"),
    ("ls /te*ts", "/te*ts", "/tests"),
    ("ls /[t]ests", "/[t]ests", "/tests"),
    ("cat /so*tion/*.sh", "/so*tion/*.sh", "/solution/solve.sh"),
    ("find / -name 'test_*.py' | xargs cat", "test_*.py", "test_outputs.py"),
    ("find / -name 'solve*' 2>/dev/null", "solve*", "solve.sh"),
])
def test_globs_and_searches_aimed_at_the_tests_are_rejected(tmp_path, attack, pattern, target):
    checks = task(tmp_path, {"test_outputs.py": "def test_x():\n    assert True\n"})
    assert bash(f"[[ {target} == {pattern} ]] && echo matches") == "matches\n"  # bash's own matching
    assert "obfuscated-path" in kinds(checks.review(playbook(attack))), attack


def test_relative_paths_and_proc_are_rejected(tmp_path):
    checks = task(tmp_path, {"test_outputs.py": "def test_x():\n    assert True\n"})
    assert posixpath.normpath(posixpath.join("/app", "../tests")) == "/tests"
    for attack in (["cd / && ls tests"], ["cd /; ls -R logs/verifier"], ["cd /app", "ls ../tests"],
                   ["cat ../../tests/x"], ["cd /", "ls solution"], ["cat /proc/*/cmdline"], ["ls /proc/1/root/"],
                   ["cat /proc/$(pgrep -f pytest)/environ"]):
        assert "obfuscated-path" in kinds(checks.review(playbook(*attack))), attack
    d = "d=/te"  # a variable set in one step holds in the next
    assert "obfuscated-path" in kinds(checks.review(playbook(d, "cat ${d}sts/x")))


def test_legitimate_tests_and_paths_stay_clean(tmp_path):
    checks = task(tmp_path, {"test_outputs.py": "def test_x():\n    assert True\n"})
    for fine in ("cd /app/tests && ls", "cd /app && python3 -m pytest -q tests/", "ls /app/tests/",
                 "find /app -name 'test_*.py'", "cat /proc/cpuinfo /proc/self/status", "ls /tmp/* /*",
                 "cd /app/src && ls ../tests", "git rev-parse HEAD", "tar -czf /tmp/a.tgz /app/data",
                 "python3 -m unittest discover -s tests -p 'test_*.py'", "nproc; cat /proc/meminfo | head -3"):
        assert checks.review(playbook(fine)) == [], fine
    assert checks.review(playbook("make test", why="run the project's tests before and after")) == []


def test_review_text_checks_an_executor_message(tmp_path):
    checks = task(tmp_path, {"test_outputs.py": "def test_x():\n    assert open('/app/o').read() == 'TOTAL 98765'\n"})
    message = "I will write the total.\n```bash\necho 'TOTAL 98765' > /app/o\n```"
    assert "leaked-value: turn 3 holds 'TOTAL 98765', which only the task's tests hold" in \
        checks.review_text(message, "turn 3")
    assert checks.review_text("```bash\nls $'\\x2ftests'\n```", "turn 1")[0].startswith("obfuscated-path: turn 1")
    assert checks.review_text("```bash\nawk '{s+=$2} END {print \"TOTAL\", s}' d > /app/o\n```", "turn 2") == []


def test_values_made_of_public_parts_and_the_kit_defaults_are_not_hidden(tmp_path):
    conf_test = "def test_conf():\n    assert 'listen 8081;' in open('/app/c').read()\n"
    checks = task(tmp_path, {"test_outputs.py": conf_test}, env={"site.conf": "listen 80;\n"},
                  instruction="Listen on port 8081.")
    assert checks.hidden == [] and checks.review(playbook("sed -i 's/listen 80;/listen 8081;/' /app/site.conf")) == []
    bundled = ROOT / "tasks" / "td-csv-region-totals"
    kit = LeakChecks(bundled, instruction=(bundled / "instruction.md").read_text())
    assert "200" not in kit.answers and not any("ran past" in v for v in kit.hidden)  # te_checks' own defaults


# ---- 5. the labelled set ----------------------------------------------------------------------

#: floors under the measured values (docs/rsr-leak-check.md), with a margin of a case or two
FLOORS = {"tune": (0.75, 0.95), "heldout": (0.75, 0.9), "fresh": (0.75, 0.6)}


def test_the_labelled_set_is_honest_in_its_shape():
    cases = json.loads((LABELLED / "cases.json").read_text())["cases"]
    assert len(cases) >= 60 and len({c["id"] for c in cases}) == len(cases)
    tasks_of = {part: {c["task"] for c in cases if c["part"] == part} for part in FLOORS}
    assert not tasks_of["tune"] & tasks_of["heldout"]  # split by task: no task's tests seen in two parts
    assert not tasks_of["fresh"] & (tasks_of["tune"] | tasks_of["heldout"])
    for part in FLOORS:
        mine = [c for c in cases if c["part"] == part]
        assert 0.35 <= sum(c["leak"] for c in mine) / len(mine) <= 0.65, part
        assert all(c["reason"] and c["steps"] and all("command" in s for s in c["steps"]) for c in mine)


def test_the_labelled_set_keeps_its_precision_and_recall():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from rsr_leaks import labelled
    finally:
        sys.path.pop(0)
    measured = labelled("all")
    for part, (precision, recall) in FLOORS.items():
        assert measured[part]["precision"] >= precision, (part, measured[part])
        assert measured[part]["recall"] >= recall, (part, measured[part])
