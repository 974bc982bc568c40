/*
 * siphash.c — SipHash-1-3 (siphash.h), little-endian as the reference.
 */
#include "siphash.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static void sipround(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = ROTL(v[1], 13) ^ v[0];
    v[0] = ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = ROTL(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = ROTL(v[1], 17) ^ v[2];
    v[2] = ROTL(v[2], 32);
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

static void absorb(uint64_t v[4], uint64_t m)
{
    v[3] ^= m;
    sipround(v);
    v[0] ^= m;
}

uint64_t siphash13(const siphash_key *k, const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t v[4] = {k->k0 ^ 0x736f6d6570736575ull, k->k1 ^ 0x646f72616e646f6dull,
                     k->k0 ^ 0x6c7967656e657261ull, k->k1 ^ 0x7465646279746573ull};
    size_t whole = n & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8)
        absorb(v, load_le64(s + i));
    unsigned char last[8] = {0};
    memcpy(last, s + whole, n - whole);
    absorb(v, load_le64(last) | (uint64_t)(n & 0xff) << 56);
    v[2] ^= 0xff;
    for (int i = 0; i < 3; i++)
        sipround(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

int siphash_random_key(siphash_key *k)
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0 && errno != EINTR)
            return errno;
        if (r > 0)
            got += (size_t)r;
    }
    k->k0 = load_le64(b);
    k->k1 = load_le64(b + 8);
    return 0;
}
