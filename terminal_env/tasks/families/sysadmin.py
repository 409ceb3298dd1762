"""Generated task families of the sysadmin category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support import h3_diskuse, source


FAMILIES: list[Family] = []

# ------------------------------------------------------------------ port-owners
# A program that lists which process owns which socket, from /proc alone (no ss/netstat/lsof).
# The tests start hidden socket holders (renamed python3 binaries, forks, other users, IPv6) and run it.

_PORT_OUT = {
    "tcp-listen": ("one line `PORT PID COMMAND` for every TCP socket in the LISTEN state, IPv4 and "
                   "IPv6 alike", "lines"),
    "udp-bound": ("one line `PORT PID COMMAND` for every UDP socket that is bound to a local port "
                  "and not connected to a remote address, IPv4 and IPv6 alike", "lines"),
    "addr-json": ("a JSON array with one object `{\"address\": ..., \"port\": ..., \"pid\": ..., "
                  "\"command\": ...}` for every TCP socket in the LISTEN state (IPv4 and IPv6); "
                  "`address` is the local address the socket is bound to: dotted IPv4 "
                  "(`0.0.0.0`, `127.0.0.2`), IPv6 in its shortest form (`::`), except that an "
                  "IPv4-mapped IPv6 address is written `::ffff:` followed by the dotted IPv4 address",
                  "json"),
    "owner": ("one line `PORT USER` for every TCP socket in the LISTEN state, IPv4 and IPv6 "
              "alike, where USER is the user name of the socket's owner (the user that created it), "
              "or the numeric user id when there is no such user in /etc/passwd", "owner"),
}

_PORT_SOLVE = r'''mkdir -p /app/bin
cat > /app/bin/sockmap <<'PY'
#!/usr/bin/env python3
import json, os, socket, struct
VARIANT = __VARIANT__
def addr(hexa):
    raw = bytes.fromhex(hexa)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    words = b"".join(struct.pack("<I", struct.unpack(">I", raw[i:i + 4])[0]) for i in range(0, 16, 4))
    if words[:12] == b"\0" * 10 + b"\xff\xff":
        return "::ffff:" + socket.inet_ntop(socket.AF_INET, words[12:])
    return socket.inet_ntop(socket.AF_INET6, words)
socks = {}
for proto in (("udp", "udp6") if VARIANT == "udp-bound" else ("tcp", "tcp6")):
    for line in open(f"/proc/net/{proto}").read().splitlines()[1:]:
        f = line.split()
        la, ra, st, owner_id, inode = f[1], f[2], f[3], int(f[7]), f[9]
        if VARIANT == "udp-bound":
            if st != "07" or int(ra.split(":")[1], 16) != 0 or int(la.split(":")[1], 16) == 0:
                continue
        elif st != "0A":
            continue
        socks[inode] = (addr(la.split(":")[0]), int(la.split(":")[1], 16), owner_id)
rows = set()
if VARIANT == "owner":
    rows = {(p, a, 0, "", u) for a, p, u in socks.values()}
for pid in os.listdir("/proc") if VARIANT != "owner" else []:
    if not pid.isdigit():
        continue
    try:
        comm = open(f"/proc/{pid}/comm").read().strip()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in socks:
            a, port, owner_id = socks[link[8:-1]]
            rows.add((port, a, int(pid), comm, owner_id))
users = {}
for line in open("/etc/passwd"):
    p = line.split(":")
    users.setdefault(int(p[2]), p[0])
rows = sorted(rows, key=lambda r: (r[0], r[1], r[2]))
if VARIANT == "addr-json":
    print(json.dumps([{"address": a, "port": p, "pid": pid, "command": c} for p, a, pid, c, u in rows]))
else:
    seen = set()
    key = (lambda r: (r[0], str(users.get(r[4], r[4])))) if VARIANT == "owner" else (lambda r: (r[0], r[2]))
    for p, a, pid, c, u in sorted(rows, key=key):
        line = f"{p} {users.get(u, u)}" if VARIANT == "owner" else f"{p} {pid} {c}"
        if line not in seen:
            seen.add(line)
            print(line)
PY
chmod +x /app/bin/sockmap
'''

_PORT_TESTS = r'''"""Starts hidden socket holders (renamed python3 binaries) and runs /app/bin/sockmap."""

import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

VARIANT = __VARIANT__
PROG = "/app/bin/sockmap"
NAMES = __NAMES__

HOLDER = r"""
import json, os, socket, sys, time
spec = json.loads(sys.argv[1])
keep, by_port = [], {}
for fam, typ, host, port in spec["binds"]:
    s = socket.socket(socket.AF_INET6 if fam == 6 else socket.AF_INET,
                      socket.SOCK_DGRAM if typ == "udp" else socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == 6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if "." in host else 1)
    s.bind((host, port))
    if typ == "tcp":
        s.listen(8)
    keep.append(s)
    by_port[(typ, port)] = s
