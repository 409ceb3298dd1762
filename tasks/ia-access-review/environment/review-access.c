/* review-access - walk through the pending access requests and record decisions.
 *
 * The requests are compiled in (requests.h, made from requests.json at build time). Every
 * recorded decision is one line of /app/data/audit.log, signed by seal_mac(); a line whose
 * signature does not verify is not a decision. /app/data/decisions.json is rewritten from the
 * signed lines after every decision.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "seal.h"
#include "requests.h"

#define TOOL "review-access"
#define DECISIONS "/app/data/decisions.json"
#define AUDIT "/app/data/audit.log"

struct record {
    int request; /* index into REQUESTS */
    long at;
    char decision[16];
    char code[8];
};

static struct record records[N_REQUESTS];
static int n_records;

static int find_request(const char *id)
{
    for (int i = 0; i < N_REQUESTS; i++)
        if (strcmp(REQUESTS[i].id, id) == 0)
            return i;
    return -1;
}

static int decided(int request)
{
    for (int i = 0; i < n_records; i++)
        if (records[i].request == request)
            return 1;
    return 0;
}

/* The decisions so far: the first signed line of each request (later ones cannot change it). */
static void load_records(void)
{
    FILE *f = fopen(AUDIT, "r");
    char line[512];
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        long at;
        char id[32], decision[16], code[8], mac[72], entry[160], want[65];
        if (sscanf(line, "%ld %31s %15s code=%7s mac=%71s", &at, id, decision, code, mac) != 5)
            continue;
        int request = find_request(id);
        if (request < 0 || decided(request))
            continue;
        if (strcmp(decision, "approved") != 0 && strcmp(decision, "denied") != 0)
            continue;
        snprintf(entry, sizeof entry, "%ld %s %s code=%s", at, id, decision, code);
        seal_mac(TOOL, entry, strlen(entry), want);
        if (strcmp(want, mac) != 0)
            continue;
        struct record *r = &records[n_records++];
        r->request = request;
        r->at = at;
        snprintf(r->decision, sizeof r->decision, "%s", decision);
        snprintf(r->code, sizeof r->code, "%s", code);
    }
    fclose(f);
}

static int by_id(const void *a, const void *b)
{
    return strcmp(REQUESTS[((const struct record *)a)->request].id,
                  REQUESTS[((const struct record *)b)->request].id);
}

/* decisions.json as json.dump(decisions, indent=2, sort_keys=True) writes it. */
static void save_decisions(void)
{
    struct record sorted[N_REQUESTS];
    memcpy(sorted, records, sizeof(struct record) * (size_t)n_records);
    qsort(sorted, (size_t)n_records, sizeof sorted[0], by_id);
    FILE *f = fopen(DECISIONS ".tmp", "w");
    if (f == NULL) {
        perror(DECISIONS ".tmp");
        exit(1);
    }
    if (n_records == 0)
        fputs("{}", f);
    else {
        fputs("{\n", f);
        for (int i = 0; i < n_records; i++)
            fprintf(f, "  \"%s\": {\n    \"at\": %ld,\n    \"code\": \"%s\",\n    \"decision\": \"%s\"\n  }%s\n",
                    REQUESTS[sorted[i].request].id, sorted[i].at, sorted[i].code, sorted[i].decision,
                    i + 1 < n_records ? "," : "");
        fputs("}", f);
    }
    if (fclose(f) != 0 || rename(DECISIONS ".tmp", DECISIONS) != 0) {
        perror(DECISIONS);
        exit(1);
    }
}

