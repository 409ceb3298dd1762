#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/join.sh <<'SCRIPT'
#!/bin/bash
awk -F'\t' -v OFS='\t' '
FNR == 1 { file++; if (file == 2) FS = ","; next }
file == 1 {
  id = $1 + 0; name = $2; gsub(/[ \t]+/, " ", name); sub(/^ /, "", name); sub(/ $/, "", name)
  email = tolower($3); gsub(/^[ \t]+|[ \t]+$/, "", email)
  nm[id] = name; em[id] = email; next
}
file == 2 && NF >= 4 {
  if ($1 in seen) next; seen[$1] = 1
  id = $2 + 0; k = (id in nm) ? id : "unknown"
  n[k]++; t[k] += $3; if ($4 > last[k]) last[k] = $4
}
END {
  for (id in nm) printf "%d\t%s\t%s\t%d\t%.2f\t%s\n", id, nm[id], em[id], n[id], t[id], (n[id] ? last[id] : "-") | "sort -n -k1,1"
  close("sort -n -k1,1")
  if (n["unknown"]) printf "unknown\t\t\t%d\t%.2f\t%s\n", n["unknown"], t["unknown"], last["unknown"]
}' "$1" "$2"
SCRIPT
chmod +x /app/join.sh