for typ, port, local in spec.get("connect", []):
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if typ == "udp" else socket.SOCK_STREAM)
    c.bind(("127.0.0.1", local))
    c.connect(("127.0.0.1", port))
    keep.append(c)
    if typ == "tcp":
        keep.append(by_port[(typ, port)].accept()[0])
for _ in range(3):
    keep.append(os.dup(keep[0].fileno()))
pids = [os.getpid()]
if spec.get("fork"):
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    pids.append(child)
with open(spec["ready"] + ".tmp", "w") as f:
    json.dump(pids, f)
os.rename(spec["ready"] + ".tmp", spec["ready"])
time.sleep(600)
"""

_procs, _pids = [], []


def holder(name, binds, connect=(), fork=False, owner_id=None):
    d = Path(tempfile.mkdtemp())
    d.chmod(0o755)
    exe = d / name
    shutil.copy("/usr/bin/python3", exe)
    ready = str(d / "ready.json")
    Path(ready).parent.chmod(0o777)
    spec = {"binds": binds, "connect": list(connect), "fork": fork, "ready": ready}
    pre = None
    if owner_id is not None:
        def pre():
            os.setgid(owner_id)
            os.setuid(owner_id)
    p = subprocess.Popen([str(exe), "-c", HOLDER, json.dumps(spec)], preexec_fn=pre,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _procs.append(p)
    for _ in range(200):
        if os.path.exists(ready):
            _pids.extend(json.loads(Path(ready).read_text()))
            return json.loads(Path(ready).read_text())
        if p.poll() is not None:
            raise RuntimeError(p.stderr.read().decode())
        time.sleep(0.05)
    raise RuntimeError("holder did not start")


@pytest.fixture(autouse=True)
def cleanup():
    yield
    for p in _procs:
        p.kill()
        p.wait()
    for pid in _pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    _procs.clear()
    _pids.clear()
    time.sleep(0.2)


def run():
    r = subprocess.run([PROG], capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-600:]}"
    if VARIANT == "addr-json":
        return [tuple(d[k] for k in ("port", "address", "pid", "command")) for d in json.loads(r.stdout)]
    return [tuple(line.split()) for line in r.stdout.splitlines() if line.strip()]


def expect(rows, ports):
    """rows: (port, address, pid, command, user); the expected output for our ports only."""
    rows = sorted(set(r for r in rows if r[0] in ports), key=lambda r: (r[0], r[1], r[2]))
    if VARIANT == "addr-json":
        return [(p, a, pid, c) for p, a, pid, c, u in rows]
    out = []
    key = (lambda r: (r[0], r[4])) if VARIANT == "owner" else (lambda r: (r[0], r[2]))
    for p, a, pid, c, u in sorted(rows, key=key):
        line = (str(p), u) if VARIANT == "owner" else (str(p), str(pid), c)
        if line not in out:
            out.append(line)
    return out


def mine(got, ports):
    return [g for g in got if int(g[0]) in ports]


def ports(rng, n):
    return rng.sample(range(20000, 60000), n)


TYP = "udp" if VARIANT == "udp-bound" else "tcp"
OTHER = "tcp" if TYP == "udp" else "udp"


@pytest.mark.weight(2)
def test_two_holders():
    rng = random.Random(__SEED__)
    a, b, c = ports(rng, 3)
    n1, n2 = rng.sample(NAMES, 2)
    p1 = holder(n1, [[4, TYP, "0.0.0.0", a], [4, TYP, "127.0.0.1", b]])[0]
    p2 = holder(n2, [[4, TYP, "127.0.0.1", c]])[0]
    rows = [(a, "0.0.0.0", p1, n1, "root"), (b, "127.0.0.1", p1, n1, "root"), (c, "127.0.0.1", p2, n2, "root")]
    want = expect(rows, {a, b, c})
    assert mine(run(), {a, b, c}) == want


@pytest.mark.weight(2)
def test_only_the_asked_sockets():
    rng = random.Random(__SEED__ + 1)
    a, b, c, d, e = ports(rng, 5)
    n1, n2 = rng.sample(NAMES, 2)
    # a listener with a live connection; a socket of the other protocol; a connected client
    p1 = holder(n1, [[4, TYP, "127.0.0.1", a], [4, OTHER, "127.0.0.1", b]], connect=[[TYP, a, e]])[0]
    p2 = holder(n2, [[4, TYP, "127.0.0.1", c], [4, "tcp", "127.0.0.1", d]] if TYP == "udp"
                else [[4, TYP, "127.0.0.1", c], [4, "udp", "127.0.0.1", d]])[0]
    rows = [(a, "127.0.0.1", p1, n1, "root"), (c, "127.0.0.1", p2, n2, "root")]
    got = run()
    assert mine(got, {a, b, c, d, e}) == expect(rows, {a, c}), "only the asked sockets, once each"


@pytest.mark.weight(1)
def test_shared_and_ipv6():
    rng = random.Random(__SEED__ + 2)
    a, b = ports(rng, 2)
    n1 = rng.choice(NAMES)
    pids = holder(n1, [[6, TYP, "::", a], [6, TYP, "::ffff:127.0.0.1", b]], fork=True)
    rows = [(a, "::", pid, n1, "root") for pid in pids] + \
           [(b, "::ffff:127.0.0.1", pid, n1, "root") for pid in pids]
    assert mine(run(), {a, b}) == expect(rows, {a, b})
__EXTRA__'''

_PORT_EXTRA = {
    "owner": r'''

@pytest.mark.weight(2)
def test_other_users():
    rng = random.Random(__SEED__ + 3)
    a, b, c = ports(rng, 3)
    n1, n2, n3 = rng.sample(NAMES, 3)
    p1 = holder(n1, [[4, "tcp", "0.0.0.0", a]], owner_id=33)[0]
    p2 = holder(n2, [[4, "tcp", "127.0.0.1", b]], owner_id=4242)[0]
    p3 = holder(n3, [[6, "tcp", "::", c]], owner_id=65534)[0]
    rows = [(a, "0.0.0.0", p1, n1, "www-data"), (b, "127.0.0.1", p2, n2, "4242"),
            (c, "::", p3, n3, "nobody")]
    assert mine(run(), {a, b, c}) == expect(rows, {a, b, c})
''',
    "addr-json": r'''

@pytest.mark.weight(2)
def test_addresses():
    rng = random.Random(__SEED__ + 3)
    a, b, c = ports(rng, 3)
    n1 = rng.choice(NAMES)
    p1 = holder(n1, [[4, "tcp", "127.0.0.2", a], [4, "tcp", "127.1.2.3", b],
                     [6, "tcp", "::ffff:127.0.0.9", c]])[0]
    rows = [(a, "127.0.0.2", p1, n1, "root"), (b, "127.1.2.3", p1, n1, "root"),
            (c, "::ffff:127.0.0.9", p1, n1, "root")]
    assert mine(run(), {a, b, c}) == expect(rows, {a, b, c})
''',
}

_PROC_NAMES = ["billing-api", "metricsd", "cache_srv", "relayd", "jobq-worker", "authgate",
               "blobstore", "mailhook", "ingestd", "tilesrv", "pushgw", "geoip-svc"]


def _port_owners(rng: random.Random, index: int) -> Instance:
    variant = rng.choice(sorted(_PORT_OUT))
    desc, kind = _PORT_OUT[variant]
    names = sorted(rng.sample(_PROC_NAMES, 6))
    order = {"json": "sorted by port, then by local address as written, then by PID (numerically)",
             "lines": "sorted by port, then by PID (numerically), without duplicate lines",
             "owner": "sorted by port (numerically), then by USER, without duplicate lines"}[kind]
    holders = """
