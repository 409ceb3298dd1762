"""The persistent shell: state, completion detection, escalation, recovery, floods, keys, screen."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from terminal_env import ShellSession
from terminal_env.session import SessionConfig

pytestmark = pytest.mark.docker


def test_state_persists_between_commands(session):
    session.run("cd /tmp && export GREETING=hi && f() { echo \"f:$1\"; }")
    out = session.run("echo $GREETING; pwd; f x")
    assert out.output == "hi\n/tmp\nf:x\n"
    assert out.exit_code == 0 and out.cwd == "/tmp"


def test_exit_code_and_output_without_newline(session):
    out = session.run("printf 'no newline'; false")
    assert out.output == "no newline"
    assert out.exit_code == 1


def test_background_jobs_survive_between_steps(session):
    session.run("sleep 30 & echo started")
    assert "sleep 30" in session.run("jobs").output


def test_multiline_and_long_commands(session):
    out = session.run("cat <<'EOF'\nline one\n  line two\nEOF\necho after")
    assert out.output == "line one\n  line two\nafter\n"
    long = "x" * 10_000  # beyond the TTY's 4 KiB line limit
    assert session.run(f"echo {long} | wc -c").output.strip() == "10001"
    assert session.run("ls /var/tmp/.terminal-env").output == ""  # delivery files clean up


def test_prompt_and_ps1_changes_do_not_break_detection(session):
    session.run("PS1='$ '; PROMPT_DIRTRIM=1; PS2='> '")
    assert session.run("echo still").output == "still\n"
    out = session.run("python3 -m venv /tmp/venv --without-pip && . /tmp/venv/bin/activate && which python")
    assert out.output == "/tmp/venv/bin/python\n"
    assert session.run("echo ok").output == "ok\n"


def test_timeout_interrupts_with_ctrl_c(session):
    out = session.run("sleep 100", timeout=0.5)
    assert out.timed_out and out.exit_code == 130
    assert any("Ctrl-C" in n for n in out.notes)
    assert session.run("echo next").output == "next\n"


def test_ignored_sigint_escalates_to_killing_the_process_group(session):
    session.run("cd /tmp; export KEEP=1")
    out = session.run("trap '' INT; sleep 100", timeout=0.5)
    assert any("killed its process group" in n for n in out.notes), out.notes
    nxt = session.run("echo $KEEP; pwd")  # same shell: state kept
    assert nxt.output == "1\n/tmp\n"


@pytest.mark.parametrize("cmd", ["exit 7", "kill -9 $$"])
def test_shell_killed_by_the_agent_is_respawned(session, cmd):
    out = session.run(cmd)
    assert out.shell_restarted
    assert any("a new shell was started" in n for n in out.notes)
    assert session.run("echo alive; pwd").output == "alive\n/app\n"


def test_exec_into_a_program_that_never_returns_respawns(session):
    out = session.run("exec sleep 100", timeout=0.5)
    assert any("new shell" in n for n in out.notes), out.notes
    assert session.run("echo alive").output == "alive\n"


def test_scrambled_terminal_settings_are_repaired(session):
    session.run("stty echo")
    assert session.run("echo visible").output == "visible\n"  # echo stripped, then repaired
    session.run("stty raw -isig")
    out = session.run("sleep 100", timeout=0.5)  # Ctrl-C is only a character now
    assert any("killed its process group" in n for n in out.notes), out.notes
    assert session.run("echo fine").output == "fine\n"


def test_binary_output_is_an_observation(session):
    out = session.run("head -c 4096 /dev/urandom; echo; echo end")
    assert out.exit_code == 0 and out.output.endswith("end\n")
    assert out.output.isprintable() or "\n" in out.output


def test_long_line_without_newline_is_truncated_head_and_tail(session):
    out = session.run("head -c 5000000 /dev/zero | tr '\\0' a; echo -n END")
    assert out.output_bytes == 5_000_003
    assert out.truncated and out.output.endswith("aEND") and len(out.output) < 17_000


def test_endless_output_hits_the_cap_and_the_session_survives(sandbox):
    s = ShellSession(sandbox, SessionConfig(output_cap_bytes=2_000_000)).start()
    out = s.run("yes", timeout=60)
    assert any("exceeded" in n for n in out.notes)
    assert out.exit_code == 130
    assert s.run("echo ok").output == "ok\n"
    s.close()


def test_keys_drive_a_repl(session):
    out = session.send_keys(b"python3 -q\r", wait=5)
    assert out.busy and out.output.endswith(">>> ")
    out = session.send_keys(b"print(6 * 7)\r", wait=5)
    assert "42" in out.output
    busy = session.run("print('typed into the REPL')")  # a command while the REPL runs
    assert "typed into the REPL" in busy.output and any("still running" in n for n in busy.notes)
    out = session.send_keys(b"\x04", wait=5)  # Ctrl-D leaves the REPL
    assert not out.busy and out.exit_code == 0
    assert session.run("echo back").output == "back\n"


def test_screen_renders_full_screen_programs(sandbox):
    s = ShellSession(sandbox, SessionConfig(rows=10, cols=40))
    s.enable_screen()
    s.start()
    s.run("seq 1 500 > /tmp/n.txt")
    s.send_keys(b"less /tmp/n.txt\r", wait=5)
    screen = s.screen_text()
    assert screen.splitlines()[0] == "1" and "9" in screen.splitlines()
    s.send_keys(b"q", wait=5)
    assert s.run("echo done").output == "done\n"
    s.close()


def test_a_100_megabyte_flood_does_not_grow_memory(base_image):
    # In a fresh process, so the peak RSS belongs to this flood alone.
    code = textwrap.dedent(
        """
        import json, resource
        from terminal_env import Sandbox, SandboxConfig, ShellSession
        with Sandbox(SandboxConfig(image="terminal-env/base:bookworm-1")) as sb:
            s = ShellSession(sb).start()
            s.run("true")
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            out = s.run("head -c 100000000 /dev/zero | tr '\\\\0' 'x'", timeout=300)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(json.dumps({"bytes": out.output_bytes, "chars": len(out.output),
                              "growth_kb": after - before, "code": out.exit_code}))
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert data["bytes"] == 100_000_000 and data["code"] == 0
    assert data["chars"] < 17_000
    assert data["growth_kb"] < 30_000  # far below the 100 MB that went through


