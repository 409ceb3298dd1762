"""Scripted attacks on three bundled tasks whose tests once trusted what the agent can rewrite.

Each test plays one episode of a scripted agent (or, for the generator, runs it in a sandbox) and
asserts that the hole is closed (what the attack earned before the fix is noted at each test):

* ``lh-log-forensics``: the tests recomputed every expected value from ``/app/logs``. An agent
  that replaced the logs with one 5xx line and wrote the five outputs matching that line passed
  without reading the real logs. The expected values now live in the tests.
* ``git-bisect-median``: the tests recomputed the first bad commit from the live repository. An
  agent that rewrote ``main`` so that a commit of its own was the first bad one passed, and the
  constant answer ``git rev-parse HEAD`` earned 0.4 from the format and clean-repository checks.
  The expected hashes (the build is deterministic) now live in the tests, and the checks on the
  repository's state count only with the right answer.
* ``sec-find-aws-credentials``: the generator was seeded from ``os.urandom``, so every build was
  a different instance. It now has a fixed seed and the tests hold that instance's answer; the
  format alone and a blanket list of every file no longer earn partial credit.
"""

from __future__ import annotations

import ast
import re

import pytest
from scripted import POOL, play  # tests/scripted.py

from terminal_env import Sandbox, SandboxConfig

pytestmark = [pytest.mark.docker, pytest.mark.attack]



# ------------------------------------------------------------------------ lh-log-forensics
# The attack: replace every log with a tiny one (one 5xx request and its application ERROR line)
# and write the five outputs that match the tiny logs, without ever reading the real ones.
FAKE_LOGS = r"""python3 - <<'EOF'
import gzip, json, os
os.chdir("/app/logs")
for f in os.listdir("."):
    os.remove(f)
line = ('10.0.0.9 - - [12/Mar/2024:09:00:00 +0000] "GET /api/orders/7 HTTP/1.1" 503 12 "-" '
        '"curl/8.0" rid=feedf00d rt=0.250')
for name in ("access.log.3.gz", "access.log.2.gz"):
    with gzip.open(name, "wb") as fh:
        fh.write(b"")
open("access.log.1", "w").close()
open("access.log", "w").write(line + "\n")
with gzip.open("app-1.log.gz", "wt") as fh:
    fh.write('2024-03-12T09:00:00.100Z ERROR app-1 rid=feedf00d user=u1 code=E_FAKE msg="boom"\n')
with gzip.open("app-2.log.gz", "wt") as fh:
    fh.write("")
os.makedirs("/app/work", exist_ok=True)
open("/app/work/access_all.log", "w").write(line + "\n")
open("/app/work/errors.log", "w").write(line + "\n")
open("/app/work/correlated.csv", "w").write(
    "rid,time,method,path,status,user,error_code\n"
    "feedf00d,2024-03-12T09:00:00Z,GET,/api/orders/7,503,u1,E_FAKE\n")
json.dump({"requests": 1, "errors": 1, "error_rate": 1.0, "by_status": {"503": 1},
           "by_error_code": {"E_FAKE": 1}, "p95_rt_ms": 250}, open("/app/work/stats.json", "w"))
json.dump({"first_error": "2024-03-12T09:00:00Z", "last_error": "2024-03-12T09:00:00Z",
           "top_error_code": "E_FAKE", "affected_users": 1,
           "worst_endpoint": "GET /api/orders/{id}", "error_rate": 1.0},
          open("/app/summary.json", "w"))
print("forged")
EOF"""


def test_log_forensics_rewritten_logs_earn_nothing(base_image):
    # before the fix: reward 1.0, outcome passed, 5/5 checks
    seen: list[str] = []
    reward, result = play("lh-log-forensics", [FAKE_LOGS], seen=seen)
    assert "forged" in seen[0], seen[0]  # the logs were replaced and the outputs written
    assert result.outcome.value == "failed", (result.outcome, result.message)
    assert reward < 0.2 and not result.strict_success
    assert not any(c.passed for c in result.checks), [(c.name, c.passed) for c in result.checks]


