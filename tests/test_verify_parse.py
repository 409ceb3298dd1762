"""parse_results: every format by example, invalid output by example, and fuzzing (hypothesis)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terminal_env.errors import ConfigError
from terminal_env.rewards import NEEDS_OPTIONS, REWARDS, get_reward

#: every reward, those with options bound (a metric by name, a weighted pair of metrics)
ALL_REWARDS = [fn for name, fn in REWARDS.items() if name not in NEEDS_OPTIONS] + [
    get_reward("metric:reward"), get_reward("metrics:reward=1,accuracy=2")]
from terminal_env.verify import MAX_FILE_BYTES, Check, Outcome, VerifierResult, parse_results

FILES = ("reward.txt", "reward.json", "ctrf.json", "junit.xml", "checks.json")


def parse(files, **kw):
    kw.setdefault("exit_code", 0)
    return parse_results({k: v.encode() if isinstance(v, str) else v for k, v in files.items()},
                         **kw)


def ctrf(*tests):
    return json.dumps({"results": {"tool": {"name": "pytest"}, "tests": [
        {"name": name, "status": status, **({"message": msg} if msg else {})}
        for name, status, msg in tests
    ]}})


# --- reported rewards ------------------------------------------------------------------------


@pytest.mark.parametrize("text, outcome, progress", [
    ("1", "passed", 1.0), ("1.0\n", "passed", 1.0), ("  0  ", "failed", 0.0),
    ("0.25", "partial", 0.25), ("1e0", "passed", 1.0),
])
def test_reward_txt(text, outcome, progress):
    r = parse({"reward.txt": text})
    assert (r.outcome.value, r.progress, r.reward_reported, r.source) == (
        outcome, progress, progress, "reward.txt")
    assert r.strict_success == (outcome == "passed")


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "-0.1", "1.5", "abc", "", "   ", "1 1",
                                 "0x1", "1_0", "Infinity"])
def test_invalid_reward_txt_fails_naming_file_and_value(bad):
    r = parse({"reward.txt": bad})
    assert r.outcome == Outcome.failed and r.progress == 0.0 and not r.strict_success
    assert r.reward_reported is None
    assert "reward.txt" in r.message and repr(bad.strip()) in r.message


def test_reward_json_decides_by_its_reward_and_keeps_every_number_as_a_metric():
    r = parse({"reward.json": '{"reward": 0.5, "accuracy": 0.9, "speed": 3, "note": "x", "ok": true}'})
    assert (r.outcome, r.progress, r.reward_reported, r.source) == (
        Outcome.partial, 0.5, 0.5, "reward.json")
    assert r.metrics == {"reward": 0.5, "accuracy": 0.9, "speed": 3.0}  # as Harbor: numbers only
    assert parse({"reward.json": '{"reward": 1}'}).strict_success


def test_reward_txt_is_the_reward_when_reward_json_has_none():
    """Harbor's rule: a detailed reward.json beside a scalar reward.txt."""
    r = parse({"reward.json": '{"accuracy": 0.25, "f1": 0.5}', "reward.txt": "1\n"})
    assert r.strict_success and r.metrics == {"accuracy": 0.25, "f1": 0.5, "reward": 1.0}
    assert r.message == "reward.txt says 1"
    r = parse({"reward.json": '{"reward": 0, "f1": 0.5}', "reward.txt": "1\n"})  # json's reward wins
    assert r.outcome == Outcome.failed and r.metrics == {"reward": 0.0, "f1": 0.5}
    r = parse({"reward.txt": "0.25"})
    assert r.metrics == {"reward": 0.25} and r.progress == 0.25


def test_metrics_without_a_reward_leave_the_verdict_to_the_checks():
    checks = '{"checks": [{"name": "a", "passed": true}, {"name": "b", "passed": false}]}'
    r = parse({"checks.json": checks, "reward.json": '{"accuracy": 7.5}'})
    assert r.outcome == Outcome.partial and r.progress == 0.5 and r.metrics == {"accuracy": 7.5}
    r = parse({"reward.json": '{"accuracy": 0.75}'})  # nothing decides: a failure that says why
    assert r.outcome == Outcome.failed and r.metrics == {"accuracy": 0.75}
    assert 'reports accuracy but no "reward" key' in r.message


