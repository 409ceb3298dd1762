#include "internal.h"

uint32_t crc_table[256];
static int tables_ready;

void init_tables(void) {
    if (tables_ready) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    tables_ready = 1;
}

uint32_t mod_adler(uint32_t x) { return x % 65521u; }
