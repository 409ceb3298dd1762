"""Task images: the build plan (pure), then real builds on the real engine, the cache, offline
base-image mapping, failures with the log tail, the build timeout, CA bundle injection, and the
fixtures' reference solutions scored by their own tests in a real sandbox."""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path

import docker
import pytest

from terminal_env import Sandbox, SandboxConfig
from terminal_env.errors import ConfigError, ImageBuildError, ImageNotFoundError
from terminal_env.sandbox.images import BASE_IMAGE
from terminal_env.tasks import build_image, image_tag, import_tb1, load_task, plan_build
from terminal_env.tasks.build import CA_PATH, LABEL_ENV_DIGEST, LABEL_TASK, BuildLog
from terminal_env.tasks.dockerfile import dockerfile_workdir

TASKS = Path(__file__).parent / "data" / "tasks"
RUN = secrets.token_hex(3)  # this run's task names, so images of earlier runs are never hits
PEM = "-----BEGIN CERTIFICATE-----\nbm90IGEgcmVhbCBjZXJ0aWZpY2F0ZQ==\n-----END CERTIFICATE-----\n"


def task_copy(tmp_path: Path, fixture: str, label: str, dockerfile: str | None = None) -> Path:
    """A copy of a fixture named test-<run>-<label> (its image tag follows the name)."""
    dest = tmp_path / f"test-{RUN}-{label}"
    shutil.copytree(TASKS / fixture, dest)
    if dockerfile is not None:
        (dest / "environment" / "Dockerfile").write_text(dockerfile)
    return dest


# ---- the plan (no engine) ----------------------------------------------------------------------


def test_from_lines_are_mapped_on_a_copy(tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "plan", dockerfile=(
        "# syntax=docker/dockerfile:1\n"
        "ARG BASE=debian:bookworm\n"
        "FROM --platform=linux/amd64 "
        "ghcr.io/laude-institute/t-bench/python-3-13:20250620 AS build\n"
        "RUN echo hi\n"
        "FROM build AS again\n"
        "FROM ${BASE}\n"
        "COPY --from=build /etc/hostname /x\n"
        "WORKDIR /srv\n"
    ))
    before = (d / "environment" / "Dockerfile").read_text()
    plan = plan_build(load_task(d))
    assert plan.applied == {
        "ghcr.io/laude-institute/t-bench/python-3-13:20250620": BASE_IMAGE,
        "debian:bookworm": BASE_IMAGE,
    }
    assert f"FROM {BASE_IMAGE} AS build\n" in plan.dockerfile_text
    assert "FROM build AS again\n" in plan.dockerfile_text  # a stage, not an image
    assert plan.images == [BASE_IMAGE, BASE_IMAGE]
    assert (d / "environment" / "Dockerfile").read_text() == before  # the task is untouched
    assert load_task(d).workdir == "/srv"


def test_tag_follows_content_mapping_and_ca(tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "tag",
                  dockerfile="FROM example.invalid/img:1\nWORKDIR /app\n")
    task = load_task(d)
    plain = image_tag(task)
    assert plain.startswith(f"terminal-env/task-test-{RUN}-tag:") and len(plain.split(":")[1]) == 12
    assert image_tag(task) == plain
    mapped = image_tag(task, base_map={"example.invalid/img": BASE_IMAGE})
    assert mapped != plain
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    assert image_tag(task, ca_bundle=ca) not in (plain, mapped)
    text = plan_build(task, ca_bundle=ca).dockerfile_text
    assert text.splitlines()[1] == f"COPY .terminal-env-ca.crt {CA_PATH}"
    assert f"SSL_CERT_FILE={CA_PATH}" in text.splitlines()[2]
    (d / "environment" / "extra.txt").write_text("x")
    assert image_tag(load_task(d)) != plain


