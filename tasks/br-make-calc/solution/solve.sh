#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/calc
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall -std=c99 -MMD -MP
LDLIBS = -lm

OBJS = main.o stack.o lexer.o ops.o

rpn: $(OBJS)
	$(CC) -o $@ $(OBJS) $(LDLIBS)

%.o: %.c
	$(CC) $(CFLAGS) -c $< -o $@

-include $(OBJS:.o=.d)

clean:
	rm -f $(OBJS) $(OBJS:.o=.d) rpn

.PHONY: clean
MK
make clean
make
printf '7 2 /\n' | ./rpn
