#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/ledger
# src/ledger.h is a stale copy of the public header with another layout; quoted includes find it
# first, so the library was compiled against it. The app was compiled with -fpack-struct.
rm -f src/ledger.h
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall -Iinclude -MMD -MP

LIB_OBJS = build/ledger.o build/ledger_io.o

all: build/ledger-report

build/libledger.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

build/%.o: src/%.c
	@mkdir -p build
	$(CC) $(CFLAGS) -c $< -o $@

build/report.o: app/report.c
	@mkdir -p build
	$(CC) $(CFLAGS) -c $< -o $@

build/ledger-report: build/report.o build/libledger.a
	$(CC) -o $@ build/report.o -Lbuild -lledger

-include $(wildcard build/*.d)

clean:
	rm -rf build

.PHONY: all clean
MK
make clean
make
build/ledger-report sample.ledger
