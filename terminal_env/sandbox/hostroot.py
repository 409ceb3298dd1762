"""Offline fallback for the base image: a rootfs assembled from the host's installed Debian packages.

debootstrap needs a reachable Debian mirror. Where there is none (an air-gapped machine, a broken
resolver), a Debian bookworm host already holds the packages we want, installed: dpkg's database
lists every file each package owns. This module copies the files of a closed set of packages
(the essential set, apt, and the recipe's packages with their dependencies) into a new directory
and writes a matching dpkg database there, so that ``apt-get install`` keeps working inside.

It only ever *reads* host paths; every write goes below ``rootfs``, checked path by path.
Packages the host lacks are reported; pytest, which Debian hosts often have only from PyPI, is
installed from wheels with pip into the rootfs' Python path.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

from ..errors import ImageBuildError

DPKG = Path("/var/lib/dpkg")
# Always wanted beside the essential set: apt so task images can install more packages.
EXTRA = ("apt", "dpkg", "debian-archive-keyring", "mawk", "ca-certificates")
# Substitutes when the host lacks a recipe package.
SUBSTITUTES = {"gawk": "mawk"}
PIP_PACKAGES = {"python3-pytest": ["pytest"]}


def parse_status(text: str) -> dict[str, dict[str, str]]:
    """Installed packages of a dpkg status file: {name: {field: value}}.

    >>> s = "Package: a\\nStatus: install ok installed\\nDepends: b (>= 1) | c, d:any\\n\\n"
    >>> parse_status(s)["a"]["Depends"]
    'b (>= 1) | c, d:any'
    """
    out: dict[str, dict[str, str]] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            out[fields["Package"]] = fields
    return out


def _names(field: str) -> list[list[str]]:
    """``'a (>= 1) | b:any, c'`` -> ``[['a', 'b'], ['c']]``."""
    groups = []
    for group in field.split(","):
        alts = [re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", a).strip().split(":")[0] for a in group.split("|")]
        alts = [a for a in alts if a]
        if alts:
            groups.append(alts)
    return groups


def closure(status: dict[str, dict[str, str]], roots: Iterable[str]) -> set[str]:
    """The roots with everything they depend on (Depends, Pre-Depends), alternatives resolved
    to what is installed.

    >>> st = {"a": {"Depends": "b | x"}, "b": {"Pre-Depends": "c"}, "c": {}, "d": {"Provides": "x"}}
    >>> sorted(closure(st, ["a"]))
    ['a', 'b', 'c']
    """
    provides: dict[str, str] = {}
    for name, fields in status.items():
        for alts in _names(fields.get("Provides", "")):
            provides.setdefault(alts[0], name)
    todo, seen = list(roots), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fields = status[name]
        for field in ("Pre-Depends", "Depends"):
            for alts in _names(fields.get(field, "")):
                pick = next((a for a in alts if a in status), None)
                pick = pick or next((provides[a] for a in alts if a in provides), None)
                if pick:
                    todo.append(pick)
    return seen


def _info_files(name: str) -> list[Path]:
    return sorted(DPKG.glob(f"info/{name}.*")) + sorted(DPKG.glob(f"info/{name}:*.*"))


def _canonical(path: str) -> str:
    """The host path with symlinked parent directories resolved (usr-merge: /bin -> /usr/bin)."""
    parent, base = os.path.split(path)
    return os.path.join(os.path.realpath(parent), base)


class _Copier:
    def __init__(self, rootfs: Path):
        self.rootfs = rootfs.resolve()
        self.done: set[str] = set()

    def dest(self, host_path: str) -> Path:
        d = (self.rootfs / host_path.lstrip("/"))
        # Never write outside the new rootfs, whatever a path or symlink says.
        inside = os.path.commonpath([str(self.rootfs), os.path.normpath(str(d))]) == str(self.rootfs)
        # ... also after symlinks in the already-built parents are followed.
        real_parent = os.path.realpath(d.parent)
        inside = inside and (real_parent + "/").startswith(str(self.rootfs) + "/") or (
            inside and real_parent == str(self.rootfs)
        )
        if not inside:
            raise ImageBuildError(f"refusing to write {d}: outside {self.rootfs}")
        return d

    def copy(self, host_path: str) -> None:
        path = _canonical(host_path) if host_path != "/" else "/"
        if path in self.done or path == "/":
            return
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return  # listed by dpkg but removed on the host (e.g. trimmed docs)
        self.copy(os.path.dirname(path))  # parents first, with their own modes
        self.done.add(path)
        d = self.dest(path)
        if stat.S_ISDIR(st.st_mode):
            d.mkdir(exist_ok=True)
        elif stat.S_ISLNK(st.st_mode):
            if not d.is_symlink() and not d.exists():
                os.symlink(os.readlink(path), d)
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(path, d, follow_symlinks=False)
        else:
            return  # devices, sockets, fifos: the engine provides /dev
        os.lchown(d, st.st_uid, st.st_gid)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(d, stat.S_IMODE(st.st_mode))


def build_host_rootfs(rootfs: Path, packages: Iterable[str], log: Callable[[str], None] = print) -> None:
    """Fill the empty directory ``rootfs`` from the host's installed packages."""
    if not (DPKG / "status").exists():
        raise ImageBuildError("the host has no dpkg database: the offline fallback needs a Debian host")
    status = parse_status((DPKG / "status").read_text(errors="replace"))
    wanted, missing, pip_wanted = [], [], []
    for pkg in packages:
        pkg2 = pkg if pkg in status else SUBSTITUTES.get(pkg, "")
        if pkg2 in status:
            wanted.append(pkg2)
        elif pkg in PIP_PACKAGES:
            pip_wanted += PIP_PACKAGES[pkg]
        else:
            missing.append(pkg)
    if missing:
        raise ImageBuildError(
            f"the offline fallback needs these Debian packages installed on the host: "
            f"{', '.join(missing)} (`apt-get install {' '.join(missing)}`), or a reachable mirror"
        )
    essential = [n for n, f in status.items() if f.get("Essential") == "yes"]
    chosen = closure(status, [*essential, *[p for p in EXTRA if p in status], *wanted])
    log(f"assembling the rootfs from {len(chosen)} installed host packages")
    rootfs.mkdir(parents=True, exist_ok=True)
    cp = _Copier(rootfs)
    # usr-merge top-level links first, so that /bin/... lands in /usr/bin.
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink(f"/{top}"):
            os.symlink(os.readlink(f"/{top}"), cp.dest(f"/{top}"))
            cp.done.add(f"/{top}")
    for name in sorted(chosen):
        lists = [p for p in _info_files(name) if p.suffix == ".list"]
        for lst in lists:
            for line in lst.read_text(errors="replace").splitlines():
                if line and line != "/.":
                    cp.copy(line)
    _write_dpkg_db(rootfs, status, chosen, cp)
    _copy_alternatives(cp)
    _write_accounts(rootfs)
    for d, mode in (("tmp", 0o1777), ("var/tmp", 0o1777), ("root", 0o700), ("home", 0o755),
                    ("proc", 0o555), ("sys", 0o555), ("dev", 0o755), ("run", 0o755),
                    ("var/lib/apt/lists/partial", 0o700), ("var/cache/apt/archives/partial", 0o700),
                    ("var/log", 0o755), ("etc/ssl/certs", 0o755),
                    # base-files' maintainer script makes these; we run no maintainer scripts
                    ("usr/local/bin", 0o755), ("usr/local/sbin", 0o755), ("usr/local/lib", 0o755),
                    ("usr/local/share", 0o755), ("usr/local/include", 0o755),
                    ("usr/local/src", 0o755)):
        p = cp.dest("/" + d)
        p.mkdir(parents=True, exist_ok=True)
        os.chmod(p, mode)
    # Certificates are generated by a maintainer script, so they are not in any .list.
    for entry in sorted(os.listdir("/etc/ssl/certs")):
        cp.copy(f"/etc/ssl/certs/{entry}")
    if pip_wanted:
        _pip_install(rootfs, pip_wanted, log)
    _maintainer_defaults(rootfs, cp)
    subprocess.run(["chroot", str(rootfs), "ldconfig"], capture_output=True)
    # Debian's maintainer scripts byte-compile Python modules; we ran none. Without the .pyc
    # files the first `python3 -m pytest` would write them into the image's trees, and the
    # verifier's tamper check rightly distrusts new files beside the test framework.
    proc = subprocess.run(
        ["chroot", str(rootfs), "python3", "-m", "compileall", "-q",
         "/usr/lib/python3/dist-packages", "/usr/lib/python3.11"],
        capture_output=True, text=True,
    )
    if not (rootfs / "usr/lib/python3.11/__pycache__").is_dir():
        raise ImageBuildError(f"byte-compiling the rootfs' Python failed: {proc.stderr[-1000:]}")


