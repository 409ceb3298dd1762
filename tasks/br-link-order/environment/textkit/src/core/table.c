#include <stdlib.h>
#include <string.h>
#include "tk/core.h"

struct entry {
    char *key;
    long value;
};

struct tk_table {
    struct entry *slots;
    size_t cap;    /* power of two */
    size_t size;
};

static size_t hash(const char *s) {
    size_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

tk_table *tk_table_new(void) {
    tk_table *t = malloc(sizeof *t);
    if (!t) return NULL;
    t->cap = 64;
    t->size = 0;
    t->slots = calloc(t->cap, sizeof *t->slots);
    if (!t->slots) { free(t); return NULL; }
    return t;
}

void tk_table_free(tk_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i].key);
    free(t->slots);
    free(t);
}

static struct entry *find(struct entry *slots, size_t cap, const char *key) {
    size_t i = hash(key) & (cap - 1);
    while (slots[i].key && strcmp(slots[i].key, key) != 0) i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int grow(tk_table *t) {
    size_t cap = t->cap * 2;
    struct entry *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].key) *find(slots, cap, t->slots[i].key) = t->slots[i];
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

long *tk_table_slot(tk_table *t, const char *key) {
    if ((t->size + 1) * 4 > t->cap * 3 && grow(t) != 0) return NULL;
    struct entry *e = find(t->slots, t->cap, key);
    if (!e->key) {
        size_t n = strlen(key) + 1;
        e->key = malloc(n);
        if (!e->key) return NULL;
        memcpy(e->key, key, n);
        e->value = 0;
        t->size++;
    }
    return &e->value;
}

size_t tk_table_size(const tk_table *t) { return t->size; }

void tk_table_each(const tk_table *t, tk_visit visit, void *ctx) {
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].key) visit(t->slots[i].key, t->slots[i].value, ctx);
}
