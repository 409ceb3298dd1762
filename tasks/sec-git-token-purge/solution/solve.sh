#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/service
git checkout -q main
# 1-2: new token, configuration, .env out of the repository
mkdir -p /app/secrets
( umask 077; printf 'pk_live_%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" > /app/secrets/payment_token )
chmod 600 /app/secrets/payment_token
# 3: rewrite every ref: redact token-shaped values in files and messages
export FILTER_BRANCH_SQUELCH_WARNING=1
git filter-branch -f \
  --tree-filter 'grep -rlE "pk_live_[0-9a-f]{32}" . 2>/dev/null | xargs -r sed -i -E "s/pk_live_[0-9a-f]{32}/REDACTED/g"' \
  --msg-filter 'sed -E "s/pk_live_[0-9a-f]{32}/REDACTED/g"' \
  --tag-name-filter cat -- --all
git rm -q --cached .env
rm -f .env notes/debug-dump.txt
echo ".env" >> .gitignore
python3 - <<'PY'
import configparser
p = "config/settings.ini"
cfg = configparser.ConfigParser()
cfg.read(p)
cfg.remove_option("payments", "api_token")
cfg.set("payments", "api_token_file", "/app/secrets/payment_token")
with open(p, "w") as f:
    cfg.write(f)
PY
git add .gitignore config/settings.ini
git commit -q -m "read the payment token from /app/secrets"
# drop every leftover copy: filter-branch backups, reflogs, unreachable objects
git for-each-ref --format='%(refname)' refs/original | xargs -r -n1 git update-ref -d
rm -f .git/ORIG_HEAD .git/FETCH_HEAD
git reflog expire --expire=now --all
git gc -q --prune=now --aggressive
python3 app.py --check
git log --oneline --all --graph
