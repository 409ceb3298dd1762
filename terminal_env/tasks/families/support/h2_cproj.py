"""Small C projects for the Makefile family (make-fault-fix): sources in ``src/``, headers in
``include/``, one module that needs libm, a ``config.h`` macro that the output depends on.

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


def project(subject, knob):
    """The subject's source files with the config macro set to ``knob``."""
    return {p: t.replace("__KNOB__", str(knob)) for p, t in SUBJECTS[subject]["files"].items()}


def make_input(subject, rng, size=1):
    n = 6 + 6 * size
    if subject == "bitstats":
        return " ".join(str(rng.randint(0, 70000)) for _ in range(n)) + "\n"
    parts = ["McDonald", "iPhone", "ABC123", "hello", "x2-y3", "HTTPServer", "aaaaBBBB", "Zz", "q"]
    parts += ["".join(rng.choice("aAbB1zZ-") for _ in range(rng.randint(1, 9))) for _ in range(n)]
    rng.shuffle(parts)
    return "\n".join(parts) + "\n"
