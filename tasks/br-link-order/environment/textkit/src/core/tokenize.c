#include "tk/core.h"

int tk_read_word(FILE *f, char *buf, size_t cap) {
    int c;
    size_t len = 0;
    while ((c = getc(f)) != EOF && !tk_is_word_char(c))
        ;
    if (c == EOF) return -1;
    do {
        if (len + 1 < cap) buf[len++] = (char)c;
    } while ((c = getc(f)) != EOF && tk_is_word_char(c));
    buf[len] = '\0';
    return (int)len;
}
