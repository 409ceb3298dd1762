#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/sizestat
python3 - <<'PY'
from pathlib import Path
p = Path("sizestat.c")
s = p.read_text()
# comparator: the difference of two longs does not fit in an int
s = s.replace("return (int)(*(const long *)a - *(const long *)b);",
              "long x = *(const long *)a, y = *(const long *)b;\n    return (x > y) - (x < y);")
# atoi returns an int: values above 2^31 were truncated
s = s.replace("v[n++] = atoi(line);", "v[n++] = strtol(line, NULL, 10);")
# 64-bit total; no sum of squares (overflows and cancels): two passes in long double
s = s.replace("""    int total = 0;
    long sumsq = 0;""", """    long total = 0;""")
s = s.replace("        sumsq += v[i] * v[i];\n", "")
s = s.replace("""    double mean = (double)total / n;
    double var = (double)sumsq / n - mean * mean;
""", """    printf("count %zu\\n", n);
    printf("total %ld\\n", total);
    if (n == 0) {
        free(v);
        return 0;
    }
    long double lmean = (long double)total / n, acc = 0;
    for (size_t i = 0; i < n; i++) {
        long double dev = (long double)v[i] - lmean;
        acc += dev * dev;
    }
    double mean = (double)lmean;
    double var = (double)(acc / n);
""")
s = s.replace("""    printf("count %zu\\n", n);
    printf("total %d\\n", total);
    printf("min""", """    printf("min""")
p.write_text(s)
PY
make
./sizestat sample.txt
