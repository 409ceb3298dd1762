#!/bin/bash
set -e
TOKEN=pk_live_c30c1e5691e23306f0cf15116ab784ed
git config --global user.name "Dana Dev"
git config --global user.email dana@example.test
git config --global init.defaultBranch main
git config --global advice.detachedHead false
mkdir -p /app/service && cd /app/service && git init -q
n=0
commit() {  # commit MESSAGE [BODY]
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-03-0${n}T10:00:00Z" GIT_COMMITTER_DATE="2024-03-0${n}T10:00:00Z"
  git add -A
  if [ -n "$2" ]; then git commit -q -m "$1" -m "$2"; else git commit -q -m "$1"; fi
}
mkdir -p config
cp /tmp/app.py app.py
printf '# Payment service\n\nRun `python3 app.py --check`.\n' > README.md
printf '[server]\nport = 8080\ntimeout = 30\n' > config/settings.ini
commit "initial app skeleton"
printf '[server]\nport = 8080\ntimeout = 30\n\n[payments]\nendpoint = https://payments.example.test/v1\napi_token = %s\n' "$TOKEN" > config/settings.ini
commit "add payment client configuration"
sed -i 's/timeout = 30/timeout = 45/' config/settings.ini
commit "tweak timeouts"
git tag -a v1.0 -m "release 1.0"
git checkout -q -b feature/metrics
printf 'def record(name, value):\n    print(f"metric {name}={value}")\n' > metrics.py
commit "add metrics module"
printf '2024-03-05 POST /v1/charges Authorization: Bearer %s -> 401\n' "$TOKEN" > debug.log
commit "debug payment failure" "Requests with token $TOKEN are rejected with 401, see debug.log."
git rm -q debug.log
commit "remove debug log"
git checkout -q main
sed -i '/^api_token = /d' config/settings.ini
printf 'PAYMENT_API_TOKEN=%s\n' "$TOKEN" > .env
commit "move token to env file"
printf '\n## Configuration\n\nSettings live in `config/settings.ini`.\n' >> README.md
commit "update README"
mkdir -p notes
printf 'curl -H "Authorization: Bearer %s" https://payments.example.test/v1/ping\n' "$TOKEN" > notes/debug-dump.txt
git gc -q
