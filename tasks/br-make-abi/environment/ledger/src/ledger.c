#include <stdlib.h>
#include <string.h>
#include "ledger.h"

void ledger_free(ledger *lg) {
    free(lg->entries);
    lg->entries = NULL;
    lg->count = lg->cap = 0;
}

long long ledger_total(const ledger *lg, const char *account) {
    long long sum = 0;
    for (size_t i = 0; i < lg->count; i++)
        if (account == NULL || strcmp(lg->entries[i].account, account) == 0)
            sum += lg->entries[i].cents;
    return sum;
}

size_t ledger_count_flag(const ledger *lg, unsigned flag) {
    size_t n = 0;
    for (size_t i = 0; i < lg->count; i++)
        if (lg->entries[i].flags & flag) n++;
    return n;
}
