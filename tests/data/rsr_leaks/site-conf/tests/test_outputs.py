import hashlib
from pathlib import Path

CONF = Path("/app/site.conf")
ORIGINAL = "258432021c57a06c3c8a5802589410ba5bad6fbfde7526dea37de24d0e05be4f"


def test_listen():
    assert "listen 8081;" in CONF.read_text()


def test_workers():
    assert "worker_connections 512;" in CONF.read_text()


def test_server_name():
    assert "server_name shop.internal.example;" in CONF.read_text()


def test_backup_is_the_original():
    assert hashlib.sha256(Path("/app/site.conf.bak").read_bytes()).hexdigest() == ORIGINAL
