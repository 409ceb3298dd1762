/* textkit stats: word frequencies. */
#ifndef TK_STATS_H
#define TK_STATS_H

#include <stdio.h>
#include "tk/core.h"

typedef struct {
    char word[TK_WORD_MAX];
    long count;
} tk_wordcount;

/* Counts the normalised words of f. Returns a malloc'ed array of the distinct words sorted by
   count (descending), then word (ascending, strcmp order); stores its length in *n and the
   number of words read in *total. */
tk_wordcount *tk_count_words(FILE *f, size_t *n, long *total);

#endif
