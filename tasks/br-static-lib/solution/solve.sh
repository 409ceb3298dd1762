#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/libcsum
# Helpers become static, next to their only users; util.c and internal.h go away.
cat > src/crc32.c <<'C'
#include "csum.h"

static uint32_t crc_table[256];
static int tables_ready;

static void init_tables(void) {
    if (tables_ready) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    tables_ready = 1;
}

uint32_t csum_crc32_update(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    init_tables();
    crc = ~crc;
    while (len--) crc = crc_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

uint32_t csum_crc32(const void *data, size_t len) { return csum_crc32_update(0, data, len); }
C
sed -i 's/#include "internal.h"/static uint32_t mod_adler(uint32_t x) { return x % 65521u; }/' src/adler32.c
sed -i 's/^uint16_t mod255/static uint16_t mod255/' src/fletcher.c
rm -f src/util.c src/internal.h
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall -Iinclude -DCSUM_VERSION='"2.1.0"'

SRCS = src/crc32.c src/adler32.c src/fletcher.c src/version.c
OBJS = $(SRCS:.c=.o)

libcsum.a: $(OBJS)
	rm -f $@
	ar rcs $@ $(OBJS)

%.o: %.c include/csum.h
	$(CC) $(CFLAGS) -c $< -o $@

clean:
	rm -f $(OBJS) libcsum.a

.PHONY: clean
MK
make clean
make
nm -g --defined-only libcsum.a
