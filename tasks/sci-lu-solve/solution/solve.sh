#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/lusolve.c <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    int n, m;
    if (scanf("%d %d", &n, &m) != 2 || n < 1 || m < 0) {
        fprintf(stderr, "bad header\n");
        return 2;
    }
    double *a = malloc(sizeof(double) * n * n);
    double *b = malloc(sizeof(double) * n * (m > 0 ? m : 1));
    int *perm = malloc(sizeof(int) * n);
    double amax = 0.0;
    for (int i = 0; i < n * n; i++) {
        if (scanf("%lf", &a[i]) != 1) { fprintf(stderr, "bad matrix\n"); return 2; }
        if (fabs(a[i]) > amax) amax = fabs(a[i]);
    }
    for (int i = 0; i < n * m; i++)
        if (scanf("%lf", &b[i]) != 1) { fprintf(stderr, "bad rhs\n"); return 2; }
    for (int i = 0; i < n; i++) perm[i] = i;
    double det = 1.0;
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(a[i * n + k]) > fabs(a[p * n + k])) p = i;
        if (fabs(a[p * n + k]) <= 1e-12 * amax) { printf("SINGULAR\n"); return 3; }
        if (p != k) {
            for (int j = 0; j < n; j++) { double t = a[k * n + j]; a[k * n + j] = a[p * n + j]; a[p * n + j] = t; }
            int t = perm[k]; perm[k] = perm[p]; perm[p] = t;
            det = -det;
        }
        det *= a[k * n + k];
        for (int i = k + 1; i < n; i++) {
            double f = a[i * n + k] / a[k * n + k];
            a[i * n + k] = f;
            for (int j = k + 1; j < n; j++) a[i * n + j] -= f * a[k * n + j];
        }
    }
    printf("det %.15e\n", det);
    double *y = malloc(sizeof(double) * n);
    for (int r = 0; r < m; r++) {
        double *rhs = b + (size_t)r * n;
        for (int i = 0; i < n; i++) {
            double s = rhs[perm[i]];
            for (int j = 0; j < i; j++) s -= a[i * n + j] * y[j];
            y[i] = s;
        }
        for (int i = n - 1; i >= 0; i--) {
            double s = y[i];
            for (int j = i + 1; j < n; j++) s -= a[i * n + j] * y[j];
            y[i] = s / a[i * n + i];
        }
        for (int i = 0; i < n; i++) printf(i ? " %.15e" : "%.15e", y[i]);
        printf("\n");
    }
    return 0;
}
C
cat > /app/Makefile <<'MK'
CC ?= gcc
CFLAGS ?= -O2 -Wall

lusolve: lusolve.c
	$(CC) $(CFLAGS) -o $@ $< -lm

clean:
	rm -f lusolve
MK
make -C /app
