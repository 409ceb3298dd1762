#include <ctype.h>
#include <stdlib.h>
#include "lexer.h"

int tokenize(char *line, char **toks, int max) {
    int n = 0;
    char *p = line;
    while (*p) {
        while (*p && isspace((unsigned char)*p)) *p++ = '\0';
        if (!*p) break;
        if (n < max) toks[n] = p;
        n++;
        while (*p && !isspace((unsigned char)*p)) p++;
    }
    return n;
}

int parse_number(const char *tok, double *out) {
    char *end;
    double v = strtod(tok, &end);
    if (end == tok || *end != '\0') return 0;
    *out = v;
    return 1;
}