def _write_dpkg_db(rootfs: Path, status: dict[str, dict[str, str]], chosen: set[str], cp: _Copier) -> None:
    info = cp.dest(str(DPKG / "info"))
    info.mkdir(parents=True, exist_ok=True)
    stanzas = []
    for name in sorted(chosen):
        fields = status[name]
        stanzas.append(
            "\n".join(f"{k}:{'' if not v or v.startswith(chr(10)) else ' '}{v}" for k, v in fields.items())
        )
        for f in _info_files(name):
            shutil.copyfile(f, info / f.name)
    cp.dest(str(DPKG / "status")).write_text("\n\n".join(stanzas) + "\n\n")
    for extra in ("available", "diversions", "statoverride"):
        target = cp.dest(str(DPKG / extra))
        if (DPKG / extra).exists() and extra != "available":
            shutil.copyfile(DPKG / extra, target)
        else:
            target.write_text("")
    cp.dest(str(DPKG / "alternatives")).mkdir(exist_ok=True)
    for sub in ("updates", "triggers"):
        cp.dest(str(DPKG / sub)).mkdir(exist_ok=True)


def _copy_alternatives(cp: _Copier) -> None:
    """Alternatives (awk, pager, ...) are made by maintainer scripts: keep those whose chosen
    target made it into the rootfs."""
    alt_dir = Path("/etc/alternatives")
    if not alt_dir.is_dir():
        return
    cp.dest("/etc/alternatives").mkdir(parents=True, exist_ok=True)
    for name in sorted(os.listdir(alt_dir)):
        target = os.readlink(alt_dir / name) if (alt_dir / name).is_symlink() else None
        if target is None or _canonical(target) not in cp.done:
            continue
        os.symlink(target, cp.dest(f"/etc/alternatives/{name}"))
        db = DPKG / "alternatives" / name
        if db.exists():
            shutil.copyfile(db, cp.dest(str(db)))
            lines = db.read_text().splitlines()
            link = lines[1] if len(lines) > 1 else ""
            if link.startswith("/"):
                canon = _canonical(link)
                d = cp.dest(canon)
                if not d.is_symlink() and not d.exists() and d.parent.is_dir():
                    os.symlink(f"/etc/alternatives/{name}", d)


