"""Volumes for the sys-disk-usage family, and the reference space report.

``make_tree`` fills a hidden volume (files of several uids, hard links, symlinks to files, to
folders and out of the volume, sparse files, old files); ``report`` is what the agent's program
must print for it."""

import json
import os
import time

UIDS = [0, 33, 65534, 4242, 1001]
EXTS = ["log", "gz", "csv", "json", "txt", "tar.gz", "", "LOG", "db", "Json"]
AREAS = ["cache", "uploads", "snapshots", "journal", "tmp", "exports", "media", "spool", "archive"]
AGES = [1, 5, 20, 40, 100, 400]


def make_tree(rng, top, links=True, sparse=True, now=None):
    now = time.time() if now is None else now
    folders = [top]
    for name in rng.sample(AREAS, rng.randint(3, 5)):
        area = os.path.join(top, name)
        os.makedirs(area)
        folders.append(area)
        for j in range(rng.randint(0, 2)):
            os.makedirs(os.path.join(area, f"part{j}"))
            folders.append(os.path.join(area, f"part{j}"))
    made = []
    for k in range(rng.randint(20, 35)):
        ext = rng.choice(EXTS)
        name = ("." if rng.random() < 0.1 else "") + f"f{k}" + (f".{ext}" if ext else "")
        p = os.path.join(rng.choice(folders), name)
        size = rng.choice([0, rng.randint(1, 5000), rng.randint(5000, 120000)])
        with open(p, "wb") as f:
            f.write((b"0123456789abcdef" * (size // 16 + 1))[:size])
            if sparse and rng.random() < 0.2:
                f.truncate(size + rng.randint(1, 6) * 1_000_000)
        uid = rng.choice(UIDS)
        os.chown(p, uid, uid)
        t = now - rng.choice(AGES) * 86400 + rng.randint(-3000, 3000)
        os.utime(p, (t, t))
        made.append(p)
    if links:
        for n in range(rng.randint(2, 4)):
            src = rng.choice(made)
            os.link(src, os.path.join(rng.choice(folders), f"hl{n}-{os.path.basename(src).lstrip('.')}"))
        os.symlink(rng.choice(made), os.path.join(rng.choice(folders), "latest.log"))
        os.symlink(folders[1], os.path.join(rng.choice(folders[2:] or folders), "shortcut"))
        os.symlink("/usr/lib", os.path.join(top, "syslib"))
        os.symlink("no-such-file", os.path.join(rng.choice(folders), "dangling.txt"))
    return top


def _walk(top, prefix=""):
    """(path under top, stat result) of every plain file; symbolic links are never followed."""
    with os.scandir(os.path.join(top, prefix)) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            yield from _walk(top, prefix + e.name + "/")
        elif e.is_file(follow_symlinks=False):
            yield prefix + e.name, e.stat(follow_symlinks=False)


def _counted(top):
    """One (path, stat result) per inode: the path first in byte order; sorted by path."""
    first = {}
    for path, st in _walk(top):
        key = (st.st_dev, st.st_ino)
        if key not in first or path.encode() < first[key][0].encode():
            first[key] = (path, st)
    return sorted(first.values(), key=lambda v: v[0].encode())


def _size(st, measure):
    return st.st_blocks * 512 if measure == "allocated" else st.st_size


def _logins():
    """uid -> login name, the first /etc/passwd entry for each uid."""
    names = {}
    with open("/etc/passwd") as f:
        for line in f:
            parts = line.split(":")
            if len(parts) > 2 and parts[2].isdigit():
                names.setdefault(int(parts[2]), parts[0])
    return names


def _ext(path):
    name = os.path.basename(path).lstrip(".")
    return name.rsplit(".", 1)[1].lower() if "." in name else ""


def report(kind, top, measure="apparent", days=0, now=None):
    """The report as the program must print it (a string ending in a newline)."""
    counted = _counted(top)
    if kind == "by-user":
        logins, tot = _logins(), {}
        for path, st in counted:
            who = logins.get(st.st_uid, str(st.st_uid))
            tot[who] = tot.get(who, 0) + _size(st, measure)
        return "".join(f"{u} {b}\n" for u, b in sorted(tot.items(), key=lambda x: (-x[1], x[0])))
    if kind == "top-level":
        tot = {}
        for path, st in counted:
            head = path.split("/")[0] if "/" in path else "."
            tot[head] = tot.get(head, 0) + _size(st, measure)
        with os.scandir(top) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    tot.setdefault(e.name, 0)
        return "".join(f"{b} {n}\n" for n, b in sorted(tot.items(), key=lambda x: (-x[1], x[0])))
    if kind == "by-ext":
        tot = {}
        for path, st in counted:
            e = tot.setdefault(_ext(path), {"files": 0, "bytes": 0})
            e["files"] += 1
            e["bytes"] += _size(st, measure)
        return json.dumps(tot, sort_keys=True) + "\n"
    now = time.time() if now is None else now
    old = [(path, st) for path, st in counted if st.st_mtime < now - days * 86400]
    return "".join(f"{path}\n" for path, st in old) + f"TOTAL {sum(st.st_size for path, st in old)}\n"


def main(argv):
    kind, measure = KIND, MEASURE  # noqa: F821 (set by the program that embeds this module)
    out = report(kind, argv[1], measure, int(argv[2]) if len(argv) > 2 else 0)
    print(out, end="")
