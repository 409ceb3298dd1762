"""Two small C programs for the cmake-fault-fix family (a polynomial evaluator with Newton
steps, a Luhn/ISBN checker): sources in ``src/``, headers in ``include/``, one module needs libm.
``sources(name, setting)`` is ``{path: text}``; ``stdin_for`` draws the program's input. Standard
library only."""

from .hB_tgz import tgz

PROGRAMS = {}

PROGRAMS["polyeval"] = dict(exe="polyeval", units=("horner", "newton"), files={
    "include/settings.h": "#pragma once\nenum { DIGITS = __SETTING__ };\n",
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
#include "settings.h"
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
"""}, settings=(3, 4, 5, 6))

PROGRAMS["luhncheck"] = dict(exe="luhncheck", units=("luhn", "isbn"), files={
    "include/settings.h": "#pragma once\nenum { GROUP = __SETTING__ };\n",
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
#include "settings.h"
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
"""}, settings=(4, 3, 5, 2))


def sources(name, setting):
    """The program's source files with the config macro set to ``setting``."""
    return {p: t.replace("__SETTING__", str(setting)) for p, t in PROGRAMS[name]["files"].items()}


def archive(name, setting):
    """The sources as a deterministic .tar.gz (what the hidden tests build their reference from)."""
    return tgz(sources(name, setting))


def stdin_for(name, rng, size=1):
    n = 6 + 6 * size
    if name == "polyeval":
        k = rng.randint(2, 4)
        coefs = [rng.randint(-9, 9) for _ in range(k)] + [rng.choice([1, -1, 2])]
        xs = [round(rng.uniform(-5, 5), 2) for _ in range(n)]
        return f"{len(coefs)}\n{' '.join(str(c) for c in coefs)}\n{' '.join(str(x) for x in xs)}\n"
    out = []
    for _ in range(n):
        k = rng.choice([10, 12, 16])
        out.append("".join(str(rng.randint(0, 9)) for _ in range(k)))
    out += ["79927398713", "0306406152", "123456789X"]
    rng.shuffle(out)
    return "\n".join(out) + "\n"
