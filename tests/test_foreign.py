"""Foreign tasks, end to end, as a benchmarker meets them: a folder of Harbor tasks (and a
Terminal-Bench 1.x task converted into it) whose Dockerfiles fetch their test dependencies over
HTTPS, built behind a TLS-intercepting proxy with the build settings set once
(``$TERMINAL_ENV_BUILD_PROXY``, ``$TERMINAL_ENV_CA_BUNDLE``), then run: nop scores 0 on every task
(failed by its tests, never masked) and the oracle passes every one (the dependencies arrived).

The proxy is this test's own, on this host: it answers CONNECT for any name with a certificate
of its own CA and serves the files itself, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from terminal_env.errors import ImageBuildError
from terminal_env.sandbox.cleanup import LABEL_MANAGED
from terminal_env.tasks import load_task
from terminal_env.tasks.build import build_image

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.docker

HOST = "files.example.test"
HELPER = b"def count_words(text):\n    return len(text.split())\n"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class InterceptingProxy:
    """CONNECT for any host, TLS ended here with a certificate of our CA, files served locally."""

    def __init__(self, tmp: Path, files: dict[str, bytes]):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                "-days", "2", "-subj", "/CN=terminal-env test intercepting proxy", cwd=tmp)
        (tmp / "leaf.ext").write_text(f"subjectAltName=DNS:{HOST}\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
                "-subj", f"/CN={HOST}", cwd=tmp)
        openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext", cwd=tmp)
        self.ca = tmp / "ca.pem"
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(tmp / "leaf.pem", tmp / "leaf.key")
        self.files = files
        self.seen: list[str] = []
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            head = conn.recv(4096).decode("latin-1")
            self.seen.append(head.split("\r\n", 1)[0])
            if not head.startswith("CONNECT "):
                conn.sendall(b"HTTP/1.1 405 CONNECT only\r\nContent-Length: 0\r\n\r\n")
                return
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with self.tls.wrap_socket(conn, server_side=True) as tls:
                request = tls.recv(4096).decode("latin-1")
                path = request.split(" ")[1] if " " in request else "/"
                self.seen.append(f"GET {path}")
                body = self.files.get(path)
                status = b"200 OK" if body is not None else b"404 Not Found"
                body = body or b""
                tls.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(body)).encode()
                            + b"\r\nConnection: close\r\n\r\n" + body)
        except (OSError, ssl.SSLError):
            pass  # a client that does not trust our CA hangs up during the handshake
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


DOCKERFILE = (
    "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\n"
    "WORKDIR /app\n"
    f"RUN curl -fsSL https://{HOST}/wordhelp.py -o /usr/lib/python3/dist-packages/wordhelp.py\n"
)
TESTS = (
    "import subprocess\nfrom wordhelp import count_words\n\n\n"
    "def test_counts():\n"
    "    out = subprocess.run(['bash', '/app/count.sh', '/app/in.txt'], capture_output=True, text=True)\n"
    "    assert out.stdout.strip() == str(count_words(open('/app/in.txt').read()))\n"
)
SOLUTION = "#!/bin/bash\nprintf '#!/bin/bash\\nwc -w < \"$1\"\\n' > /app/count.sh\n"


def harbor_task(d: Path, words: str) -> None:
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "solution").mkdir()
    (d / "instruction.md").write_text("Write /app/count.sh FILE, printing the number of words in FILE.\n")
    (d / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n')
    (d / "environment" / "Dockerfile").write_text(DOCKERFILE + f"RUN printf '{words}\\n' > /app/in.txt\n")
    (d / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\ncd /tests && python3 -m pytest -rA -p no:cacheprovider test_outputs.py\n"
        "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n")
    (d / "tests" / "test_outputs.py").write_text(TESTS)
    (d / "solution" / "solve.sh").write_text(SOLUTION)


def tb1_task(d: Path) -> None:
    d.mkdir(parents=True)
    (d / "task.yaml").write_text("instruction: |\n  Write /app/count.sh FILE, printing the number of words in FILE.\n"
                                 "difficulty: easy\ncategory: text\n")
    (d / "Dockerfile").write_text(DOCKERFILE + "RUN printf 'one two three four\\n' > /app/in.txt\n")
    (d / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build:\n      dockerfile: Dockerfile\n"
        "    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n")
    (d / "run-tests.sh").write_text("#!/bin/bash\ncd $TEST_DIR && python3 -m pytest -rA -p no:cacheprovider test_outputs.py\n")
    (d / "tests").mkdir()
    (d / "tests" / "test_outputs.py").write_text(TESTS)
    (d / "solution.sh").write_text(SOLUTION)


def docker0_address(client, image: str) -> str:
    """The host's address on Docker's default bridge: the gateway the network lists, or, where the
    engine lists none (seen after a daemon reload), the gateway a container on it is given."""
    for cfg in client.networks.get("bridge").attrs["IPAM"].get("Config") or []:
        if cfg.get("Gateway"):
            return cfg["Gateway"].split("/")[0]
    box = client.containers.run(image, ["sleep", "60"], detach=True,
                                labels={LABEL_MANAGED: "1", "terminal-env.task": "foreign-gateway-probe"})
    try:
        box.reload()
        return box.attrs["NetworkSettings"]["Networks"]["bridge"]["Gateway"]
    finally:
        box.remove(force=True)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "terminal_env.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={**os.environ, **env})


def test_foreign_tasks_behind_an_intercepting_proxy_build_once_and_score(client, base_image, compose_tool,
                                                                         tmp_path):
    proxy = InterceptingProxy(tmp_path, {"/wordhelp.py": HELPER})
    gateway = docker0_address(client, base_image)
    settings = {"TERMINAL_ENV_BUILD_PROXY": f"http://{gateway}:{proxy.port}",
                "TERMINAL_ENV_CA_BUNDLE": str(proxy.ca)}
    try:
        foreign = tmp_path / "foreign"
        harbor_task(foreign / "count-words-a", "alpha beta gamma")
        harbor_task(foreign / "count-words-b", "a b c d e f g")
        tb1_task(tmp_path / "tb1" / "count-words-tb1")
        # One call converts the Terminal-Bench 1.x folder into the Harbor folder.
        done = cli("tasks", "import-tb1", str(tmp_path / "tb1"), str(foreign), env={})
        assert done.returncode == 0, done.stdout + done.stderr
        assert (foreign / "count-words-tb1" / "task.toml").is_file()

        # The proxy intercepts TLS: without its CA, a build through it fails on the certificate.
        plain = load_task(foreign / "count-words-a")
        with pytest.raises(ImageBuildError, match="certificate"):
            build_image(plain, client, proxy=settings["TERMINAL_ENV_BUILD_PROXY"], ca_bundle=None,
                        log=lambda _: None, force=True)
        assert f"CONNECT {HOST}:443 HTTP/1.1" in proxy.seen

        # With the settings set once, in the environment, every command builds and runs.
        runs = {}
        for model in ("nop", "oracle"):
            out = tmp_path / f"run-{model}"
            done = cli("run", "--tasks", str(foreign), "--model", model, "-k", "1", "-n", "2",
                       "--out", str(out), "--quiet", env=settings)
            assert done.returncode == 0, done.stdout + done.stderr
            runs[model] = json.loads((out / "summary.json").read_text())
            trials = [json.loads(p.read_text()) for p in sorted(out.glob("trials/*/1/trajectory.json"))]
            assert len(trials) == 3
            assert not any(t.get("masked") for t in trials), [t.get("termination") for t in trials]
        assert runs["nop"]["mean_at_k"]["value"] == 0.0
        assert runs["oracle"]["mean_at_k"]["value"] == 1.0  # the tests imported what the build fetched
        assert "GET /wordhelp.py" in proxy.seen
    finally:
        proxy.close()
    shutil.rmtree(tmp_path / "tb1", ignore_errors=True)