- PID is the id of a process that holds the socket (has a file descriptor open on it); when
  several processes hold the same socket, each of them gets its own entry, and a process that holds
  one socket through several descriptors gets one entry.
- COMMAND (`command`) is the process name the kernel keeps for it (`/proc/PID/comm`).
- Sockets that no process holds are left out.
""" if kind != "owner" else ""
    instruction = f"""\
This host has no `ss`, `netstat` or `lsof`, and the on-call team needs to know which process holds
which socket. Write `/app/bin/sockmap`, an executable program (a bash or Python 3 script;
standard library only) that takes no arguments and prints {desc}, {order}.
{holders}
Everything you need is under `/proc`. The program is run as root while test programs hold
sockets, so it must inspect the live system each time it runs.
"""
    tests = (_PORT_TESTS.replace("__EXTRA__", _PORT_EXTRA.get(variant, ""))
             .replace("__VARIANT__", repr(variant)).replace("__NAMES__", repr(names))
             .replace("__SEED__", str(rng.randint(1000, 9999))))
    difficulty = {"tcp-listen": "medium", "udp-bound": "medium", "addr-json": "hard",
                  "owner": "hard"}[variant]
    return Instance(
        instruction=instruction, tests=tests,
        solution=_PORT_SOLVE.replace("__VARIANT__", repr(variant)), difficulty=difficulty,
        variant=variant, files={"bin/README": "Put the sockmap program here.\n"},
        tags=("proc", "sockets", "networking"), oracle_turns=2,
    )


FAMILIES.append(Family("sys-port-owners", "sysadmin", "test",
                       "which process holds which TCP/UDP socket, read from /proc alone (LISTEN or "
                       "bound UDP, addresses, owners), run against hidden socket holders",
                       _port_owners))


# ------------------------------------------------------------------ disk-usage
# A space report over a volume, in one of four kinds, measured in apparent or allocated bytes;
# the tests fill hidden volumes (several uids, hard links, symlinks, sparse and old files).

_DU_KINDS = {
    "by-user": ("`/app/bin/usage DIR`", "one line `USER BYTES` for each user the counted files "
                "belong to, where USER is the login name that /etc/passwd gives the file's uid "
                "(the uid itself when /etc/passwd has no entry for it); sorted by BYTES, largest "
                "first, ties by USER in byte order"),
    "top-level": ("`/app/bin/usage DIR`", "one line `BYTES NAME` for each folder directly inside "
                  "DIR (the counted files anywhere below it; an empty folder gets 0), plus a line "
                  "for the name `.` with the counted files directly in DIR when there are any; "
                  "sorted by BYTES, largest first, ties by NAME in byte order"),
    "by-ext": ("`/app/bin/usage DIR`", "one JSON object mapping each file extension to "
               "`{\"files\": COUNT, \"bytes\": BYTES}` over the counted files. The extension is "
               "the part of the file name after its last dot, lowercased (`a.tar.gz` -> `gz`); "
               "names without a dot, and hidden names like `.profile` with no other dot, have the "
               "extension `\"\"` (a leading dot does not count)"),
    "stale": ("`/app/bin/usage DIR DAYS`", "the paths (under DIR, written like `journal/a.gz`) of "
              "the counted files last modified more than DAYS days (DAYS x 86400 seconds) before "
              "the program runs, one per line in byte order, followed by a line `TOTAL BYTES` "
              "with the sum of their sizes in bytes (`TOTAL 0` when there are none)"),
}
_DU_MEASURE = {
    "apparent": "BYTES is the files' size in bytes (their length, as `ls -l` shows it)",
    "allocated": ("BYTES is the disk space the files occupy: their allocated 512-byte blocks x 512, "
                  "as `du -B1` counts it (a sparse file occupies less than its length)"),
}

_DU_TESTS = '''"""Runs the agent's space report on freshly filled hidden volumes."""

