#include "csum.h"
#include "internal.h"

uint32_t csum_crc32_update(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    init_tables();
    crc = ~crc;
    while (len--) crc = crc_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

uint32_t csum_crc32(const void *data, size_t len) { return csum_crc32_update(0, data, len); }