# ------------------------------------------------------------------------ git-bisect-median
def test_git_bisect_constant_head_answer_earns_nothing(base_image):
    # before the fix: reward 0.4, outcome partial (the format and clean-repository checks)
    constant = "cd /app/stats && git rev-parse HEAD > /app/first_bad.txt && cat /app/first_bad.txt"
    seen: list[str] = []
    reward, result = play("git-bisect-median", [constant], seen=seen)
    assert re.search(r"^[0-9a-f]{40}$", seen[0], re.M), seen[0]  # the constant answer is in place
    assert reward <= 0.1 and not result.strict_success, (reward, result.checks)
    assert result.outcome.value == "failed", (result.outcome, result.message)


# The attack: rebuild main from v1.0 so that a commit of the agent's choosing is the first bad one
# (enough good commits before it to look like a history), answer that commit, leave main clean.
REWRITE_MAIN = r"""cd /app/stats && git reset -q --hard v1.0 \
 && for i in 1 2 3 4 5 6; do git commit -q --allow-empty -m "chore $i"; done \
 && sed -i 's|) / 2$|) // 2|' stats.py && git commit -q -am "median: integer halves" \
 && git rev-parse HEAD > /app/first_bad.txt && git status --short && git log --oneline | head -3"""


def test_git_bisect_rewritten_history_fails(base_image):
    # before the fix: reward 1.0, outcome passed (the tests bisected the rewritten main)
    seen: list[str] = []
    reward, result = play("git-bisect-median", [REWRITE_MAIN], seen=seen)
    assert "median: integer halves" in seen[0], seen[0]  # main was rebuilt, the new commit on top
    assert result.outcome.value == "failed", (result.outcome, result.message)
    assert reward <= 0.1 and not result.strict_success, (reward, result.checks)


# The right answer (found by bisecting), then main changed under it: no strict success.
BISECT_THEN_AMEND = r"""cd /app/stats && git bisect start main v1.0 >/dev/null \
 && git bisect run sh -c 'test "$(python3 stats.py median 3 8 1 6)" = 4.5' >/dev/null \
 && git rev-parse refs/bisect/bad > /app/first_bad.txt && git bisect reset >/dev/null 2>&1 \
 && git commit -q --amend --no-edit --date='2030-01-01T00:00:00Z' && git status --short"""


def test_git_bisect_right_answer_with_changed_history_is_not_a_success(base_image):
    reward, result = play("git-bisect-median", [BISECT_THEN_AMEND])
    passed = {c.name.split("::")[-1]: c.passed for c in result.checks}
    assert passed == {"test_first_bad_commit": True, "test_history_unchanged": False,
                      "test_repo_left_clean": True}, passed
    assert result.outcome.value == "partial" and not result.strict_success
    assert reward == pytest.approx(0.8)


# ------------------------------------------------------------------ sec-find-aws-credentials
TREE_DIGEST = (
    "cd /app/configs && find . -type f -print0 | sort -z | xargs -0 sha256sum "
    "| sha256sum | cut -c1-64"
)
# the instance of environment/gen.py with its fixed seed, whose answer tests/test_outputs.py holds
SEC_INSTANCE = "adb9b4513b428de3578546dd67f93c14346610614e20be4049038a361e76a830"
SEC_SCAN = r"""python3 - <<'EOF'
import os, re
KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])")
ASSIGN = re.compile(r"([A-Za-z0-9_-]+)['\"]?\s*[=:]\s*(['\"]?)"
                    r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])\2")
for d, _, files in os.walk("/app/configs"):
    for f in files:
        p = os.path.join(d, f)
        data = open(p, "rb").read()
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        t = data.decode("utf-16") if utf16 else data.decode("utf-8", "replace")
        ids = {k for k in KEY_ID.findall(t) if not k.endswith("EXAMPLE")}
        names = ("awssecretaccesskey", "secretaccesskey")
        if ids and any(re.sub(r"[_-]", "", m[1]).lower() in names and "EXAMPLEKEY" not in m[3]
                       for m in ASSIGN.finditer(t)):
            print("\n".join(f"LIVE {p} {k}" for k in sorted(ids)))
EOF"""


