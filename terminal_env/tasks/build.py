"""Task images: built from the task's ``environment/`` and cached by content.

The tag is ``terminal-env/task-<name>:<digest12>``, where the digest covers the build context
and Dockerfile, the base-image mapping actually applied, and the CA bundle injected. So:

* tag present             -> returned at once (one API call, no build, nothing logged);
* anything changed        -> a new tag, built from a temporary copy of the context.

Offline, ``FROM`` images that cannot be pulled are rewritten to local stand-ins
(:data:`terminal_env.sandbox.images.BASE_IMAGE_ALIASES`, extended by ``base_map``); a ``FROM`` that is
neither local nor mapped is refused before building, naming the remedy. The task directory is
never modified: the rewritten Dockerfile lives in the temporary copy.

Behind a TLS-intercepting proxy, ``ca_bundle`` (the host's CA bundle) is copied into every stage
and pointed at by the variables OpenSSL, Python requests, pip, curl, git and Node read, so a
``pip install`` or ``curl`` in a Dockerfile works there; :func:`ca_env` gives the same variables
for sandboxes that have a network.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import shutil
import socket
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import docker
import requests

from ..errors import ConfigError, ImageBuildError, ImageNotFoundError
from ..sandbox.engine import get_client
from ..sandbox.images import BASE_IMAGE, BASE_IMAGE_ALIASES, image_exists, map_base_image
from .dockerfile import from_lines, parse_dockerfile

BUILD_FORMAT = 1  # bump when this module changes what ends up in an image
TAG_PREFIX = "terminal-env/task-"
LABEL_TASK = "terminal-env.task"
LABEL_ENV_DIGEST = "terminal-env.environment-digest"
LABEL_BUILD_DIGEST = "terminal-env.build-digest"
CA_FILE = ".terminal-env-ca.crt"
CA_PATH = "/usr/local/share/ca-certificates/terminal-env-ca.crt"
TAIL_LINES = 30


def ca_env(path_in_container: str = CA_PATH) -> dict[str, str]:
    """The variables that make common clients trust the bundle at ``path_in_container``.

    >>> sorted(ca_env("/ca.pem"))[:3]
    ['CURL_CA_BUNDLE', 'GIT_SSL_CAINFO', 'NODE_EXTRA_CA_CERTS']
    """
    names = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE",
             "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO")
    return {name: path_in_container for name in names}


# ---- the plan: what to build, under which tag (no engine needed) ---------------------------


class BuildableTask(Protocol):
    """What this module reads of a task; a loaded :class:`~terminal_env.tasks.model.Task` has it
    all. A protocol rather than that class: ``Task.to_spec`` builds the image through this module,
    so this module must not depend on the one defining ``Task``."""

    name: str
    path: Path
    environment_dir: Path
    dockerfile: Path | None
    docker_image: str | None
    context_excludes: tuple[str, ...]
    environment_digest: str
    build_timeout: float


@dataclass
class BuildPlan:
    tag: str
    digest: str
    dockerfile_text: str | None  # None: nothing to build, use `images[0]` as it is
    images: list[str]  # the images the build starts from (after mapping)
    applied: dict[str, str] = field(default_factory=dict)  # original -> mapped
    ca: bytes | None = None


def _slug(name: str) -> str:
    """A valid repository path component from a task name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:100] or "task"


#: the environment variables every command and API that builds reads, when not told otherwise
CA_BUNDLE_ENV = "TERMINAL_ENV_CA_BUNDLE"
BASE_MAP_ENV = "TERMINAL_ENV_BASE_MAP"
#: the proxy builds go through (``http://host:port``), e.g. a TLS-intercepting one
BUILD_PROXY_ENV = "TERMINAL_ENV_BUILD_PROXY"


def parse_base_map(items: list[str] | None, source: str = "--base-map") -> dict[str, str]:
    """``["A=B", ...]`` -> ``{"A": "B"}``; ``source`` (a flag or a variable) names the input in
    errors.

    >>> parse_base_map(["ghcr.io/x/y:1=terminal-env/base:bookworm-1"])
    {'ghcr.io/x/y:1': 'terminal-env/base:bookworm-1'}
    """
    out: dict[str, str] = {}
    for item in items or []:
        image, sep, local = item.partition("=")
        if not sep or not image.strip() or not local.strip():
            raise ConfigError(f"{source} expects IMAGE=LOCAL_IMAGE, got {item!r}")
        out[image.strip()] = local.strip()
    return out


