"""Two bash scripts with injectable bugs (the sh-script-bugfix family).

``render(script, bugs)`` is the script with ``bugs`` injected (``()``: the reference);
``make_case(script, rng, size)`` draws a case: files to create in a fresh directory and the
script's arguments (``@DIR`` stands for that directory). Every case exercises every bug site.
Standard library only."""

SCRIPTS = {}

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
