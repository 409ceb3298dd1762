// rpn: evaluates one reverse-Polish expression per input line.
#include <stdio.h>
#include <string.h>
#include "lexer.h"
#include "ops.h"
#include "stack.h"

#define MAX_TOKENS 1024

static void eval_line(char *line) {
    char *toks[MAX_TOKENS];
    int n = tokenize(line, toks, MAX_TOKENS);
    if (n == 0) return;                     // blank lines produce no output
    if (n > MAX_TOKENS) { puts("error"); return; }
    Stack s;
    stack_init(&s);
    for (int i = 0; i < n; i++) {
        double v;
        if (parse_number(toks[i], &v)) {
            if (stack_push(&s, v) != 0) { puts("error"); return; }
            continue;
        }
        if (apply_op(&s, toks[i]) != 0) { puts("error"); return; }
    }
    double result;
    if (stack_depth(&s) != 1 || stack_pop(&s, &result) != 0) { puts("error"); return; }
    printf("%.10g\n", result);
}

int main(void) {
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        eval_line(line);
    }
    return 0;
}