@dataclass(frozen=True)
class BuildSettings:
    """How task images are built, decided once: the base-image mapping (``FROM`` images that
    cannot be pulled here, to local ones) and the CA bundle injected for TLS-intercepting proxies.
    What a caller gives (a flag, an argument) wins; else ``$TERMINAL_ENV_BASE_MAP`` (``A=B``
    pairs separated by spaces or commas) and ``$TERMINAL_ENV_CA_BUNDLE`` (a path). Every command
    and API that builds resolves its settings here, so an image ``tasks build`` made is the one
    ``TerminalEnv`` and ``run`` find.

    >>> BuildSettings.resolve(environ={"TERMINAL_ENV_BASE_MAP": "a:1=b:2, c=d"}).base_map
    {'a:1': 'b:2', 'c': 'd'}
    >>> BuildSettings.resolve(base_map={"x": "y"}, environ={"TERMINAL_ENV_BASE_MAP": "a=b"}).base_map
    {'x': 'y'}
    """

    base_map: dict[str, str] = field(default_factory=dict)
    ca_bundle: str | None = None
    #: the proxy every build's network traffic goes through (``$TERMINAL_ENV_BUILD_PROXY``)
    proxy: str | None = None

    @classmethod
    def resolve(cls, base_map: dict[str, str] | None = None, ca_bundle: str | Path | None = None,
                environ: Any = None, proxy: str | None = None) -> "BuildSettings":
        env = os.environ if environ is None else environ
        if base_map is None:
            base_map = parse_base_map(env.get(BASE_MAP_ENV, "").replace(",", " ").split(), BASE_MAP_ENV)
        if ca_bundle is None:
            ca_bundle = env.get(CA_BUNDLE_ENV) or None
        proxy = proxy or env.get(BUILD_PROXY_ENV, "").strip() or None
        if proxy is not None and not re.fullmatch(r"https?://[^\s/]+/?", proxy):
            raise ConfigError(f"{BUILD_PROXY_ENV} must look like http://HOST:PORT, got {proxy!r}")
        return cls(dict(base_map), str(ca_bundle) if ca_bundle else None, proxy)


def _read_ca(ca_bundle: str | Path | None) -> bytes | None:
    if ca_bundle is None:
        return None
    path = Path(ca_bundle)
    if not path.is_file():
        raise ConfigError(f"CA bundle {path} does not exist; give the host's bundle, e.g. "
                          "/etc/ssl/certs/ca-certificates.crt")
    data = path.read_bytes()
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise ConfigError(f"CA bundle {path} holds no PEM certificate "
                          "(-----BEGIN CERTIFICATE-----)")
    return data


def plan_build(
    task: BuildableTask, *, base_map: dict[str, str] | None = None,
    ca_bundle: str | Path | None = None,
) -> BuildPlan:
    """Decide the Dockerfile to build and the tag it gets, without touching the engine.
    ``base_map`` extends (and overrides) :data:`~terminal_env.sandbox.images.BASE_IMAGE_ALIASES`;
    what is not given comes from the environment (:class:`BuildSettings`)."""
    settings = BuildSettings.resolve(base_map, ca_bundle)
    mapping = {**BASE_IMAGE_ALIASES, **settings.base_map}
    ca = _read_ca(settings.ca_bundle)
    if task.dockerfile is None:  # a prebuilt image: build only to inject the CA bundle
        assert task.docker_image is not None
        mapped = map_base_image(task.docker_image, mapping)
        if ca is None:
            return BuildPlan(mapped, "", None, [mapped],
                             {task.docker_image: mapped} if mapped != task.docker_image else {})
        text = f"FROM {task.docker_image}\n"
    else:
        text = task.dockerfile.read_text(encoding="utf-8", errors="replace")
    lines, instructions = parse_dockerfile(text)
    stages: set[str] = set()
    applied: dict[str, str] = {}
    images: list[str] = []
    replace: dict[int, tuple[int, str]] = {}
    inject: dict[int, list[str]] = {}
    for fl in from_lines(instructions):
        ins = instructions[fl.index]
        if fl.image.lower() in stages or fl.image == "scratch":
            ref = fl.image
        else:
            ref = map_base_image(fl.image, mapping)
            images.append(ref)
            if ref != fl.image:
                applied[fl.image] = ref
                # --platform is dropped: the stand-in is a local image built for this host
                alias = f" AS {fl.stage}" if fl.stage else ""
                replace[ins.start] = (ins.end, f"FROM {ref}{alias}\n")
        if fl.stage:
            stages.add(fl.stage.lower())
        if ca is not None:
            env = " ".join(f"{k}={v}" for k, v in ca_env().items())
            inject[ins.end] = [f"COPY {CA_FILE} {CA_PATH}\n", f"ENV {env}\n"]
    for ins in instructions:  # COPY --from=<image> also starts from an image
        if ins.keyword in ("COPY", "ADD"):
            for flag in ins.args.split():
                src = flag[len("--from="):] if flag.startswith("--from=") else None
                if src and src.lower() not in stages and not src.isdigit():
                    images.append(map_base_image(src, mapping))
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i in replace:
            end, new = replace[i]
            out.append(new)
            i = end
        else:
            out.append(lines[i] if lines[i].endswith("\n") else lines[i] + "\n")
        out.extend(inject.get(i, []))
        i += 1
    blob = json.dumps({
        "format": BUILD_FORMAT,
        "environment": task.environment_digest,
        "mapping": sorted(applied.items()),
        "ca": hashlib.sha256(ca).hexdigest() if ca is not None else None,
    }, sort_keys=True).encode()
    digest = hashlib.sha256(blob).hexdigest()
    return BuildPlan(f"{TAG_PREFIX}{_slug(task.name)}:{digest[:12]}", digest, "".join(out),
                     images, applied, ca)


