/* libcsum: checksums over byte buffers. */
#ifndef CSUM_H
#define CSUM_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32 (IEEE 802.3, as in zlib and PNG) of a buffer. */
uint32_t csum_crc32(const void *data, size_t len);

/* Continues a CRC-32: csum_crc32_update(csum_crc32(a), b) == CRC-32 of a followed by b.
   csum_crc32_update(0, data, len) == csum_crc32(data, len). */
uint32_t csum_crc32_update(uint32_t crc, const void *data, size_t len);

/* Adler-32 (RFC 1950) of a buffer. */
uint32_t csum_adler32(const void *data, size_t len);

/* Fletcher-16: two 8-bit sums modulo 255, returned as (sum2 << 8) | sum1. */
uint16_t csum_fletcher16(const void *data, size_t len);

/* The library version, e.g. "1.0.0". */
const char *csum_version(void);

#endif
