#ifndef CSUM_INTERNAL_H
#define CSUM_INTERNAL_H

#include <stdint.h>

extern uint32_t crc_table[256];
void init_tables(void);
uint32_t mod_adler(uint32_t x);

#endif
