"""Small C projects for the build-repair families: sources in ``src/``, headers in ``include/``,
one module that needs libm, a ``config.h`` macro that the output depends on.

``project(subject, knob)`` is ``{path: text}`` of the sources (no build files); ``make_input``
draws stdin for the program. Standard library only."""

SUBJECTS = {}

SUBJECTS["bitstats"] = dict(binary="bitstats", modules=("bits", "entropy"), files={
    "include/config.h": "#ifndef CONFIG_H\n#define CONFIG_H\n#define WIDTH __KNOB__\n#endif\n",
    "include/bits.h": "#ifndef BITS_H\n#define BITS_H\nint popcount(unsigned long v);\n"
                      "unsigned long reverse_bits(unsigned long v, int width);\n#endif\n",
    "include/entropy.h": "#ifndef ENTROPY_H\n#define ENTROPY_H\ndouble entropy(const long *counts, int n);\n#endif\n",
    "src/bits.c": """#include "bits.h"

int popcount(unsigned long v)
{
    int n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
}

unsigned long reverse_bits(unsigned long v, int width)
{
    unsigned long r = 0;
    for (int i = 0; i < width; i++)
        r |= ((v >> i) & 1UL) << (width - 1 - i);
    return r;
}
""",
    "src/entropy.c": """#include <math.h>
#include "entropy.h"

double entropy(const long *counts, int n)
{
    long total = 0;
    double h = 0.0;
    for (int i = 0; i < n; i++)
        total += counts[i];
    for (int i = 0; i < n; i++)
        if (counts[i] > 0) {
            double p = (double)counts[i] / (double)total;
            h -= p * log2(p);
        }
    return h;
}
""",
    "src/main.c": """#include <stdio.h>
#include "bits.h"
#include "config.h"
#include "entropy.h"

int main(void)
{
    unsigned long v;
    long hist[WIDTH + 1] = {0};
    while (scanf("%lu", &v) == 1) {
        v &= (WIDTH >= 64) ? ~0UL : ((1UL << WIDTH) - 1);
        int c = popcount(v);
        hist[c]++;
        printf("%lu ones=%d reversed=%lu\\n", v, c, reverse_bits(v, WIDTH));
    }
    printf("entropy %.4f\\n", entropy(hist, WIDTH + 1));
    return 0;
}
"""}, knobs=(8, 12, 16, 10))

SUBJECTS["wordshape"] = dict(binary="wordshape", modules=("shape", "spread"), files={
    "include/config.h": "#ifndef CONFIG_H\n#define CONFIG_H\n#define MAXRUN __KNOB__\n#endif\n",
    "include/shape.h": "#ifndef SHAPE_H\n#define SHAPE_H\nvoid word_shape(const char *w, char *out);\n"
                       "int letter_score(const char *w);\n#endif\n",
    "include/spread.h": "#ifndef SPREAD_H\n#define SPREAD_H\ndouble stddev(const int *v, int n);\n#endif\n",
    "src/shape.c": """#include <ctype.h>
#include "config.h"
#include "shape.h"

void word_shape(const char *w, char *out)
{
    char last = 0;
    int run = 0;
    for (; *w; w++) {
        char c = isupper((unsigned char)*w) ? 'X' : islower((unsigned char)*w) ? 'x'
               : isdigit((unsigned char)*w) ? 'd' : *w;
        run = (c == last) ? run + 1 : 1;
        last = c;
        if (run <= MAXRUN)
            *out++ = c;
    }
    *out = 0;
}

int letter_score(const char *w)
{
    static const int pts[26] = {1, 3, 3, 2, 1, 4, 2, 4, 1, 8, 5, 1, 3, 1, 1, 3, 10, 1, 1, 1, 1, 4, 4, 8, 4, 10};
    int s = 0;
    for (; *w; w++)
        if (isalpha((unsigned char)*w))
            s += pts[tolower((unsigned char)*w) - 'a'];
    return s;
}
""",
    "src/spread.c": """#include <math.h>
#include "spread.h"

double stddev(const int *v, int n)
{
    double mean = 0.0, ss = 0.0;
    if (n == 0)
        return 0.0;
    for (int i = 0; i < n; i++)
        mean += v[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    return sqrt(ss / n);
}
""",
    "src/main.c": """#include <stdio.h>
#include "shape.h"
#include "spread.h"

int main(void)
{
    char word[256], shape[256];
    int scores[4096];
    int n = 0;
    while (n < 4096 && scanf("%255s", word) == 1) {
        word_shape(word, shape);
        scores[n] = letter_score(word);
        printf("%s %s %d\\n", word, shape, scores[n]);
        n++;
    }
    printf("words %d spread %.3f\\n", n, stddev(scores, n));
    return 0;
}
"""}, knobs=(2, 3, 4, 1))

