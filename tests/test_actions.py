import pytest

from terminal_env.actions import Command, Keys, Submit, action_to_text, parse_action
from terminal_env.errors import ConfigError
from terminal_env.keys import encode_keys, key_bytes


@pytest.mark.parametrize(
    "text, expected",
    [
        ("ls -la", Command(command="ls -la")),
        ("#!submit", Submit()),
        ("  #!submit\n", Submit()),
        ("#!keys C-c", Keys(keys=["C-c"])),
        ("#!keys 'hello world' Enter", Keys(keys=["hello world", "Enter"])),
        ("#!keysmith", Command(command="#!keysmith")),
        ("#!timeout 2.5\nsleep 1\necho x", Command(command="sleep 1\necho x", timeout=2.5)),
        ("#!timeoutx", Command(command="#!timeoutx")),
    ],
)
def test_plain_text_actions(text, expected):
    assert parse_action(text) == expected


def test_round_trip_through_text():
    for act in (Command(command="echo 'a b'"), Command(command="make\nmake test", timeout=30),
                Command(command="x", timeout=0.125), Command(command="y", timeout=1e-7),
                Keys(keys=["a b", "C-c", "Up"]), Submit()):
        assert parse_action(action_to_text(act)) == act


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("#!keys", "at least one key"),
        ("#!keys 'unterminated", "cannot parse keys"),
        ({"kind": "jump"}, "invalid action"),
        ({"kind": "command"}, "invalid action"),
        ({"kind": "command", "command": "x", "colour": 1}, "invalid action"),
        (42, "must be a str"),
        ("#!timeout\nls", "positive number of seconds, got ''"),
        ("#!timeout -3\nls", "positive number of seconds, got '-3'"),
        ("#!timeout nan\nls", "positive number of seconds"),
        ("#!timeout 5", "needs a command on the lines after it"),
    ],
)
def test_bad_actions_raise_config_error_naming_the_problem(bad, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_action(bad)


def test_key_names():
    assert key_bytes("C-c") == b"\x03"
    assert key_bytes("C-[") == b"\x1b"
    assert key_bytes("M-Up") == b"\x1b\x1b[A"
    assert key_bytes("F5") == b"\x1b[15~"
    assert key_bytes("hello") is None
    assert encode_keys(["vim", "Enter", "i", "x", "Escape", ":wq", "Enter"]) == b"vim\rix\x1b:wq\r"
    assert encode_keys("C-c", literal=True) == b"C-c"
    with pytest.raises(ConfigError):
        encode_keys([3])  # type: ignore[list-item]
