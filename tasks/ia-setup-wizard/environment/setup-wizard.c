/* setup-wizard - interactive first-run setup for the ledger service.
 *
 * Asks its questions at the terminal and writes /app/config/app.json, with a detached signature
 * in /app/config/app.json.sig: "hmac-sha256 <hex>", the seal_mac() of the file's bytes.
 */
#include <strings.h>
#include <sys/stat.h>

#include "seal.h"

#define TOOL "setup-wizard"
#define VERSION "setup-wizard 3.0"
#define CONFIG_DIR "/app/config"
#define CONFIG CONFIG_DIR "/app.json"
#define FIELD 256

typedef int (*check_fn)(const char *);

static void ask(const char *question, const char *def, check_fn check, const char *error, char *out,
                int hidden)
{
    char prompt[FIELD + 64];
    if (def != NULL)
        snprintf(prompt, sizeof prompt, "%s [%s]: ", question, def);
    else
        snprintf(prompt, sizeof prompt, "%s: ", question);
    for (;;) {
        int r = seal_ask(prompt, out, FIELD, hidden);
        if (r < 0) {
            fputs("\naborted: no more input\n", stderr);
            exit(2);
        }
        if (r == 1) {
            printf("  use at most %d printable ASCII characters, try again\n", FIELD - 1);
            continue;
        }
        if (out[0] == 0 && def != NULL)
            snprintf(out, FIELD, "%s", def);
        if (check == NULL || check(out))
            return;
        printf("  %s, try again\n", error != NULL ? error : "invalid value");
    }
}

static int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alnum(char c) { return is_lower(c) || is_digit(c) || (c >= 'A' && c <= 'Z'); }

static int name_ok(const char *s) /* [a-z][a-z0-9-]{2,30} */
{
    size_t n = strlen(s);
    if (n < 3 || n > 31 || !is_lower(s[0]))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!is_lower(s[i]) && !is_digit(s[i]) && s[i] != '-')
            return 0;
    return 1;
}

static int port_ok(const char *s)
{
    if (s[0] == 0)
        return 0;
    for (const char *p = s; *p; p++)
        if (!is_digit(*p))
            return 0;
    long v = strtol(s, NULL, 10);
    return v >= 1024 && v <= 65535;
}

static int backend_ok(const char *s) { return !strcmp(s, "1") || !strcmp(s, "2") || !strcmp(s, "3"); }
static int absolute(const char *s) { return s[0] == '/'; }

static int host_ok(const char *s) /* [A-Za-z0-9.-]+ */
{
    if (s[0] == 0)
        return 0;
    for (const char *p = s; *p; p++)
        if (!is_alnum(*p) && *p != '.' && *p != '-')
            return 0;
    return 1;
}

static int word_ok(const char *s) /* \w+ */
{
    if (s[0] == 0)
        return 0;
    for (const char *p = s; *p; p++)
        if (!is_alnum(*p) && *p != '_')
            return 0;
    return 1;
}

static int db_password_ok(const char *s)
{
    return strlen(s) >= 8 && strchr(s, ':') == NULL && strchr(s, '@') == NULL;
}

static int yes_no_ok(const char *s)
{
    return !strcasecmp(s, "y") || !strcasecmp(s, "yes") || !strcasecmp(s, "n") || !strcasecmp(s, "no");
}

static int is_file(const char *s)
{
    struct stat st;
    return stat(s, &st) == 0 && S_ISREG(st.st_mode);
}

static int email_ok(const char *s) /* [^@\s]+@[^@\s]+\.[a-z]{2,} */
{
    const char *at = strchr(s, '@');
    if (at == NULL || at == s || strchr(at + 1, '@') != NULL || strchr(s, ' ') != NULL)
        return 0;
    const char *dot = strrchr(at + 1, '.');
    if (dot == NULL || dot == at + 1 || strlen(dot + 1) < 2)
        return 0;
    for (const char *p = dot + 1; *p; p++)
        if (!is_lower(*p))
            return 0;
    return 1;
}

static int admin_password_ok(const char *s) { return strlen(s) >= 10; }

static int yes_no(const char *question, int def)
{
    char q[FIELD], answer[FIELD];
    snprintf(q, sizeof q, "%s %s", question, def ? "(Y/n)" : "(y/N)");
    ask(q, def ? "y" : "n", yes_no_ok, "answer y or n", answer, 0);
    return answer[0] == 'y' || answer[0] == 'Y';
}

