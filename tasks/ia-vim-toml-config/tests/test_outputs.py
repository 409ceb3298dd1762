# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Parses the edited TOML and compares it, value by value, with the original plus the edits."""
import copy
import tomllib

PATH = "/app/config/gateway.toml"
ORIGINAL = '''# Gateway configuration
# Owner: platform team. Changes need a ticket number in the commit message.

title = "edge-gateway"
environment = "production"

[server]
# Address to bind; 0.0.0.0 means all interfaces.
host = "0.0.0.0"
port = 8080
tls = false
workers = 4
# Seconds before an idle keep-alive connection is closed.
keepalive_timeout = 75

[database]
url = "postgres://gateway@db.internal:5432/gateway"
pool_size = 5
# Statement timeout in milliseconds.
statement_timeout = 30000
replicas = ["db-r1.internal", "db-r2.internal"]

[logging]
log_level = "info"
format = "json"
# Where logs go; "-" is standard output.
target = "-"

[legacy]
# Old XML endpoint, switched off since v3.
xml_api = true
xml_port = 8081

[limits]
max_body_kb = 512
requests_per_minute = 600

# Upstream services, tried by weight.
[[upstream]]
name = "catalog"
url = "http://10.0.4.10:9000"
weight = 2

[[upstream]]
name = "search"
url = "http://10.0.4.11:9200"
weight = 1

[[upstream]]
name = "accounts"
url = "http://10.0.4.20:9000"
weight = 2
'''


def expected():
    cfg = tomllib.loads(ORIGINAL)
    want = copy.deepcopy(cfg)
    want["server"].update(port=8443, tls=True)
    want["database"]["pool_size"] = 20
    del want["logging"]["log_level"]
    want["logging"]["level"] = "warn"
    del want["legacy"]
    want["upstream"][1]["weight"] = 5
    want["upstream"].append({"name": "billing", "url": "http://10.0.4.12:9000", "weight": 3})
    return want


def load():
    text = open(PATH).read()
    assert text != ORIGINAL, "the file was not edited"
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AssertionError(f"not valid TOML any more: {exc}")


def test_valid_toml():
    load()


def test_server():
    assert load()["server"] == expected()["server"]


def test_database():
    assert load()["database"] == expected()["database"]


def test_logging():
    assert load()["logging"] == expected()["logging"]


def test_legacy_removed():
    cfg = load()
    assert "legacy" not in cfg
    assert "Old XML endpoint" not in open(PATH).read(), "the legacy section's comment is still there"


def test_upstreams():
    assert load()["upstream"] == expected()["upstream"]


def test_rest_and_comments_kept():
    cfg, want = load(), expected()
    assert set(cfg) == set(want), f"top-level keys: {sorted(cfg)}"
    for key in ("title", "environment", "limits"):
        assert cfg[key] == want[key], key
    text = open(PATH).read().splitlines()
    kept = [l.strip() for l in ORIGINAL.splitlines() if l.strip().startswith("#") and "XML" not in l]
    for comment in kept:
        assert comment in (l.strip() for l in text), f"comment lost: {comment}"
