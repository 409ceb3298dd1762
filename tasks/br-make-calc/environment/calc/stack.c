#include "stack.h"

void stack_init(Stack *s) { s->top = 0; }

int stack_push(Stack *s, double v) {
    if (s->top >= STACK_MAX) return -1;
    s->items[s->top++] = v;
    return 0;
}

int stack_pop(Stack *s, double *out) {
    if (s->top <= 0) return -1;
    *out = s->items[--s->top];
    return 0;
}

int stack_depth(const Stack *s) { return s->top; }
