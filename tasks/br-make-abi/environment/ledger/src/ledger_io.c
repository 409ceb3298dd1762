#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ledger.h"

/* "-12.5" -> -1250; at most two decimals. Returns 0 on success. */
static int parse_cents(const char *s, long long *out) {
    int neg = 0;
    long long whole = 0, frac = 0;
    int fd = 0;
    if (*s == '-' || *s == '+') neg = (*s++ == '-');
    if (!isdigit((unsigned char)*s)) return -1;
    while (isdigit((unsigned char)*s)) whole = whole * 10 + (*s++ - '0');
    if (*s == '.') {
        s++;
        while (isdigit((unsigned char)*s)) {
            if (fd == 2) return -1;
            frac = frac * 10 + (*s++ - '0');
            fd++;
        }
    }
    if (*s) return -1;
    if (fd == 1) frac *= 10;
    *out = (neg ? -1 : 1) * (whole * 100 + frac);
    return 0;
}

static int push(ledger *lg, const ledger_entry *e) {
    if (lg->count == lg->cap) {
        size_t cap = lg->cap ? lg->cap * 2 : 16;
        ledger_entry *p = realloc(lg->entries, cap * sizeof *p);
        if (!p) return -1;
        lg->entries = p;
        lg->cap = cap;
    }
    lg->entries[lg->count++] = *e;
    return 0;
}

/* Line format: DAY ACCOUNT AMOUNT [FLAGS]   (FLAGS: letters D = disputed, R = recurring)
   Blank lines and lines starting with '#' are ignored. */
int ledger_load(ledger *lg, const char *path) {
    FILE *f = fopen(path, "r");
    char line[512];
    lg->entries = NULL;
    lg->count = lg->cap = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        char *tok[5];
        int n = 0;
        for (char *t = strtok(line, " \t\r\n"); t && n < 5; t = strtok(NULL, " \t\r\n")) tok[n++] = t;
        if (n == 0 || tok[0][0] == '#') continue;
        if (n < 3 || n > 4) goto bad;
        ledger_entry e;
        memset(&e, 0, sizeof e);
        e.day = atoi(tok[0]);
        if (e.day < 1 || e.day > 366) goto bad;
        if (strlen(tok[1]) >= LEDGER_ACCOUNT_MAX) goto bad;
        strcpy(e.account, tok[1]);
        if (parse_cents(tok[2], &e.cents) != 0) goto bad;
        if (n == 4) {
            for (const char *c = tok[3]; *c; c++) {
                if (*c == 'D') e.flags |= LEDGER_FLAG_DISPUTED;
                else if (*c == 'R') e.flags |= LEDGER_FLAG_RECURRING;
                else goto bad;
            }
        }
        if (push(lg, &e) != 0) goto bad;
    }
    fclose(f);
    return 0;
bad:
    fclose(f);
    ledger_free(lg);
    return -1;
}