def image_tag(task: BuildableTask, *, base_map: dict[str, str] | None = None,
              ca_bundle: str | Path | None = None) -> str:
    """The tag :func:`build_image` gives (or gave) this task's image."""
    return plan_build(task, base_map=base_map, ca_bundle=ca_bundle).tag


# ---- building ------------------------------------------------------------------------------


def build_image(
    task: BuildableTask,
    client: docker.DockerClient | None = None,
    *,
    base_map: dict[str, str] | None = None,
    ca_bundle: str | Path | None = None,
    timeout: float | None = None,
    log: Callable[[str], None] = print,
    force: bool = False,
    no_cache: bool = False,
    proxy: str | None = None,
) -> str:
    """The local image of ``task``, built only when its tag is missing (or ``force``).

    ``timeout`` defaults to the task's ``build_timeout``. Raises :class:`ImageNotFoundError`
    before building when a ``FROM`` image is neither local nor mapped, and
    :class:`ImageBuildError` (task name, reason, last lines of the log) when the build fails or
    runs past the timeout. ``no_cache`` builds every step again (the gate's same-instance probe).
    ``proxy`` (default ``$TERMINAL_ENV_BUILD_PROXY``) is handed to the build as the standard
    proxy variables, which the engine keeps out of the image and its cache keys.
    """
    client = client or get_client()
    plan = plan_build(task, base_map=base_map, ca_bundle=ca_bundle)
    if plan.dockerfile_text is None:  # prebuilt image, no CA bundle: nothing to build
        _require_from(client, task, plan, plan.images)
        return plan.tag
    if not force and image_exists(client, plan.tag) and _same_bases(client, plan):
        return plan.tag
    _require_from(client, task, plan, [ref for ref in plan.images if "$" not in ref])
    limit = float(timeout if timeout is not None else task.build_timeout)
    with tempfile.TemporaryDirectory(prefix="terminal-env-build-") as tmp:
        context = Path(tmp) / "context"
        if task.dockerfile is not None:
            top, excludes = task.environment_dir, set(task.context_excludes)
            shutil.copytree(top, context, symlinks=True, ignore=lambda d, names: [
                n for n in names if Path(d) == top and n in excludes])
        else:
            context.mkdir()
        # Outside the context: docker-py then sends it under a random name that the engine
        # drops from the context, so `COPY . /x` copies what it would copy without us.
        dockerfile = Path(tmp) / "Dockerfile"
        dockerfile.write_text(plan.dockerfile_text, encoding="utf-8")
        if plan.ca is not None:
            (context / CA_FILE).write_bytes(plan.ca)
            ignore = context / ".dockerignore"
            if ignore.is_file():  # a `*` rule would drop our file from the context
                ignore.write_text(ignore.read_text() + f"\n!{CA_FILE}\n")
        log(f"building {plan.tag} for task {task.name} (timeout {limit:g} s)")
        _run_build(client, task, plan, context, dockerfile, limit, log, no_cache,
                   BuildSettings.resolve(base_map={}, proxy=proxy).proxy)
    return plan.tag


LABEL_FROM_IDS = "terminal-env.from-ids"


def _from_ids(client: docker.DockerClient, plan: BuildPlan) -> str:
    """The ids of the images the build starts from: a rebuilt base image must rebuild the task
    even though the task's own files (and so its tag) did not change."""
    ids = []
    for ref in plan.images:
        try:
            ids.append(client.api.inspect_image(ref)["Id"])
        except docker.errors.ImageNotFound:
            ids.append("missing")
    return ",".join(ids)


def _same_bases(client: docker.DockerClient, plan: BuildPlan) -> bool:
    labels = client.api.inspect_image(plan.tag)["Config"].get("Labels") or {}
    return labels.get(LABEL_FROM_IDS) == _from_ids(client, plan)


