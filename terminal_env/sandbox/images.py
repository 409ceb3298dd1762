"""The project's base image, made without any container registry.

No registry can be reached on the machines this runs on, so ``FROM debian`` is impossible. The
base image is instead made from Debian packages: ``debootstrap`` a minimal bookworm into a
directory, trim it, tar it, and ``docker import`` the tarball. Task images then build ``FROM``
:data:`BASE_IMAGE`.

Caching is by content. The recipe (suite, variant, packages, mirror, trimming rules) has a digest;
the image carries it as a label, and the rootfs tarball is kept under
``$XDG_CACHE_HOME/terminal-env/base/<digest>.tar``. So:

* image present with the right label  -> nothing to do (one API call);
* engine lost its images              -> ``docker import`` of the cached tarball (seconds);
* recipe changed or first run         -> debootstrap (about a minute, needs root).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import docker

from ..errors import ConfigError, ImageBuildError, ImageNotFoundError
from .engine import get_client
from .hostroot import build_host_rootfs

# Bump the suffix when the recipe changes in a way users should see in the tag. The label digest
# is what decides a rebuild, so forgetting to bump never serves a stale image.
BASE_IMAGE = "terminal-env/base:bookworm-1"
RECIPE_LABEL = "terminal-env.recipe"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# What tasks commonly need, and nothing big: no compilers, no pip (PyPI over HTTPS fails
# certificate checks inside the sandbox here; tasks should prefer Debian packages).
BASE_PACKAGES = (
    "bash", "ca-certificates", "coreutils", "curl", "diffutils", "findutils", "gawk", "git",
    "grep", "gzip", "less", "procps", "python3", "python3-pytest", "sed", "tar", "tmux",
)

# Runs inside the new rootfs under chroot, so every path (and every absolute symlink debootstrap
# made) resolves inside it, never on the host. As a second guard it refuses to run unless the
# marker file that _trim_rootfs drops into the rootfs is there: these commands delete system files.
# It points apt at plain-HTTP sources and trims what no task needs, like Debian's official "slim"
# images; the dpkg excludes keep later `apt-get install`s in task images trimmed too.
ROOTFS_MARKER = ".terminal-env-rootfs"
TRIM_SCRIPT = r"""
set -eu
[ -f /{marker} ] || {{ echo "not inside the new rootfs; refusing to trim" >&2; exit 3; }}
rm -f /etc/apt/sources.list
cat > /etc/apt/sources.list.d/debian.sources <<'END_SOURCES'
Types: deb
URIs: {mirror}
Suites: {suite} {suite}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: {suite}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
END_SOURCES
cat > /etc/dpkg/dpkg.cfg.d/terminal-env-excludes <<'END_EXCLUDES'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
END_EXCLUDES
echo 'Acquire::Languages "none";' > /etc/apt/apt.conf.d/90terminal-env
apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/man/* /usr/share/info/* /usr/share/groff/*
rm -rf /usr/share/lintian/* /usr/share/locale/* /var/log/*.log /var/log/apt/*
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
# Docker supplies these per container; the build host's copies must not leak into the image.
rm -f /etc/hostname /etc/resolv.conf /etc/hosts
: > /etc/machine-id
rm -f /{marker}
"""

IMAGE_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",  # built into bookworm's libc: UTF-8 output without the locales package
    'CMD ["bash"]',
)


@dataclass(frozen=True)
class BaseRecipe:
    """Everything that decides the bytes of the base image; its digest names the cache entry."""

    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = BASE_PACKAGES
    mirror: str = DEFAULT_MIRROR  # written into the image's apt sources, so part of the content
    arch: str = field(default_factory=platform.machine)
    version: int = 5  # bump when the code below changes what ends up in the rootfs

    def digest(self) -> str:
        fields = asdict(self) | {
            "packages": sorted(set(self.packages)),
            "trim_script": TRIM_SCRIPT,
            "changes": IMAGE_CHANGES,
        }
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# A second family for tasks that compile, debug or administer: the base plus build tools and
# the utilities the bundled task pool uses. Task images build FROM one of the families, so the
# whole pool needs two bootstraps and no package download at task build time.
DEV_IMAGE = "terminal-env/dev:bookworm-1"
DEV_EXTRA = (
    "bc", "cmake", "ed", "file", "gcc", "jq", "libc6-dev", "make", "openssl", "passwd",
    "patch", "python3-venv", "sqlite3", "vim", "xxd",
)
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "base": (BASE_IMAGE, BASE_PACKAGES),
    "dev": (DEV_IMAGE, BASE_PACKAGES + DEV_EXTRA),
}


def base_recipe(family: str = "base") -> BaseRecipe:
    if family not in FAMILIES:
        raise ConfigError(f"unknown image family {family!r}; known: {', '.join(FAMILIES)}")
    return BaseRecipe(
        mirror=os.environ.get("TERMINAL_ENV_DEBIAN_MIRROR", DEFAULT_MIRROR),
        packages=FAMILIES[family][1],
    )


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "terminal-env" / "base"


# ---- looking images up ---------------------------------------------------------------------


def image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def require_image(client: docker.DockerClient, ref: str) -> None:
    """Raise :class:`ImageNotFoundError` naming the image and how to get it."""
    if image_exists(client, ref):
        return
    if ref == BASE_IMAGE or ref.startswith("terminal-env/base:"):
        remedy = "run `terminal-env images bootstrap` to build it from Debian packages"
    else:
        remedy = (
            f"build it (`docker build -t {ref} <dir>`) or fetch it (`docker pull {ref}`; where no "
            "registry is reachable, `docker save` it elsewhere and `docker load` it here)"
        )
    raise ImageNotFoundError(f"image {ref!r} is not in the local Docker engine: {remedy}")


def _recipe_label(client: docker.DockerClient, ref: str) -> str | None:
    try:
        labels = client.api.inspect_image(ref)["Config"].get("Labels") or {}
    except docker.errors.ImageNotFound:
        return None
    return labels.get(RECIPE_LABEL)


def image_source(client: docker.DockerClient, ref: str, family: str = "base") -> str | None:
    """How the image at ``ref`` was made: ``debootstrap``, ``host``, ``stale`` (an older recipe)
    or None (no such image). Read from the recipe label; it is what CI reports."""
    label = _recipe_label(client, ref)
    if label is None:
        return None if not image_exists(client, ref) else "stale"
    digest = base_recipe(family).digest()
    return {digest: "debootstrap", digest + "-host": "host"}.get(label, "stale")


# ---- Terminal-Bench base images, offline ----------------------------------------------------

# Terminal-Bench tasks build FROM these. They cannot be pulled here, so for offline use they map
# to our base image. This is an approximation, stated plainly: ours is Debian bookworm with
# Python 3.11, not Ubuntu 24.04 or Python 3.13, and it lacks the tmux/asciinema those ship.
# Tasks that depend on exact versions will notice.
BASE_IMAGE_ALIASES: dict[str, str] = {
    "ghcr.io/laude-institute/t-bench/python-3-13": BASE_IMAGE,
    "ghcr.io/laude-institute/t-bench/ubuntu-24-04": BASE_IMAGE,
    "debian:bookworm": BASE_IMAGE,
    "debian:bookworm-slim": BASE_IMAGE,
    "debian:12": BASE_IMAGE,
}


def _repository(ref: str) -> str:
    """``host:5000/a/b:tag@sha256:..`` -> ``host:5000/a/b`` (a ':' after the last '/' is a tag)."""
    ref = ref.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def map_base_image(ref: str, mapping: dict[str, str] = BASE_IMAGE_ALIASES) -> str:
    """The local stand-in for ``ref``: an exact key first, then the repository with any tag.

    >>> map_base_image("ghcr.io/laude-institute/t-bench/python-3-13:20250620")
    'terminal-env/base:bookworm-1'
    >>> map_base_image("alpine:3.20")
    'alpine:3.20'
    """
    return mapping.get(ref) or mapping.get(_repository(ref)) or ref


# ---- building -------------------------------------------------------------------------------


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _remove_tree(path: Path) -> None:
    """rmtree that first unmounts what a killed debootstrap left mounted (its /proc, /sys)."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for mnt in sorted((m for m in mounts if m.startswith(f"{path}/")), reverse=True):
        subprocess.run(["umount", "-l", mnt], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def _trim_rootfs(rootfs: Path, recipe: BaseRecipe) -> None:
    """Run TRIM_SCRIPT inside ``rootfs`` (chroot: its paths can never touch the host)."""
    if not (rootfs / "bin/sh").exists() or rootfs.resolve() == Path("/"):
        raise ImageBuildError(f"{rootfs} does not look like a fresh rootfs; not trimming it")
    (rootfs / ROOTFS_MARKER).touch()
    script = TRIM_SCRIPT.format(marker=ROOTFS_MARKER, mirror=recipe.mirror, suite=recipe.suite)
    proc = subprocess.run(
        ["chroot", str(rootfs), "/bin/sh", "-c", script],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"},
    )
    if proc.returncode != 0:
        raise ImageBuildError(f"trimming the rootfs failed:\n{(proc.stdout + proc.stderr)[-2000:]}")


def mirror_reachable(recipe: BaseRecipe, timeout: float = 10) -> bool:
    """Whether the Debian mirror answers (one small HTTP request for the suite's Release file)."""
    url = f"{recipe.mirror.rstrip('/')}/dists/{recipe.suite}/Release"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except Exception:  # noqa: BLE001 - any failure means: not usable now
        return False


def build_rootfs_tarball(
    recipe: BaseRecipe, dest: Path, log: Callable[[str], None] = print, source: str = "debootstrap"
) -> None:
    """Build the rootfs (debootstrap, or from the host's packages) + trim + tar into ``dest``,
    atomically (a killed run leaves no ``dest``)."""
    if os.geteuid() != 0:
        raise ImageBuildError(
            "building the base image needs root (debootstrap, chroot): run "
            "`terminal-env images bootstrap` as root (or `docker load` an exported copy)"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Same filesystem as dest, so the final rename is atomic.
    work = Path(tempfile.mkdtemp(prefix="tmp-", dir=dest.parent))
    try:
        rootfs = work / "rootfs"
        if source == "host":
            build_host_rootfs(rootfs, recipe.packages, log)
        else:
            _debootstrap(recipe, rootfs, work / "debootstrap.log", log)
        _trim_rootfs(rootfs, recipe)
        tmp_tar = work / "rootfs.tar"
        # --one-file-system: never archive a mount that debootstrap may have left behind.
        # /dev, /proc, /sys are emptied: the engine mounts its own.
        subprocess.run(
            ["tar", "--numeric-owner", "--one-file-system", "-C", str(rootfs),
             "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*",
             "-cf", str(tmp_tar), "."],
            check=True, capture_output=True,
        )
        os.replace(tmp_tar, dest)
    except subprocess.CalledProcessError as exc:
        raise ImageBuildError(f"tar of the rootfs failed: {exc.stderr.decode()[-2000:]}") from None
    finally:
        _remove_tree(work)


def _debootstrap(recipe: BaseRecipe, rootfs: Path, log_file: Path, log: Callable[[str], None]) -> None:
    debootstrap = _which("debootstrap")
    if not debootstrap:
        raise ImageBuildError(
            "debootstrap is not installed: `apt-get install debootstrap` "
            "(or run `bash scripts/install-engine.sh`)"
        )
    cmd = [
        debootstrap, f"--variant={recipe.variant}", "--components=main",
        f"--include={','.join(sorted(set(recipe.packages)))}",
        recipe.suite, str(rootfs), recipe.mirror,
    ]
    log(f"debootstrap {recipe.suite} ({recipe.variant} + {len(recipe.packages)} packages) "
        f"from {recipe.mirror}; this takes about a minute")
    with open(log_file, "wb") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-20:])
        raise ImageBuildError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")


def _import(client: docker.DockerClient, tarball: Path, tag: str, digest: str) -> str:
    """``docker import`` through the API (works for a remote DOCKER_HOST too); returns the id."""
    repo, _, version = tag.rpartition(":")
    changes = [*IMAGE_CHANGES, f"LABEL {RECIPE_LABEL}={digest}"]
    try:
        out = client.api.import_image(src=str(tarball), repository=repo, tag=version, changes=changes)
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"docker import of {tarball} failed: {exc.explanation}") from None
    # The answer is a stream of JSON lines; an error arrives as a line, not as an HTTP status.
    last = json.loads(out.strip().splitlines()[-1])
    if "error" in last:
        raise ImageBuildError(f"docker import of {tarball} failed: {last['error']}")
    return last["status"]


@contextlib.contextmanager
def _build_lock(directory: Path, log: Callable[[str], None]) -> Iterator[None]:
    """Serialise builds across processes: two concurrent debootstraps would waste a minute each."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another process is building the base image; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        # Holding the lock, any temp dir here belongs to a run that died: clean it up.
        for stale in directory.glob("tmp-*"):
            _remove_tree(stale)
        yield  # the lock is released when the file closes


def ensure_base_image(
    client: docker.DockerClient | None = None,
    force: bool = False,
    log: Callable[[str], None] = print,
    tag: str | None = None,
    source: str = "auto",
    family: str = "base",
) -> str:
    """Make sure ``tag`` holds the current base image; return the tag.

    ``source`` is ``debootstrap`` (from the Debian mirror), ``host`` (from the host's installed
    Debian packages, for machines without a reachable mirror) or ``auto`` (debootstrap when the
    mirror answers, else host). Each source has its own digest, recorded as the image's label
    and naming its cached tarball; an image from either source is accepted as current.
    ``force`` rebuilds from scratch, ignoring the image and the cached tarball.
    ``tag`` exists for tests that must not disturb the shared base image; ``family`` picks the
    package set (``base`` or ``dev``, see :data:`FAMILIES`).
    """
    if source not in ("auto", "debootstrap", "host"):
        raise ConfigError(f"source must be auto, debootstrap or host, got {source!r}")
    client = client or get_client()
    recipe = base_recipe(family)
    tag = tag or FAMILIES[family][0]
    digests = {"debootstrap": recipe.digest(), "host": recipe.digest() + "-host"}
    accepted = set(digests.values()) if source == "auto" else {digests[source]}
    if not force and _recipe_label(client, tag) in accepted:
        return tag  # the common case: one API call

    with _build_lock(cache_dir(), log):
        if not force and _recipe_label(client, tag) in accepted:
            return tag  # another process built it while we waited for the lock
        old_id = client.api.inspect_image(tag)["Id"] if image_exists(client, tag) else None
        cached = [s for s in ("debootstrap", "host") if (cache_dir() / f"{digests[s]}.tar").exists()]
        if source != "auto":
            chosen = source
        elif cached and not force:
            chosen = cached[0]
        else:
            chosen = "debootstrap" if mirror_reachable(recipe) else "host"
            if chosen == "host":
                log(f"the Debian mirror {recipe.mirror} is not reachable: building the base image "
                    "from the host's installed Debian packages instead")
        digest = digests[chosen]
        tarball = cache_dir() / f"{digest}.tar"
        fresh = force or not tarball.exists()
        if fresh:
            try:
                build_rootfs_tarball(recipe, tarball, log, source=chosen)
            except ImageBuildError as exc:
                if source != "auto" or chosen != "debootstrap":
                    raise
                # The mirror answered but debootstrap failed (a flaky mirror, a proxy that cuts
                # large downloads): the host's own packages are still a faithful bookworm.
                log(f"debootstrap failed ({str(exc).splitlines()[0]}); building from the host's "
                    "installed Debian packages instead")
                chosen = "host"
                digest = digests[chosen]
                tarball = cache_dir() / f"{digest}.tar"
                if not tarball.exists():
                    build_rootfs_tarball(recipe, tarball, log, source=chosen)
        else:
            log(f"importing the cached rootfs {tarball}")
        try:
            image_id = _import(client, tarball, tag, digest)
        except ImageBuildError:
            if fresh:
                raise
            # A cached tarball the engine rejects is useless: drop it and build once more.
            log(f"the cached rootfs {tarball} was rejected; rebuilding it")
            tarball.unlink(missing_ok=True)
            build_rootfs_tarball(recipe, tarball, log, source=chosen)
            image_id = _import(client, tarball, tag, digest)

    if old_id and old_id != image_id:
        # The superseded image is now untagged; free its space unless a container still uses it.
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(old_id)
    size_mb = client.api.inspect_image(image_id)["Size"] / 1e6
    log(f"base image {tag} ready ({size_mb:.0f} MB, recipe {digest}, from {chosen})")
    return tag
