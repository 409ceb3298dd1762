#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cat > /etc/minirotate.d/webapp <<'CONF'
/var/log/webapp/access.log /var/log/webapp/error.log {
    daily
    rotate 7
    compress
    delaycompress
    missingok
    notifempty
    create 0640 webapp adm
    sharedscripts
    postrotate
        /opt/webapp/reopen-logs
    endscript
}

/var/log/webapp/audit.log {
    size 1M
    rotate 30
    nocompress
    copytruncate
}
CONF
minirotate --verbose --state /tmp/try-state.json --now 2025-01-01T00:05 /etc/minirotate.d
rm -f /tmp/try-state.json
