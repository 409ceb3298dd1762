#ifndef STACK_H
#define STACK_H

#define STACK_MAX 256

typedef struct {
    double items[STACK_MAX];
    int top;
} Stack;

void stack_init(Stack *s);
int stack_push(Stack *s, double v);
int stack_pop(Stack *s, double *out);
int stack_depth(const Stack *s);

#endif