def expected_live() -> set[tuple[str, str]]:
    """The answer the task's tests hold: their literal ``LIVE``, read without importing them
    (an import would leave a __pycache__ in the task's tests/)."""
    source = (POOL / "sec-find-aws-credentials" / "tests" / "test_outputs.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["LIVE"]:
            return set(ast.literal_eval(node.value))
    raise AssertionError("the task's tests define no LIVE")


def test_aws_credentials_generator_is_deterministic(base_image):
    # before the fix: two runs of the generator gave two different trees (os.urandom seed)
    gen = (POOL / "sec-find-aws-credentials" / "environment" / "gen.py").read_bytes()
    config = SandboxConfig(image=base_image, workdir="/app", task="pytest-gen")
    with Sandbox(config) as sb:
        sb.write_files({"/tmp/gen.py": gen})
        digests = []
        for _ in range(2):
            run = sb.exec(f"rm -rf /app/configs && python3 /tmp/gen.py && {TREE_DIGEST}",
                          user="root", timeout=120)
            assert run.exit_code == 0, run.stderr.decode(errors="replace")
            digests.append(run.stdout.decode().strip())
        count = sb.exec("find /app/configs -type f | wc -l", user="root", timeout=60)
        scan = sb.exec(SEC_SCAN, user="root", timeout=120)
    assert int(count.stdout) > 100
    assert digests[0] == digests[1], "the generator gives a different instance on every run"
    assert digests[0] == SEC_INSTANCE, "the generator's instance is not the one the tests expect"
    lines = scan.stdout.decode().splitlines()
    live = {tuple(line.split()[1:]) for line in lines if line.startswith("LIVE ")}
    assert live and live == expected_live(), "the tests' answer is not the fixed instance's"


# Knowledge-free reports: every file with a made-up key ID (recall without precision), and the
# documentation example (a valid-looking line). Before the fix: 0.5 and 0.17 (format check).
BLANKET = "find /app/configs -type f | sed 's/$/ AKIAAAAAAAAAAAAAAAAA/' > /app/findings.txt"
CONSTANT = "echo '/app/configs/docs/aws-howto.md AKIAIOSFODNN7EXAMPLE' > /app/findings.txt"


@pytest.mark.parametrize("command", [BLANKET, CONSTANT], ids=["blanket", "constant"])
def test_aws_credentials_knowledge_free_reports_earn_nothing(base_image, command):
    reward, result = play("sec-find-aws-credentials", [command])
    assert result.outcome.value == "failed", (result.outcome, result.message)
    assert reward == 0.0 and not result.strict_success, (reward, result.checks)


# ------------------------------------------------- lh-build-install, lh-py-project
# Their report checks recompute the expected report from /app/data (found by the gate's rewrite
# probe: the oracle on shrunken data still passed). The data are now protected paths.
INPUT_REWRITES = {
    "lh-build-install": ("test_4_report", [
        "rm -f /app/data/*.dat && mkdir -p /app/out && printf 'TOTAL\\t0\\t-\\t-\\n' > /app/out/report.tsv"]),
    "lh-py-project": ("test_5_report", [
        "printf 'storm\\n' > /app/data/corpus.txt && : > /app/data/stopwords.txt && mkdir -p /app/reports "
        "&& printf 'storm\\t1\\n' > /app/reports/top_words.tsv && echo '{\"version\": \"0.3.0\", "
        "\"total_words\": 1, \"unique_words\": 1}' > /app/reports/summary.json"]),
}


@pytest.mark.parametrize("name", sorted(INPUT_REWRITES))
def test_rewritten_report_inputs_are_tampering(name, tmp_path, base_image):
    import shutil

    check, commands = INPUT_REWRITES[name]
    # the attack, on the task as it was (its data not protected): the report check passes
    unprotected = tmp_path / name
    shutil.copytree(POOL / name, unprotected)
    toml = unprotected / "task.toml"
    toml.write_text(toml.read_text().replace('protected_paths = ["/app/data"]\n', ""))
    reward, result = play(unprotected, commands)
    passed = {c.name.rsplit("::", 1)[-1] for c in result.checks if c.passed}
    assert check in passed and reward > 0, f"the attack must work unprotected: {passed}"
    # the bundled task: the same episode is tampering, reward 0
    reward, result = play(name, commands)
    assert result.outcome.value == "tampered" and reward == 0.0
    assert "/app/data" in result.message
