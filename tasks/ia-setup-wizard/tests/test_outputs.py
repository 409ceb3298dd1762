# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Reads the configuration the wizard wrote and checks it semantically."""

import hashlib
import hmac
import json
import os
from urllib.parse import urlsplit

import pytest

CONFIG = "/app/config/app.json"


@pytest.fixture(scope="module")
def cfg():
    assert os.path.isfile(CONFIG), f"{CONFIG} was not written"
    return json.load(open(CONFIG))


def test_integrity(cfg):
    body = {k: v for k, v in cfg.items() if k != "checksum"}
    assert cfg.get("generated_by", "").startswith("setup-wizard")
    assert cfg.get("checksum") == hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest(), \
        "the file was not produced by the wizard (or was edited afterwards)"


def test_project_and_port(cfg):
    assert cfg["project"] == "ledger-api"
    assert cfg["http"]["port"] == 8443


def test_database(cfg):
    db = cfg["database"]
    assert db["backend"] == "postgres"
    u = urlsplit(db["dsn"])
    assert u.scheme == "postgresql"
    assert (u.hostname, u.port, u.path.lstrip("/")) == ("db.internal", 6432, "ledger")
    assert (u.username, u.password) == ("ledger_app", "Tr1cky-Pass")


def test_tls(cfg):
    tls = cfg["http"]["tls"]
    assert tls.get("enabled") is True
    assert os.path.realpath(tls.get("cert", "")) == "/app/certs/server.crt"
    assert os.path.realpath(tls.get("key", "")) == "/app/certs/server.key"


def test_admin(cfg):
    admin = cfg["admin"]
    assert admin["email"] == "ops@ledger.example"
    algo, iters, salt, digest = admin["password_hash"].split("$")
    assert algo == "pbkdf2_sha256"
    calc = hashlib.pbkdf2_hmac("sha256", b"correct-horse-42", salt.encode(), int(iters)).hex()
    assert hmac.compare_digest(calc, digest), "the admin password does not match"
