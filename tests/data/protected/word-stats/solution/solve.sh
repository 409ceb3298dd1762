#!/bin/bash
cat > /app/stats.sh <<'SCRIPT'
#!/bin/bash
awk '{ for (i = 1; i <= NF; i++) { words++; if (length($i) > length(best)) best = $i } }
     END { printf "lines %d\nwords %d\nlongest %s\n", NR, words, best }'
SCRIPT
chmod +x /app/stats.sh
