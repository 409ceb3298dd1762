/* Public interface of libledger. */
#ifndef LEDGER_H
#define LEDGER_H

#include <stddef.h>

#define LEDGER_ACCOUNT_MAX 24          /* including the terminating NUL */
#define LEDGER_FLAG_DISPUTED  1u
#define LEDGER_FLAG_RECURRING 2u

typedef struct {
    char account[LEDGER_ACCOUNT_MAX];
    long long cents;                    /* signed amount in cents */
    unsigned short flags;               /* LEDGER_FLAG_* */
    int day;                            /* day of the year, 1..366 */
} ledger_entry;

typedef struct {
    ledger_entry *entries;
    size_t count;
    size_t cap;
} ledger;

/* Reads a ledger file; returns 0, or -1 if the file cannot be read or a line is malformed. */
int ledger_load(ledger *lg, const char *path);
void ledger_free(ledger *lg);

/* Sum of the amounts of one account (all accounts if account is NULL), in cents. */
long long ledger_total(const ledger *lg, const char *account);

/* Number of entries that have the given flag set. */
size_t ledger_count_flag(const ledger *lg, unsigned flag);

#endif