SUBJECTS["polyeval"] = dict(binary="polyeval", modules=("horner", "newton"), files={
    "include/config.h": "#ifndef CONFIG_H\n#define CONFIG_H\n#define DIGITS __KNOB__\n#endif\n",
    "include/horner.h": "#ifndef HORNER_H\n#define HORNER_H\ndouble poly_at(const double *c, int n, double x);\n"
                        "double deriv_at(const double *c, int n, double x);\n#endif\n",
    "include/newton.h": "#ifndef NEWTON_H\n#define NEWTON_H\nint newton_root(const double *c, int n, double x0, double *root);\n#endif\n",
    "src/horner.c": """#include "horner.h"

double poly_at(const double *c, int n, double x)
{
    double y = 0.0;
    for (int i = n - 1; i >= 0; i--)
        y = y * x + c[i];
    return y;
}

double deriv_at(const double *c, int n, double x)
{
    double y = 0.0;
    for (int i = n - 1; i >= 1; i--)
        y = y * x + i * c[i];
    return y;
}
""",
    "src/newton.c": """#include <math.h>
#include "horner.h"
#include "newton.h"

int newton_root(const double *c, int n, double x0, double *root)
{
    double x = x0;
    for (int it = 0; it < 100; it++) {
        double d = deriv_at(c, n, x);
        if (fabs(d) < 1e-12)
            return 0;
        double step = poly_at(c, n, x) / d;
        x -= step;
        if (fabs(step) < 1e-12 * fmax(1.0, fabs(x))) {
            *root = x;
            return 1;
        }
    }
    return 0;
}
""",
    "src/main.c": """#include <stdio.h>
#include "config.h"
#include "horner.h"
#include "newton.h"

/* stdin: the number of coefficients n, then c0 .. c(n-1), then x values */
int main(void)
{
    double c[32], x, r;
    int n;
    if (scanf("%d", &n) != 1 || n < 1 || n > 32)
        return 1;
    for (int i = 0; i < n; i++)
        if (scanf("%lf", &c[i]) != 1)
            return 1;
    while (scanf("%lf", &x) == 1) {
        printf("p(%.*f) = %.*f", DIGITS, x, DIGITS, poly_at(c, n, x));
        if (newton_root(c, n, x, &r))
            printf(" root %.*f\\n", DIGITS, r);
        else
            printf(" no root\\n");
    }
    return 0;
}
"""}, knobs=(3, 4, 5, 6))

SUBJECTS["luhncheck"] = dict(binary="luhncheck", modules=("luhn", "isbn"), files={
    "include/config.h": "#ifndef CONFIG_H\n#define CONFIG_H\n#define GROUP __KNOB__\n#endif\n",
    "include/luhn.h": "#ifndef LUHN_H\n#define LUHN_H\nint luhn_ok(const char *digits);\nint luhn_digit(const char *digits);\n#endif\n",
    "include/isbn.h": "#ifndef ISBN_H\n#define ISBN_H\nint isbn10_ok(const char *s);\ndouble digit_mean_log(const char *s);\n#endif\n",
    "src/luhn.c": """#include <string.h>
#include "luhn.h"

int luhn_digit(const char *d)
{
    int sum = 0, dbl = 1;
    for (int i = (int)strlen(d) - 1; i >= 0; i--, dbl = !dbl) {
        int v = d[i] - '0';
        if (dbl && (v *= 2) > 9)
            v -= 9;
        sum += v;
    }
    return (10 - sum % 10) % 10;
}

int luhn_ok(const char *d)
{
    size_t n = strlen(d);
    char body[128];
    if (n < 2 || n >= sizeof body)
        return 0;
    memcpy(body, d, n - 1);
    body[n - 1] = 0;
    return luhn_digit(body) == d[n - 1] - '0';
}
""",
    "src/isbn.c": """#include <math.h>
#include <string.h>
#include "isbn.h"

int isbn10_ok(const char *s)
{
    if (strlen(s) != 10)
        return 0;
    int sum = 0;
    for (int i = 0; i < 10; i++) {
        int v = (i == 9 && s[i] == 'X') ? 10 : s[i] - '0';
        sum += (10 - i) * v;
    }
    return sum % 11 == 0;
}

double digit_mean_log(const char *s)
{
    double acc = 0.0;
    int n = 0;
    for (; *s; s++, n++)
        acc += log1p(*s == 'X' ? 10 : *s - '0');
    return n ? acc / n : 0.0;
}
""",
    "src/main.c": """#include <stdio.h>
#include <string.h>
#include "config.h"
#include "isbn.h"
#include "luhn.h"

int main(void)
{
    char s[128];
    while (scanf("%127s", s) == 1) {
        for (size_t i = 0; s[i]; i++)
            printf("%s%c", (i && i % GROUP == 0) ? " " : "", s[i]);
        printf(" luhn=%s check=%d isbn10=%s mlog=%.4f\\n", luhn_ok(s) ? "ok" : "bad", luhn_digit(s),
               isbn10_ok(s) ? "ok" : "bad", digit_mean_log(s));
    }
    return 0;
}
"""}, knobs=(4, 3, 5, 2))


def project(subject, knob):
    """The subject's source files with the config macro set to ``knob``."""
    return {p: t.replace("__KNOB__", str(knob)) for p, t in SUBJECTS[subject]["files"].items()}


def make_input(subject, rng, size=1):
    n = 6 + 6 * size
    if subject == "bitstats":
        return " ".join(str(rng.randint(0, 70000)) for _ in range(n)) + "\n"
    if subject == "wordshape":
        parts = ["McDonald", "iPhone", "ABC123", "hello", "x2-y3", "HTTPServer", "aaaaBBBB", "Zz", "q"]
        parts += ["".join(rng.choice("aAbB1zZ-") for _ in range(rng.randint(1, 9))) for _ in range(n)]
        rng.shuffle(parts)
        return "\n".join(parts) + "\n"
    if subject == "polyeval":
        k = rng.randint(2, 4)
        coefs = [rng.randint(-9, 9) for _ in range(k)] + [rng.choice([1, -1, 2])]
        xs = [round(rng.uniform(-5, 5), 2) for _ in range(n)]
        return f"{len(coefs)}\n{' '.join(map(str, coefs))}\n{' '.join(map(str, xs))}\n"
    out = []
    for _ in range(n):
        k = rng.choice([10, 12, 16])
        out.append("".join(str(rng.randint(0, 9)) for _ in range(k)))
    out += ["79927398713", "0306406152", "123456789X"]
    rng.shuffle(out)
    return "\n".join(out) + "\n"
