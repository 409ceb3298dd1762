"""The offline base image: recipe digest (pure), lookups, and the real build on a real engine."""

from __future__ import annotations

import dataclasses

import docker
import pytest

from terminal_env.errors import ImageNotFoundError
from terminal_env.sandbox import images
from terminal_env.sandbox.engine import get_client
from terminal_env.sandbox.images import BASE_IMAGE, BaseRecipe, ensure_base_image, map_base_image

# ---- recipe digest (no engine) ---------------------------------------------------------------


def test_digest_is_stable():
    assert BaseRecipe().digest() == BaseRecipe().digest()


def test_digest_changes_when_the_package_list_changes():
    recipe = BaseRecipe()
    more = dataclasses.replace(recipe, packages=(*recipe.packages, "vim-tiny"))
    assert more.digest() != recipe.digest()


def test_digest_ignores_package_order_and_duplicates():
    recipe = BaseRecipe()
    shuffled = dataclasses.replace(recipe, packages=tuple(reversed(recipe.packages)) + ("git",))
    assert shuffled.digest() == recipe.digest()


@pytest.mark.parametrize(
    "change", [{"suite": "trixie"}, {"variant": "buildd"}, {"version": 2}, {"mirror": "http://m/d"}]
)
def test_digest_changes_with_every_field(change):
    assert dataclasses.replace(BaseRecipe(), **change).digest() != BaseRecipe().digest()


def test_mirror_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TERMINAL_ENV_DEBIAN_MIRROR", "http://mirror.example/debian")
    assert images.base_recipe().mirror == "http://mirror.example/debian"


def test_cache_dir_honours_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert images.cache_dir() == tmp_path / "terminal-env" / "base"


# ---- Terminal-Bench aliases (no engine) ------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    [
        "ghcr.io/laude-institute/t-bench/python-3-13:20250620",
        "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
        "ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest",
        "ghcr.io/laude-institute/t-bench/ubuntu-24-04",
    ],
)
def test_terminal_bench_bases_map_to_ours(ref):
    assert map_base_image(ref) == BASE_IMAGE


def test_unknown_images_pass_through():
    assert map_base_image("alpine:3.20") == "alpine:3.20"
    assert map_base_image("x", {"x": "y"}) == "y"


@pytest.mark.parametrize(
    "ref, repo",
    [
        ("ubuntu", "ubuntu"),
        ("ubuntu:24.04", "ubuntu"),
        ("localhost:5000/a/b:tag", "localhost:5000/a/b"),
        ("a/b@sha256:abc", "a/b"),
    ],
)
def test_repository_strips_tag_and_digest_but_not_registry_port(ref, repo):
    assert images._repository(ref) == repo


# ---- the real thing --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    return get_client()


@pytest.fixture(scope="module")
def base_image(client):
    return ensure_base_image(client)


def run(client, cmd, **kwargs) -> str:
    out = client.containers.run(BASE_IMAGE, cmd, remove=True, network_mode="none", **kwargs)
    return out.decode()


@pytest.mark.docker
def test_ensure_base_image_is_idempotent(client, base_image):
    before = client.images.get(base_image).id
    messages: list[str] = []
    assert ensure_base_image(client, log=messages.append) == base_image
    assert client.images.get(base_image).id == before  # same image: nothing was rebuilt
    assert messages == []  # and nothing was debootstrapped or imported


@pytest.mark.docker
def test_base_image_carries_the_recipe_digest(client, base_image):
    labels = client.images.get(base_image).labels
    digest = images.base_recipe().digest()
    # debootstrap where the mirror answers, the host's packages where it does not
    assert labels[images.RECIPE_LABEL] in {digest, digest + "-host"}


@pytest.mark.docker
@pytest.mark.parametrize(
    "cmd, expect",
    [
        (["python3", "-c", "import pytest; print(pytest.__version__)"], "."),
        (["git", "--version"], "git version"),
        (["ps", "-e"], "PID"),
        (["sh", "-c", "echo $LANG; cat /etc/apt/sources.list.d/debian.sources"], "C.UTF-8"),
    ],
)
def test_base_image_has_the_tools_tasks_need(client, base_image, cmd, expect):
    assert expect in run(client, cmd)


@pytest.mark.docker
def test_docker_init_works_with_the_base_image(client, base_image):
    # `docker run --init` puts docker-init (tini) at PID 1 to reap zombies.
    assert "docker-init" in run(client, ["ps", "-o", "comm=", "-p", "1"], init=True)


@pytest.mark.docker
def test_import_from_cached_tarball_into_a_new_tag(client, base_image, monkeypatch):
    tag = "terminal-env/test-import:1"  # a scratch tag: never disturb the shared base image
    messages: list[str] = []
    built: list[str] = []

    def no_build(recipe, dest, log=print, source="debootstrap"):
        built.append(source)
        raise AssertionError(f"the cached rootfs should have been imported, not built ({source})")

    # Whichever way the cached rootfs was made (debootstrap or the host's packages), importing it
    # must not build anything: the builder itself is replaced, not a log message inspected.
    monkeypatch.setattr(images, "build_rootfs_tarball", no_build)
    try:
        assert ensure_base_image(client, log=messages.append, tag=tag) == tag
        assert built == []
        assert any("importing the cached rootfs" in m for m in messages), messages
        label = client.images.get(tag).labels[images.RECIPE_LABEL]
        digest = images.base_recipe().digest()
        assert label in {digest, digest + "-host"}
        assert (images.cache_dir() / f"{label}.tar").is_file()  # the tarball it came from
    finally:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


@pytest.mark.docker
def test_require_image_names_the_missing_image(client):
    ref = "terminal-env/does-not-exist:never"
    assert not images.image_exists(client, ref)
    with pytest.raises(ImageNotFoundError, match="terminal-env/does-not-exist:never") as info:
        images.require_image(client, ref)
    assert "docker build" in str(info.value)


@pytest.mark.docker
def test_require_image_points_at_bootstrap_for_the_base_image(client):
    with pytest.raises(ImageNotFoundError, match="terminal-env images bootstrap"):
        images.require_image(client, "terminal-env/base:no-such-version")


@pytest.mark.docker
def test_require_image_accepts_the_base_image(client, base_image):
    images.require_image(client, base_image)


@pytest.mark.docker
def test_failed_debootstrap_falls_back_to_host_packages(client, base_image, monkeypatch, tmp_path):
    # A "mirror" on loopback that refuses connections: debootstrap fails at once, nothing leaves
    # this machine, and auto mode must still produce an image from the host's packages.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TERMINAL_ENV_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
    monkeypatch.setattr(images, "mirror_reachable", lambda recipe, timeout=10: True)
    tag = "terminal-env/test-fallback:1"
    messages: list[str] = []
    try:
        assert ensure_base_image(client, log=messages.append, tag=tag) == tag
        assert any("debootstrap failed" in m for m in messages), messages
        label = client.images.get(tag).labels[images.RECIPE_LABEL]
        assert label.endswith("-host")
        assert "ok" in run_tag(client, tag, ["sh", "-c", "python3 -c 'import pytest' && echo ok"])
    finally:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


def run_tag(client, tag, cmd) -> str:
    return client.containers.run(tag, cmd, remove=True, network_mode="none").decode()
