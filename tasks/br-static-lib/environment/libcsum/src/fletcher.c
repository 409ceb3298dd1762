#include "csum.h"

uint16_t mod255(uint32_t x) { return (uint16_t)(x % 255u); }

uint16_t csum_fletcher16(const void *data, size_t len) {
    const unsigned char *p = data;
    uint32_t s1 = 0, s2 = 0;
    while (len--) {
        s1 = mod255(s1 + *p++);
        s2 = mod255(s2 + s1);
    }
    return (uint16_t)((s2 << 8) | s1);
}
