"""Key names (tmux style) to the bytes a terminal sends for them.

>>> encode_keys(["ls -l", "Enter"])
b'ls -l\\r'
>>> encode_keys(["C-c", "Up", "M-x", "Escape", ":wq", "Enter"])
b'\\x03\\x1b[A\\x1bx\\x1b:wq\\r'
>>> encode_keys(["Enter"], literal=True)
b'Enter'
"""

from __future__ import annotations

from typing import Iterable

from .errors import ConfigError

NAMED_KEYS: dict[str, bytes] = {
    "Enter": b"\r",
    "Return": b"\r",
    "Tab": b"\t",
    "BTab": b"\x1b[Z",
    "Escape": b"\x1b",
    "Esc": b"\x1b",
    "Space": b" ",
    "BSpace": b"\x7f",
    "Backspace": b"\x7f",
    "Up": b"\x1b[A",
    "Down": b"\x1b[B",
    "Right": b"\x1b[C",
    "Left": b"\x1b[D",
    "Home": b"\x1b[H",
    "End": b"\x1b[F",
    "PageUp": b"\x1b[5~",
    "PPage": b"\x1b[5~",
    "PageDown": b"\x1b[6~",
    "NPage": b"\x1b[6~",
    "Delete": b"\x1b[3~",
    "DC": b"\x1b[3~",
    "Insert": b"\x1b[2~",
    "IC": b"\x1b[2~",
    "F1": b"\x1bOP",
    "F2": b"\x1bOQ",
    "F3": b"\x1bOR",
    "F4": b"\x1bOS",
    "F5": b"\x1b[15~",
    "F6": b"\x1b[17~",
    "F7": b"\x1b[18~",
    "F8": b"\x1b[19~",
    "F9": b"\x1b[20~",
    "F10": b"\x1b[21~",
    "F11": b"\x1b[23~",
    "F12": b"\x1b[24~",
}
_CTRL_SPECIAL = {"@": 0, "Space": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31, "?": 127}


def key_bytes(token: str) -> bytes | None:
    """Bytes for one key name (``C-c``, ``M-x``, ``Up``, ...), or None if it is not a key name."""
    if token in NAMED_KEYS:
        return NAMED_KEYS[token]
    if len(token) >= 3 and token[1] == "-" and token[0] in "CM^":
        rest = token[2:]
        if token[0] == "M":
            inner = key_bytes(rest) if len(rest) > 1 else rest.encode()
            return None if inner is None else b"\x1b" + inner
        if rest in _CTRL_SPECIAL:
            return bytes([_CTRL_SPECIAL[rest]])
        if len(rest) == 1 and rest.isalpha():
            return bytes([ord(rest.lower()) & 0x1F])
    return None


def encode_keys(keys: str | Iterable[str], *, literal: bool = False) -> bytes:
    """Encode a sequence of key names and literal text.

    Each item that is a key name becomes its bytes; any other item is typed as text. With
    ``literal=True`` every item is text. A single string is one item.
    """
    if isinstance(keys, str):
        keys = [keys]
    out = bytearray()
    for item in keys:
        if not isinstance(item, str):
            raise ConfigError(f"keys must be strings, got {type(item).__name__}: {item!r}")
        b = None if literal else key_bytes(item)
        out += b if b is not None else item.encode("utf-8")
    return bytes(out)
