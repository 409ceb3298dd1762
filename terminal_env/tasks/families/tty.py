"""What the interactive families share: prompts that read the terminal and discard typeahead (for
the generated programs), the oracle's pseudo-terminal driver, and the stamp key."""

from __future__ import annotations

import random

# Terminal prompts that ignore typeahead, for a generated program (text to paste into it).
TTY_PROMPTS = r'''
import hashlib, hmac, json, os, sys, termios
try:
    _IN, _OUT = open("/dev/tty"), open("/dev/tty", "w")
except OSError:
    sys.exit("this program talks to a terminal; run it in one (not with a pipe or a file)")


def say(text=""):
    _OUT.write(text + "\n")
    _OUT.flush()


def ask(prompt):
    termios.tcflush(_IN.fileno(), termios.TCIFLUSH)
    _OUT.write(prompt + ": ")
    _OUT.flush()
    line = _IN.readline()
    if not line:
        sys.exit("aborted")
    return line.strip()


def stamp(text):
    return hmac.new(KEY.encode(), text.encode(), hashlib.sha256).hexdigest()
'''

# The oracle's driver: a pty, one input per prompt (a prompt ends with PROMPT and then silence);
# it ends the program if it falls silent or prompts for more than it was given.
_DRIVER = r'''python3 - <<'PY'
import os, pty, select
answers = __ANSWERS__
pid, fd = pty.fork()
if pid == 0:
    os.execv(__ARGV__[0], __ARGV__)
buf, i, ended = b"", 0, False
while True:
    r, _, _ = select.select([fd], [], [], 15)
    if not r:
        break
    try:
        data = os.read(fd, 4096)
    except OSError:
        data = b""
    if not data:
        ended = True
        break
    buf += data
    if buf.endswith(__PROMPT__) and not select.select([fd], [], [], 0.3)[0]:
        if i >= len(answers):
            break
        os.write(fd, answers[i].encode() + b"\n")
        i, buf = i + 1, b""
if not ended:  # silent, or asking for more than it was given: stop it rather than hang
    os.kill(pid, 15)
os.waitpid(pid, 0)
PY
'''


def pty_driver(argv: list[str], answers: list[str], prompt: str = ": ") -> str:
    """An oracle's bash that runs ``argv`` on a pseudo-terminal and types ``answers``, one at each
    prompt."""
    return (_DRIVER.replace("__ANSWERS__", repr(answers)).replace("__ARGV__", repr(argv))
            .replace("__PROMPT__", repr(prompt.encode())))


def seal_key(rng: random.Random) -> str:
    """The key a generated program stamps its output with (readable in the program: the stamp
    catches a plain edit of the output, not a forger who reads the program)."""
    return "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(28))
