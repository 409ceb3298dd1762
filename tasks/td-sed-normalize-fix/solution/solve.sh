#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/normalize.sh <<'SCRIPT'
#!/bin/bash
# Normalise a contact-list export: stdin -> stdout.
sed -E \
  -e '/^[ \t]*#/d' \
  -e '/^[ \t]*$/d' \
  -e 's/^[ \t]+//' \
  -e 's/[ \t]+$//' \
  -e 's/[ \t]+/ /g' \
  -e 's/([0-9]{2})\/([0-9]{2})\/([0-9]{4})/\3-\2-\1/g' \
  -e 's/\(([0-9]{3})\) ([0-9]{3})-([0-9]{4})/+1-\1-\2-\3/g' \
  -e 's/<([^>]*)>/<\L\1\E>/g'
SCRIPT
chmod +x /app/normalize.sh
