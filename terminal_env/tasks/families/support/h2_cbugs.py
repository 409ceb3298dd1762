"""Three C programs and their catalogue of defects (the c-prog-bugfix family).

A program's text has ``{{SLOT}}`` markers, each filled with the right code or with a defect;
``program_text(prog, defects)`` fills them, ``program_text(prog, ())`` is the reference.
``input_bytes(prog, rng, size)`` draws a file on which every defect shows. Standard library
only."""

PROGS = {}

PROGS["rpn"] = dict(text=r'''/* rpn: evaluate reverse Polish expressions.

Run as: rpn FILE

Each non-blank line of FILE is an expression of tokens separated by spaces: integers (optionally
negative, like -12), the operators + - * / %, `dup` (push a copy of the top value) and `swap`
(exchange the top two values). `/` is floor division (it rounds toward negative infinity) and `%`
the matching remainder (its sign is the divisor's), as in Python. For each line, prints the
result if exactly one value is left on the stack at the end, otherwise `error`; a line that
divides by zero, lacks operands or has an unknown token also prints `error`. All values fit in a
signed 64-bit integer.
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_number(const char *t)
{
    if ({{SIGN}})
        t++;
    if (!*t)
        return 0;
    for (; *t; t++)
        if (!isdigit((unsigned char)*t))
            return 0;
    return 1;
}

static long long floordiv(long long a, long long b)
{
    long long q = a / b;
    {{FLOOR}}
    return q;
}

static int eval(char *line, long long *out)
{
    long long st[256];
    int sp = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        if (is_number(tok)) {
            if (sp == 256)
                return 0;
            st[sp++] = strtoll(tok, NULL, 10);
        } else if ({{DUP}}) {
            if (sp < 1 || sp == 256)
                return 0;
            st[sp] = st[sp - 1];
            sp++;
        } else if (strcmp(tok, "swap") == 0) {
            if (sp < 2)
                return 0;
            long long t = st[sp - 1];
            st[sp - 1] = st[sp - 2];
            st[sp - 2] = t;
        } else if (strlen(tok) == 1 && strchr("+-*/%", tok[0])) {
            if (sp < 2)
                return 0;
            long long b = st[--sp], a = st[--sp], r;
            switch (tok[0]) {
            case '+': r = a + b; break;
            case '-': r = a - b; break;
            case '*': r = a * b; break;
            default:
                if ({{ZERO}})
                    return 0;
                r = tok[0] == '/' ? floordiv(a, b) : a - b * floordiv(a, b);
            }
            st[sp++] = r;
        } else {
            return 0;
        }
    }
    if ({{END}})
        return 0;
    *out = st[sp - 1];
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "rpn: expected exactly one FILE argument\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        long long v;
        if (eval(line, &v))
            printf("%lld\n", v);
        else
            puts("error");
    }
    fclose(f);
    return 0;
}
''', defects={
    "negative-literal": ("SIGN", "*t == '-' && t[1]", "0", "expressions with negative numbers like `-4` print `error`"),
    "floor-division": ("FLOOR", "if (a % b != 0 && (a < 0) != (b < 0))\n        q--;", "",
                       "`/` and `%` give different results than Python for negative operands"),
    "string-compare": ("DUP", 'strcmp(tok, "dup") == 0', 'tok == "dup"', "every expression that uses `dup` prints `error`"),
    "zero-check": ("ZERO", "b == 0", "a == 0", "`0 5 /` prints `error`, and dividing by zero crashes the program"),
    "leftover-stack": ("END", "sp != 1", "sp < 1", "lines that leave several values on the stack print a number"),
})

PROGS["freq"] = dict(text=r'''/* freq: letter frequencies.

Run as: freq FILE

Counts the letters A-Z of FILE, case-insensitively. FILE is ISO-8859-1 text: every byte is one
character, and bytes outside A-Z and a-z (accented letters included) are not letters. Prints one
line `LETTER COUNT` (the letter in lower case) for each letter that occurs, the most frequent
first, letters with the same count in alphabetical order; then `letters N` (the number of
letters in FILE) and `bytes N` (the size of FILE in bytes).
*/
#include <stdio.h>
#include <stdlib.h>

struct entry {
    char letter;
    long count;
};

static int by_count(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    {{CMP}}
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "freq: expected exactly one FILE argument\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    struct entry e[26];
    for (int i = 0; i < 26; i++) {
        e[i].letter = 'a' + i;
        e[i].count = 0;
    }
    long letters = 0, bytes = 0;
    {{CTYPE}} c;
    while ((c = getc(f)) != EOF) {
        bytes++;
        if (c >= 'A' && c {{UPPER}} 'Z')
            c += 'a' - 'A';
        if (c >= 'a' && c <= 'z') {
            e[c - 'a'].count++;
            letters++;
        }
    }
    fclose(f);
    qsort(e, 26, sizeof e[0], by_count);
    for (int i = 0; i < {{LAST}}; i++)
        if (e[i].count)
            printf("%c %ld\n", e[i].letter, e[i].count);
    printf("letters %ld\nbytes %ld\n", letters, bytes);
    return 0;
}
''', defects={
    "char-eof": ("CTYPE", "int", "char", "on some files the counts stop partway through the file"),
    "comparator": ("CMP", "if (a->count != b->count)\n        return a->count < b->count ? 1 : -1;\n    return a->letter - b->letter;",
                   "if (a->count != b->count)\n        return a->count < b->count ? 1 : -1;\n    return b->letter - a->letter;",
                   "letters with the same count are not in the specified order"),
    "upper-range": ("UPPER", "<=", "<", "a capital Z is not counted"),
    "last-entry": ("LAST", "26", "25", "when every letter occurs, the rarest one is missing"),
})