@pytest.mark.parametrize("doc, says", [
    ('{"f1": NaN}', "metric 'f1' is 'NaN'"), ('{"f1": 1e999}', "metric 'f1' is 'Infinity'"),
    ('{"f1": 1' + "0" * 400 + "}", "not a finite number"),
    ('{"' + "m" * 101 + '": 1}', "longer than 100"), ('{" ": 1}', "empty or longer"),
    ("{" + ", ".join(f'"m{i}": {i}' for i in range(65)) + "}", "65 metrics; at most 64"),
])
def test_invalid_metrics_fail_naming_the_metric(doc, says):
    r = parse({"reward.json": doc, "reward.txt": "1"})
    assert r.outcome == Outcome.failed and r.metrics == {} and says in r.message, r.message


@pytest.mark.parametrize("doc, says", [
    ('{"reward": NaN}', "NaN"), ('{"reward": Infinity}', "Infinity"), ('{"reward": 1.5}', "1.5"),
    ('{"reward": -0.1}', "-0.1"), ('{"reward": "1"}', '"1"'), ('{"reward": true}', "true"),
    ('{"reward": null}', "null"), ('{"score": 1}', "no \"reward\" key"), ("[1]", "an object of named numbers"),
    ('{"reward": 1', "malformed JSON"), ("", "malformed JSON"),
])
def test_invalid_reward_json(doc, says):
    r = parse({"reward.json": doc})
    assert r.outcome == Outcome.failed and r.progress == 0.0
    assert "reward.json" in r.message and says in r.message
    if "score" not in doc:  # (a reward.json without "reward" beside reward.txt is valid)
        r = parse({"reward.json": doc, "reward.txt": "1"})  # the file that failed is the source
        assert r.outcome == Outcome.failed and r.source == "reward.json"


@pytest.mark.parametrize("doc", [b'{"reward": 1' + b"0" * 400 + b"}",
                                 b'{"reward": 1' + b"0" * 5000 + b"}"])
def test_huge_integer_reward_is_invalid_not_a_crash(doc):
    r = parse_results({"reward.json": doc}, exit_code=0)
    assert r.outcome == Outcome.failed and "reward.json" in r.message


def test_reward_json_takes_precedence_over_reward_txt():
    r = parse({"reward.json": '{"reward": 0}', "reward.txt": "1"})
    assert r.outcome == Outcome.failed and r.source == "reward.json"


def test_nothing_written_is_a_failure_that_says_so():
    r = parse({}, exit_code=2)
    assert r.outcome == Outcome.failed and r.source == "none"
    assert "wrote no result" in r.message and "exit code 2" in r.message


# --- checks.json -----------------------------------------------------------------------------


def test_checks_json_object_and_bare_list():
    doc = {"checks": [
        {"name": "file exists", "passed": True, "weight": 3},
        {"name": "content right", "passed": False, "message": "got 4, want 3"},
    ]}
    for text in (json.dumps(doc), json.dumps(doc["checks"])):
        r = parse({"checks.json": text})
        assert (r.outcome, r.progress, r.source) == (Outcome.partial, 0.75, "checks.json")
        assert r.checks[1] == Check(name="content right", passed=False, message="got 4, want 3")
        assert "content right (got 4, want 3)" in r.message


@pytest.mark.parametrize("doc, says", [
    ('{"checks": [{"name": "a"}]}', "check 0: passed"),
    ('{"checks": [{"name": "a", "passed": "yes"}]}', "check 0: passed"),
    ('[{"name": "a", "passed": true, "weight": -1}]', "check 0: weight"),
    ('[{"name": "a", "passed": true, "extra": 1}]', "check 0: extra"),
    ('{"checks": 3}', "expected"),
    ("{oops", "malformed JSON"),
])
def test_bad_checks_json(doc, says):
    r = parse({"checks.json": doc, "reward.txt": "1"})
    assert r.outcome == Outcome.failed and "checks.json" in r.message and says in r.message


def test_checks_json_beats_ctrf_and_junit():
    r = parse({
        "checks.json": '[{"name": "mine", "passed": true}]',
        "ctrf.json": ctrf(("t", "failed", "")),
        "junit.xml": "not even xml",
    })
    assert r.source == "checks.json" and r.outcome == Outcome.passed


