/* libledger internal header */
#ifndef LEDGER_H
#define LEDGER_H

#include <stddef.h>

#define LEDGER_ACCOUNT_MAX 16
#define LEDGER_FLAG_DISPUTED  1u
#define LEDGER_FLAG_RECURRING 2u

typedef struct {
    char account[LEDGER_ACCOUNT_MAX];
    long long cents;
    int flags;
    int day;
} ledger_entry;

typedef struct {
    ledger_entry *entries;
    size_t count;
    size_t cap;
} ledger;

int ledger_load(ledger *lg, const char *path);
void ledger_free(ledger *lg);
long long ledger_total(const ledger *lg, const char *account);
size_t ledger_count_flag(const ledger *lg, unsigned flag);

#endif