def _require_from(
    client: docker.DockerClient, task: BuildableTask, plan: BuildPlan, refs: list[str]
) -> None:
    missing = [ref for ref in dict.fromkeys(refs) if not image_exists(client, ref)]
    if not missing:
        return
    reverse = {v: k for k, v in plan.applied.items()}
    lines = []
    for ref in missing:
        if ref in reverse:
            remedy = ("run `terminal-env images bootstrap`" if ref.startswith("terminal-env/base:")
                      else f"build or `docker load` {ref}, or map {reverse[ref]} elsewhere")
            lines.append(f"{reverse[ref]} is mapped to {ref}, which is not in the local engine: "
                         f"{remedy}")
        else:
            lines.append(
                f"{ref} is not in the local engine and cannot be pulled here: map it to a "
                f"compatible local image with `--base-map {ref.split('@')[0]}=LOCAL_IMAGE` "
                f"(base_map={{...}} in Python; e.g. LOCAL_IMAGE={BASE_IMAGE}), or `docker load` it"
            )
    raise ImageNotFoundError(f"cannot build the image of task {task.name!r}: " + "; ".join(lines))


def _abort(response: Any) -> None:
    """Cut the build's connection: the engine then cancels the build and removes its container.
    (A blocked read in another thread wakes up only on shutdown, not on close.)"""
    try:
        raw = response.raw._fp.fp.raw
        getattr(raw, "_sock", raw).shutdown(socket.SHUT_RDWR)
    except (AttributeError, OSError):
        pass


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class BuildLog:
    """The build's log as lines. The engine sends it in chunks that may split a line (a failing
    RUN's stderr can arrive a few characters at a time, each chunk wrapped in colour codes), so
    chunks are joined before they are cut into lines; the last lines are kept for the error."""

    def __init__(self, log: Callable[[str], None], keep: int = 0) -> None:
        self.log = log
        self.tail: deque[str] = deque(maxlen=keep or TAIL_LINES)
        self._partial = ""

    def feed(self, chunk: str) -> None:
        text = (self._partial + _ANSI.sub("", chunk)).replace("\r\n", "\n")
        *whole, self._partial = text.split("\n")
        for line in whole:
            self._add(line)

    def flush(self) -> None:
        rest, self._partial = self._partial, ""
        self._add(rest)

    def _add(self, line: str) -> None:
        if line.strip():
            self.tail.append(line)
            self.log(line)


def _run_build(client: docker.DockerClient, task: BuildableTask, plan: BuildPlan, context: Path,
               dockerfile: Path, limit: float, log: Callable[[str], None], no_cache: bool = False,
               proxy: str | None = None) -> None:
    lines = BuildLog(log)
    tail = lines.tail

    def failure(reason: str) -> ImageBuildError:
        lines.flush()
        shown = "\n".join(tail) or "(no output)"
        return ImageBuildError(
            f"building the image of task {task.name!r} ({task.path}) {reason}\n"
            f"--- last {len(tail)} lines of the build log ---\n{shown}"
        )

    labels = {LABEL_TASK: task.name, LABEL_ENV_DIGEST: task.environment_digest,
              LABEL_BUILD_DIGEST: plan.digest, LABEL_FROM_IDS: _from_ids(client, plan)}
    try:
        # The HTTP timeout only bounds one silent read; the deadline below bounds the build.
        stream = client.api.build(
            path=str(context), dockerfile=str(dockerfile), tag=plan.tag, rm=True, forcerm=True,
            pull=False, decode=True, timeout=int(limit) + 30, labels=labels, nocache=no_cache,
            buildargs={name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
            if proxy else None,
        )
    except docker.errors.APIError as exc:
        raise failure(f"was refused by the engine: {exc.explanation or exc}") from None
    frame = getattr(stream, "gi_frame", None)
    response = frame.f_locals.get("response") if frame is not None else None
    events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def pump() -> None:
        try:
            for item in stream:
                events.put(("item", item))
            events.put(("end", None))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting thread
            events.put(("exc", exc))

    threading.Thread(target=pump, name=f"build-{task.name}", daemon=True).start()
    deadline = time.monotonic() + limit
    built = False
    while True:
        try:
            kind, item = events.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            _abort(response)
            raise failure(f"timed out after {limit:g} s (the build timeout: [environment] "
                          "build_timeout_sec, or --timeout); the build was cancelled") from None
        if kind == "end":
            lines.flush()
            break
        if kind == "exc":
            detail = item.explanation if isinstance(item, docker.errors.APIError) else item
            if isinstance(item, requests.RequestException):
                detail = f"the engine stopped answering ({type(item).__name__})"
            raise failure(f"failed: {detail}")
        if not isinstance(item, dict):
            continue
        if "error" in item:
            raise failure(f"failed: {str(item['error']).strip()}")
        status = item.get("status")
        lines.feed(str(item.get("stream") or (f"{status}\n" if status else "")))
        if "aux" in item and isinstance(item["aux"], dict) and item["aux"].get("ID"):
            built = True
    if not built and not image_exists(client, plan.tag):
        raise failure("ended without producing an image")