def test_empty_checks_json_falls_through_to_the_next_source():
    r = parse({"checks.json": "[]", "ctrf.json": ctrf(("t", "passed", ""))})
    assert r.source == "ctrf" and r.outcome == Outcome.passed


# --- CTRF ------------------------------------------------------------------------------------


def test_ctrf_statuses():
    r = parse({"ctrf.json": ctrf(
        ("tests/test_outputs.py::test_a", "passed", ""),
        ("tests/test_outputs.py::test_b", "failed", "assert 1 == 2"),
        ("tests/test_outputs.py::test_c", "skipped", ""),
        ("tests/test_outputs.py::test_d", "pending", ""),
        ("tests/test_outputs.py::test_e", "other", ""),
    ), "reward.txt": "0"})
    assert [c.name.rsplit("::")[-1] for c in r.checks] == ["test_a", "test_b", "test_e"]
    assert [c.passed for c in r.checks] == [True, False, False]
    assert r.checks[1].message == "assert 1 == 2"
    assert (r.outcome, r.source, r.reward_reported) == (Outcome.partial, "ctrf", 0.0)
    assert r.progress == pytest.approx(1 / 3)


def test_ctrf_all_passed_with_reward_one_is_success():
    r = parse({"ctrf.json": ctrf(("a", "passed", ""), ("b", "passed", "")), "reward.txt": "1"})
    assert r.strict_success and r.progress == 1.0


@pytest.mark.parametrize("doc", ['{"results": {}}', '{"results": {"tests": [{"status": "passed"}]}}',
                                 '{"results": {"tests": [{"name": "a", "status": "weird"}]}}', "[]"])
def test_bad_ctrf(doc):
    r = parse({"ctrf.json": doc})
    assert r.outcome == Outcome.failed and "ctrf.json" in r.message


# --- JUnit -----------------------------------------------------------------------------------

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
  <testcase classname="tests.test_outputs" name="test_a" time="0.01"/>
  <testcase classname="tests.test_outputs" name="test_b"><failure message="assert 1 == 2">trace</failure></testcase>
  <testcase classname="tests.test_outputs" name="test_c"><error>boom in fixture</error></testcase>
  <testcase classname="tests.test_outputs" name="test_d"><skipped message="later"/></testcase>
</testsuite></testsuites>"""


def test_junit():
    r = parse({"junit.xml": JUNIT})
    assert [(c.name, c.passed, c.message) for c in r.checks] == [
        ("tests.test_outputs::test_a", True, ""),
        ("tests.test_outputs::test_b", False, "assert 1 == 2"),
        ("tests.test_outputs::test_c", False, "boom in fixture"),
    ]
    assert (r.outcome, r.source) == (Outcome.partial, "junit")
    assert r.progress == pytest.approx(1 / 3)


def test_junit_single_testsuite_root_passes():
    r = parse({"junit.xml": '<testsuite><testcase name="only"/></testsuite>'})
    assert r.strict_success and r.checks[0].name == "only"


@pytest.mark.parametrize("doc", [
    # billion laughs (shortened): refused before any expansion happens
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
    '<testsuite><testcase name="&lol2;"/></testsuite>',
    '<!DOCTYPE testsuite SYSTEM "http://example.invalid/x.dtd"><testsuite/>',
    '<!DOCTYPE testsuite><testsuite><testcase name="a"/></testsuite>',
])
def test_junit_with_dtd_is_refused(doc):
    r = parse({"junit.xml": doc, "reward.txt": "1"})
    assert r.outcome == Outcome.failed and "DTD" in r.message and "junit.xml" in r.message


def test_junit_dtd_in_utf16_is_refused_too():
    doc = '<?xml version="1.0" encoding="utf-16"?><!DOCTYPE x [<!ENTITY a "b">]><testsuite/>'
    r = parse_results({"junit.xml": doc.encode("utf-16")}, exit_code=0)
    assert r.outcome == Outcome.failed and "DTD" in r.message


@pytest.mark.parametrize("doc, says", [
    ("<testsuite><testcase>", "not well-formed"), ("<report/>", "root element"),
    ("", "not well-formed"), ("<testsuite>&undefined;</testsuite>", "not well-formed"),
])
def test_bad_junit(doc, says):
    r = parse({"junit.xml": doc})
    assert r.outcome == Outcome.failed and "junit.xml" in r.message and says in r.message


# --- pytest -rA output (Terminal-Bench 1.x) --------------------------------------------------

PYTEST_OUT = """\
============================= test session starts ==============================
collected 4 items

