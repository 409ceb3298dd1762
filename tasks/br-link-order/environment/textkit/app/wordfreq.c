/* wordfreq [-n K]: the K most frequent words of standard input (default 10). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tk/stats.h"

int main(int argc, char **argv) {
    long k = 10;
    if (argc == 3 && strcmp(argv[1], "-n") == 0) {
        char *end;
        k = strtol(argv[2], &end, 10);
        if (*end || k < 0) { fprintf(stderr, "bad count %s\n", argv[2]); return 2; }
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [-n K]\n", argv[0]);
        return 2;
    }
    size_t n;
    long total;
    tk_wordcount *wc = tk_count_words(stdin, &n, &total);
    if (!wc) { fprintf(stderr, "out of memory\n"); return 1; }
    printf("words %ld distinct %zu\n", total, n);
    for (size_t i = 0; i < n && (long)i < k; i++) printf("%ld %s\n", wc[i].count, wc[i].word);
    free(wc);
    return 0;
}
