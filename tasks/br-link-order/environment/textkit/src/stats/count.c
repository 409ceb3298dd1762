#include <stdlib.h>
#include <string.h>
#include "tk/stats.h"

struct collect {
    tk_wordcount *items;
    size_t n;
};

static void add(const char *key, long value, void *ctx) {
    struct collect *c = ctx;
    strncpy(c->items[c->n].word, key, TK_WORD_MAX - 1);
    c->items[c->n].word[TK_WORD_MAX - 1] = '\0';
    c->items[c->n].count = value;
    c->n++;
}

static int by_count(const void *pa, const void *pb) {
    const tk_wordcount *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return strcmp(a->word, b->word);
}

tk_wordcount *tk_count_words(FILE *f, size_t *n, long *total) {
    char word[TK_WORD_MAX];
    tk_table *t = tk_table_new();
    long words = 0;
    if (!t) return NULL;
    while (tk_read_word(f, word, sizeof word) >= 0) {
        tk_normalize(word);
        long *slot = tk_table_slot(t, word);
        if (!slot) { tk_table_free(t); return NULL; }
        (*slot)++;
        words++;
    }
    struct collect c = { malloc((tk_table_size(t) + 1) * sizeof(tk_wordcount)), 0 };
    if (!c.items) { tk_table_free(t); return NULL; }
    tk_table_each(t, add, &c);
    tk_table_free(t);
    qsort(c.items, c.n, sizeof *c.items, by_count);
    *n = c.n;
    *total = words;
    return c.items;
}