PROGS["tally"] = dict(text=r'''/* tally: count repeated lines.

Run as: tally FILE

Prints each distinct line of FILE once, in the order of first occurrence, as `COUNT LINE`. Lines
are compared exactly (case and spaces matter); the line terminator (`\n`, or nothing at the end
of a last line without one) is not part of the line. Lines are at most 200 bytes long. Finally
prints `distinct N`, the number of distinct lines.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct row {
    char *text;
    long n;
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "tally: expected exactly one FILE argument\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    struct row *rows = NULL;
    size_t nrows = 0, cap = 0;
    char buf[256];
    while (fgets(buf, sizeof buf, f)) {
        size_t len = strlen(buf);
        {{STRIP}}
        size_t i;
        for (i = 0; i < nrows; i++)
            if ({{SAME}})
                break;
        if (i < nrows) {
            rows[i].n++;
            continue;
        }
        if (nrows == cap) {
            cap = cap ? 2 * cap : 16;
            rows = realloc(rows, cap * sizeof *rows);
        }
        rows[nrows].text = {{COPY}};
        rows[nrows].n = {{START}};
        nrows++;
    }
    fclose(f);
    for (size_t i = 0; i < nrows; i++)
        printf("%ld %s\n", rows[i].n, rows[i].text);
    printf("distinct %zu\n", nrows);
    return 0;
}
''', defects={
    "newline-strip": ("STRIP", "if (len && buf[len - 1] == '\\n')\n            buf[--len] = '\\0';",
                      "buf[len - 1] = '\\0';", "the last line of a file loses its last character"),
    "prefix-compare": ("SAME", "strcmp(rows[i].text, buf) == 0", "strncmp(rows[i].text, buf, len) == 0",
                       "a line that is the beginning of an earlier line is counted as that line"),
    "aliased-buffer": ("COPY", "strdup(buf)", "buf", "every line of the report shows the same text"),
    "count-start": ("START", "1", "0", "the counts are one too low"),
})


def program_text(prog, defects):
    """The program's source with ``defects`` in it."""
    text = PROGS[prog]["text"]
    for name, (site, good, bad, _) in PROGS[prog]["defects"].items():
        text = text.replace("{{" + site + "}}", bad if name in defects else good)
    return text


def defect_names(prog):
    return sorted(PROGS[prog]["defects"])


def complaint(prog, name):
    return PROGS[prog]["defects"][name][3]


def input_bytes(prog, rng, size=1):
    """An input file (bytes) for ``prog`` on which every defect shows."""
    if prog == "rpn":
        lines = []
        for _ in range(4 + 3 * size):
            a, b = rng.randint(-60, 60), rng.choice([-7, -3, 2, 5, 9])
            form = rng.choice(["{a} {b} /", "{a} {b} %", "{a} dup *", "{a} {b} swap -", "{a} {b} + {b} *",
                               "{a} {b} {b} + /", "{a} {b} dup", "{a} +", "{a} {b} x", "{a} {b} - dup %"])
            lines.append(form.format(a=a, b=b))
        lines += [f"-{rng.randint(7, 40)} {rng.randint(3, 6)} /", f"{rng.randint(5, 30)} -{rng.randint(2, 4)} %",
                  f"{rng.randint(2, 9)} dup * dup +", f"0 {rng.randint(2, 9)} /", f"{rng.randint(1, 9)} 1 1 -",
                  f"{rng.randint(1, 9)} {rng.randint(1, 9)}", f"{rng.randint(1, 9)} 0 %", "", "7 -"]
        rng.shuffle(lines)
        idx = rng.randrange(len(lines))
        lines.insert(idx, f"{rng.randint(1, 9)} 0 /")
        return ("\n".join(lines) + "\n").encode()
    if prog == "freq":
        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 8))) for _ in range(30 * size)]
        text = " ".join(words).encode() + b" Zz qZ "
        text += bytes(range(97, 123)) + b"\n"
        parts = [text[:len(text) // 2], bytes([0xFF, 0xE9, 0x20]), text[len(text) // 2:],
                 bytes([0xC0, 0xFF]), b"Zebra jazz\n" * rng.randint(1, 3)]
        return b"".join(parts)
    pool = ["alpha", "alpha beta", "Alpha", "gamma ray", "gamma", "delta  x", "delta x", "omega", "om"]
    rows = [rng.choice(pool) for _ in range(8 + 6 * size)]
    rows += ["alpha beta", "alpha", "gamma ray", "gamma"]
    rng.shuffle(rows)
    rows.append(rows[0] if rng.random() < 0.5 else "tail-" + str(rng.randint(10, 99)))
    return ("\n".join(rows)).encode()
