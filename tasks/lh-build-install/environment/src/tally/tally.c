/* tally: summary statistics of numbers read from files or standard input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION "1.4.2"

struct acc { long n; double sum, mean, m2, min, max; };

static void add(struct acc *a, double x) {
    double d = x - a->mean;
    a->n++;
    a->sum += x;
    a->mean += d / a->n;
    a->m2 += d * (x - a->mean);
    if (a->n == 1 || x < a->min) a->min = x;
    if (a->n == 1 || x > a->max) a->max = x;
}

static int read_stream(FILE *fp, const char *name, struct acc *a) {
    char line[4096];
    long lineno = 0;
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '#' || *s == '\n' || *s == '\0' || *s == '\r') continue;
        char *end;
        double x = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
        if (end == s || *end != '\0') {
            fprintf(stderr, "tally: %s:%ld: not a number\n", name, lineno);
            return 1;
        }
        add(a, x);
    }
    return 0;
}

int main(int argc, char **argv) {
    struct acc a;
    memset(&a, 0, sizeof a);
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("tally %s\n", VERSION);
        return 0;
    }
    if (argc == 1) {
        if (read_stream(stdin, "-", &a)) return 1;
    }
    for (int i = 1; i < argc; i++) {
        FILE *fp = strcmp(argv[i], "-") ? fopen(argv[i], "r") : stdin;
        if (!fp) { perror(argv[i]); return 2; }
        int bad = read_stream(fp, argv[i], &a);
        if (fp != stdin) fclose(fp);
        if (bad) return 1;
    }
    if (a.n == 0) {
        printf("count=0\n");
        return 0;
    }
    double sd = a.n > 1 ? sqrt(a.m2 / (a.n - 1)) : 0.0;
    printf("count=%ld sum=%.6f mean=%.6f min=%.6f max=%.6f stddev=%.6f\n", a.n, a.sum, a.mean, a.min, a.max, sd);
    return 0;
}
