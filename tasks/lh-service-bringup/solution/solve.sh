#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
# 1. configuration
mkdir -p /etc/kvsvc /var/lib/kvsvc /var/log/kvsvc
umask 077
openssl rand -hex 32 > /etc/kvsvc/token
chmod 600 /etc/kvsvc/token
umask 022
cat > /etc/kvsvc/config.json <<'JSON'
{
  "host": "127.0.0.1",
  "port": 8765,
  "data_dir": "/var/lib/kvsvc",
  "token_file": "/etc/kvsvc/token",
  "log_file": "/var/log/kvsvc/access.log"
}
JSON
python3 /app/service/kvsvc.py --check-config
# 2. start script
cat > /app/start.sh <<'SH'
#!/bin/bash
PIDFILE=/run/kvsvc.pid
healthy() { curl -fsS --max-time 2 http://127.0.0.1:8765/health >/dev/null 2>&1; }
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && healthy; then
  exit 0
fi
mkdir -p /var/log/kvsvc
setsid nohup python3 /app/service/kvsvc.py >>/var/log/kvsvc/service.log 2>&1 < /dev/null &
echo $! > "$PIDFILE"
for _ in $(seq 1 100); do
  healthy && exit 0
  kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { echo "kvsvc exited, see /var/log/kvsvc/service.log" >&2; exit 1; }
  sleep 0.1
done
echo "kvsvc did not become healthy" >&2
exit 1
SH
chmod +x /app/start.sh
# 5. stop script (written before use)
cat > /app/stop.sh <<'SH'
#!/bin/bash
PIDFILE=/run/kvsvc.pid
[ -f "$PIDFILE" ] || exit 0
pid=$(cat "$PIDFILE")
if kill -0 "$pid" 2>/dev/null; then
  kill "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
fi
rm -f "$PIDFILE"
exit 0
SH
chmod +x /app/stop.sh
# 3. users through the API
/app/start.sh
TOKEN=$(cat /etc/kvsvc/token)
for u in ada:admin grace:admin linus:dev; do
  curl -fsS -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d "{\"name\": \"${u%%:*}\", \"role\": \"${u##*:}\"}" http://127.0.0.1:8765/users
  echo
done
# 4. answer
admins=$(curl -fsS -H "Authorization: Bearer $TOKEN" 'http://127.0.0.1:8765/users?role=admin' | jq -c '[.users[].name] | sort')
fp=$(curl -fsS -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8765/stats | jq -r .fingerprint)
jq -n --argjson admins "$admins" --arg fp "$fp" '{admins: $admins, fingerprint: $fp}' > /app/answer.json
cat /app/answer.json
/app/stop.sh
