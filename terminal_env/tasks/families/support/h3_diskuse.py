"""Directory trees for the sys-disk-usage family, and the reference usage report.

``make_tree`` builds a hidden tree (owners, hard links, symlinks to files, directories and out of
the tree, sparse files, old files); ``report`` is the report the agent's program must print."""

import json
import os
import pwd
import stat
import time

UIDS = [0, 33, 65534, 4242, 1001]
EXTS = ["log", "gz", "csv", "json", "txt", "tar.gz", "", "LOG", "db", "Json"]
DIRNAMES = ["cache", "uploads", "backups", "logs", "tmp", "reports", "media", "spool", "archive"]
AGES = [1, 5, 20, 40, 100, 400]


def make_tree(rng, root, links=True, sparse=True, now=None):
    now = time.time() if now is None else now
    dirs = [root]
    for i, name in enumerate(rng.sample(DIRNAMES, rng.randint(3, 5))):
        d = os.path.join(root, name)
        os.makedirs(d)
        dirs.append(d)
        for j in range(rng.randint(0, 2)):
            os.makedirs(os.path.join(d, f"part{j}"))
            dirs.append(os.path.join(d, f"part{j}"))
    files = []
    for k in range(rng.randint(20, 35)):
        ext = rng.choice(EXTS)
        name = ("." if rng.random() < 0.1 else "") + f"f{k}" + (f".{ext}" if ext else "")
        p = os.path.join(rng.choice(dirs), name)
        size = rng.choice([0, rng.randint(1, 5000), rng.randint(5000, 120000)])
        with open(p, "wb") as f:
            f.write((b"0123456789abcdef" * (size // 16 + 1))[:size])
            if sparse and rng.random() < 0.2:
                f.truncate(size + rng.randint(1, 6) * 1_000_000)
        uid = rng.choice(UIDS)
        os.chown(p, uid, uid)
        t = now - rng.choice(AGES) * 86400 + rng.randint(-3000, 3000)
        os.utime(p, (t, t))
        files.append(p)
    if links:
        for n in range(rng.randint(2, 4)):
            src = rng.choice(files)
            os.link(src, os.path.join(rng.choice(dirs), f"hl{n}-{os.path.basename(src).lstrip('.')}"))
        os.symlink(rng.choice(files), os.path.join(rng.choice(dirs), "latest.log"))
        os.symlink(dirs[1], os.path.join(rng.choice(dirs[2:] or dirs), "shortcut"))
        os.symlink("/usr/lib", os.path.join(root, "syslib"))
        os.symlink("no-such-file", os.path.join(rng.choice(dirs), "dangling.txt"))
    return root


def _files(root):
    """Regular files under root, symlinks not followed: {inode key: (first path, lstat)}."""
    seen = {}
    for d, dirnames, names in os.walk(root):
        dirnames.sort()
        for n in names:
            p = os.path.join(d, n)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = os.path.relpath(p, root)
            key = (st.st_dev, st.st_ino)
            if key not in seen or rel.encode() < seen[key][0].encode():
                seen[key] = (rel, st)
    return sorted(seen.values(), key=lambda v: v[0].encode())


def _size(st, measure):
    return st.st_blocks * 512 if measure == "allocated" else st.st_size


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _ext(path):
    name = os.path.basename(path).lstrip(".")
    return name.rsplit(".", 1)[1].lower() if "." in name else ""


def report(kind, root, measure="apparent", days=0, now=None):
    """The report as the program must print it (a string ending in a newline)."""
    files = _files(root)
    if kind == "by-owner":
        tot = {}
        for rel, st in files:
            tot[_user(st.st_uid)] = tot.get(_user(st.st_uid), 0) + _size(st, measure)
        return "".join(f"{u} {b}\n" for u, b in sorted(tot.items(), key=lambda x: (-x[1], x[0])))
    if kind == "top-dirs":
        tot = {}
        for rel, st in files:
            top = rel.split(os.sep)[0] if os.sep in rel else "."
            tot[top] = tot.get(top, 0) + _size(st, measure)
        for name in os.listdir(root):
            p = os.path.join(root, name)
            if os.path.isdir(p) and not os.path.islink(p):
                tot.setdefault(name, 0)
        return "".join(f"{b} {n}\n" for n, b in sorted(tot.items(), key=lambda x: (-x[1], x[0])))
    if kind == "by-ext":
        tot = {}
        for rel, st in files:
            e = tot.setdefault(_ext(rel), {"files": 0, "bytes": 0})
            e["files"] += 1
            e["bytes"] += _size(st, measure)
        return json.dumps(tot, sort_keys=True) + "\n"
    now = time.time() if now is None else now
    old = [(rel, st) for rel, st in files if st.st_mtime < now - days * 86400]
    return "".join(f"{rel}\n" for rel, st in old) + f"TOTAL {sum(st.st_size for rel, st in old)}\n"


def main(argv):
    kind, measure = KIND, MEASURE  # noqa: F821 (set by the program that embeds this module)
    out = report(kind, argv[1], measure, int(argv[2]) if len(argv) > 2 else 0)
    print(out, end="")
