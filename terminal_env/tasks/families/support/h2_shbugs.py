"""Bash scripts with injectable bugs (the sh-script-bugfix family).

``render(script, bugs)`` is the script with ``bugs`` injected (``()``: the reference);
``make_case(script, rng, size)`` draws a case: files to create in a fresh directory and the
script's arguments (``@DIR`` stands for that directory). Every case exercises every bug site.
Standard library only."""

SCRIPTS = {}

SCRIPTS["extcount"] = dict(usage="extcount.sh DIR", template='''#!/bin/bash
# extcount.sh DIR
#
# Counts the regular files under DIR (recursively; hidden files and names with spaces included)
# by extension. The extension of a file is the text after the last dot of its name; a name
# without a dot, or whose only dot is its first character (like `.profile`), has the extension
# `(none)`. Prints `EXT COUNT` lines sorted by EXT (byte order), then `total N`.
set -u
dir=$1
total=0
declare -A count
{{HEAD}}
    name=${path##*/}
    base={{BASE}}
    if [[ $base == *.* ]]; then ext=${base{{EXT}}*.}; else ext="(none)"; fi
    count[$ext]=$(( ${count[$ext]:-0} + 1 ))
    total=$((total + 1))
{{TAIL}}
for ext in "${!count[@]}"; do
    printf '%s %s\\n' "$ext" "${count[$ext]}"
done | LC_ALL=C sort
echo "total $total"
''', bugs={
    "pipe-subshell": ({"HEAD": "while IFS= read -r -d '' path; do", "TAIL": 'done < <(find "$dir" -type f -print0)'},
                      {"HEAD": "find \"$dir\" -type f -print0 | while IFS= read -r -d '' path; do", "TAIL": "done"},
                      "it always prints `total 0` and no extension at all"),
    "word-split": ({"HEAD": "while IFS= read -r -d '' path; do", "TAIL": 'done < <(find "$dir" -type f -print0)'},
                   {"HEAD": 'for path in $(find "$dir" -type f); do', "TAIL": "done"},
                   "files with spaces in their names are counted wrong"),
    "last-dot": ({"EXT": "##"}, {"EXT": "#"}, "`notes.tar.gz` is counted under `tar.gz`"),
    "dotfile": ({"BASE": "${name#.}"}, {"BASE": "$name"}, "`.profile` is counted under the extension `profile`"),
}, exclusive=("pipe-subshell", "word-split"))

SCRIPTS["colsum"] = dict(usage="colsum.sh FILE COLUMN", template='''#!/bin/bash
# colsum.sh FILE COLUMN
#
# FILE is a whitespace-separated table whose first line holds the column names; blank lines are
# ignored. Prints three lines for the column named exactly COLUMN: `rows N` (the number of data
# rows), `sum S` and `mean M` (S and M with two decimals; M is 0.00 without rows). If there is no
# such column, prints `no column COLUMN` and exits with status 1.
set -u
awk -v name="$2" '
NR == 1 { for (i = 1; i <= NF; i++) if ($i {{MATCH}} name) c = i; {{NEXT}} }
{{BLANK}}
{ s += $c; n++ }
END {
    if (!c) { print "no column " name; exit 1 }
    printf "rows %d\\nsum {{FMT}}\\nmean %.2f\\n", n, s, n ? s / n : 0
}' "$1"
''', bugs={
    "header-row": ({"NEXT": "next"}, {"NEXT": ""}, "the row count is one too high"),
    "blank-lines": ({"BLANK": "NF == 0 { next }"}, {"BLANK": ""}, "files with empty lines give a wrong mean"),
    "int-format": ({"FMT": "%.2f"}, {"FMT": "%d.00"}, "the sum loses its cents"),
    "column-match": ({"MATCH": "=="}, {"MATCH": "~"}, "asking for `price` sometimes sums another column"),
}, exclusive=())

