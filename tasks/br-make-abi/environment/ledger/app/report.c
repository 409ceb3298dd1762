/* ledger-report FILE: summary of a ledger file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ledger.h"

static void money(long long cents) {
    if (cents < 0) { putchar('-'); cents = -cents; }
    printf("%lld.%02lld", cents / 100, cents % 100);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int main(int argc, char **argv) {
    ledger lg;
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    if (ledger_load(&lg, argv[1]) != 0) {
        fprintf(stderr, "cannot read ledger %s\n", argv[1]);
        return 1;
    }
    /* distinct accounts, sorted */
    const char **names = malloc((lg.count + 1) * sizeof *names);
    size_t nn = 0;
    for (size_t i = 0; i < lg.count; i++) names[nn++] = lg.entries[i].account;
    qsort(names, nn, sizeof *names, cmp_str);

    int first_day = 0, last_day = 0;
    for (size_t i = 0; i < lg.count; i++) {
        int d = lg.entries[i].day;
        if (i == 0 || d < first_day) first_day = d;
        if (i == 0 || d > last_day) last_day = d;
    }
    printf("entries %zu\n", lg.count);
    printf("days %d-%d\n", first_day, last_day);
    printf("total ");
    money(ledger_total(&lg, NULL));
    putchar('\n');
    for (size_t i = 0; i < nn; i++) {
        if (i > 0 && strcmp(names[i], names[i - 1]) == 0) continue;
        printf("account %s ", names[i]);
        money(ledger_total(&lg, names[i]));
        putchar('\n');
    }
    printf("disputed %zu\n", ledger_count_flag(&lg, LEDGER_FLAG_DISPUTED));
    printf("recurring %zu\n", ledger_count_flag(&lg, LEDGER_FLAG_RECURRING));
    free(names);
    ledger_free(&lg);
    return 0;
}
