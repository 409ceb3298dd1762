"""A git repository written in pure Python (loose objects, refs, reflogs, an index and the work
tree), so that a family can ship a repository with a known history as plain files under /app
and know every commit's hash when it writes the tests. Objects are what git itself would write
for the same content, author, committer and dates."""

import hashlib
import struct
import zlib

EPOCH = 1767225600  # 2026-01-01T00:00:00Z


class Repo:
    def __init__(self, branch="main"):
        self.objects = {}
        self.refs = {}
        self.logs = {}
        self.head = branch
        self.clock = EPOCH

    def _put(self, kind, data):
        raw = f"{kind} {len(data)}\0".encode() + data
        sha = hashlib.sha1(raw).hexdigest()
        self.objects[sha] = raw
        return sha

    def blob(self, content):
        return self._put("blob", content if isinstance(content, bytes) else content.encode())

    def tree(self, files):
        root = {}
        for path, content in files.items():
            parts = path.split("/")
            d = root
            for p in parts[:-1]:
                d = d.setdefault(p, {})
            d[parts[-1]] = content
        return self._tree(root)

    def _tree(self, d):
        entries = []
        for name, v in d.items():
            if isinstance(v, dict):
                entries.append((name + "/", b"40000 " + name.encode(), self._tree(v)))
            else:
                entries.append((name, b"100644 " + name.encode(), self.blob(v)))
        entries.sort(key=lambda e: e[0].encode())
        return self._put("tree", b"".join(h + b"\0" + bytes.fromhex(s) for _, h, s in entries))

    def commit(self, files, message, parents=(), author=("Ana Lima", "ana@example.com"),
               committer=None, when=None):
        """A commit of the full file set ``files``; returns its hash. Time moves on by itself."""
        if when is None:
            self.clock += 3600 + 61 * (len(self.objects) % 37)
            when = self.clock
        an, ae = author
        cn, ce = committer or author
        lines = [f"tree {self.tree(files)}"] + [f"parent {p}" for p in parents]
        lines += [f"author {an} <{ae}> {when} +0000", f"committer {cn} <{ce}> {when} +0000", "",
                  message.rstrip("\n")]
        return self._put("commit", ("\n".join(lines) + "\n").encode())

    def set_ref(self, name, sha, msg=None, who=("Ana Lima", "ana@example.com"), log_head=False):
        """Point refs/heads/NAME (or a full ref name) at sha, with a reflog line when msg is given."""
        ref = name if name.startswith("refs/") else f"refs/heads/{name}"
        old = self.refs.get(ref, "0" * 40)
        self.refs[ref] = sha
        if msg is not None:
            self.clock += 120
            line = f"{old} {sha} {who[0]} <{who[1]}> {self.clock} +0000\t{msg}\n"
            self.logs.setdefault(ref, []).append(line)
            if log_head:
                self.log_head(old, sha, msg, who)

    def log_head(self, old, new, msg, who=("Ana Lima", "ana@example.com")):
        self.clock += 60
        self.logs.setdefault("HEAD", []).append(
            f"{old} {new} {who[0]} <{who[1]}> {self.clock} +0000\t{msg}\n")

    def delete_ref(self, name):
        ref = name if name.startswith("refs/") else f"refs/heads/{name}"
        self.refs.pop(ref, None)
        self.logs.pop(ref, None)

    def _index(self, files):
        body = b""
        paths = sorted(files, key=lambda p: p.encode())
        for path in paths:
            data = files[path] if isinstance(files[path], bytes) else files[path].encode()
            e = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, len(data))
            e += bytes.fromhex(self.blob(data)) + struct.pack(">H", min(len(path.encode()), 0xFFF))
            e += path.encode()
            body += e + b"\0" * (8 - len(e) % 8)
        body = b"DIRC" + struct.pack(">II", 2, len(paths)) + body
        return body + hashlib.sha1(body).digest()

    def write(self, prefix, worktree, extra_config=""):
        """Instance files for a repository at ``prefix`` whose work tree and index hold
        ``worktree`` (normally the files of HEAD's commit)."""
        out = {f"{prefix}/{p}": c for p, c in worktree.items()}
        g = f"{prefix}/.git"
        out[f"{g}/HEAD"] = f"ref: refs/heads/{self.head}\n"
        out[f"{g}/config"] = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n"
                              "\tbare = false\n\tlogallrefupdates = true\n" + extra_config)
        out[f"{g}/description"] = "Unnamed repository.\n"
        for sha, raw in sorted(self.objects.items()):
            out[f"{g}/objects/{sha[:2]}/{sha[2:]}"] = zlib.compress(raw, 6)
        for ref, sha in sorted(self.refs.items()):
            out[f"{g}/{ref}"] = sha + "\n"
        for ref, lines in sorted(self.logs.items()):
            out[f"{g}/logs/{ref}"] = "".join(lines)
        out[f"{g}/index"] = self._index(worktree)
        return out
