/*
 * sizestat FILE: statistics of a list of sizes in bytes.
 *
 * FILE has one non-negative integer per line (at most 10^15; blank lines and lines starting
 * with '#' are skipped). The sum of all values always fits in a signed 64-bit integer.
 * Prints:
 *
 *   count N        number of values
 *   total S        their sum
 *   min A          smallest value
 *   max B          largest value
 *   mean M         S / N, two decimals
 *   median X       the lower median: element (N-1)/2 (0-based) of the sorted values
 *   stddev D       population standard deviation, two decimals
 *
 * An input without values prints only the "count 0" and "total 0" lines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_long(const void *a, const void *b) {
    return (int)(*(const long *)a - *(const long *)b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    long *v = NULL;
    size_t n = 0, cap = 0;
    char line[128];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\n' || line[0] == '#') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            v = realloc(v, cap * sizeof *v);
            if (!v) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
        }
        v[n++] = atoi(line);
    }
    fclose(f);

    int total = 0;
    long sumsq = 0;
    long mn = n ? v[0] : 0, mx = n ? v[0] : 0;
    for (size_t i = 0; i < n; i++) {
        total += v[i];
        sumsq += v[i] * v[i];
        if (v[i] < mn) mn = v[i];
        if (v[i] > mx) mx = v[i];
    }
    qsort(v, n, sizeof *v, cmp_long);
    double mean = (double)total / n;
    double var = (double)sumsq / n - mean * mean;

    printf("count %zu\n", n);
    printf("total %d\n", total);
    printf("min %ld\n", mn);
    printf("max %ld\n", mx);
    printf("mean %.2f\n", mean);
    printf("median %ld\n", v[(n - 1) / 2]);
    printf("stddev %.2f\n", sqrt(var));
    free(v);
    return 0;
}
