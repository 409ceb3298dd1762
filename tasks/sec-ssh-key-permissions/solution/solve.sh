#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
d=/home/deploy/.ssh
chown -R deploy:deploy "$d"
chmod 0700 "$d"
for f in "$d"/* "$d"/.[!.]*; do
  [ -f "$f" ] || continue
  if grep -q -- '-----BEGIN.*PRIVATE KEY' "$f"; then
    chmod 0600 "$f"
  else
    case "$(basename "$f")" in
      authorized_keys|config) chmod 0600 "$f" ;;
      *) chmod 0644 "$f" ;;
    esac
  fi
done
ls -la "$d"