def test_build_settings_come_from_the_environment_once_for_every_builder(tmp_path, monkeypatch):
    """TERMINAL_ENV_BASE_MAP / TERMINAL_ENV_CA_BUNDLE reach every builder: the tag that `tasks
    build` plans is the one TerminalEnv and `run` plan, and a flag or argument still wins."""
    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.run import trial_spec
    from terminal_env.tasks.build import BuildSettings

    d = task_copy(tmp_path, "harbor-sum", "settings", dockerfile="FROM example.invalid/img:1\nWORKDIR /app\n")
    task = load_task(d)
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    explicit = image_tag(task, base_map={"example.invalid/img": BASE_IMAGE}, ca_bundle=ca)
    plain = image_tag(task)
    monkeypatch.setenv("TERMINAL_ENV_BASE_MAP", f"example.invalid/img={BASE_IMAGE}")
    monkeypatch.setenv("TERMINAL_ENV_CA_BUNDLE", str(ca))
    assert image_tag(task) == explicit != plain  # the environment's settings, as if given
    assert image_tag(task, base_map={}, ca_bundle=ca) != explicit  # an explicit empty map wins
    assert BuildSettings.resolve().ca_bundle == str(ca)
    monkeypatch.setenv("TERMINAL_ENV_BASE_MAP", "no-equals-sign")
    with pytest.raises(ConfigError, match="TERMINAL_ENV_BASE_MAP expects IMAGE=LOCAL_IMAGE"):
        image_tag(task)
    # `terminal-env run --base-map/--ca-bundle` travel with every trial to the environment
    cfg = RunConfig(tasks=[str(d)], model="nop", base_map={"a": "b"}, ca_bundle=str(ca))
    assert trial_spec(cfg, task, 1, "r").build == {"base_map": {"a": "b"}, "ca_bundle": str(ca)}
    assert trial_spec(RunConfig(tasks=[str(d)], model="nop"), task, 1, "r").build == {}


