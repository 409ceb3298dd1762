# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Reads the configuration the wizard wrote and checks it semantically.

Only a file the wizard wrote here counts: app.json.sig must verify under the wizard's key, which
the agent's user cannot read (the readable key of its fallback build counts only where the
runtime makes the wizard use that build).
"""

import hashlib
import hmac
import json
import os
import subprocess
from urllib.parse import urlsplit

import pytest

CONFIG = "/app/config/app.json"
SIGNATURE = CONFIG + ".sig"


def sandbox_tag():
    try:
        host_run = open("/proc/sys/kernel/random/boot_id").read().strip() or "-"
    except OSError:
        host_run = "-"
    return host_run + ":" + open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19]


def wizard_keys():
    names = ["sealed"]
    if subprocess.run(["dmesg"], capture_output=True, text=True).stdout.startswith("[    0.000000] Starting gVisor"):
        names.append("open")
    return [bytes.fromhex(open(f"/etc/setup-wizard/{n}.key").read().strip()) for n in names]


def wizard_wrote(raw):
    assert os.path.isfile(SIGNATURE), f"{SIGNATURE} is missing: the wizard did not write this file"
    kind, _, seal = open(SIGNATURE).read().strip().partition(" ")
    data = f"setup-wizard\n{sandbox_tag()}\n".encode() + raw
    return kind == "hmac-sha256" and any(
        hmac.compare_digest(hmac.new(k, data, hashlib.sha256).hexdigest(), seal) for k in wizard_keys())


@pytest.fixture(scope="module")
def app_json():
    assert os.path.isfile(CONFIG), f"{CONFIG} was not written"
    raw = open(CONFIG, "rb").read()
    assert wizard_wrote(raw), \
        "the file was not produced by the wizard in this environment (or was edited afterwards)"
    return json.loads(raw)


def test_integrity(app_json):
    assert app_json.get("generated_by", "").startswith("setup-wizard")


def test_project_and_port(app_json):
    assert app_json["project"] == "ledger-api"
    assert app_json["http"]["port"] == 8443


def test_database(app_json):
    db = app_json["database"]
    assert db["backend"] == "postgres"
    u = urlsplit(db["dsn"])
    assert u.scheme == "postgresql"
    assert (u.hostname, u.port, u.path.lstrip("/")) == ("db.internal", 6432, "ledger")
    assert (u.username, u.password) == ("ledger_app", "Tr1cky-Pass")


def test_tls(app_json):
    tls = app_json["http"]["tls"]
    assert tls.get("enabled") is True
    assert os.path.realpath(tls.get("cert", "")) == "/app/certs/server.crt"
    assert os.path.realpath(tls.get("key", "")) == "/app/certs/server.key"


def test_admin(app_json):
    admin = app_json["admin"]
    assert admin["email"] == "ops@ledger.example"
    algo, iters, salt, digest = admin["password_hash"].split("$")
    assert algo == "pbkdf2_sha256"
    calc = hashlib.pbkdf2_hmac("sha256", b"correct-horse-42", salt.encode(), int(iters)).hex()
    assert hmac.compare_digest(calc, digest), "the admin password does not match"
