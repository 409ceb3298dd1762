/* seal.h - what the sealed setup wizard needs: SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104),
 * PBKDF2-HMAC-SHA256 (RFC 8018), the binding of a signature to this container, and prompts that
 * insist on a terminal.
 *
 * The tool is built twice from one source, each build with its own key (KEY_HEX, given on the
 * compiler's command line):
 *   sealed  mode 0711, statically linked. The user who runs it cannot read the file, so the key
 *           stays out of reach: the kernel also marks the process non-dumpable (no ptrace, no
 *           /proc/PID/mem), and with no dynamic loader there is nothing to preload.
 *   open    mode 0755, for where the shell cannot execute a file its user may not read (under
 *           gVisor). Its key is readable by anyone; the verifier accepts it only under gVisor,
 *           where an agent can therefore forge records (the terminal is still required).
 */
#ifndef SEAL_H
#define SEAL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

#ifndef KEY_HEX
#error "build with -DKEY_HEX='\"<64 hex digits>\"'"
#endif

/* ---- SHA-256 ------------------------------------------------------------------------------ */

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    size_t used;
} sha256_ctx;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define SEAL_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static inline void sha256_block(sha256_ctx *c, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8
               | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = SEAL_ROR(w[i - 15], 7) ^ SEAL_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = SEAL_ROR(w[i - 2], 17) ^ SEAL_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
    uint32_t e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (SEAL_ROR(e, 6) ^ SEAL_ROR(e, 11) ^ SEAL_ROR(e, 25)) + ((e & f) ^ (~e & g))
                      + sha256_k[i] + w[i];
        uint32_t t2 = (SEAL_ROR(a, 2) ^ SEAL_ROR(a, 13) ^ SEAL_ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = b;
        b = a;
        a = t1 + t2;
    }
    c->h[0] += a;
    c->h[1] += b;
    c->h[2] += cc;
    c->h[3] += d;
    c->h[4] += e;
    c->h[5] += f;
    c->h[6] += g;
    c->h[7] += h;
}

static inline void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->bytes = 0;
    c->used = 0;
}

static inline void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->bytes += len;
    while (len > 0) {
        size_t take = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->buf + c->used, p, take);
        c->used += take;
        p += take;
        len -= take;
        if (c->used == 64) {
            sha256_block(c, c->buf);
            c->used = 0;
        }
    }
}

static inline void sha256_final(sha256_ctx *c, uint8_t out[32])
{
    uint64_t bits = c->bytes * 8;
    uint8_t pad = 0x80, zero = 0, len[8];
    sha256_update(c, &pad, 1);
    while (c->used != 56)
        sha256_update(c, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

/* ---- HMAC-SHA256 and PBKDF2 --------------------------------------------------------------- */

typedef struct {
    sha256_ctx inner, outer;
} hmac_ctx;

static inline void hmac_init(hmac_ctx *m, const uint8_t *key, size_t klen)
{
    uint8_t block[64] = {0}, pad[64];
    if (klen > 64) {
        sha256_ctx k;
        sha256_init(&k);
        sha256_update(&k, key, klen);
        sha256_final(&k, block);
    } else {
        memcpy(block, key, klen);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x36;
    sha256_init(&m->inner);
    sha256_update(&m->inner, pad, 64);
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x5c;
    sha256_init(&m->outer);
    sha256_update(&m->outer, pad, 64);
}

static inline void hmac_update(hmac_ctx *m, const void *data, size_t len)
{
    sha256_update(&m->inner, data, len);
}

static inline void hmac_final(hmac_ctx *m, uint8_t out[32])
{
    uint8_t inner[32];
    sha256_final(&m->inner, inner);
    sha256_update(&m->outer, inner, 32);
    sha256_final(&m->outer, out);
}

/* PBKDF2-HMAC-SHA256 with a 32-byte result (Python's hashlib.pbkdf2_hmac default length). */
static inline void pbkdf2_sha256(const char *password, const char *salt, unsigned iterations,
                                 uint8_t out[32])
{
    hmac_ctx base, m;
    uint8_t u[32], one[4] = {0, 0, 0, 1};
    hmac_init(&base, (const uint8_t *)password, strlen(password));
    m = base;
    hmac_update(&m, salt, strlen(salt));
    hmac_update(&m, one, 4);
    hmac_final(&m, u);
    memcpy(out, u, 32);
    for (unsigned i = 1; i < iterations; i++) {
        m = base;
        hmac_update(&m, u, 32);
        hmac_final(&m, u);
        for (int j = 0; j < 32; j++)
            out[j] ^= u[j];
    }
}

static inline void seal_hex(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = 0;
}

/* ---- the seal ----------------------------------------------------------------------------- */

/* What ties a signature to this container: the kernel's boot id ("-" where there is none, as
 * under gVisor) and the start time of process 1, both read from /proc, which no user of the
 * container can change. A signature copied from another episode does not verify here. */
static inline void seal_binding(char *out, size_t size)
{
    char boot[80] = "-", stat[4096] = "", start[32] = "?";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof boot, f) == NULL)
            boot[0] = 0;
        fclose(f);
        boot[strcspn(boot, " \t\r\n")] = 0;
        if (boot[0] == 0)
            strcpy(boot, "-");
    }
    f = fopen("/proc/1/stat", "r");
    if (f != NULL) {
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        stat[n] = 0;
        fclose(f);
        char *p = strrchr(stat, ')'), *save = NULL;
        /* after "pid (comm)" come the fields from the 3rd on; the start time is the 22nd */
        char *tok = p == NULL ? NULL : strtok_r(p + 1, " \n", &save);
        for (int field = 3; tok != NULL; field++, tok = strtok_r(NULL, " \n", &save)) {
            if (field == 22) {
                if (strlen(tok) < sizeof start)
                    strcpy(start, tok);
                break;
            }
        }
    }
    snprintf(out, size, "%s:%s", boot, start);
}

