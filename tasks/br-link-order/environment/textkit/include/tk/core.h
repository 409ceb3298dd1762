/* textkit core: word characters, normalisation, a string -> counter hash table, a tokenizer. */
#ifndef TK_CORE_H
#define TK_CORE_H

#include <stddef.h>
#include <stdio.h>

#define TK_WORD_MAX 64   /* longest word kept, including the NUL; longer words are truncated */

/* ASCII letters and digits are word characters; everything else separates words. */
inline int tk_is_word_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Lower-cases word in place. */
void tk_normalize(char *word);

/* Reads the next word of f into buf (at most cap-1 characters, NUL-terminated).
   Returns its length, or -1 at end of input. */
int tk_read_word(FILE *f, char *buf, size_t cap);

typedef struct tk_table tk_table;
typedef void (*tk_visit)(const char *key, long value, void *ctx);

tk_table *tk_table_new(void);
void tk_table_free(tk_table *t);
/* The counter stored under key (created as 0 when missing). */
long *tk_table_slot(tk_table *t, const char *key);
size_t tk_table_size(const tk_table *t);
void tk_table_each(const tk_table *t, tk_visit visit, void *ctx);

#endif
