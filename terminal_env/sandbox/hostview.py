"""A container's files read from the host, through its PID 1's root (``/proc/PID/root``).

Each read through the engine's archive API costs about as much CPU as an exec (the engine starts
a helper to make the archive: ~45 ms a call here); the verifier made a dozen such calls and forty
file stats per episode. Where the sandbox's processes are host processes and this process may
read them (root, a local engine, runc rather than gVisor: the same conditions as the host-side
sweep), the same answers come from the host in microseconds.

The walk never leaves the container's root: every path component is opened with ``O_NOFOLLOW``
relative to the directory before it, and a symbolic link met on the way is read and resolved
inside the container's root (an absolute target starts again from that root; ``..`` stops at it),
as the engine resolves it. The final component is never followed (``lstat`` semantics: a link is
reported as a link, and never read as a file). A link loop, or more than 40 links, is an error.
PID 1 is checked to be the container's own init (in its cgroup, pid 1 of its pid namespace)
before and after its root is opened, so a reused pid can never point the reads at the host.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from .sweep import _ns_levels, cgroup_pids, host_sweep_possible

_MAX_LINKS = 40


class HostView:
    """Read-only questions about a running container's files, answered from the host."""

    def __init__(self, root_fd: int):
        self._root = root_fd

    @classmethod
    def of(cls, sandbox: Any) -> HostView | None:
        """The view of ``sandbox``'s files, or None where it cannot be had from the host (then
        the caller asks the engine)."""
        if not host_sweep_possible() or not getattr(sandbox.runtime, "host_processes", False):
            return None
        pid = _init_pid(sandbox.id)
        if pid is None:
            return None
        try:
            fd = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        if _init_pid(sandbox.id) != pid:  # the process whose root was opened is the container's
            os.close(fd)
            return None
        return cls(fd)

    def close(self) -> None:
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def __enter__(self) -> HostView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ questions
    def lstat(self, path: str) -> os.stat_result | None:
        """The file at ``path`` (its last component not followed), or None if nothing is there."""
        try:
            parent, name = self._parent(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            if name is None:
                return os.fstat(parent)
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(parent)

    def read_file(self, path: str, limit: int) -> bytes | None:
        """A regular file's bytes (None: not a regular file, or over ``limit`` bytes);
        FileNotFoundError when nothing is there."""
        parent, name = self._parent(path)
        try:
            if name is None:
                return None
            return _read_regular(parent, name, limit)
        finally:
            os.close(parent)

    def read_dir(self, path: str, limit: int) -> dict[str, bytes]:
        """The regular files directly in a directory, by name (links, devices, subdirectories
        and files over ``limit`` bytes left out); FileNotFoundError if it is not there. A link
        there gives no files, as the engine's archive of a link holds only the link."""
        parent, name = self._parent(path)
        try:
            if name is None:
                folder = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent)
            else:
                try:
                    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    raise FileNotFoundError(path) from None
                if not stat.S_ISDIR(st.st_mode):
                    return {}
                folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                 dir_fd=parent)
        finally:
            os.close(parent)
        try:
            out: dict[str, bytes] = {}
            for entry in sorted(os.listdir(folder)):
                try:
                    data = _read_regular(folder, entry, limit)
                except FileNotFoundError:
                    continue  # gone since it was listed
                if data is not None:
                    out[entry] = data
            return out
        finally:
            os.close(folder)

    # ------------------------------------------------------------------ the walk
    def realpath(self, path: str) -> str:
        """``path`` with every link resolved inside the root, the last one too (what the
        engine reports as a link's target); a missing tail is kept as it is written."""
        stack, name = self._walk(path, follow_last=True)
        return "/" + "/".join(stack + ([name] if name else []))

    def _parent(self, path: str) -> tuple[int, str | None]:
        """(an open directory, the last component's name in it), links on the way resolved
        inside the root; (the directory itself, None) when ``path`` names the root or ends in
        ``..``. The caller closes the descriptor."""
        stack, name = self._walk(path)
        return self._open_dir(stack), name

    def _walk(self, path: str, follow_last: bool = False) -> tuple[list[str], str | None]:
        """(the directories below the root that hold the last component, its name)."""
        if not path.startswith("/"):
            raise ValueError(f"an absolute path is needed, got {path!r}")
        follow_last = follow_last or path.endswith("/")  # "dir-link/" means where it leads
        todo = [p for p in path.split("/") if p not in ("", ".")]
        stack: list[str] = []  # the resolved directories below the root
        links = 0
        while True:
            if not todo:
                return stack, None
            last = len(todo) == 1
            if last and todo[0] != ".." and not follow_last:
                return stack, todo[0]
            part = todo.pop(0)
            if part == "..":
                if stack:
                    stack.pop()
                continue
            where = self._open_dir(stack)
            try:
                try:
                    st = os.stat(part, dir_fd=where, follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return stack, part
                    raise
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(part, dir_fd=where)
                elif last:
                    return stack, part
                elif stat.S_ISDIR(st.st_mode):
                    stack.append(part)
                    continue
                else:
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
            finally:
                os.close(where)
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            if target.startswith("/"):
                stack = []
            todo = [p for p in target.split("/") if p not in ("", ".")] + todo

    def _open_dir(self, parts: list[str]) -> int:
        fd = os.dup(self._root)
        try:
            for part in parts:
                nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd


def _read_regular(folder: int, name: str, limit: int) -> bytes | None:
    """The bytes of ``name`` in ``folder`` if it is a regular file of at most ``limit`` bytes."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(name) from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        return None
    # O_NONBLOCK: were it swapped for a pipe since, opening it must not wait for a writer
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def _init_pid(container_id: str) -> int | None:
    """The host pid of the container's PID 1: in its cgroup, pid 1 of the container's pid
    namespace and of no namespace nested in it."""
    for pid in cgroup_pids(container_id) or []:
        if _ns_levels(pid) == [pid, 1]:
            return pid
    return None
