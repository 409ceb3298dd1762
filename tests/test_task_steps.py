"""Multi-step Harbor tasks ([[steps]]) with the real Docker engine: one sandbox through every step,
each step verified by its own tests, min_reward stopping the later steps, the reward as the
task's multi_step_reward_strategy says, each boundary in the trajectory and the report; and the
attacks a later step could try on an earlier step's verification (each shown to happen first)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.actions import Submit
from terminal_env.cli import main
from terminal_env.verify import guard

pytestmark = pytest.mark.docker

STEPS = Path(__file__).parent / "data" / "tasks" / "harbor-steps"
STEP1 = "printf 'alpha\\nbeta\\n' > /app/notes.txt"
STEP2 = "wc -l < /app/items.txt > /app/count.txt"


def copy_task(tmp_path: Path, strategy: str = "mean", min_reward: str = "1.0") -> Path:
    d = tmp_path / "harbor-steps"
    shutil.copytree(STEPS, d)
    toml = (d / "task.toml").read_text()
    toml = toml.replace('multi_step_reward_strategy = "mean"', f'multi_step_reward_strategy = "{strategy}"')
    (d / "task.toml").write_text(toml.replace("min_reward = 1.0", f"min_reward = {min_reward}"))
    return d


def play(env: TerminalEnv, actions: list[str]) -> list[tuple]:
    out = []
    for a in actions:
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


def test_the_oracle_passes_every_step_and_each_boundary_is_in_the_trajectory_and_report(tmp_path, base_image):
    out = tmp_path / "run"
    assert main(["run", "--tasks", str(STEPS), "--model", "oracle", "-k", "1", "--out", str(out)]) == 0
    trial = out / "trials" / "harbor-steps" / "1"
    result = json.loads((trial / "result.json").read_text())
    assert result["reward"] == 1.0 and result["outcome"] == "passed"
    assert [(s["name"], s["outcome"]) for s in result["steps"]] == [("01-notes", "passed"), ("02-count", "passed")]
    marks = json.loads((trial / "trajectory.json").read_text())["extra"]["task_steps"]
    assert [(m["name"], m["reward"]) for m in marks] == [("01-notes", 1.0), ("02-count", 1.0)]
    assert 0 < marks[0]["after_turn"] < marks[1]["after_turn"]  # where in the episode each step ended
    assert main(["report", str(out)]) == 0
    page = (out / "report" / "trials" / "harbor-steps" / "1.html").read_text()
    assert "<h2>Steps</h2>" in page and "01-notes" in page and "02-count" in page


def test_min_reward_stops_the_later_steps(tmp_path, base_image):
    env = TerminalEnv(copy_task(tmp_path), reward="binary")
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step("#!submit")  # step 1 not done: below 1.0
    finally:
        env.close()
    assert terminated and reward == 0.0 and "next_step" not in info
    v = info["verification"]
    assert [s["name"] for s in v.steps] == ["01-notes"]
    assert "1 of 2 steps verified" in v.message and "below min_reward 1" in v.message


@pytest.mark.parametrize("strategy, expected", [("mean", 0.5), ("final", 0.0)])
def test_the_reward_follows_the_tasks_strategy(tmp_path, base_image, strategy, expected):
    env = TerminalEnv(copy_task(tmp_path, strategy), reward="binary")
    try:
        obs, info = env.reset()
        assert info["task_step"] == {"index": 0, "name": "01-notes", "of": 2}
        steps = play(env, [STEP1, "#!submit"])
        obs, reward, terminated, truncated, info = steps[-1]
        assert not terminated and reward == 0.0  # the step ended, the episode goes on
        assert info["task_step"]["reward"] == 1.0 and info["next_step"]["name"] == "02-count"
        assert "step 2 of 2: 02-count" in obs and "items.txt" in obs and env.step_index == 1
        assert env.step("cat /app/items.txt | wc -l")[0].strip().startswith("17")  # setup.sh ran
        obs, reward, terminated, truncated, info = env.step("#!submit")  # step 2 left undone
    finally:
        env.close()
    assert terminated and reward == expected
    assert [(s["name"], s["outcome"]) for s in info["verification"].steps] == [("01-notes", "passed"),
                                                                               ("02-count", "failed")]
    assert info["verification"].outcome.value == ("partial" if expected else "failed")


def test_a_step_whose_time_runs_out_is_verified_and_the_next_begins(tmp_path, base_image):
    env = TerminalEnv(copy_task(tmp_path, min_reward="0.0"), reward="binary", time_limit=4)
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step("#!timeout 10\nsleep 6")
        assert not (terminated or truncated) and info["next_step"]["name"] == "02-count"  # as Harbor does
        assert info["task_step"]["outcome"] == "failed"
        play(env, [STEP1, STEP2])  # step 2 checks step 1's notes too
        obs, reward, terminated, truncated, info = env.step("#!submit")
    finally:
        env.close()
    assert terminated and reward == 0.5


@pytest.mark.parametrize("strategy, expected", [("mean", 0.5), ("final", 0.0)])
def test_ending_the_episode_after_a_good_step_scores_the_steps_not_reached_as_failed(
        tmp_path, base_image, strategy, expected):
    """A final submit ends the episode in its step. Harbor's mean over the verified steps alone
    would give 1.0 here: an agent that did the easy first step and stopped would outscore one
    that went on and failed the second (0.5). The steps not reached count as failed."""
    from terminal_env.actions import parse_action

    assert parse_action("#!submit --final") == Submit(final=True)  # its text form, for replays
    env = TerminalEnv(copy_task(tmp_path, strategy), reward="binary")
    try:
        env.reset()
        play(env, [STEP1])
        obs, reward, terminated, truncated, info = env.step(Submit(final=True))
    finally:
        env.close()
    assert terminated and reward == expected
    v = info["verification"]
    assert [s["outcome"] for s in v.steps] == ["passed"]  # the step it was in was verified
    assert "the episode ended in step 01-notes; the 1 not reached count as failed" in v.message


# -- attacks a later step could try ------------------------------------------------------------------
def _peek_at_step1s_tests(tmp_path: Path) -> str:
    env = TerminalEnv(copy_task(tmp_path), reward="binary")
    try:
        env.reset()
        play(env, [STEP1, "#!submit"])
        return env.step("cat /tests/test.sh /tests/check.sh 2>&1; ls /logs/verifier /run/terminal-env-guard 2>&1")[0]
    finally:
        env.close()


def test_a_later_step_never_sees_an_earlier_steps_tests(tmp_path, base_image, monkeypatch):
    """Step 1's verifier copied its tests, results and guard into the sandbox: the next step's
    agent would read them (and a step's tests may hold a later step's answers)."""
    with monkeypatch.context() as m:
        m.setattr(guard, "cleanup_script", lambda: "true")  # without the rule: the attack works
        seen = _peek_at_step1s_tests(tmp_path / "a")
    assert "alpha" in seen and "verdict()" in seen and "reward.txt" in seen
    seen = _peek_at_step1s_tests(tmp_path / "b")
    assert "alpha" not in seen and "verdict" not in seen and "reward.txt" not in seen
    assert seen.count("No such file or directory") == 4


def test_a_reward_planted_for_a_later_step_makes_the_episode_tampered(tmp_path, base_image):
    env = TerminalEnv(copy_task(tmp_path), reward="binary")
    try:
        env.reset()
        play(env, [STEP1, "#!submit"])
        planted = env.step("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
                           "cat /logs/verifier/reward.txt")[0]
        assert planted.strip() == "1"  # the attack happened
        obs, reward, terminated, truncated, info = env.step("#!submit")
    finally:
        env.close()
    assert terminated and reward == 0.0
    v = info["verification"]
    assert v.outcome.value == "tampered" and "02-count" in v.message  # the whole episode, not one step


def test_a_background_writer_from_an_earlier_step_does_not_outlive_it(tmp_path, base_image):
    env = TerminalEnv(copy_task(tmp_path), reward="binary")
    try:
        env.reset()
        started = env.step("(while true; do echo 17 > /app/count.txt; sleep 0.2; done) > /dev/null 2>&1 &"
                           " sleep 0.5; cat /app/count.txt")[0]
        assert started.strip().endswith("17")  # the writer runs: it would do step 2's work for it
        play(env, [STEP1, "#!submit"])
        left = env.step("rm -f /app/count.txt; sleep 1; cat /app/count.txt 2>&1")[0]
        obs, reward, terminated, truncated, info = env.step("#!submit")
    finally:
        env.close()
    assert "No such file or directory" in left  # stopped with step 1's verification
    assert terminated and reward == 0.5 and info["verification"].steps[1]["outcome"] == "failed"


@pytest.mark.parametrize("check, ready", [("test -f /app/items.txt", True), ("test -f /app/never", False)])
def test_a_steps_healthcheck_runs_after_its_setup_before_its_agent(tmp_path, base_image, check, ready):
    from terminal_env.errors import InfraError

    d = copy_task(tmp_path)
    toml = (d / "task.toml").read_text().replace(
        'name = "02-count"\n', f'name = "02-count"\nhealthcheck = {{ command = "{check}", interval_sec = 0.1 }}\n')
    (d / "task.toml").write_text(toml)
    env = TerminalEnv(d, reward="binary")
    try:
        env.reset()
        play(env, [STEP1])
        if ready:  # items.txt is made by the step's setup.sh, which runs first
            assert "next_step" in env.step("#!submit")[4]
        else:  # never ready: the episode fails for the infrastructure's reasons (masked, retried)
            with pytest.raises(InfraError, match="healthcheck of step 02-count failed 3 times"):
                env.step("#!submit")
    finally:
        env.close()


def _plant_a_link_for_the_next_steps_files(tmp_path: Path) -> tuple[str, str]:
    d = copy_task(tmp_path)
    (d / "steps" / "02-count" / "workdir" / "sub").mkdir()
    (d / "steps" / "02-count" / "workdir" / "sub" / "data.txt").write_text("step 2's data\n")
    env = TerminalEnv(d, reward="binary")
    try:
        env.reset()
        play(env, ["mkdir -p /tmp/elsewhere && ln -s /tmp/elsewhere /app/sub", STEP1, "#!submit"])
        here = env.step("test -L /app/sub && echo link; cat /app/sub/data.txt")[0]
        elsewhere = env.step("ls /tmp/elsewhere")[0]
        return here, elsewhere
    finally:
        env.close()


def test_a_link_planted_for_a_later_steps_files_redirects_nothing(tmp_path, base_image, monkeypatch):
    """The next step's files are written as root: a link the agent left where one of their
    folders goes would send them (and the chown after them) wherever it points."""
    import terminal_env.steps as steps

    with monkeypatch.context() as m:
        m.setattr(steps, "_CLEAR", "true")  # without the rule: the attack works
        here, elsewhere = _plant_a_link_for_the_next_steps_files(tmp_path / "a")
    assert here.startswith("link") and "data.txt" in elsewhere
    here, elsewhere = _plant_a_link_for_the_next_steps_files(tmp_path / "b")
    assert here.strip() == "step 2's data" and elsewhere.strip() == ""


def test_a_trainer_adapter_plays_the_steps_and_its_record_replays_to_the_same_reward(tmp_path, base_image):
    """The tool-call episode under the TRL, SkyRL, verifiers and OpenEnv adapters: a submit ends
    a step and shows the next; finish() ends the episode; replay(record) gives the same reward."""
    from terminal_env.integrations.episode import ToolEpisode, replay

    episode = ToolEpisode(reward="binary")
    try:
        first = episode.start(str(copy_task(tmp_path)))
        assert "step 1 of 2: 01-notes" in first
        episode.command(STEP1)
        nxt = episode.act(Submit())
        assert "step 2 of 2: 02-count" in nxt and not episode.over
        reward = episode.finish()  # step 2 left undone: verified, and the episode ends
        record = episode.record
    finally:
        episode.close()
    assert reward == 0.5 and record.actions[-1] == "#!submit --final"
    assert replay(record) == 0.5


def test_a_steps_failing_setup_is_the_tasks_fault_never_the_agents(tmp_path, base_image):
    from terminal_env.errors import ConfigError, InfraError

    d = copy_task(tmp_path)
    (d / "steps" / "02-count" / "workdir" / "setup.sh").write_text("#!/bin/bash\necho broken >&2\nexit 3\n")
    env = TerminalEnv(d, reward="binary")
    try:
        env.reset()
        play(env, [STEP1])
        with pytest.raises(InfraError, match=r"step 02-count could not begin: .*setup.sh failed \(exit 3\): broken"):
            env.step("#!submit")  # the agent's episode is masked: a trainer drops it, a runner retries
    finally:
        env.close()
    (d / "steps" / "01-notes" / "workdir").mkdir()
    (d / "steps" / "01-notes" / "workdir" / "setup.sh").write_text("#!/bin/bash\nexit 4\n")
    env = TerminalEnv(d, reward="binary")
    try:
        with pytest.raises(ConfigError, match=r"step '01-notes'.*setup.sh failed \(exit 4\)"):
            env.reset()  # the first step's: the episode does not start
    finally:
        env.close()
