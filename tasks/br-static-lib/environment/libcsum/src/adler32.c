#include "csum.h"
#include "internal.h"

#define ADLER_NMAX 5552   /* largest n with 255n(n+1)/2 + (n+1)(65520) < 2^32 */

uint32_t csum_adler32(const void *data, size_t len) {
    const unsigned char *p = data;
    uint32_t a = 1, b = 0;
    while (len > 0) {
        size_t n = len < ADLER_NMAX ? len : ADLER_NMAX;
        len -= n;
        while (n--) {
            a += *p++;
            b += a;
        }
        a = mod_adler(a);
        b = mod_adler(b);
    }
    return (b << 16) | a;
}
