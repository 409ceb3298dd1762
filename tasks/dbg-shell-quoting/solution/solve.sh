#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
f=/app/tools/organize.sh
head -n "$(grep -n '^SRC=\$1' "$f" | cut -d: -f1)" "$f" | head -n -1 > /tmp/organize.new
cat >> /tmp/organize.new <<'SH'
SRC=$1
DEST=$2
count=0

# NUL-separated paths, read verbatim (IFS= keeps edge blanks, -r keeps backslashes), and a
# process substitution instead of a pipe so that count survives the loop.
while IFS= read -r -d '' f; do
    name=${f##*/}
    ext=${name##*.}
    stem=${name%.*}
    if [[ $name == *.* && -n $ext && -n $stem ]]; then
        dir=$DEST/${ext,,}
    else
        dir=$DEST/noext
        ext=
    fi
    target=$dir/$name
    n=1
    while [[ -e $target || -L $target ]]; do
        if [[ -n $ext ]]; then
            target=$dir/${stem}_$n.$ext
        else
            target=$dir/${name}_$n
        fi
        n=$((n + 1))
    done
    mkdir -p -- "$dir"
    mv -- "$f" "$target"
    count=$((count + 1))
done < <(find "$SRC" -type f -print0 | LC_ALL=C sort -z)

echo "moved $count"
SH
cat /tmp/organize.new > "$f"
rm -f /tmp/organize.new
chmod +x "$f"
mkdir -p "/tmp/demo src/a b" && touch "/tmp/demo src/a b/x y.TXT" "/tmp/demo src/README"
"$f" "/tmp/demo src" "/tmp/demo dest" && find "/tmp/demo dest" -type f
rm -rf "/tmp/demo src" "/tmp/demo dest"
