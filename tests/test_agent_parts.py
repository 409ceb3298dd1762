"""Pure parts of the agent path: context fitting, the recorder, trajectories, scripted replies."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terminal_env.context import fit_messages
from terminal_env.errors import ConfigError
from terminal_env.harness.base import ActionResult, CommandRecord, HarnessAction
from terminal_env.models.base import (
    Completion,
    ContextOverflowError,
    ModelError,
    Usage,
    count_tokens_approx,
)
from terminal_env.models.simple import HumanBackend, ScriptedBackend, to_completion
from terminal_env.recording import CastRecorder, read_cast
from terminal_env.trajectory import ModelRef, TaskRef, Trajectory, Turn


def convo(n_turns: int, out_chars: int = 4000) -> list[dict]:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "the task"}]
    for i in range(n_turns):
        msgs.append({"role": "assistant", "content": f"cmd {i}"})
        msgs.append({"role": "user", "content": f"out {i} " + "x" * out_chars})
    return msgs


def test_fit_keeps_small_conversations_untouched():
    msgs = convo(2, 10)
    sent, event = fit_messages(msgs, 10_000)
    assert sent is msgs and event is None


def test_fit_elides_oldest_observations_first_and_keeps_the_task():
    msgs = convo(6)
    sent, event = fit_messages(msgs, 4000)
    assert event["kind"] == "elided" and event["tokens_after"] <= 4000 < event["tokens_before"]
    assert sent[1]["content"] == "the task" and sent[0]["content"] == "sys"
    assert "elided" in sent[3]["content"] and sent[-1] == msgs[-1]
    assert msgs[3]["content"].startswith("out 0 ")  # the caller's list is not changed


def test_fit_drops_whole_turns_and_says_so():
    msgs = convo(40, 300)
    sent, event = fit_messages(msgs, 600, keep_recent=2)
    assert event["kind"] == "dropped"
    assert "earlier turns were left out" in sent[1]["content"]
    assert sent[2]["role"] == "assistant" and sent[-1] == msgs[-1]
    assert count_tokens_approx(sent) <= 600


def test_fit_never_splits_tool_answers_from_their_call():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    for i in range(30):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "y" * 500})
    sent, _ = fit_messages(msgs, 800)
    ids = {c["id"] for m in sent if m["role"] == "assistant" for c in m["tool_calls"]}
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert ids == answered


def test_fit_overflow_is_a_clear_error():
    msgs = [{"role": "system", "content": "s" * 10_000}, {"role": "user", "content": "t"}]
    with pytest.raises(ContextOverflowError, match="max_input_tokens"):
        fit_messages(msgs, 500)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["assistant", "user", "tool"]), st.integers(0, 3000)), max_size=30),
       st.integers(300, 5000))
def test_fit_either_fits_or_raises(shape, budget):
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    msgs += [{"role": r, "content": "z" * n} for r, n in shape]
    try:
        sent, _ = fit_messages(msgs, budget)
    except ContextOverflowError:
        return
    assert count_tokens_approx(sent) <= budget
    assert sent[0] == msgs[0] and sent[1]["content"].startswith("task")


def test_recorder_strips_split_sentinels_and_survives_a_kill(tmp_path):
    path = tmp_path / "a.cast"
    rec = CastRecorder(path, width=80, height=24)
    rec.command("echo hi")
    rec.output(b"hi\r\n\x1eTEabc123:0:42:1234.56:17:/a")  # the sentinel arrives in two pieces
    rec.output(b"pp\x1f\r\nmore")
    rec.marker("turn 1")
    # not closed: a killed run still leaves a readable file
    header, events = read_cast(path)
    assert header["width"] == 80
    text = "".join(e[2] for e in events if e[1] == "o")
    assert "hi\r\n" in text and "\x1e" not in text and "TEabc" not in text
    rec.close()
    _, events = read_cast(path)
    assert "more" in "".join(e[2] for e in events if e[1] == "o")
    assert [e[2] for e in events if e[1] == "m"] == ["turn 1"]
    assert all(a[0] <= b[0] for a, b in zip(events, events[1:]))


def test_recorder_caps_its_size(tmp_path):
    rec = CastRecorder(tmp_path / "b.cast", max_bytes=10_000)
    for _ in range(100):
        rec.output(b"y" * 1000)
    rec.close()
    text = (tmp_path / "b.cast").read_text()
    assert len(text) < 20_000 and "recording capped" in text


def make_traj() -> Trajectory:
    t = Trajectory(task=TaskRef(name="t"), harness="generic", model=ModelRef(name="m", backend="x"))
    t.messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
                  {"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "a b"}]
    cmd = CommandRecord(action={"kind": "command", "command": "ls", "timeout": None}, text="ls", observation="a b")
    t.turns = [Turn(index=0, started=0.0, message_index=2,
                    completion=Completion(text="```bash\nls\n```", usage=Usage(prompt_tokens=5, completion_tokens=3),
                                          token_ids=[1, 2], logprobs=[-0.1, -0.2]),
                    actions=[ActionResult(action=HarnessAction(tool="bash", args={"command": "ls"}),
                                          commands=[cmd], observation="a b")])]
    t.verification = {"outcome": "passed", "strict_success": True, "progress": 1.0}
    return t


def test_trajectory_round_trip_and_exports(tmp_path):
    t = make_traj()
    path = t.save(tmp_path / "t.json")
    back = Trajectory.load(path)
    assert back == t and back.generic_commands() == ["ls"] and back.strict_success
    atif = back.to_atif()
    assert [s["source"] for s in atif["steps"]] == ["system", "user", "agent"]
    agent = atif["steps"][2]
    assert agent["tool_calls"][0]["function_name"] == "command"
    assert agent["observation"]["results"][0]["content"] == "a b"
    assert agent["metrics"]["logprobs"] == [-0.1, -0.2]
    assert atif["final_metrics"]["total_prompt_tokens"] == 5
    # the current version of the format, as an independent implementation of it reads it
    import atif as atif_spec

    assert atif["schema_version"] == "ATIF-v1.8" and agent["llm_call_count"] == 1
    assert atif_spec.Trajectory.model_validate(json.loads(json.dumps(atif))).steps[2].metrics.logprobs == [-0.1, -0.2]
    # a backend without a model: its agent steps say so, and carry no model metrics
    oracle = Trajectory.model_validate({**back.model_dump(), "model": {"name": "oracle", "backend": "OracleBackend"}})
    step = oracle.to_atif()["steps"][2]
    assert step["llm_call_count"] == 0 and "metrics" not in step
    atif_spec.Trajectory.model_validate(oracle.to_atif())
    bad = {**atif, "steps": [*atif["steps"][:2], {**agent, "llm_call_count": 0}]}
    with pytest.raises(ValueError, match="metrics"):  # the validator does check what we rely on
        atif_spec.Trajectory.model_validate(bad)
    chat = back.to_chat()
    assert chat["messages"] == t.messages and chat["strict_success"] is True
    json.dumps(atif), json.dumps(chat)


def test_trajectory_load_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{half")
    with pytest.raises(ConfigError, match="bad.json.*damaged"):
        Trajectory.load(bad)
    bad.write_text(json.dumps({"schema": "terminal-env/trajectory", "version": 99}))
    with pytest.raises(ConfigError, match="version 99"):
        Trajectory.load(bad)
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ConfigError, match="not a terminal-env trajectory"):
        Trajectory.load(bad)


def test_scripted_replies_and_exhaustion():
    b = ScriptedBackend(["<think>hmm</think>ls", {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}])
    c1 = b.complete([])
    assert c1.text == "ls" and c1.reasoning == "hmm"
    c2 = b.complete([])
    assert c2.tool_calls[0].name == "bash" and json.loads(c2.tool_calls[0].arguments) == {"command": "ls"}
    assert c2.assistant_message()["tool_calls"][0]["function"]["name"] == "bash"
    with pytest.raises(ModelError, match="exhausted"):
        b.complete([])
    b.start_episode(None, None)
    assert b.complete([]).text == "ls"
    with pytest.raises(ConfigError):
        to_completion(3.5)  # type: ignore[arg-type]


def test_human_backend_reads_lines_and_continuations():
    h = HumanBackend(stdin=io.StringIO("ls \\\n -la\n\n#!keys C-c\n"), stdout=io.StringIO())
    msgs = [{"role": "user", "content": "obs"}]
    assert h.complete(msgs).text == "```bash\nls \\\n -la\n```"
    assert h.complete(msgs).text == "```bash\n#!keys C-c\n```"
    assert h.complete(msgs).text == "```bash\n#!submit\n```"  # end of input submits


def test_trajectory_saves_are_spaced_but_the_forced_ones_always_happen(tmp_path, monkeypatch):
    import terminal_env.agent as agent

    clock = [100.0]
    monkeypatch.setattr(agent.time, "monotonic", lambda: clock[0])
    writes = []

    class Traj:
        def save(self, path):
            writes.append(clock[0])

    ep = agent._Episode(env=None, traj=Traj(), path=tmp_path / "t.json", on_step=None)
    ep.save(force=True)
    for _ in range(5):  # turns in quick succession: the file is not rewritten each time
        clock[0] += 0.1
        ep.save()
    clock[0] += 1.0
    ep.save()  # a second later: written
    clock[0] += 0.01
    ep.save(force=True)  # the end of the episode: always written
    assert writes == pytest.approx([100.0, 101.5, 101.51])
    agent._Episode(env=None, traj=Traj(), path=None, on_step=None).save(force=True)  # no path: no write
    assert len(writes) == 3


def test_scripted_actions_play_through_the_generic_harness_then_submit():
    from terminal_env.actions import Command, Keys, Submit
    from terminal_env.harness import get_harness

    backend = ScriptedBackend.of_actions(["echo ```x```", Command(command="make", timeout=7), "#!keys C-c"])
    harness = get_harness("generic")
    played = []
    for _ in range(4):
        completion = backend.complete([])
        (action,) = harness.parse(completion)
        played.extend(harness.compile(action))
    assert played == [Command(command="echo ```x```"), Command(command="make", timeout=7.0),
                      Keys(keys=["C-c"]), Submit()]
    with pytest.raises(ModelError, match="exhausted"):
        backend.complete([])  # nothing after the submit
    backend.start_episode(None, harness)  # rewound for the next episode
    assert harness.parse(backend.complete([]))[0].args == {"command": "echo ```x```"}
    stopped = ScriptedBackend.of_actions(["ls", Submit(), "never"])
    assert len(stopped._replies) == 2  # nothing after an explicit submit


def test_scripted_actions_refuse_what_the_text_form_cannot_carry():
    from terminal_env.actions import Keys

    with pytest.raises(ConfigError, match="scripted action 1: .*literal/wait/quiet"):
        ScriptedBackend.of_actions(["ls", Keys(keys=["q"], wait=5)])
    with pytest.raises(ConfigError, match="positive number of seconds"):
        ScriptedBackend.of_actions(["#!timeout 0\nls"])