def test_half_typed_line_is_erased_before_a_command(session):
    out = session.send_keys(b"echo hel", wait=1, quiet=0.05)
    assert out.busy
    out = session.run("pwd")
    assert out.output == "/app\n" and out.exit_code == 0 and not out.notes


def test_keys_return_after_one_quiet_period(session):
    # `cat` echoes nothing until Enter: the step ends after `quiet`, not after `wait`.
    session.send_keys(b"cat\r", wait=5, quiet=0.05)
    out = session.send_keys(b"abc\r", wait=30, quiet=0.2)
    assert "abc" in out.output and out.duration < 25
    session.send_keys(b"\x04", wait=5)


def test_missing_shell_is_a_clear_error(sandbox):
    from terminal_env.errors import SessionError

    match = "no-such-shell.*ended before showing a prompt.*not found"
    with pytest.raises(SessionError, match=match):
        ShellSession(sandbox, SessionConfig(shell="no-such-shell")).start()
    assert ShellSession(sandbox).start().run("echo ok").output == "ok\n"  # the sandbox is fine


def test_terminal_size_is_set_without_exec_resize(sandbox):
    s = ShellSession(sandbox, SessionConfig(rows=33, cols=111)).start()
    try:
        assert s.run("stty size; tput cols").output == "33 111\n111\n"
    finally:
        s.close()


def test_out_of_memory_is_named_and_the_shell_goes_on(client, base_image):
    from terminal_env import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(image=base_image, memory_mb=128), client=client) as sb:
        if sb.oom_kills() is None:
            pytest.skip("the container's memory cgroup is not readable from here (not root, remote engine)")
        with ShellSession(sb) as s:
            out = s.run("python3 -c 'a = bytearray(512 * 1024 * 1024)'", timeout=60)
            assert out.exit_code == 137
            assert any("out of memory" in n and "128 MB" in n for n in out.notes), out.notes
            again = s.run("echo fine")
            assert again.output.strip() == "fine" and not any("memory" in n for n in again.notes)


@pytest.mark.parametrize("breaker", [
    "printf() { echo HACK; }",  # the prompt's sentinel uses printf
    "PROMPT_COMMAND='echo mine'",
    "exec 1>/dev/null",
])
def test_a_shell_whose_prompt_protocol_the_agent_broke_is_replaced(session, breaker):
    """Each costs the agent the command's timeout, then the shell is replaced; nothing hangs."""
    out = session.run(breaker, timeout=2)
    assert out.timed_out and out.shell_restarted
    assert any("new shell" in n for n in out.notes), out.notes
    assert session.run("echo fine").output == "fine\n"


def test_sessions_compile_no_pattern_per_nonce(session, sandbox):
    """A pattern per session's nonce would fill the re module's cache (512 entries) with patterns
    used once each, through a long training run; the sentinels share one tail pattern."""
    import re

    from terminal_env import ShellSession

    second = ShellSession(sandbox).start()
    try:
        assert second.run("echo ok").output == "ok\n"
        nonces = [s._nonce.encode() for s in (session, second)]
    finally:
        second.close()
    cached = [key for cache in (getattr(re, "_cache", {}), getattr(re, "_cache2", {})) for key in cache]
    assert cached, "the re module's cache was not found: this test needs updating"
    per_nonce = [k for k in cached if isinstance(k[1], bytes) and any(n in k[1] for n in nonces)]
    assert per_nonce == []


def test_delivery_files_of_an_unprivileged_shell_keep_nothing(sandbox):
    """A multi-line command reaches the shell through a root-written file in a sticky directory;
    a shell of another user cannot delete it, so it empties it: no command text stays behind
    (the gate's snoop once found its own search file there)."""
    from terminal_env import ShellSession
    from terminal_env.session import SessionConfig

    s = ShellSession(sandbox, SessionConfig(user="nobody")).start()
    try:
        assert s.run("id -un").output.strip() == "nobody"
        assert s.run("echo secret-needle-1 > /dev/null\necho done").output == "done\n"
    finally:
        s.close()
    left = sandbox.exec("cat /var/tmp/.terminal-env/* 2>/dev/null", user="root").stdout
    assert b"secret-needle-1" not in left