tests/test_outputs.py .F.E                                                [100%]
==================================== PASSES ====================================
_________________________________ test_hello __________________________________
----------------------------- Captured stdout call -----------------------------
PASSED tests/test_outputs.py::test_fake_from_the_agents_program
=========================== short test summary info ============================
PASSED tests/test_outputs.py::test_hello
PASSED tests/test_outputs.py::test_world
FAILED tests/test_outputs.py::test_count - AssertionError: assert 4 == 3
ERROR tests/test_outputs.py::test_db - ConnectionRefusedError
SKIPPED [1] tests/test_outputs.py:40: not on this platform
XFAIL tests/test_outputs.py::test_later - flaky
==================== 1 failed, 2 passed, 1 error in 0.12s =====================
"""


def test_pytest_output():
    r = parse({}, fmt="pytest-output", stdout=PYTEST_OUT, exit_code=1)
    assert [(c.name.rsplit("::")[-1], c.passed) for c in r.checks] == [
        ("test_hello", True), ("test_world", True), ("test_count", False), ("test_db", False)]
    assert r.checks[2].message == "AssertionError: assert 4 == 3"
    assert (r.outcome, r.progress, r.source, r.exit_code) == (
        Outcome.partial, 0.5, "pytest-output", 1)
    assert "summary info" in r.log_tail


def test_pytest_output_all_passed_in_colour():
    out = ("\x1b[32m==== short test summary info ====\x1b[0m\n"
           "\x1b[32mPASSED\x1b[0m t.py::test_a\nPASSED t.py::test_b\n")
    r = parse({}, fmt="pytest-output", stdout=out)
    assert r.strict_success and len(r.checks) == 2


def test_pytest_output_teardown_error_fails_the_test():
    out = "=== short test summary info ===\nPASSED t.py::test_a\nERROR t.py::test_a - teardown\n"
    r = parse({}, fmt="pytest-output", stdout=out)
    assert [(c.name, c.passed) for c in r.checks] == [("t.py::test_a", False)]


def test_pytest_output_without_summary():
    r = parse({}, fmt="pytest-output", stdout="PASSED t.py::test_a\n", exit_code=4)
    assert r.outcome == Outcome.failed and "-rA" in r.message
    # harbor format never reads stdout
    assert parse({}, stdout=PYTEST_OUT).source == "none"


def test_unknown_format_is_a_config_error():
    with pytest.raises(ConfigError, match="pytest-output"):
        parse({}, fmt="tb3")


# --- weights and the reward veto -------------------------------------------------------------


def test_weights_override_by_full_name_or_last_part():
    r = parse({"ctrf.json": ctrf(("tests/t.py::test_a", "passed", ""),
                                 ("tests/t.py::test_b", "failed", ""),
                                 ("tests/t.py::test_c", "failed", ""))},
              weights={"test_a": 6, "tests/t.py::test_b": 2, "not_there": 100})
    assert [c.weight for c in r.checks] == [6.0, 2.0, 1.0]
    assert r.progress == pytest.approx(6 / 9)
    with pytest.raises(ConfigError, match="test_a"):
        parse({"reward.txt": "1"}, weights={"test_a": -1})


def test_zero_reward_with_all_checks_passed_is_a_failure():
    r = parse({"ctrf.json": ctrf(("a", "passed", ""), ("b", "passed", "")), "reward.txt": "0"})
    assert r.outcome == Outcome.failed and not r.strict_success
    assert r.progress == 1.0  # the checks' share; only success is withheld
    assert "reward.txt says 0" in r.message and "withholds success" in r.message
    r = parse({"checks.json": '[{"name": "a", "passed": true}]', "reward.json": '{"reward": 0.5}'})
    assert r.outcome == Outcome.partial and not r.strict_success


def test_invalid_reward_fails_even_with_passing_checks():
    r = parse({"ctrf.json": ctrf(("a", "passed", "")), "reward.txt": "1.5"})
    assert r.outcome == Outcome.failed and r.progress == 0.0 and r.source == "reward.txt"
    assert len(r.checks) == 1  # kept for debugging


# --- limits ----------------------------------------------------------------------------------


def test_oversized_file_fails_naming_it():
    r = parse({"reward.txt": b"1", "ctrf.json": b" " * (MAX_FILE_BYTES + 1)})
    assert r.outcome == Outcome.failed and "ctrf.json" in r.message and "limit" in r.message


def test_messages_and_logs_are_capped():
    tests = [(f"test_{i}", "failed", "x" * 5000) for i in range(50)]
    r = parse({"ctrf.json": ctrf(*tests)}, stdout="y" * 100_000)
    assert len(r.message) <= 2000 and all(len(c.message) <= 2000 for c in r.checks)
    assert len(r.log_tail) <= 8000 and r.log_tail.endswith("y")


def test_unrelated_files_are_ignored():
    r = parse({"reward.txt": "1", "test-stdout.txt": b"\xff" * 10, "big.log": b"x" * 100})
    assert r.strict_success


# --- fuzzing ---------------------------------------------------------------------------------

junk = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.sampled_from([b"nan", b"1e999", b"-0", b"1", b"0.5", b'{"reward": 1e999}', b"[" * 5000,
                     b'{"checks": [{"name": "a", "passed": true, "weight": 1e999}]}',
                     b'{"results": {"tests": [{"name": "a", "status": "passed", "message": 1}]}}',
                     b"<testsuite><testcase name='a'><failure/></testcase></testsuite>",
                     b"\xef\xbb\xbf1", b"<?xml version='1.0' encoding='bogus'?><testsuite/>",
                     b'{"reward": 1' + b"0" * 400 + b"}", b'{"reward": 1' + b"0" * 5000 + b"}",
                     b'[{"name": "a", "passed": true, "weight": 1' + b"0" * 400 + b"}]",
                     b"1" * 1000, b"<testsuite>" * 2000,
                     b'{"accuracy": 1e999, "reward": 1}', b'{"f1": -3, "reward": 0.5, "x": [1]}',
                     b'{"accuracy": 2' + b"0" * 400 + b"}", b'{"": 1}', b'{"reward": true, "a": 1}']),
    # reward.json objects of named numbers, valid or not
    st.dictionaries(st.text(max_size=12), st.one_of(st.floats(), st.integers(), st.booleans(), st.none()),
                    max_size=5).map(lambda d: json.dumps(d).encode()),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FILES), junk), st.sampled_from(["harbor", "pytest-output"]),
       st.text(max_size=300), st.one_of(st.none(), st.integers(-255, 255)))
def test_parse_never_raises_and_rewards_stay_in_unit_interval(files, fmt, stdout, exit_code):
    r = parse_results(files, exit_code=exit_code, stdout=stdout, fmt=fmt)
    assert isinstance(r, VerifierResult)
    assert all(isinstance(v, float) and math.isfinite(v) for v in r.metrics.values()), r.metrics
    assert r.reward_reported is None or r.metrics.get("reward") == r.reward_reported
    assert r.strict_success == (r.outcome == Outcome.passed)
    for fn in ALL_REWARDS:
        assert 0.0 <= fn(r) <= 1.0


@st.composite
def check_docs(draw):
    """A well-formed checks.json with some passed flags, and the same with one more pass."""
    n = draw(st.integers(1, 8))
    weights = draw(st.lists(st.floats(0, 100), min_size=n, max_size=n))
    passed = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda p: not all(p)))
    flip = draw(st.sampled_from([i for i, p in enumerate(passed) if not p]))
    better = list(passed)
    better[flip] = True

    def doc(flags):
        return json.dumps([{"name": f"c{i}", "passed": p, "weight": w}
                           for i, (p, w) in enumerate(zip(flags, weights))]).encode()

    return doc(passed), doc(better)


@given(check_docs(), st.sampled_from([None, b"0", b"1", b"0.5", b"nan"]))
def test_parsed_progress_is_monotone_in_passed_checks(docs, reward):
    worse, better = docs
    extra = {} if reward is None else {"reward.txt": reward}
    r_worse = parse_results({"checks.json": worse, **extra}, exit_code=0)
    r_better = parse_results({"checks.json": better, **extra}, exit_code=0)
    for fn in ALL_REWARDS:
        assert fn(r_better) >= fn(r_worse)