SCRIPTS["pathdedup"] = dict(usage="pathdedup.sh STRING", template='''#!/bin/bash
# pathdedup.sh STRING
#
# STRING is a colon-separated list of directories, like $PATH. Prints the list without empty
# entries and without repeated entries (the first occurrence of each stays, in order), joined by
# colons, on one line. Entries are compared exactly; they may contain spaces.
set -u
IFS=':' read -r -a parts <<< "$1"
seen=":"
out=()
for p in {{LOOP}}; do
    {{EMPTY}}
    if [[ $seen != {{SEEN}} ]]; then
        seen+="$p:"
        out+=("$p")
    fi
done
{{JOIN}}
''', bugs={
    "substring-seen": ({"SEEN": '*":$p:"*'}, {"SEEN": '*"$p"*'}, "`/usr/bin` disappears when `/usr/bin/extra` comes first"),
    "unquoted-array": ({"LOOP": '"${parts[@]}"'}, {"LOOP": "${parts[@]}"}, "entries with spaces are cut in pieces"),
    "empty-entry": ({"EMPTY": "[[ -z $p ]] && continue"}, {"EMPTY": ":"}, "`a::b` keeps an empty entry"),
    "join": ({"JOIN": "(IFS=:; printf '%s\\n' \"${out[*]}\")"}, {"JOIN": "echo \"${out[@]}\" | tr ' ' ':'"},
             "spaces inside entries turn into colons"),
}, exclusive=())


def render(script, bugs):
    spec = SCRIPTS[script]
    text = spec["template"]
    chosen = {}
    for bug, (good, bad, _) in spec["bugs"].items():
        for site, value in (bad if bug in bugs else good).items():
            if bug in bugs or site not in chosen:
                chosen[site] = value
    for site, value in chosen.items():
        text = text.replace("{{" + site + "}}", value)
    return text


def symptom(script, bug):
    return SCRIPTS[script]["bugs"][bug][2]


def make_case(script, rng, size=1):
    """(files {relative path: text}, args) with ``@DIR`` in args standing for the directory."""
    if script == "extcount":
        exts = ["txt", "log", "tar.gz", "c", "h", "md"]
        files = {}
        for i in range(5 + 4 * size):
            sub = rng.choice(["", "src/", "docs/", "a b/", "x/y/"])
            stem = rng.choice(["notes", "main", "my file", "data.v2", "report", "r"])
            files[f"{sub}{stem}{i}.{rng.choice(exts)}"] = "x\n"
        files.update({".profile": "", f"docs/.hidden{rng.randint(1, 9)}.cfg": "", "Makefile": "",
                      f"old {rng.randint(1, 9)}.tar.gz": "", "src/.env": ""})
        return files, ["@DIR"]
    if script == "colsum":
        cols = ["id", "unit_price", "price", "qty", "price_old"]
        rng.shuffle(cols)
        if cols.index("price") > cols.index("price_old"):  # another match after the right column
            cols[cols.index("price")], cols[cols.index("price_old")] = "price_old", "price"
        lines = [" ".join(cols)]
        for i in range(4 + 4 * size):
            row = {"id": str(i + 1), "qty": str(rng.randint(1, 9))}
            for c in ("unit_price", "price", "price_old"):
                row[c] = f"{rng.randint(0, 99)}.{rng.randint(0, 99):02d}"
            lines.append(" ".join(row[c] for c in cols))
            if rng.random() < 0.3:
                lines.append("")
        lines.insert(2, "")
        return {"table.txt": "\n".join(lines) + "\n"}, ["@DIR/table.txt", "price"]
    dirs = ["/usr/bin", "/usr/local/bin", "/opt/My Tools/bin", "/bin", "/usr/bin/extra", "/home/u/bin",
            "/snap/bin", "/opt/app bin"]
    parts = [rng.choice(dirs) for _ in range(5 + 3 * size)]
    parts[0:0] = [rng.choice(["/usr/bin/extra", "/opt/app bin/x"]), "", "/opt/My Tools/bin"]
    parts.insert(rng.randint(3, len(parts)), "/usr/bin" if parts[0] == "/usr/bin/extra" else "/opt/app bin")
    parts.insert(rng.randrange(len(parts)), "")
    return {}, [":".join(parts)]
