#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/endpoint_errors.sh <<'SCRIPT'
#!/bin/bash
# The request is the first double-quoted part; the status follows it.
awk '{
  i = index($0, "\""); if (!i) next
  rest = substr($0, i + 1); j = index(rest, "\""); if (!j) next
  req = substr(rest, 1, j - 1); after = substr(rest, j + 1)
  if (req ~ /^ / || req ~ / $/ || req ~ /  /) next
  n = split(req, p, " "); if (n != 3) next
  split(after, a, " "); status = a[1] + 0
  path = p[2]; q = index(path, "?"); if (q) path = substr(path, 1, q - 1)
  key = p[1] " " path
  reqs[key]++; if (status >= 500 && status <= 599) errs[key]++
}
END { for (k in reqs) printf "%s %d %d %.1f\n", k, reqs[k], errs[k], 100 * errs[k] / reqs[k] }' "$1" |
  LC_ALL=C sort -k4,4nr -k3,3nr -k1,1 -k2,2
SCRIPT
chmod +x /app/endpoint_errors.sh
