#include <math.h>
#include <string.h>
#include "ops.h"

static int pop2(Stack *s, double *a, double *b) {
    if (stack_pop(s, b) != 0) return -1;
    if (stack_pop(s, a) != 0) return -1;
    return 0;
}

static double divide(double a, double b) {
#ifdef LEGACY_INT_MATH
    /* compatibility mode of the 1.x releases: integer division */
    return (double)((long)a / (long)b);
#else
    return a / b;
#endif
}

int apply_op(Stack *s, const char *tok) {
    double a, b;
    if (strcmp(tok, "+") == 0 || strcmp(tok, "-") == 0 || strcmp(tok, "*") == 0 ||
        strcmp(tok, "/") == 0 || strcmp(tok, "^") == 0 || strcmp(tok, "%") == 0) {
        if (pop2(s, &a, &b) != 0) return -1;
        double r;
        switch (tok[0]) {
        case '+': r = a + b; break;
        case '-': r = a - b; break;
        case '*': r = a * b; break;
        case '/':
            if (b == 0.0) return -1;
            r = divide(a, b);
            break;
        case '^': r = pow(a, b); break;
        default:
            if (b == 0.0) return -1;
            r = fmod(a, b);
            break;
        }
        return stack_push(s, r);
    }
    if (strcmp(tok, "sqrt") == 0) {
        if (stack_pop(s, &a) != 0 || a < 0) return -1;
        return stack_push(s, sqrt(a));
    }
    if (strcmp(tok, "neg") == 0) {
        if (stack_pop(s, &a) != 0) return -1;
        return stack_push(s, -a);
    }
    if (strcmp(tok, "dup") == 0) {
        if (stack_pop(s, &a) != 0) return -1;
        if (stack_push(s, a) != 0) return -1;
        return stack_push(s, a);
    }
    if (strcmp(tok, "swap") == 0) {
        if (pop2(s, &a, &b) != 0) return -1;
        if (stack_push(s, b) != 0) return -1;
        return stack_push(s, a);
    }
    return 1;
}
