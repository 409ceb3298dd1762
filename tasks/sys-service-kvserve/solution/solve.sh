#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cat > /etc/kvserve/kvserve.conf <<'CONF'
# kvserve configuration
[server]
bind = 127.0.0.1
port = 8137
user = kvserve

[content]
docroot = /srv/site
motd = Maintenance window: Sundays 02:00-04:00 UTC

[auth]
require_key = yes
api_key_file = /etc/kvserve/api.key

[logging]
file = /var/log/kvserve/kvserve.log
CONF
openssl rand -hex 16 > /etc/kvserve/api.key
chown kvserve:kvserve /etc/kvserve/api.key
chmod 0600 /etc/kvserve/api.key
install -d -o kvserve -g kvserve -m 0750 /var/log/kvserve
/opt/kvserve/start.sh
for i in $(seq 50); do curl -fs http://127.0.0.1:8137/health && break; sleep 0.2; done
curl -s http://127.0.0.1:8137/motd
curl -s -H "X-Api-Key: $(cat /etc/kvserve/api.key)" http://127.0.0.1:8137/files/docs/notes.txt
kill "$(cat /run/kvserve.pid)"
