/* crc32c.c — CRC32C: SSE4.2 crc32 instruction when present, else a
 * slicing-by-8 table; see crc32c.h. */
#include "crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

static uint32_t table[8][256];
static bool have_sse42;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
    const uint32_t poly = 0x82f63b78u; /* reversed Castagnoli */
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
              table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p,
                                                         size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&init_once, crc32c_init);
    crc = ~crc;
#if defined(__x86_64__)
    if (have_sse42)
        return ~crc_hw(crc, data, n);
#endif
    return ~crc_table(crc, data, n);
}

uint32_t crc32c_extend_portable(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&init_once, crc32c_init);
    return ~crc_table(~crc, data, n);
}
