#!/bin/bash
# summarize.sh LOGFILE: summary of a web server access log in Common Log Format, e.g.
#
#   203.0.113.9 - - [10/Oct/2023:13:55:36 +0000] "GET /shop/cart?id=3 HTTP/1.1" 200 2326
#
# (fields: client, ident, user, [time], "request line", status, bytes; bytes may be "-").
# Empty lines are skipped; all other lines are well-formed. Prints:
#
#   requests N               number of requests (non-empty lines)
#   bytes B                  sum of the bytes fields ("-" counts as 0)
#   status CODE N            one line per status code, by code ascending
#   top_paths                then the 5 most requested paths as "N PATH" lines, by count
#                            descending, ties by path ascending (byte order); PATH is the
#                            request target without its query string (from the first "?")
#   hour HH N                one line per hour of day (from the timestamp) that occurs, ascending
export LC_ALL=C

log=$1
requests=0
bytes=0
declare -A status_count path_count hour_count

while IFS= read -r line; do
    [ -z "$line" ] && continue
    requests=$((requests + 1))
    status=$(echo "$line" | awk '{print $9}')
    size=$(echo "$line" | awk '{print $10}')
    [ "$size" = "-" ] && size=0
    bytes=$((bytes + size))
    path=$(echo "$line" | cut -d'"' -f2 | cut -d' ' -f2 | cut -d'?' -f1)
    hour=$(echo "$line" | cut -d'[' -f2 | cut -d: -f2)
    status_count[$status]=$(( ${status_count[$status]:-0} + 1 ))
    path_count[$path]=$(( ${path_count[$path]:-0} + 1 ))
    hour_count[$hour]=$(( ${hour_count[$hour]:-0} + 1 ))
done < "$log"

echo "requests $requests"
echo "bytes $bytes"
for s in $(printf '%s\n' "${!status_count[@]}" | sort -n); do
    echo "status $s ${status_count[$s]}"
done
echo "top_paths"
for p in "${!path_count[@]}"; do
    printf '%d %s\n' "${path_count[$p]}" "$p"
done | sort -k1,1nr -k2,2 | head -n 5
for h in $(printf '%s\n' "${!hour_count[@]}" | sort); do
    echo "hour $h ${hour_count[$h]}"
done
