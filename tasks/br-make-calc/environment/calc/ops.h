#ifndef OPS_H
#define OPS_H

#include "stack.h"

/* Applies the operator named by tok to the stack.
   Returns 0 on success, -1 on error, 1 if tok is not an operator. */
int apply_op(Stack *s, const char *tok);

#endif