static void record(int request, const char *decision, const char *code)
{
    char entry[160], mac[65], line[240];
    long at = (long)time(NULL);
    snprintf(entry, sizeof entry, "%ld %s %s code=%s", at, REQUESTS[request].id, decision, code);
    seal_mac(TOOL, entry, strlen(entry), mac);
    int len = snprintf(line, sizeof line, "%s mac=%s\n", entry, mac);
    int fd = open(AUDIT, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, line, (size_t)len) != len || close(fd) != 0) {
        perror(AUDIT);
        exit(1);
    }
    struct record *r = &records[n_records++];
    r->request = request;
    r->at = at;
    snprintf(r->decision, sizeof r->decision, "%s", decision);
    snprintf(r->code, sizeof r->code, "%s", code);
    save_decisions();
}

static unsigned uniform(unsigned n) /* 0 <= result < n, without modulo bias */
{
    uint32_t v, limit = UINT32_MAX - UINT32_MAX % n;
    do
        seal_random(&v, sizeof v);
    while (v >= limit);
    return v % n;
}

static void ask(const char *prompt, char *out, size_t size)
{
    int r;
    while ((r = seal_ask(prompt, out, size, 0)) == 1)
        puts("  please answer with a few printable characters");
    if (r < 0) {
        puts("\ninput closed, stopping (decisions so far are saved)");
        exit(1);
    }
    for (char *p = out; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
}

int main(int argc, char **argv)
{
    seal_start();
    if (argc > 1 && strcmp(argv[1], "--can-run") == 0)
        return 0;
    seal_need_terminal(TOOL);
    load_records();

    int pending[N_REQUESTS], n = 0;
    for (int i = 0; i < N_REQUESTS; i++)
        if (!decided(i))
            pending[n++] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)uniform((unsigned)i + 1), t = pending[i];
        pending[i] = pending[j];
        pending[j] = t;
    }

    printf("Access review for %s: %d pending request(s). Policy: /app/POLICY.md\n", REVIEW_DATE, n);
    int approved = 0, denied = 0, skipped = 0;
    for (int k = 0; k < n; k++) {
        const struct request *r = &REQUESTS[pending[k]];
        char code[5], ans[64], typed[64], prompt[160];
        for (int i = 0; i < 4; i++)
            code[i] = (char)('A' + uniform(26));
        code[4] = 0;
        puts("------------------------------------------------------------");
        printf("Request %s   (%d of %d)\n", r->id, k + 1, n);
        printf("  requester:          %s (team: %s)\n", r->requester, r->team);
        printf("  role requested:     %s on %s\n", r->role, r->resource);
        printf("  manager approval:   %s\n", r->manager_approved ? "yes" : "no");
        printf("  security training:  %s\n", r->training ? r->training : "never");
        printf("  confirmation code:  %s\n", code);
        puts("------------------------------------------------------------");
        snprintf(prompt, sizeof prompt, "Decision for %s [a]pprove/[d]eny/[s]kip: ", r->id);
        for (;;) {
            ask(prompt, ans, sizeof ans);
            if (!strcmp(ans, "a") || !strcmp(ans, "d") || !strcmp(ans, "s") || !strcmp(ans, "approve")
                || !strcmp(ans, "deny") || !strcmp(ans, "skip"))
                break;
            puts("  please answer a, d or s");
        }
        if (ans[0] == 's') {
            skipped++;
            printf("  %s left pending\n", r->id);
            continue;
        }
        const char *decision = ans[0] == 'a' ? "approved" : "denied";
        snprintf(prompt, sizeof prompt, "Type the confirmation code to confirm (%s): ", decision);
        ask(prompt, typed, sizeof typed);
        for (char *p = typed; *p; p++)
            if (*p >= 'a' && *p <= 'z')
                *p = (char)(*p - 'a' + 'A');
        if (strcmp(typed, code) != 0) {
            puts("  confirmation failed, nothing recorded (the request stays pending)");
            skipped++;
            continue;
        }
        record(pending[k], decision, code);
        if (ans[0] == 'a')
            approved++;
        else
            denied++;
        printf("  %s %s\n", r->id, decision);
    }
    printf("Review finished: %d approved, %d denied, %d skipped.\n", approved, denied, skipped);
    return 0;
}