/* The MAC of `data`, domain-separated by the tool's name and bound to this container:
 * HMAC-SHA256(key, tool "\n" binding "\n" data), as 64 hex digits. */
static inline void seal_mac(const char *tool, const void *data, size_t len, char out[65])
{
    static const char key_hex[] = KEY_HEX;
    uint8_t key[32], mac[32];
    char binding[160];
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        sscanf(key_hex + 2 * i, "%2x", &v);
        key[i] = (uint8_t)v;
    }
    seal_binding(binding, sizeof binding);
    hmac_ctx m;
    hmac_init(&m, key, sizeof key);
    hmac_update(&m, tool, strlen(tool));
    hmac_update(&m, "\n", 1);
    hmac_update(&m, binding, strlen(binding));
    hmac_update(&m, "\n", 1);
    hmac_update(&m, data, len);
    hmac_final(&m, mac);
    seal_hex(mac, 32, out);
    memset(key, 0, sizeof key);
}

/* First thing in main: no core file, no tracing by the user who runs the tool. */
static inline void seal_start(void)
{
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* The tool talks to a person at a terminal: a pipe or a file on standard input is refused. */
static inline void seal_need_terminal(const char *tool)
{
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr,
                "%s: this program is interactive and reads its answers from a terminal, but its "
                "standard input is not one (a pipe or a file). Run it in the terminal and answer "
                "its questions there.\n",
                tool);
        exit(2);
    }
}

static inline void seal_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            perror("getrandom");
            exit(3);
        }
        p += n;
        len -= (size_t)n;
    }
}

/* Asks one question and reads the answer, one line, from the terminal. Keys typed before the
 * question was shown are discarded first: every answer is given to the question on the screen.
 * `hidden` turns the echo off (passwords). Leading and trailing blanks are dropped.
 * Returns 0, 1 for an answer that is too long or not printable ASCII, -1 at the end of input. */
static inline int seal_ask(const char *prompt, char *out, size_t size, int hidden)
{
    struct termios saved, quiet;
    int restore = 0, got = 0, bad = 0;
    size_t n = 0;
    tcflush(STDIN_FILENO, TCIFLUSH);
    if (hidden && tcgetattr(STDIN_FILENO, &saved) == 0) {
        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        restore = tcsetattr(STDIN_FILENO, TCSANOW, &quiet) == 0;
    }
    fputs(prompt, stdout);
    fflush(stdout);
    for (;;) {
        char ch;
        ssize_t r = read(STDIN_FILENO, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got = 1;
        if (ch == '\n' || ch == '\r')
            break;
        if (n + 1 < size)
            out[n++] = ch;
        else
            bad = 1;
    }
    if (restore) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        fputs("\n", stdout);
    }
    out[n] = 0;
    if (!got)
        return -1;
    size_t start = 0;
    while (out[start] == ' ' || out[start] == '\t')
        start++;
    while (n > start && (out[n - 1] == ' ' || out[n - 1] == '\t'))
        n--;
    memmove(out, out + start, n - start);
    out[n - start] = 0;
    for (const char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            bad = 1;
    return bad;
}

#endif
