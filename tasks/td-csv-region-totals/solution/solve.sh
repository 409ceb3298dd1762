#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/region_totals.sh <<'SCRIPT'
#!/bin/bash
awk -F, 'NR > 1 && NF >= 4 { n[$1]++; u[$1] += $3; r[$1] += $3 * $4 }
END { for (k in n) printf "%s,%d,%d,%.2f\n", k, n[k], u[k], r[k] }' "$1" | LC_ALL=C sort -t, -k1,1 > /tmp/.rt.$$
echo "region,orders,units,revenue"
cat /tmp/.rt.$$; rm -f /tmp/.rt.$$
SCRIPT
chmod +x /app/region_totals.sh