/* A JSON string: the answers are printable ASCII, so only '"' and '\' need escaping. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int main(int argc, char **argv)
{
    char name[FIELD], port[FIELD], backend_no[FIELD], path[FIELD], host[FIELD], dbport[FIELD];
    char dbname[FIELD], user[FIELD], pw[FIELD], cert[FIELD] = "", key[FIELD] = "", email[FIELD];
    char p1[FIELD], p2[FIELD], def[2 * FIELD], dsn[8 * FIELD], shown[8 * FIELD];

    seal_start();
    if (argc > 1 && strcmp(argv[1], "--can-run") == 0)
        return 0;
    seal_need_terminal(TOOL);

    printf("== %s ==\n", VERSION);
    printf("Answer the questions; press Enter to accept the [default].\n\n");
    ask("Project name", NULL, name_ok, "use 3-31 lowercase letters, digits or dashes, starting with a letter",
        name, 0);
    ask("HTTP port", "8080", port_ok, "choose a port between 1024 and 65535", port, 0);
    printf("Database backends: 1) sqlite  2) postgres  3) mysql\n");
    ask("Backend", "1", backend_ok, "type 1, 2 or 3", backend_no, 0);
    const char *backend = backend_no[0] == '1' ? "sqlite" : backend_no[0] == '2' ? "postgres" : "mysql";
    if (backend_no[0] == '1') {
        snprintf(def, sizeof def, "/var/lib/%s/db.sqlite3", name);
        ask("Database file", def, absolute, "give an absolute path", path, 0);
        const char *rel = path;
        while (*rel == '/')
            rel++;
        snprintf(dsn, sizeof dsn, "sqlite:///%s", rel);
        snprintf(shown, sizeof shown, "%s", dsn);
    } else {
        ask("Database host", "localhost", host_ok, NULL, host, 0);
        ask("Database port", backend_no[0] == '2' ? "5432" : "3306", port_ok, NULL, dbport, 0);
        snprintf(def, sizeof def, "%s", name);
        for (char *p = def; *p; p++)
            if (*p == '-')
                *p = '_';
        ask("Database name", def, word_ok, NULL, dbname, 0);
        ask("Database user", dbname, word_ok, NULL, user, 0);
        ask("Database password", NULL, db_password_ok, "at least 8 characters, no ':' or '@'", pw, 1);
        const char *scheme = backend_no[0] == '2' ? "postgresql" : "mysql";
        snprintf(dsn, sizeof dsn, "%s://%s:%s@%s:%ld/%s", scheme, user, pw, host, strtol(dbport, NULL, 10), dbname);
        snprintf(shown, sizeof shown, "%s://%s:***@%s:%ld/%s", scheme, user, host, strtol(dbport, NULL, 10), dbname);
    }
    int tls = yes_no("Enable TLS?", 0);
    if (tls) {
        ask("Certificate file", NULL, is_file, "no such file", cert, 0);
        ask("Private key file", NULL, is_file, "no such file", key, 0);
    }
    ask("Admin e-mail", NULL, email_ok, "not an e-mail address", email, 0);
    for (;;) {
        ask("Admin password", NULL, admin_password_ok, "at least 10 characters", p1, 1);
        ask("Repeat admin password", NULL, NULL, NULL, p2, 1);
        if (strcmp(p1, p2) == 0)
            break;
        printf("  passwords differ, try again\n");
    }
    uint8_t salt_bytes[8], digest[32];
    char salt[17], digest_hex[65];
    seal_random(salt_bytes, sizeof salt_bytes);
    seal_hex(salt_bytes, sizeof salt_bytes, salt);
    pbkdf2_sha256(p1, salt, 120000, digest);
    seal_hex(digest, sizeof digest, digest_hex);

    printf("\nSummary:\n");
    printf("  project %s, port %ld, TLS %s\n", name, strtol(port, NULL, 10), tls ? "on" : "off");
    printf("  database %s (%s)\n", backend, shown);
    printf("  admin %s\n", email);
    if (!yes_no("Write configuration?", 1)) {
        printf("nothing written\n");
        return 1;
    }

    /* the configuration as Python's json.dump(config, indent=2) lays it out */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fprintf(f, "{\n  \"project\": ");
    json_str(f, name);
    fprintf(f, ",\n  \"http\": {\n    \"port\": %ld,\n    \"tls\": {\n      \"enabled\": %s", strtol(port, NULL, 10),
            tls ? "true" : "false");
    if (tls) {
        fprintf(f, ",\n      \"cert\": ");
        json_str(f, cert);
        fprintf(f, ",\n      \"key\": ");
        json_str(f, key);
    }
    fprintf(f, "\n    }\n  },\n  \"database\": {\n    \"backend\": \"%s\",\n    \"dsn\": ", backend);
    json_str(f, dsn);
    fprintf(f, "\n  },\n  \"admin\": {\n    \"email\": ");
    json_str(f, email);
    fprintf(f, ",\n    \"password_hash\": \"pbkdf2_sha256$120000$%s$%s\"\n  },\n", salt, digest_hex);
    fprintf(f, "  \"generated_by\": \"%s\"\n}\n", VERSION);
    fclose(f);

    char mac[65];
    seal_mac(TOOL, text, len, mac);
    mkdir(CONFIG_DIR, 0755);
    umask(077);
    FILE *out = fopen(CONFIG ".tmp", "w");
    FILE *sig = out == NULL ? NULL : fopen(CONFIG ".sig.tmp", "w");
    if (out == NULL || sig == NULL || fwrite(text, 1, len, out) != len || fprintf(sig, "hmac-sha256 %s\n", mac) < 0
        || fclose(out) != 0 || fclose(sig) != 0 || rename(CONFIG ".tmp", CONFIG) != 0
        || rename(CONFIG ".sig.tmp", CONFIG ".sig") != 0) {
        perror(CONFIG);
        return 1;
    }
    printf("written %s\n", CONFIG);
    return 0;
}