def test_ca_bundle_must_be_a_pem_file(tmp_path):
    task = load_task(TASKS / "harbor-sum")
    with pytest.raises(ConfigError, match="does not exist"):
        plan_build(task, ca_bundle=tmp_path / "none.pem")
    (tmp_path / "x.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="PEM"):
        plan_build(task, ca_bundle=tmp_path / "x.pem")


def test_dockerfile_workdir():
    assert dockerfile_workdir("FROM a\nWORKDIR /x\nWORKDIR y\n") == "/x/y"
    assert dockerfile_workdir("FROM a\nWORKDIR /x\nFROM b\n") is None
    assert dockerfile_workdir("FROM a\nWORKDIR $HOME\n") is None


# ---- real builds -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine():
    from terminal_env.sandbox.engine import get_client

    client = get_client()
    yield client
    # Remove every image this run made (they are named after the test-<run>-* tasks).
    for image in client.images.list(filters={"label": LABEL_TASK}):
        if (image.labels or {}).get(LABEL_TASK, "").startswith(f"test-{RUN}-"):
            try:
                client.images.remove(image.id, force=True)
            except docker.errors.APIError:
                pass


@pytest.fixture
def built(engine, base_image):
    return engine


@pytest.mark.docker
def test_build_then_cache_hit(built, tmp_path):
    task = load_task(task_copy(tmp_path, "harbor-sum", "sum"))
    first_log: list[str] = []
    tag = build_image(task, built, log=first_log.append)
    assert any(line.startswith("Step ") for line in first_log)
    info = built.api.inspect_image(tag)
    assert info["Config"]["Labels"][LABEL_TASK] == task.name
    assert info["Config"]["Labels"][LABEL_ENV_DIGEST] == task.environment_digest
    assert info["Config"]["WorkingDir"] == "/app"

    again: list[str] = []
    assert build_image(load_task(task.path), built, log=again.append) == tag
    assert again == []  # a hit: no build, nothing logged
    assert built.api.inspect_image(tag)["Id"] == info["Id"]

    forced: list[str] = []
    assert build_image(task, built, log=forced.append, force=True) == tag
    assert forced  # --force builds again (the engine's layer cache makes it quick)


@pytest.mark.docker
def test_changed_context_gets_a_new_tag(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "changed")
    old = build_image(load_task(d), built, log=lambda _: None)
    (d / "environment" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nWORKDIR /app\nRUN echo changed > /app/marker\n")
    new = build_image(load_task(d), built, log=lambda _: None)
    assert new != old and old.split(":")[0] == new.split(":")[0]
    assert built.containers.run(new, ["cat", "/app/marker"], remove=True) == b"changed\n"


@pytest.mark.docker
def test_tb1_context_leaves_the_tests_out(built, tmp_path):
    d = tmp_path / f"test-{RUN}-tb1"
    shutil.copytree(TASKS / "tb1-grep", d)
    with open(d / "Dockerfile", "a") as f:
        f.write("COPY . /ctx\n")
    tag = build_image(load_task(d), built, log=lambda _: None)
    listing = built.containers.run(tag, ["ls", "-A", "/ctx"], remove=True).decode().split()
    assert sorted(listing) == ["Dockerfile", "make_log.py"]


@pytest.mark.docker
def test_a_docker_compose_yml_is_build_context_that_reaches_the_image(built, tmp_path):
    """The Harbor tasks that were refused here: their docker-compose.yml is data the Dockerfile
    copies in (the task asks the agent to repair it), not an environment definition."""
    compose = "services:\n  web:\n    image: nginx:1.25\n    ports: ['8080:80'\n"  # broken on purpose
    d = task_copy(tmp_path, "harbor-sum", "compose-data")
    (d / "environment" / "docker-compose.yml").write_text(compose)
    dockerfile = d / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY docker-compose.yml /app/docker-compose.yml\n")
    tag = build_image(load_task(d), built, log=lambda _: None)
    with Sandbox(SandboxConfig(image=tag, task=f"test-{RUN}-compose-data"), client=built) as box:
        assert box.read_file("/app/docker-compose.yml").decode() == compose


@pytest.mark.docker
def test_terminal_bench_base_builds_through_the_default_mapping(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "tbbase", dockerfile=(
        "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nWORKDIR /app\n"
        "RUN python3 -c 'print(1)'\n"))
    tag = build_image(load_task(d), built, log=lambda _: None)
    assert built.containers.run(tag, ["cat", "/etc/debian_version"], remove=True).startswith(b"12")


@pytest.mark.docker
def test_user_mapping_builds_an_unknown_base(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "usermap", dockerfile="FROM example.invalid/custom:7\n")
    tag = build_image(load_task(d), built, base_map={"example.invalid/custom:7": BASE_IMAGE},
                      log=lambda _: None)
    assert built.api.inspect_image(tag)


@pytest.mark.docker
def test_missing_unmapped_base_is_refused_before_building(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "missing", dockerfile="FROM example.invalid/nothing:1\n")
    task = load_task(d)
    lines: list[str] = []
    with pytest.raises(ImageNotFoundError) as info:
        build_image(task, built, log=lines.append)
    message = str(info.value)
    assert "example.invalid/nothing:1" in message and "--base-map" in message
    assert task.name in message
    assert lines == []  # refused before any build started
    with pytest.raises(docker.errors.ImageNotFound):
        built.api.inspect_image(image_tag(task))


@pytest.mark.docker
def test_failing_step_raises_with_the_log_tail(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "fails", dockerfile=(
        f"FROM {BASE_IMAGE}\nRUN echo about-to-fail-{RUN} && exit 3\n"))
    task = load_task(d)
    with pytest.raises(ImageBuildError) as info:
        build_image(task, built, log=lambda _: None)
    message = str(info.value)
    assert task.name in message and f"about-to-fail-{RUN}" in message
    assert "last" in message and "lines of the build log" in message
    assert "returned a non-zero code: 3" in message


@pytest.mark.docker
def test_build_timeout_cancels_the_build(built, tmp_path):
    marker = f"slow-{RUN}"
    d = task_copy(tmp_path, "harbor-sum", "slow", dockerfile=(
        f"FROM {BASE_IMAGE}\nRUN sleep 30 && echo {marker}\n"))
    task = load_task(d)
    with pytest.raises(ImageBuildError) as info:
        build_image(task, built, timeout=3, log=lambda _: None)
    assert "timed out after 3 s" in str(info.value) and task.name in str(info.value)

    def build_containers() -> list[str]:
        return [c.name for c in built.containers.list(all=True)
                if marker in " ".join(c.attrs["Config"].get("Cmd") or [])]

    for _ in range(60):  # the engine cancels the build when its connection is cut
        if not build_containers():
            break
        time.sleep(0.5)
    assert build_containers() == []
    with pytest.raises(docker.errors.ImageNotFound):
        built.api.inspect_image(image_tag(task))


@pytest.mark.docker
def test_ca_bundle_is_injected(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "ca")
    (d / "environment" / ".dockerignore").write_text("*\n")  # must not drop the bundle
    ca = tmp_path / "host-ca.pem"
    ca.write_text(PEM)
    task = load_task(d)
    tag = build_image(task, built, ca_bundle=ca, log=lambda _: None)
    assert tag != image_tag(task)
    env = dict(e.split("=", 1) for e in built.api.inspect_image(tag)["Config"]["Env"])
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE"):
        assert env[name] == CA_PATH
    out = built.containers.run(tag, ["sh", "-c", 'cat "$SSL_CERT_FILE"'], remove=True)
    assert out.decode() == PEM


@pytest.mark.docker
def test_prebuilt_image_task(built, tmp_path):
    d = task_copy(tmp_path, "harbor-sum", "prebuilt")
    (d / "environment" / "Dockerfile").unlink()
    toml = (d / "task.toml").read_text().replace(
        "[environment]\n", "[environment]\ndocker_image = \"debian:bookworm\"\n")
    (d / "task.toml").write_text(toml)
    task = load_task(d)
    assert build_image(task, built) == BASE_IMAGE  # mapped, nothing to build
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    tag = build_image(task, built, ca_bundle=ca, log=lambda _: None)
    assert tag.startswith(f"terminal-env/task-test-{RUN}-prebuilt:")


# ---- the fixtures are real tasks: their solutions pass their own tests -------------------------


def run_verifier(client, task, image: str, *, solve: bool) -> tuple[str, str]:
    """(reward.txt or "", test output) after optionally running the reference solution."""
    cfg = SandboxConfig(image=image, workdir=task.workdir, task=f"test-{RUN}-oracle",
                        memory_mb=task.memory_mb)
    with Sandbox(cfg, client=client) as box:
        if solve:
            box.write_files({f"/solution/{n}": (s if isinstance(s, bytes) else s.read_bytes())
                             for n, s in task.solution_files().items()}, mode=0o755)
            res = box.exec(task.solution_command, timeout=60, workdir=task.workdir)
            assert res.exit_code == 0, res.output
        box.write_files({f"/tests/{n}": p.read_bytes() for n, p in task.verifier_files().items()},
                        mode=0o755)
        box.exec(["mkdir", "-p", "/logs/verifier"])
        res = box.exec(task.test_command, timeout=task.verifier_timeout, workdir=task.workdir,
                       env=task.verifier_env)
        try:
            reward = box.read_file("/logs/verifier/reward.txt").decode().strip()
        except FileNotFoundError:
            reward = ""
        return reward, res.output


@pytest.mark.docker
@pytest.mark.parametrize("fixture", ["harbor-sum", "harbor-new-schema"])
def test_harbor_fixture_solutions_pass_and_nothing_fails(built, tmp_path, fixture):
    d = task_copy(tmp_path, fixture, "oracle")
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("terminal-env/count-words", f"t/test-{RUN}-oracle"))
    task = load_task(d)
    assert task.name == f"test-{RUN}-oracle"
    image = build_image(task, built, log=lambda _: None)
    assert run_verifier(built, task, image, solve=True)[0] == "1"
    reward, output = run_verifier(built, task, image, solve=False)
    assert reward == "0" and output.count("FAILED") >= 2  # several checks, not all-or-nothing


@pytest.mark.docker
def test_tb1_fixture_native_and_imported(built, tmp_path):
    d = tmp_path / f"test-{RUN}-tb1-native"
    shutil.copytree(TASKS / "tb1-grep", d)
    task = load_task(d)
    image = build_image(task, built, log=lambda _: None)
    _, output = run_verifier(built, task, image, solve=True)
    assert output.count("PASSED ") == 3 and "FAILED" not in output
    _, output = run_verifier(built, task, image, solve=False)
    assert output.count("FAILED ") == 3

    imported = load_task(import_tb1(d, tmp_path / f"test-{RUN}-imported"))
    image = build_image(imported, built, log=lambda _: None)
    assert run_verifier(built, imported, image, solve=True)[0] == "1"
    assert run_verifier(built, imported, image, solve=False)[0] == "0"


def test_a_build_log_sent_a_few_characters_at_a_time_reads_as_whole_lines():
    # What the engine sent for a failing `curl` in CI: stderr in fragments, each wrapped in colour
    # codes. Cut into lines per chunk, the tail read "ce", "r", "t", ... and "certificate" was lost.
    logged: list[str] = []
    lines = BuildLog(logged.append)
    lines.feed("Step 3/3 : RUN curl https://files.example.test/x\n ---> Running in 1f27\n")
    for part in ["curl: (60) SSL ", "ce", "r", "tif", "icate problem: unable to ", "get local issuer",
                 " certificate\n", "More details here"]:
        lines.feed(f"\x1b[91m{part}\x1b[0m")
    assert logged[-1] == "curl: (60) SSL certificate problem: unable to get local issuer certificate"
    lines.flush()
    assert list(lines.tail) == ["Step 3/3 : RUN curl https://files.example.test/x", " ---> Running in 1f27",
                                "curl: (60) SSL certificate problem: unable to get local issuer certificate",
                                "More details here"]
    assert logged == list(lines.tail)
    lines.flush()
    assert len(logged) == 4