def _maintainer_defaults(rootfs: Path, cp: _Copier) -> None:
    """What the maintainer scripts we do not run would have made, where it matters to tasks:
    base-files' /etc/profile and root's dot files, and libpam-runtime's /etc/pam.d/common-*
    (without them passwd, chpasswd, su and runuser fail with a PAM error)."""
    defaults = Path("/usr/share/base-files")
    for src, dest, mode in (("profile", "/etc/profile", 0o644), ("dot.profile", "/root/.profile", 0o644),
                            ("dot.bashrc", "/root/.bashrc", 0o644)):
        target = cp.dest(dest)
        if (defaults / src).is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(defaults / src, target)
            os.chmod(target, mode)
    cp.dest("/etc/profile.d").mkdir(parents=True, exist_ok=True)
    if (rootfs / "usr/sbin/pam-auth-update").exists():
        subprocess.run(
            ["chroot", str(rootfs), "pam-auth-update", "--package", "--force"],
            capture_output=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"},
        )


def _write_accounts(rootfs: Path) -> None:
    master = Path("/usr/share/base-passwd")
    etc = rootfs / "etc"
    passwd = (master / "passwd.master").read_text()
    group = (master / "group.master").read_text()
    (etc / "passwd").write_text(passwd)
    (etc / "group").write_text(group)
    users = [line.split(":")[0] for line in passwd.splitlines() if line]
    groups = [line.split(":")[0] for line in group.splitlines() if line]
    (etc / "shadow").write_text("".join(f"{u}:*:19000:0:99999:7:::\n" for u in users))
    (etc / "gshadow").write_text("".join(f"{g}:*::\n" for g in groups))
    os.chmod(etc / "shadow", 0o640)
    os.chmod(etc / "gshadow", 0o640)


def _pip_install(rootfs: Path, reqs: list[str], log: Callable[[str], None]) -> None:
    """Install pure-Python packages from wheels into the rootfs' system Python path."""
    target = rootfs / "usr/lib/python3/dist-packages"
    target.mkdir(parents=True, exist_ok=True)
    log(f"installing {', '.join(reqs)} from wheels into the rootfs")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--retries", "0",
         "--timeout", "10", "--only-binary=:all:", "--python-version", "3.11",
         "--implementation", "py", "--platform", "any", "--target", str(target), *reqs],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise ImageBuildError(f"pip could not install {reqs} into the rootfs:\n{proc.stderr[-2000:]}")
    # pip --target drops scripts in target/bin with the host interpreter's shebang: replace them.
    shutil.rmtree(target / "bin", ignore_errors=True)
    script = rootfs / "usr/bin/pytest"
    script.write_text("#!/usr/bin/python3\nimport sys\nimport pytest\nsys.exit(pytest.main())\n")
    os.chmod(script, 0o755)
