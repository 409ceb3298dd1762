"""The one trial driver and the one place that decides whether a backend is shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.errors import ConfigError
from terminal_env.models.simple import NopBackend, OracleBackend
from terminal_env.prepare import prepare_task
from terminal_env.protocols import ModelBackend
from terminal_env.scale.executor import LocalExecutor, TrialJob
from terminal_env.trial import Backends, TrialSpec, play_trial

TASK = Path(__file__).parent / "data" / "tasks" / "harbor-sum"


def test_a_stateless_backend_is_shared_and_an_episode_aware_one_is_not():
    backends = Backends()
    server = {"base_url": "http://127.0.0.1:9/v1", "api_key": "k"}  # built, never called
    a, b = backends.get("openai:m", server), backends.get("openai:m", server)
    assert a is b and isinstance(a, ModelBackend)
    assert backends.get("openai:m", {**server, "max_retries": 0}) is not a  # other options, other client
    assert backends.get("nop") is not backends.get("nop")  # episode state: one per episode
    made = []
    assert isinstance(backends.get(lambda: made.append(1) or NopBackend()), NopBackend) and made == [1]
    obj = NopBackend()
    assert backends.get(obj) is obj
    with pytest.raises(ConfigError, match="need a backend spec string"):
        backends.get(obj, {"x": 1})


def test_trial_spec_refuses_unknown_fields():
    with pytest.raises(ValueError, match="bogus"):
        TrialSpec(bogus=1)


@pytest.mark.docker
def test_play_trial_writes_the_trial_files_and_classifies_a_broken_task(tmp_path, base_image):
    out = play_trial(str(TASK), TrialSpec(reward="binary", record=True), lambda: "oracle", out_dir=tmp_path)
    # a backend that is a string is not a backend: the trial is a bug, kept with its traceback
    assert out.failure == "bug" and out.traj is None and "error.txt" in out.error
    assert (tmp_path / "error.txt").read_text().startswith("Traceback")
    executor = LocalExecutor()
    try:
        job = TrialJob(task=str(TASK), spec=TrialSpec(reward="binary", record=True), backend="oracle",
                       out_dir=tmp_path)
        outcome = executor.play(job)
        assert outcome.failure is None and outcome.traj.reward == 1.0 and not outcome.traj.masked
        assert {"trajectory.json", "recording.cast", "verifier.json", "verifier.log"} <= {
            p.name for p in tmp_path.iterdir()}
        broken = TrialJob(task=str(tmp_path / "no-such-task"), spec=TrialSpec(), backend="nop")
        outcome = executor.play(broken)
        assert outcome.failure == "config" and "no-such-task" in outcome.error
        assert executor.stats()["live"] == 0
    finally:
        executor.close()


def test_prepare_task_refuses_unknown_build_options_by_name():
    with pytest.raises(ConfigError, match=r"unknown build options \['ca_bundel'\]"):
        prepare_task(str(TASK), build={"ca_bundel": "/x"})
    spec = prepare_task({"name": "t", "instruction": "i", "image": "terminal-env/base:x"})
    assert spec.source is None and spec.verifier() is None and spec.time_limit is None
    assert prepare_task(spec) is spec


@pytest.mark.docker
def test_a_prepared_task_is_built_once_and_shared_by_environments(monkeypatch, base_image):
    import terminal_env.prepare as prepare

    prepared = prepare_task(str(TASK))  # load, build (cached by content), budgets
    assert prepared.spec.image and prepared.source.name == prepared.name == "harbor-sum"
    assert prepared.time_limit == float(prepared.source.agent_timeout)
    assert prepared.verifier() is not prepared.verifier()  # one per environment, never shared

    def no_build(*args, **kwargs):
        raise AssertionError("an environment of a prepared task built an image")

    monkeypatch.setattr(prepare, "build_image", no_build)
    envs = [TerminalEnv(prepared, reward="binary") for _ in range(2)]
    try:
        assert envs[0].verifier is not envs[1].verifier
        assert envs[0].config.time_limit == prepared.time_limit  # the task's own budget
        for env in envs:
            reward, info = run_episode(env, OracleBackend())
            assert reward == 1.0 and info["verification"].outcome == "passed"
            assert env.source_task is prepared.source
        # switching to a spec written in Python drops the task's verifier
        envs[0].reset(options={"task": {"name": "t", "instruction": "i", "image": prepared.spec.image}})
        assert envs[0].verifier is None and envs[0].source_task is None
        with pytest.raises(AssertionError, match="built an image"):
            TerminalEnv(str(TASK))  # a path is prepared (and built) by the same one step
    finally:
        for env in envs:
            env.close()
