#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
f=/app/logsum/summarize.sh
# keep the header comment, replace the per-line process pipeline by one awk pass
sed -n '1,/^export LC_ALL=C$/p' "$f" > /tmp/summarize.new
cat >> /tmp/summarize.new <<'SH'

log=$1
awk '
$0 == "" { next }
{
    requests++
    size = $10
    if (size == "-") size = 0
    bytes += size
    split($0, q, "\"")
    split(q[2], r, " ")
    path = r[2]
    sub(/\?.*/, "", path)
    rest = substr($0, index($0, "[") + 1)
    split(rest, t, ":")
    sc[$9]++
    pc[path]++
    hc[t[2]]++
}
END {
    # mawk prints big numbers in %g form and clamps %d to 32 bits: use %.0f
    printf "requests %.0f\nbytes %.0f\n", requests, bytes
    fflush()
    cmd = "sort -n -k2,2"
    for (s in sc) printf "status %s %.0f\n", s, sc[s] | cmd
    close(cmd)
    print "top_paths"
    fflush()
    cmd = "sort -k1,1nr -k2,2 | head -n 5"
    for (p in pc) printf "%.0f %s\n", pc[p], p | cmd
    close(cmd)
    cmd = "sort"
    for (h in hc) printf "hour %s %.0f\n", h, hc[h] | cmd
    close(cmd)
}' "$log"
SH
cat /tmp/summarize.new > "$f"
rm -f /tmp/summarize.new
chmod +x "$f"
"$f" /app/logsum/sample.log | head -8