import json
import random
import subprocess
import tempfile
import time

import pytest

from h3_diskuse import make_tree, report

KIND = __KIND__
MEASURE = __MEASURE__
SEED = __SEED__


def check(seed, links, sparse):
    rng = random.Random(seed)
    vol = make_tree(rng, tempfile.mkdtemp(prefix="vol"), links=links, sparse=sparse)
    days = rng.choice([3, 10, 30, 60, 200])
    argv = ["/app/bin/usage", vol] + ([str(days)] if KIND == "stale" else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/")
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-600:]}"
    want = report(KIND, vol, MEASURE, days, time.time())
    if KIND == "by-ext":
        assert json.loads(r.stdout) == json.loads(want), f"wrong report for a volume like {vol}"
    else:
        assert r.stdout.strip("\\n").split("\\n") == want.strip("\\n").split("\\n"), \\
            f"wrong report for a volume like {vol}"


@pytest.mark.weight(1)
def test_simple_volume():
    check(SEED, links=False, sparse=False)


@pytest.mark.weight(2)
def test_hard_links_count_once():
    check(SEED + 1, links=True, sparse=False)


@pytest.mark.weight(2)
def test_full_volumes():
    for k in range(3):
        check(SEED + 10 + k, links=True, sparse=True)
'''

_DU_SOLVE = """mkdir -p /app/bin
{{ echo '#!/usr/bin/env python3'; echo "KIND, MEASURE = {kind!r}, {measure!r}"; cat <<'PY'
{module}
if __name__ == "__main__":
    import sys
    main(sys.argv)
PY
}} > /app/bin/usage
chmod +x /app/bin/usage
"""


def _disk_usage(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_DU_KINDS))
    measure = "apparent" if kind == "stale" else rng.choice(sorted(_DU_MEASURE))
    usage, desc = _DU_KINDS[kind]
    meas = "" if kind == "stale" else f" {_DU_MEASURE[measure]}."
    instruction = f"""\
The storage team wants a space report it can run by itself. Write `/app/bin/usage`, an executable
program (bash or Python 3, standard library only), run as {usage}, that prints
{desc}.{meas}

What is counted, in every report:
- Plain files only: not folders, devices, sockets or symbolic links. Symbolic links are never
  followed, whether they point to files or to folders, inside DIR or outside it.
- A file with several hard-linked names inside DIR counts once, under the name whose path
  (written from DIR down, like `media/x.gz`) comes first in byte order.
- Hidden files and folders (names starting with a dot) count like any other.

The program runs with full privileges on other volumes than the sample in `/app/sample`, which you
can use to try it.
"""
    difficulty = "hard" if measure == "allocated" else "medium"
    sample = {f"sample/{d}/{n}": "x" * rng.randint(10, 400) + "\n"
              for d in rng.sample(h3_diskuse.AREAS, 3) for n in ("a.log", "b.csv", ".keep")}
    tests = (_DU_TESTS.replace("__KIND__", repr(kind)).replace("__MEASURE__", repr(measure))
             .replace("__SEED__", str(rng.randint(1000, 99999))))
    return Instance(
        instruction=instruction, tests=tests,
        solution=_DU_SOLVE.format(kind=kind, measure=measure, module=source(h3_diskuse)),
        difficulty=difficulty, variant=f"{kind}/{measure}", files=sample,
        test_files={"h3_diskuse.py": source(h3_diskuse)}, tags=("disk-usage", "filesystem"),
        oracle_turns=2,
    )


FAMILIES.append(Family("sys-disk-usage", "sysadmin", "validation",
                       "a space report (per user, per top-level folder, per extension, stale "
                       "files) in apparent or allocated bytes, run on hidden volumes with hard links, "
                       "symlinks and sparse files", _disk_usage))
