#ifndef LEXER_H
#define LEXER_H

/* Splits line in place into whitespace-separated tokens.
   Stores at most max pointers in toks and returns the number of tokens. */
int tokenize(char *line, char **toks, int max);

/* Returns 1 and stores the value if tok is a number, else 0. */
int parse_number(const char *tok, double *out);

#endif
