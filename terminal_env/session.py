"""One persistent bash in a PTY inside the sandbox, driven with pexpect.

The shell runs as a ``docker exec`` with a TTY. We talk to the engine's hijacked exec socket
directly through :class:`pexpect.fdpexpect.fdspawn` rather than through a ``docker exec -it``
client process: one socket per session instead of a ~30 MB Go process, and one hop less.
A sandbox in ``first_shell="attach"`` mode comes with its first shell already running as the
container's main process; the session then talks to it through the hijacked attach socket (no
exec on the cold path). When that shell dies, the container's main process prints a marker and
the session respawns through ``docker exec``, exactly as for an exec'd shell.

Completion of a command is detected without sleeping: ``PROMPT_COMMAND`` prints a sentinel that
carries a per-session nonce, the exit code and the working directory, and resets ``PS1``/``PS2``
to empty each time, so a ``venv`` activation or an agent's ``PS1=...`` cannot break detection.

Defences, in the order they are tried when something goes wrong:

* a command that does not finish in time gets Ctrl-C; if that does not bring the prompt back,
  the terminal's foreground process group is killed (found through ``/proc`` by a separate
  exec, since Ctrl-C may be disabled by ``stty -isig``); if even that fails the shell is
  respawned. Each step says in its notes what was done.
* a shell that exits (``exit``, ``kill -9 $$``, ``exec`` of a program that ends) is respawned.
* output is read in chunks into a bounded head+tail buffer, so floods and endless lines use
  constant memory; a per-step output cap interrupts a command that never stops printing.
* long or multi-line commands are delivered as a file and sourced, so the TTY's 4 KiB line
  limit and the shell's continuation prompts never split or swallow them.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable

import docker.errors
import pexpect
from pexpect import fdpexpect

from .errors import SandboxGoneError, SessionError
from .output import OutputBuffer, Sentinel, SentinelMatch, clean_text, truncate_middle
from .sandbox import Sandbox
from .sandbox.dockerio import ExecSocket
from .screen import Screen

#: what follows a session's sentinel prefix (its nonce): exit code, shell pid, the sandbox's uptime at
#: the prompt, the last background job's pid ($!), working directory
_MARKER_TAIL = re.compile(rb"(\d+):(\d+):([0-9.]*):(\d*):([^\x1f]{0,4096})\x1f\r?\n")

# Typed directly: single line commands up to this size. Longer ones go through a file.
_TYPE_LIMIT = 1024
# Not under /tmp: gVisor mounts a /tmp of its own over an empty one, where files put in through
# the engine do not appear (terminal_env.sandbox.runtimes).
_CMD_DIR = "/var/tmp/.terminal-env"
#: clock ticks per second of /proc/PID/stat's start time (USER_HZ, 100 on Linux and gVisor)
_CLOCK_TICKS = 100
_WINDOW = 8192
FIRST_OUTPUT_WAIT = 1.0  # seconds a keystroke may go unanswered before the terminal counts as quiet  # bytes kept unsearched at the end of the stream, to find a split sentinel


@dataclass
class SessionConfig:
    rows: int = 40
    cols: int = 160
    max_output_chars: int = 16_000
    head_fraction: float = 0.5
    #: a command printing more than this is interrupted (its output is still head+tail)
    output_cap_bytes: int = 256 * 1024 * 1024
    #: seconds to wait for the prompt after each escalation step
    grace: float = 2.0
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None
    shell: str = "bash"


@dataclass
class StepOutput:
    """What one command or keystroke action produced."""

    output: str  #: clean text for a model, truncated head+tail
    raw: bytes  #: raw bytes (head and tail if large), sentinel removed
    exit_code: int | None  #: None when the shell did not come back to its prompt
    cwd: str | None
    duration: float
    output_bytes: int  #: bytes produced in total
    truncated: bool  #: clean text was cut in the middle
    timed_out: bool = False
    busy: bool = False  #: a foreground program is still running (e.g. an editor or REPL)
    shell_restarted: bool = False
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """Output and notes as one text, the way the environment shows it."""
        text = self.output
        for note in self.notes:
            sep = "" if not text or text.endswith("\n") else "\n"
            text += f"{sep}[terminal-env] {note}"
        return text


class _ShellDied(Exception):
    pass


class ShellSession:
    """A persistent interactive bash in a sandbox.

    ``run(cmd)`` types a command and returns when the prompt is back; ``send_keys(keys)`` sends
    raw keystrokes and returns when the terminal has been quiet for a moment.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        config: SessionConfig | None = None,
        *,
        on_output: Callable[[bytes], None] | None = None,
        on_input: Callable[[bytes], None] | None = None,
    ):
        self.sandbox = sandbox
        self.config = config or SessionConfig()
        self.on_output = on_output
        self.on_input = on_input
        self.cwd: str | None = None
        self.shell_pid: int | None = None
        self.busy = False
        self.restarts = 0
        self._ooms_seen: int | None = None  # the sandbox's OOM kills after the last action
        self._proc: fdpexpect.fdspawn | None = None
        self._sock: ExecSocket | None = None
        self._exec_id: str | None = None
        #: marker of the container's main process when the attached first shell exits
        self._death: Sentinel | None = None
        self._death_code: int | None = None
        self._nonce = ""
        self._marker: Sentinel | None = None
        self._pending = b""
        self._cmd_n = 0
        self._screen = None
        self._needs_repair = False
        self._prompt_uptime: float | None = None  # the sandbox's uptime at the last prompt
        self._prompt_last_job = 0  # the pid of the last background job at the last prompt

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "ShellSession":
        cfg = self.config
        api = self.sandbox.client.api
        self._nonce = secrets.token_hex(8)
        self._marker = Sentinel(b"\x1eTE" + self._nonce.encode() + b":", _MARKER_TAIL)
        env = {"TERM": "xterm-256color", "PAGER": "cat", "GIT_PAGER": "cat", "LANG": "C.UTF-8"}
        env.update(cfg.env)
        self._death, self._death_code, self._exec_id = None, None, None
        first = self._claim_first_shell()
        try:
            if first is not None:
                self._sock, self._death = first.sock, first.death
            else:
                self._exec_id = api.exec_create(
                self.sandbox.id,
                    [cfg.shell, "--noprofile", "--norc", "--noediting", "-i"],
                    stdin=True,
                    tty=True,
                    user=cfg.user if cfg.user is not None else (self.sandbox.config.user or ""),
                    workdir=cfg.workdir or self.sandbox.config.workdir,
                    environment=env,
                )["Id"]
                self._sock = ExecSocket(api, self._exec_id, tty=True)
        except docker.errors.APIError as exc:
            self.sandbox.check_alive()
            raise SessionError(f"could not start a shell in {self.sandbox.name}: {exc}") from None
        self._proc = fdpexpect.fdspawn(self._sock.fileno(), timeout=30, use_poll=True)
        self._pending = b""
        # One line sets up the prompt protocol. It is typed at once, without waiting for the
        # shell: the terminal queues it until bash reads its first line, so the process start-up
        # (the engine's runc exec, most of this method's time) and the typing overlap. The line
        # sets the window size too (`stty cols rows`), which makes an `exec_resize` call
        # redundant; that call would also block until the process runs. The line itself is
        # echoed (echo is still on when it is typed); everything before the first sentinel is
        # discarded.
        # Single quotes: expanded at each prompt, not now. `$$` is the shell's pid, used to find
        # its foreground process group when Ctrl-C is not enough.
        # The marker also carries the sandbox's uptime at the prompt (`read`, a built-in: no
        # process is started) and the last background job's pid, so that the job of the next
        # command can be told from earlier ones (see _foreground_pgid).
        # Only where the kernel reports no tpgid (gVisor): a runc sandbox's prompt reads no file.
        runtime = getattr(self.sandbox, "runtime", None)
        if runtime is None or not runtime.reports_tpgid:
            pc = (
                "__TE_RC=$?; __TE_UP=; read -r __TE_UP _ </proc/uptime 2>/dev/null; "
                f'printf "\\036TE%s:%d:%d:%s:%s:%s\\037\\n" {self._nonce} "$__TE_RC" "$$" "$__TE_UP" "$!" "$PWD"; '
                'PS1=""; PS2=""'
            )
        else:
            pc = (f'printf "\\036TE%s:%d:%d:::%s\\037\\n" {self._nonce} "$?" "$$" "$PWD"; '
                  'PS1=""; PS2=""')
        box = getattr(self.sandbox, "config", None)
        limits = runtime.shell_limits(box.memory_mb, box.pids_limit) if runtime is not None else ""
        setup = (
            f"{limits}stty -echo cols {cfg.cols} rows {cfg.rows} 2>/dev/null; unset HISTFILE; "
            f"PROMPT_COMMAND='{pc}'\n"
        )
        buf = OutputBuffer(4096, 4096)
        try:
            self._write(setup.encode())
            m = self._read_until(time.monotonic() + 30, buf)
        except _ShellDied:
            if first is not None:
                # The container's own shell could not start: try the exec'd one, whose failure
                # (if any) is reported below with the engine's words.
                self.close()
                return self.start()
            # The exec ended before a prompt: the engine could not run the shell (its error is
            # the output) or the shell exited at once.
            tail = clean_text(buf.getvalue()).strip()[-500:]
            self.close()
            self.sandbox.check_alive()
            raise SessionError(
                f"the shell `{cfg.shell}` in {self.sandbox.name} ended before showing a prompt "
                f"(is it installed in the image?). Output: {tail!r}"
            ) from None
        if m is None:
            tail = clean_text(buf.getvalue())[-500:]
            self.close()
            raise SessionError(
                f"the shell in {self.sandbox.name} did not show its prompt within 30 s "
                f"(is `{cfg.shell}` installed in the image?). Last output: {tail!r}"
            )
        self.shell_pid = int(m.group(2))
        self._note_prompt(m)
        self.busy = False
        return self

    def _claim_first_shell(self):
        """The sandbox's own first shell if it fits this session's settings, else None (then
        the shell is exec'd; an unclaimed first shell stays idle)."""
        cfg, sb = self.config, self.sandbox
        take = getattr(sb, "take_first_shell", None)
        first = getattr(sb, "_first_shell", None)
        if take is None or first is None:
            return None
        fits = (
            cfg.shell == first.shell
            and not cfg.env
            and cfg.user in (None, sb.config.user)
            and cfg.workdir in (None, sb.config.workdir)
        )
        return take() if fits else None

    def close(self) -> None:
        """Close the connection to the shell (the shell itself dies with its terminal)."""
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._proc = None

    # ------------------------------------------------------------------ low level I/O
    def _write(self, data: bytes) -> None:
        assert self._proc is not None
        if self.on_input is not None:
            self.on_input(data)
        try:
            self._proc.send(data)
        except OSError as exc:
            raise _ShellDied(str(exc)) from None

    def _emit(self, buf: OutputBuffer, data: bytes) -> None:
        if data:
            buf.feed(data)
            if self.on_output is not None:
                self.on_output(data)

    def _read_until(
        self,
        deadline: float,
        buf: OutputBuffer,
        *,
        quiet: float | None = None,
        first_quiet: float | None = None,
        cap: float = float("inf"),
    ) -> SentinelMatch | None:
        """Read into ``buf`` until the sentinel (returned), the deadline, ``cap`` bytes in
        ``buf``, or ``quiet`` seconds without output (these return None). Raises _ShellDied on
        EOF."""
        assert self._proc is not None and self._marker is not None
        got_output = False
        while True:
            m = self._marker.search(self._pending)
            d = self._death.search(self._pending) if self._death is not None else None
            if d and (not m or d.start() < m.start()):
                # The attached first shell exited; the container's main process said so.
                self._emit(buf, self._pending[: d.start()])
                self._pending = b""
                self._death_code = int(d.group(1))
                raise _ShellDied("the first shell exited")
            if m:
                self._emit(buf, self._pending[: m.start()])
                # What follows the sentinel belongs to the next read (e.g. a background job).
                self._pending = self._pending[m.end() :]
                return m
            if len(self._pending) > _WINDOW:
                self._emit(buf, self._pending[:-_WINDOW])
                self._pending = self._pending[-_WINDOW:]
            now = time.monotonic()
            if now >= deadline or buf.total > cap:
                return None
            silence = first_quiet if (first_quiet is not None and not got_output) else quiet
            wait = deadline - now if silence is None else min(silence, deadline - now)
            try:
                chunk = self._proc.read_nonblocking(65536, timeout=wait)
            except pexpect.TIMEOUT:
                if quiet is not None:
                    return None
                continue
            except (pexpect.EOF, OSError):
                self._emit(buf, self._pending)
                self._pending = b""
                raise _ShellDied("end of file") from None
            self._pending += chunk
            got_output = True

    def _flush_pending(self, buf: OutputBuffer) -> None:
        self._emit(buf, self._pending)
        self._pending = b""

    # ------------------------------------------------------------------ actions
    def run(self, command: str, timeout: float = 180.0) -> StepOutput:
        """Run one shell command and wait for the prompt (at most ``timeout`` seconds)."""
        if self.busy:
            if self._foreground_pgid() not in (None, self.shell_pid):
                out = self.send_keys(command.encode() + b"\r", wait=min(timeout, 5.0))
                out.notes.insert(
                    0,
                    "a program was still running in the foreground, so the command was typed "
                    "into it; send keys (for example C-c) to leave it.",
                )
                return out
            # Only the shell is there, with a half-typed line from earlier keys: erase it
            # (Ctrl-U, the terminal's line kill) so that it does not change this command.
            self._write(b"\x15")
            self.busy = False
        t0 = time.monotonic()
        buf = self._new_buffer()
        notes: list[str] = []
        trips = self._counters()
        timed_out = False
        try:
            if self._needs_repair:
                self._repair()
            self._write(self._command_line(command))
            m = self._read_until(t0 + timeout, buf, cap=self.config.output_cap_bytes)
            capped = m is None and buf.total > self.config.output_cap_bytes
            timed_out = m is None and not capped
            if m is None:
                m = self._escalate(buf, notes, timeout, capped=capped)
        except _ShellDied:
            out = self._after_death(buf, notes, t0, command_lost=buf.total == 0)
            out.timed_out = timed_out  # it may have died of the escalation after a timeout
            return self._after_action(out, trips)
        return self._after_action(
            self._result(buf, m, t0, notes, timed_out=timed_out, echo_of=command), trips
        )

    def send_keys(self, keys: bytes, *, wait: float = 1.0, quiet: float = 0.15) -> StepOutput:
        """Send raw keystrokes; return once output has been quiet for ``quiet`` seconds (or the
        prompt came back, or ``wait`` seconds passed)."""
        t0 = time.monotonic()
        buf = self._new_buffer()
        notes: list[str] = []
        trips = self._counters()
        try:
            self._write(keys)
            # Returns after `quiet` seconds without output; while output flows it keeps reading.
            # A program may take a moment to answer at all (python starts in ~0.2 s): until the
            # first byte arrives, silence may last up to FIRST_OUTPUT_WAIT.
            m = self._read_until(
                t0 + wait,
                buf,
                quiet=quiet,
                first_quiet=max(quiet, FIRST_OUTPUT_WAIT),
                cap=self.config.output_cap_bytes,
            )
        except _ShellDied:
            return self._after_action(self._after_death(buf, notes, t0), trips)
        if m is None:
            self._flush_pending(buf)
            self.busy = True
        return self._after_action(self._result(buf, m, t0, notes), trips)

    def interrupt(self) -> StepOutput:
        """Ctrl-C, then the same escalation as a timed-out command."""
        t0 = time.monotonic()
        buf, notes = self._new_buffer(), []
        try:
            m = self._escalate(buf, notes, None)
        except _ShellDied:
            return self._after_death(buf, notes, t0)
        return self._result(buf, m, t0, notes)

    # ------------------------------------------------------------------ internals
    def _counters(self) -> tuple[int, int | None]:
        guard = getattr(self.sandbox, "disk", None)
        ooms = self._ooms_seen  # as read after the last action: one read of the cgroup a step
        if ooms is None:
            read = getattr(self.sandbox, "oom_kills", None)
            ooms = read() if read is not None else None
        return (guard.trips if guard is not None else 0), ooms

    def _after_action(self, out: StepOutput, before: tuple[int, int | None]) -> StepOutput:
        """After an action: say so if the kernel killed a process for want of memory, and check
        the disk budget (rate-limited; the sandbox's watcher also checks while commands run) and
        say so if the agent's processes were killed for it."""
        trips, ooms = before
        if ooms is not None:
            now = self._ooms_seen = self.sandbox.oom_kills()
            if now is not None and now > ooms:
                limit = getattr(getattr(self.sandbox, "config", None), "memory_mb", None)
                out.notes.append(
                    f"out of memory: the kernel killed {now - ooms} process(es) of the sandbox"
                    + (f" (memory limit {limit} MB)" if limit else "") + "."
                )
        guard = getattr(self.sandbox, "disk", None)
        if guard is None:
            return out
        guard.check()
        if guard.trips > trips:
            out.notes.append(
                f"{guard.message()}: every process in the sandbox was killed."
            )
        return out

    def _new_buffer(self) -> OutputBuffer:
        # Raw bytes: keep generously more than the clean text needs (escapes are dropped).
        n = max(4 * self.config.max_output_chars, 16384)
        return OutputBuffer(n, n)

    def _command_line(self, command: str) -> bytes:
        data = command.encode("utf-8", errors="surrogateescape")
        single = b"\n" not in data and b"\r" not in data
        has_ctrl = any(b < 32 and b != 9 for b in data)
        if single and len(data) <= _TYPE_LIMIT and not has_ctrl:
            return data + b"\n"
        # Deliver through a file: the TTY would cut lines over 4 KiB and run each line as
        # its own command (one sentinel each). `source` runs it in this shell, so cd and
        # variables persist exactly as if typed. The file removes itself first; a shell of an
        # unprivileged user cannot remove a root-written file from the sticky directory, so it
        # empties it instead (no command text stays behind for the agent or a probe to find).
        self._cmd_n += 1
        path = f"{_CMD_DIR}/cmd-{self._nonce}-{self._cmd_n}.sh"
        self.sandbox.write_files(
            {path: b'rm -f -- "${BASH_SOURCE[0]}" 2>/dev/null || : > "${BASH_SOURCE[0]}"\n' + data + b"\n"},
            mode=0o666,
            dir_mode=0o1777,
        )
        return f". {path}\n".encode()

    def _escalate(
        self, buf: OutputBuffer, notes: list[str], timeout: float | None, capped: bool = False
    ) -> re.Match[bytes] | None:
        grace = self.config.grace
        if capped:
            notes.append(
                f"output exceeded {self.config.output_cap_bytes} bytes; the command was interrupted."
            )
        elif timeout is not None:
            notes.append(f"command timed out after {timeout:g} s.")
        self._write(b"\x03")
        m = self._read_until(time.monotonic() + grace, buf)
        if m is not None:
            notes.append("interrupted with Ctrl-C.")
            return m
        # Ctrl-C did not bring the prompt back (ignored SIGINT, stty -isig, a REPL...).
        pgid = self._foreground_pgid()
        # Never group 1 (or 0): a shell that exec'd a program in the attached first shell is
        # back in PID 1's group, and `kill -- -1` would be every process of the sandbox. Then
        # only the shell's own pid is killed (below), as for a shell that stopped responding.
        if pgid and pgid > 1 and pgid != self.shell_pid:
            self.sandbox.exec(["kill", "-9", "--", f"-{pgid}"], user="root", timeout=10)
            m = self._read_until(time.monotonic() + grace, buf)
            if m is not None:
                notes.append(f"Ctrl-C did not stop it; killed its process group {pgid}.")
                self._repair()
                return m
        notes.append("the shell did not respond; it was killed and a new shell was started.")
        self._flush_pending(buf)
        self._respawn()
        return None

    def _repair(self) -> None:
        """Bring the terminal back to the settings the protocol needs, discarding the output.

        Needed after the agent scrambled it (``stty echo``, ``stty raw -isig``): a Ctrl-C that
        was not a signal sits in the input queue as a character, so an empty line flushes it
        before ``stty sane`` restores line editing and signals.
        """
        self._needs_repair = False
        scratch = OutputBuffer(4096, 4096)
        cfg = self.config
        for line in (b"\n", f"stty sane -echo cols {cfg.cols} rows {cfg.rows} 2>/dev/null\n".encode()):
            self._write(line)
            if self._read_until(time.monotonic() + self.config.grace, scratch) is None:
                break

    def _note_prompt(self, m: re.Match[bytes]) -> None:
        self.cwd = m.group(5).decode("utf-8", "replace")
        try:
            self._prompt_uptime = float(m.group(3))
        except ValueError:  # no /proc/uptime in this sandbox
            self._prompt_uptime = None
        self._prompt_last_job = int(m.group(4) or 0)

    def _foreground_pgid(self) -> int | None:
        """The terminal's foreground process group: the shell's ``tpgid``. Where the kernel
        reports none (gVisor's /proc says 0), the group of the shell's newest child among those
        started since the last prompt: the job the shell waits for. A job of an earlier step (a
        server the agent started) is never taken for it: it started in an earlier tick of the
        clock, or in the prompt's own tick but as the background job the prompt reported."""
        if not self.shell_pid:
            return None
        res = self.sandbox.exec(
            ["sh", "-c", "cat /proc/[0-9]*/stat 2>/dev/null"], user="root", timeout=10
        )
        since = self._prompt_uptime
        newest: tuple[int, int] | None = None  # (pid, pgrp) of the shell's newest child
        for line in res.stdout.splitlines():
            head, _, tail = line.rpartition(b")")
            fields = tail.split()
            try:
                pid = int(head.split(b" (", 1)[0])
                ppid, pgrp, tpgid, start = int(fields[1]), int(fields[2]), int(fields[5]), int(fields[19])
            except (IndexError, ValueError):
                continue
            if pid == self.shell_pid and tpgid > 0:
                return tpgid
            # Start times and the prompt's uptime both count in ticks of 10 ms.
            if (ppid == self.shell_pid and since is not None and start >= round(since * _CLOCK_TICKS)
                    and pid > self._prompt_last_job and (newest is None or pid > newest[0])):
                newest = (pid, pgrp)
        return newest[1] if newest else None

    def _respawn(self) -> None:
        old_pid = self.shell_pid
        self.close()
        self.sandbox.check_alive()
        if old_pid:
            self.sandbox.exec(["kill", "-9", str(old_pid)], user="root", timeout=10)
        self.restarts += 1
        self.start()

    def _after_death(
        self, buf: OutputBuffer, notes: list[str], t0: float, command_lost: bool = False
    ) -> StepOutput:
        self._flush_pending(buf)
        guard = getattr(self.sandbox, "disk", None)
        if guard is not None:
            guard.wait_idle()  # the shell may have died in a disk-budget sweep still running
        self.sandbox.check_alive()  # a dead container is an infrastructure error, not data
        code = self._shell_exit_code()
        if self._death is not None and self._death_code is None and self.shell_pid:
            # The attach stream ended without the marker: make sure that shell is gone.
            self.sandbox.exec(["kill", "-9", str(self.shell_pid)], user="root", timeout=10)
        self.close()
        self.restarts += 1
        self.start()
        notes.append(
            f"the shell exited (exit code {code}); a new shell was started in {self.cwd}. "
            "Variables and the working directory were reset."
            + (" It printed nothing and exited normally: unless the command was meant to end the "
               "shell, it may not have run at all." if command_lost and code == 0 else "")
        )
        out = self._result(buf, None, t0, notes)
        out.shell_restarted = True
        return out

    def _shell_exit_code(self) -> int | None:
        if self._exec_id is None:  # the attached first shell: its code came with the marker
            return self._death_code
        for _ in range(20):
            info = self.sandbox.client.api.exec_inspect(self._exec_id)
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.01)
        return None

    def _result(
        self,
        buf: OutputBuffer,
        m: re.Match[bytes] | None,
        t0: float,
        notes: list[str],
        *,
        timed_out: bool = False,
        echo_of: str | None = None,
    ) -> StepOutput:
        exit_code = None
        restarted = False
        if m is not None:
            exit_code = int(m.group(1))
            self._note_prompt(m)
            self.busy = False
            if int(m.group(2)) != self.shell_pid:
                self.shell_pid = int(m.group(2))
        elif any("new shell" in n for n in notes):
            restarted = True
        raw = buf.getvalue()
        if echo_of is not None and raw.startswith(echo_of.encode()[:200]):
            # The agent turned echo back on (stty echo / sane / raw): drop the echoed command
            # line and restore the settings before the next command. Without canonical mode
            # the typed newline comes back as `^J` (echoctl), not as a line end.
            cmd = echo_of.encode()
            ctl = re.match(rb"\^[JM]\r?\n?", raw[len(cmd):]) if raw.startswith(cmd) else None
            if ctl is not None:
                raw = raw[len(cmd) + ctl.end() :]
            else:
                end = raw.find(b"\n", len(cmd))
                raw = raw[end + 1 :] if end >= 0 else b""
            self._needs_repair = True
        text, truncated = truncate_middle(
            clean_text(raw), self.config.max_output_chars, self.config.head_fraction
        )
        if buf.dropped:
            truncated = True
        if self._screen is not None:
            self._screen.feed(raw)
        return StepOutput(
            output=text,
            raw=raw,
            exit_code=exit_code,
            cwd=self.cwd,
            duration=time.monotonic() - t0,
            output_bytes=buf.total,
            truncated=truncated,
            timed_out=timed_out,
            busy=self.busy,
            shell_restarted=restarted,
            notes=notes,
        )

    # ------------------------------------------------------------------ screen
    def enable_screen(self) -> None:
        """Keep a rendered screen (rows x cols) of everything shown from now on."""
        if self._screen is None:
            self._screen = Screen(self.config.rows, self.config.cols)

    def screen_text(self) -> str | None:
        return None if self._screen is None else self._screen.text()

    def __enter__(self) -> "ShellSession":
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ShellSession", "SessionConfig", "StepOutput", "SandboxGoneError"]
