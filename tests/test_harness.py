"""Harnesses: model text -> harness actions -> generic actions, the feedback on malformed
output, the message shapes, and the registry. Pure unit tests (no Docker); the file-tool commands
of the tool-calling harness are executed with the local bash to prove they are byte-exact."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import terminal_env.harness as registry
from terminal_env.actions import Command, Keys, Submit, action_to_text, parse_action
from terminal_env.errors import ConfigError
from terminal_env.harness import FormatError, Harness, HarnessAction, get_harness
from terminal_env.harness.base import ActionResult, CommandRecord
from terminal_env.harness.generic import GenericHarness
from terminal_env.harness.react import ReactHarness
from terminal_env.harness.terminus import TerminusHarness, keystroke_keys
from terminal_env.harness.tool_calling import ToolCallingHarness
from terminal_env.keys import encode_keys
from terminal_env.models.base import Completion, ToolCall

BUILTINS = {"generic": GenericHarness, "terminus": TerminusHarness,
            "tool-calling": ToolCallingHarness, "react": ReactHarness}


def text(t: str, finish: str = "stop") -> Completion:
    return Completion(text=t, finish_reason=finish)


def calls(*specs: tuple[str, str | dict]) -> Completion:
    return Completion(tool_calls=[
        ToolCall(id=f"call_{i}", name=name, arguments=a if isinstance(a, str) else json.dumps(a))
        for i, (name, a) in enumerate(specs)
    ], finish_reason="tool_calls")


def run_one(h: Harness, completion: Completion) -> list:
    """parse + compile, for a turn with exactly one action."""
    (action,) = h.parse(completion)
    return h.compile(action)


def result(action: HarnessAction, *observations: str, error: str | None = None) -> ActionResult:
    recs = [CommandRecord(action={}, text="", observation=o) for o in observations]
    return ActionResult(action=action, commands=recs, observation="\n".join(observations), error=error)


# ------------------------------------------------------------------ common to all harnesses
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_harness_has_a_prompt_that_explains_environment_and_submitting(name):
    h = get_harness(name)
    prompt = h.system_prompt()
    assert "submit" in prompt.lower() and "hidden tests" in prompt and "network" in prompt
    msgs = h.initial_messages("Fix it.", "Fix it.\n\n[terminal-env] a bash shell is ready in /app.")
    assert [m["role"] for m in msgs] == ["system", "user"] and "/app" in msgs[1]["content"]
    assert (h.tools() is not None) == (name == "tool-calling")


def test_options_are_refused():
    with pytest.raises(ConfigError, match="takes no options"):
        get_harness("generic", colour="red")


# ------------------------------------------------------------------ generic
def test_generic_runs_the_one_bash_block():
    h = GenericHarness()
    reply = "The build failed; rebuild verbosely.\n```bash\ncd /app && make V=1\n```\nThen I will look."
    assert run_one(h, text(reply)) == [Command(command="cd /app && make V=1")]
    multi = "Write the file.\n```sh\ncat > a.txt <<'EOF'\nhello\n  world\nEOF\nwc -l a.txt\n```"
    assert run_one(h, text(multi)) == [Command(command="cat > a.txt <<'EOF'\nhello\n  world\nEOF\nwc -l a.txt")]
    assert run_one(h, text("```\nls\n```")) == [Command(command="ls")]
    assert run_one(h, text("Windows line ends:\r\n```bash\r\nls\r\npwd\r\n```\r\n")) == [Command(command="ls\npwd")]


def test_generic_keys_submit_and_thinking():
    h = GenericHarness()
    assert run_one(h, text("Stop it.\n```bash\n#!keys C-c\n```")) == [Keys(keys=["C-c"])]
    assert run_one(h, text("```bash\n#!keys ':wq' Enter\n```")) == [Keys(keys=[":wq", "Enter"])]
    assert run_one(h, text("All tests pass.\n```bash\n#!submit\n```")) == [Submit()]
    # closed, template-opened and unterminated <think> blocks are all ignored
    assert run_one(h, text("<think>```bash\nrm -rf /\n```</think>\n```bash\npwd\n```")) == [Command(command="pwd")]
    assert run_one(h, text("maybe ```bash\nrm x\n``` no</think>```bash\npwd\n```")) == [Command(command="pwd")]
    with pytest.raises(FormatError):
        h.parse(text("<think>I could run\n```bash\nls\n```\nbut"))


def test_generic_four_backtick_fence_holds_a_three_backtick_one_and_other_languages_are_ignored():
    h = GenericHarness()
    reply = ("Here is the code:\n```python\nprint(1)\n```\nWrite it:\n````bash\n"
             "cat > README.md <<'EOF'\n```\ncode\n```\nEOF\n````")
    assert run_one(h, text(reply)) == [Command(command="cat > README.md <<'EOF'\n```\ncode\n```\nEOF")]


@pytest.mark.parametrize("reply, finish, fragment", [
    ("I will list the files with ls -la.", "stop", "no fenced code block"),
    ("```python\nprint(1)\n```", "stop", "only a block of: python"),
    ("```bash\nls\n```\nthen\n```bash\npwd\n```", "stop", "2 ```bash blocks"),
    ("```bash\n\n```", "stop", "empty"),
    ("```bash\nmake all && make te", "length", "not closed"),
    ("```bash\n#!keys 'oops\n```", "stop", "cannot parse keys"),
    ("```bash\n#!submit\nrm -rf build\n```", "stop", "#!submit must be alone"),
    ("Thinking about it a lot", "length", "cut off"),
])
def test_generic_format_errors_say_what_to_do(reply, finish, fragment):
    with pytest.raises(FormatError) as err:
        GenericHarness().parse(text(reply, finish))
    assert fragment in err.value.feedback
    assert err.value.call_ids == []


def test_generic_messages():
    h = GenericHarness()
    act = HarnessAction(tool="bash", args={"command": "false"})
    rec = CommandRecord(action={}, text="false", observation="[exit code 1]", exit_code=1)
    assert h.observe(act, [rec]) == "[exit code 1]"
    assert h.observe(act, [CommandRecord(action={}, text="true")]) == "(no output)"
    msgs = h.result_messages([result(act, "[exit code 1]")], text(""))
    assert msgs == [{"role": "user", "content": "[exit code 1]"}]
    err = FormatError("Format error: x")
    assert h.error_messages(err, text("")) == [{"role": "user", "content": "Format error: x"}]
    refused = ActionResult(action=act, error="the command is empty")
    assert h.result_messages([refused], text(""))[0]["content"] == "the command is empty"


def test_generic_compile_refuses_bad_actions():
    h = GenericHarness()
    for bad in (HarnessAction(tool="bash", args={"command": ""}), HarnessAction(tool="keys", args={"keys": []}),
                HarnessAction(tool="fly"), HarnessAction(tool="bash", args={"command": "echo \ud800"})):
        with pytest.raises(FormatError):
            h.compile(bad)


# ------------------------------------------------------------------ terminus
def terminus_reply(commands, done=False, **extra) -> Completion:
    obj = {"analysis": "The shell is idle in /app.", "plan": "List files, then build.",
           "commands": commands, "task_complete": done, **extra}
    return text(json.dumps(obj, indent=2))


def test_terminus_keystrokes_compile_to_keys():
    h = TerminusHarness()
    actions = h.parse(terminus_reply([{"keystrokes": "ls -la\n", "duration": 0.1},
                                      {"keystrokes": "C-c"},
                                      {"keystrokes": "make\n", "duration": 600}]))
    generic = [h.compile(a) for a in actions]
    assert generic[0] == [Keys(keys=["ls -la", "Enter"], wait=0.1, quiet=0.1)]
    assert generic[1] == [Keys(keys=["C-c"], wait=1.0, quiet=1.0)]
    assert generic[2] == [Keys(keys=["make", "Enter"], wait=60.0, quiet=60.0)]  # capped
    assert encode_keys(generic[0][0].keys) == b"ls -la\r"
    assert encode_keys(generic[1][0].keys) == b"\x03"


@pytest.mark.parametrize("keystrokes, sent", [
    ("ls -la\n", b"ls -la\r"),
    ("C-c", b"\x03"),
    ("Escape", b"\x1b"),
    ("Up\n", b"\x1b[A\r"),                      # one key name, then Enter
    ("echo Up\n", b"echo Up\r"),                 # a key name inside text is text
    ("Up\nTab\n", b"Up\rTab\r"),                 # several lines: all text
    ("cat <<EOF\na\nEOF\n", b"cat <<EOF\ra\rEOF\r"),
    ("python3\r\n", b"python3\r"),
    ("i", b"i"),
    (":wq\n", b":wq\r"),
    ("", b""),                                   # a pure wait
])
def test_terminus_keystrokes_bytes(keystrokes, sent):
    keys = keystroke_keys(keystrokes)
    assert encode_keys(keys) == sent
    # the plain-text form of the action (the generic harness's syntax) means the same thing
    again = parse_action(action_to_text(Keys(keys=keys)))
    assert encode_keys(again.keys, literal=again.literal) == sent


def test_terminus_accepts_prose_and_fences_with_a_warning():
    h = TerminusHarness()
    body = json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": "pwd\n"}]})
    assert len(h.parse(text(f"```json\n{body}\n```"))) == 1
    assert h.result_messages([], text(""))[0]["content"].startswith("No commands")
    (action,) = h.parse(text(f"Here is my answer:\n{body}\nHope it helps."))
    msg = h.result_messages([result(action, "/app")], text(""))[0]["content"]
    assert "WARNINGS" in msg and "New Terminal Output:\n/app" in msg
    assert h.parse(text("<think>{not json}</think>" + body))[0].args["duration"] == 1.0


def test_terminus_confirmation():
    h = TerminusHarness()
    first = h.parse(terminus_reply([{"keystrokes": "pytest -q\n", "duration": 5}], done=True))
    assert [a.tool for a in first] == ["keystrokes"]  # runs, does not submit yet
    msg = h.result_messages([result(first[0], "3 passed")], text(""))[0]["content"]
    assert "3 passed" in msg and "Are you sure" in msg and '"task_complete": true' in msg
    second = h.parse(terminus_reply([], done=True))
    assert [a.tool for a in second] == ["submit"] and h.compile(second[0]) == [Submit()]

    h.reset()
    assert h.parse(terminus_reply([], done=True)) == []
    assert "Are you sure" in h.result_messages([], text(""))[0]["content"]
    h.parse(terminus_reply([{"keystrokes": "ls\n"}], done=False))  # changes its mind
    assert "Are you sure" not in h.result_messages([], text(""))[0]["content"]
    assert h.parse(terminus_reply([], done=True)) == []  # asked again, not submitted
    assert [a.tool for a in h.parse(terminus_reply([], done="true"))] == ["submit"]


def test_terminus_format_error_resets_confirmation_and_reset_forgets():
    h = TerminusHarness()
    h.parse(terminus_reply([], done=True))
    with pytest.raises(FormatError):
        h.parse(text("oops"))
    assert h.parse(terminus_reply([], done=True)) == []
    h.reset()
    assert h.parse(terminus_reply([], done=True)) == []


@pytest.mark.parametrize("reply, fragment", [
    ("I will run ls.", "no valid JSON"),
    ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n"}', "JSON error"),
    ('[{"keystrokes": "ls\\n"}]', "JSON object"),
    ('{"plan": "p", "commands": []}', '"analysis" is missing'),
    ('{"analysis": "a", "plan": "p"}', '"commands" is missing'),
    ('{"analysis": "a", "plan": "p", "commands": "ls\\n"}', '"commands" must be a list'),
    ('{"analysis": "a", "plan": "p", "commands": ["ls\\n"]}', "commands[0] must be an object"),
    ('{"analysis": "a", "plan": "p", "commands": [{"keys": "ls"}]}', 'commands[0] has no "keystrokes"'),
    ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": 5}]}', "commands[0].keystrokes must be a string"),
    ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls", "duration": "long"}]}',
     "commands[0].duration"),
    ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls", "duration": -1}]}', "duration"),
    ('{"analysis": "a", "plan": "p", "commands": [], "task_complete": "maybe"}', '"task_complete"'),
    ("", "empty"),
])
def test_terminus_format_errors_name_the_field_and_show_the_shape(reply, fragment):
    with pytest.raises(FormatError) as err:
        TerminusHarness().parse(text(reply))
    assert fragment in err.value.feedback
    assert '"keystrokes"' in err.value.feedback and '"task_complete"' in err.value.feedback


def test_pathological_json_is_a_format_error_not_a_crash():
    # json raises RecursionError (not ValueError) for deep nesting
    for reply in ("[" * 20_000, '{"analysis": ' * 20_000, "{" * 20_000):
        with pytest.raises(FormatError, match="JSON"):
            TerminusHarness().parse(text(reply))
    with pytest.raises(FormatError) as err:
        ToolCallingHarness().parse(calls(("bash", "[" * 20_000)))
    assert err.value.call_ids == ["call_0"]


# ------------------------------------------------------------------ tool-calling
def bash(cmd: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=30)


NASTY = [
    "plain",
    "",
    "no newline at end",
    "it's \"quoted\" `cmd` $HOME ${x:-y} $(id) \\ \\n \\\\ %s %% !!\n",
    "unicode: é ü 中文 🙂\ttab\r\nCRLF\n\n\nblank lines\n",
    "\x00\x01 control \x1b[31m bytes",
    "-n\n",
    "EOF\n'EOF'\n```\n",
]


@pytest.mark.parametrize("content", NASTY)
def test_write_file_is_byte_exact(tmp_path, content):
    h = ToolCallingHarness()
    path = "sub dir/it's a \"file\".txt"
    (cmd,) = run_one(h, calls(("write_file", {"path": path, "content": content})))
    assert isinstance(cmd, Command)
    out = bash(cmd.command, tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / path).read_bytes() == content.encode("utf-8")
    assert f"Wrote {len(content.encode())} bytes" in out.stdout


def test_write_file_to_a_dash_path_and_home(tmp_path):
    h = ToolCallingHarness()
    (cmd,) = run_one(h, calls(("write_file", {"path": "-rf", "content": "x"})))
    assert bash(cmd.command, tmp_path).returncode == 0 and (tmp_path / "-rf").read_text() == "x"
    (cmd,) = run_one(h, calls(("write_file", {"path": "~/notes/a.txt", "content": "y"})))
    subprocess.run(["bash", "-c", cmd.command], cwd=tmp_path, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                   check=True, capture_output=True)
    assert (tmp_path / "notes" / "a.txt").read_text() == "y"


def test_edit_replaces_exactly_one_occurrence(tmp_path):
    h = ToolCallingHarness()
    target = tmp_path / "my file's.py"
    original = "def f(x):\n    return x  # $HOME 'q' \\n é\n\ndef g():\n    pass\n    pass\n"
    target.write_bytes(original.encode())

    def edit(old, new):
        (cmd,) = run_one(h, calls(("edit", {"path": target.name, "old_str": old, "new_str": new})))
        return bash(cmd.command, tmp_path)

    out = edit("    return x  # $HOME 'q' \\n é\n", "    return 2 * x  # \"ok\" 🙂\n")
    assert out.returncode == 0, out.stderr
    assert "Edited" in out.stdout and "return 2 * x" in out.stdout
    expected = original.replace("    return x  # $HOME 'q' \\n é\n", "    return 2 * x  # \"ok\" 🙂\n")
    assert target.read_bytes() == expected.encode()

    out = edit("return y", "return z")  # 0 occurrences: nothing changes
    assert out.returncode != 0 and "not found" in out.stderr
    out = edit("    pass\n", "")  # 2 occurrences: nothing changes
    assert out.returncode != 0 and "occurs 2 times" in out.stderr
    assert target.read_bytes() == expected.encode()

    out = edit("def g():\n    pass\n    pass\n", "")  # deletion, file ends without newline now
    assert out.returncode == 0 and target.read_bytes() == expected.split("def g")[0].encode()
    out = bash(run_one(h, calls(("edit", {"path": "missing.txt", "old_str": "a", "new_str": "b"})))[0].command,
               tmp_path)
    assert out.returncode != 0 and "cannot read" in out.stderr


def test_read_file_numbers_lines(tmp_path):
    h = ToolCallingHarness()
    (tmp_path / "a b.txt").write_text("".join(f"line {i}\n" for i in range(1, 3001)))
    (cmd,) = run_one(h, calls(("read_file", {"path": "a b.txt", "start_line": 2, "end_line": 4})))
    assert bash(cmd.command, tmp_path).stdout == "     2\tline 2\n     3\tline 3\n     4\tline 4\n"
    (cmd,) = run_one(h, calls(("read_file", {"path": "a b.txt"})))
    out = bash(cmd.command, tmp_path).stdout.splitlines()
    assert out[0] == "     1\tline 1" and out[1999] == "  2000\tline 2000"
    assert "3000 lines in all" in out[-1] and "start_line=2001" in out[-1]
    (cmd,) = run_one(h, calls(("read_file", {"path": "a b.txt", "start_line": 3001})))
    assert bash(cmd.command, tmp_path).stdout == "read_file: the file has 3000 lines\n"
    (tmp_path / "short").write_text("one\ntwo")  # no newline at the end
    (cmd,) = run_one(h, calls(("read_file", {"path": "short"})))
    assert bash(cmd.command, tmp_path).stdout == "     1\tone\n     2\ttwo"
    (cmd,) = run_one(h, calls(("read_file", {"path": "nope"})))
    out = bash(cmd.command, tmp_path)
    assert out.returncode != 0 and "not a file" in out.stderr


def test_bash_and_submit_tools():
    h = ToolCallingHarness()
    actions = h.parse(calls(("submit", ""), ("bash", {"command": "make", "timeout": 300})))
    assert [a.tool for a in actions] == ["bash", "submit"]  # submit runs last
    assert h.compile(actions[0]) == [Command(command="make", timeout=300)]
    assert h.compile(actions[1]) == [Submit()]
    assert [a.call_id for a in actions] == ["call_1", "call_0"]
    twice = json.dumps(json.dumps({"command": "ls"}))  # arguments encoded twice
    assert run_one(h, calls(("bash", twice))) == [Command(command="ls")]


@pytest.mark.parametrize("name, args, fragment", [
    ("bash", {}, "'command' is missing"),
    ("bash", {"command": ["ls"]}, "must be a string"),
    ("bash", {"command": "ls", "timeout": -5}, "timeout"),
    ("read_file", {"path": "a", "start_line": 0}, "start_line"),
    ("read_file", {"path": "a", "start_line": 5, "end_line": 2}, "end_line"),
    ("write_file", {"path": "a"}, "'content' is missing"),
    ("edit", {"path": "a", "old_str": "", "new_str": "x"}, "'old_str' must not be empty"),
    ("rm_rf", {}, "unknown tool 'rm_rf'"),
])
def test_tool_argument_errors_refuse_that_call_only(name, args, fragment):
    with pytest.raises(FormatError, match=fragment):
        run_one(ToolCallingHarness(), calls((name, args)))


def test_tool_messages_answer_every_call_id():
    h = ToolCallingHarness()
    comp = calls(("bash", {"command": "ls"}), ("read_file", {"path": "x"}))
    a, b = h.parse(comp)
    msgs = h.result_messages([result(a, "a.txt"), ActionResult(action=b, error="read_file: bad")], comp)
    assert msgs == [{"role": "tool", "tool_call_id": "call_0", "content": "a.txt"},
                    {"role": "tool", "tool_call_id": "call_1", "content": "read_file: bad"}]
    assert comp.assistant_message()["tool_calls"][1]["id"] == "call_1"

    bad = calls(("bash", {"command": "ls"}), ("write_file", '{"path": "a", "content": "unterminated'))
    with pytest.raises(FormatError) as err:
        h.parse(bad)
    assert err.value.call_ids == ["call_0", "call_1"] and "write_file (call call_1)" in err.value.feedback
    msgs = h.error_messages(err.value, bad)
    assert [m["role"] for m in msgs] == ["tool", "tool"]
    assert [m["tool_call_id"] for m in msgs] == ["call_0", "call_1"]
    assert all("not valid JSON" in m["content"] for m in msgs)

    with pytest.raises(FormatError) as err:
        h.parse(Completion(text="I think we are done.", finish_reason="stop"))
    assert err.value.call_ids == [] and "call" in err.value.feedback and "submit" in err.value.feedback
    assert h.error_messages(err.value, text("")) == [{"role": "user", "content": err.value.feedback}]


def test_tool_schemas_are_well_formed():
    schemas = ToolCallingHarness().tools()
    names = [s["function"]["name"] for s in schemas]
    assert names == ["bash", "read_file", "write_file", "edit", "submit"]
    for s in schemas:
        assert s["type"] == "function" and s["function"]["description"]
        params = s["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
    json.dumps(schemas)


# ------------------------------------------------------------------ react
def test_react_parses_thought_and_action():
    h = ReactHarness()
    reply = "<thought>Look at the logs.</thought>\n<action>tail -n 50 /var/log/app.log</action>"
    assert run_one(h, text(reply)) == [Command(command="tail -n 50 /var/log/app.log")]
    assert run_one(h, text("<thought>done</thought><action>#!submit</action>")) == [Submit()]
    assert run_one(h, text("<action>\n#!keys C-c\n</action>")) == [Keys(keys=["C-c"])]
    assert run_one(h, text("<action>\n```bash\nls\n```\n</action>")) == [Command(command="ls")]
    multi = "<thought>x</thought><action>for f in *.c; do\n  gcc -c \"$f\"\ndone</action>"
    assert run_one(h, text(multi)) == [Command(command='for f in *.c; do\n  gcc -c "$f"\ndone')]
    # generation stopped on the stop sequence </action>
    assert run_one(h, text("<thought>t</thought><action>pwd", "stop")) == [Command(command="pwd")]
    msgs = h.result_messages([result(HarnessAction(tool="bash", args={"command": "pwd"}), "/app")], text(""))
    assert msgs == [{"role": "user", "content": "<observation>\n/app\n</observation>"}]


@pytest.mark.parametrize("reply, finish, fragment", [
    ("<thought>I should run ls</thought>", "stop", "no <action>"),
    ("<action>ls</action><observation>a</observation><action>pwd</action>", "stop", "2 <action> tags"),
    ("<action>ls -la /very/long", "length", "not closed"),
    ("<action>  </action>", "stop", "empty"),
])
def test_react_format_errors(reply, finish, fragment):
    with pytest.raises(FormatError) as err:
        ReactHarness().parse(text(reply, finish))
    assert fragment in err.value.feedback and "<thought>" in err.value.feedback


# ------------------------------------------------------------------ registry
@pytest.mark.parametrize("name, cls", sorted(BUILTINS.items()))
def test_builtin_harnesses_by_name(name, cls):
    h = get_harness(name)
    assert type(h) is cls and h.name == name
    assert name in registry.available_harnesses()


class _ThirdParty(GenericHarness):
    name = "mine"


def _entry_point(name, obj, value="pkg.mod:Obj"):
    return SimpleNamespace(name=name, value=value, load=lambda: obj)


def test_unknown_harness_lists_the_available_ones(monkeypatch):
    monkeypatch.setattr(registry, "_plugins", lambda: {"mine": _entry_point("mine", _ThirdParty)})
    with pytest.raises(ConfigError) as err:
        get_harness("nope")
    for name in (*BUILTINS, "mine"):
        assert name in str(err.value)


def test_third_party_harness_through_an_entry_point(monkeypatch):
    def broken():
        raise ImportError("no module named pkg")

    plugins = {
        "mine": _entry_point("mine", _ThirdParty),
        "notaharness": _entry_point("notaharness", object, "pkg.mod:thing"),
        "broken": SimpleNamespace(name="broken", value="pkg.broken:X", load=broken),
    }
    monkeypatch.setattr(registry, "_plugins", lambda: plugins)
    assert isinstance(get_harness("mine"), _ThirdParty)
    assert "mine" in registry.available_harnesses()
    with pytest.raises(ConfigError, match="not a Harness subclass"):
        get_harness("notaharness")
    with pytest.raises(ConfigError, match="failed to load"):
        get_harness("broken")


# ------------------------------------------------------------------ fuzz: never crash
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
terminus_like = st.fixed_dictionaries({}, optional={
    "analysis": json_values, "plan": json_values, "task_complete": json_values,
    "commands": st.lists(st.fixed_dictionaries({}, optional={"keystrokes": json_values,
                                                             "duration": json_values}) | json_values,
                         max_size=3) | json_values,
}).map(json.dumps)
fragments = st.sampled_from(["```", "```bash\n", "\n", "<action>", "</action>", "<think>", "</think>",
                             "#!keys ", "#!submit", "{", "}", '"commands": [', "'", "C-c"])
model_text = st.one_of(
    st.text(max_size=300),
    st.lists(fragments | st.text(max_size=10), max_size=20).map("".join),
    terminus_like,
    st.tuples(st.text(max_size=20), terminus_like, st.text(max_size=20)).map("\n".join),
)


def _check_turn(h: Harness, completion: Completion) -> None:
    try:
        actions = h.parse(completion)
    except FormatError as err:
        assert isinstance(err.feedback, str) and err.feedback
        assert h.error_messages(err, completion)
        return
    assert isinstance(actions, list) and all(isinstance(a, HarnessAction) for a in actions)
    for a in actions:
        try:
            generic = h.compile(a)
        except FormatError:
            continue
        assert all(isinstance(g, (Command, Keys, Submit)) for g in generic)
    h.result_messages([ActionResult(action=a) for a in actions], completion)


@FUZZ
@given(model_text, st.sampled_from([None, "stop", "length"]))
def test_fuzz_text_harnesses_only_raise_format_error(t, finish):
    for name in ("generic", "terminus", "react", "tool-calling"):
        _check_turn(get_harness(name), Completion(text=t, finish_reason=finish))


tool_arguments = st.one_of(st.text(max_size=80), json_values.map(json.dumps),
                           st.dictionaries(st.sampled_from(["command", "timeout", "path", "content", "old_str",
                                                            "new_str", "start_line", "end_line"]),
                                           json_values, max_size=4).map(json.dumps))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["bash", "read_file", "write_file", "edit", "submit", "x", ""]),
                          tool_arguments), max_size=4))
def test_fuzz_tool_calls_only_raise_format_error(specs):
    h = ToolCallingHarness()
    comp = Completion(tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(specs)])
    _check_turn(h, comp)
    try:
        h.parse(comp)
    except FormatError as err:  # every call id is answered
        answered = [m.get("tool_call_id") for m in h.error_messages(err, comp) if m["role"] == "tool"]
        assert answered == [c.id for c in comp.tool_calls]


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=200), st.text(max_size=40).filter(lambda p: p.strip() and p != "~" and "\x00" not in p and "/" not in p))
def test_fuzz_write_file_round_trips(tmp_path_factory, content, name):
    tmp = tmp_path_factory.mktemp("w")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        return
    if name in (".", ".."):
        return
    (cmd,) = run_one(ToolCallingHarness(), calls(("write_file", {"path": name, "content": content})))
    out = bash(cmd.command, tmp)
    assert out.returncode == 0, out.stderr
    assert (tmp / name).read_bytes() == content.encode("utf-8")
