/*
 * bench_common.h — the few helpers the filesystem benchmarks (tools/bench_*.c)
 * share: a clock, a seeded generator, reproducible file contents, percentiles
 * and size parsing. Header-only so each benchmark stays one cc command.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: any seed gives a good stream, so contents are derived from
 * (file, offset) seeds and can be regenerated to verify what was read. */
static inline uint64_t bench_rng(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fills buf with incompressible bytes determined by seed. */
static inline void bench_fill(char *buf, size_t len, uint64_t seed)
{
    uint64_t st = seed;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = bench_rng(&st);
        memcpy(buf + i, &v, 8);
    }
    if (i < len) {
        uint64_t v = bench_rng(&st);
        memcpy(buf + i, &v, len - i);
    }
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* p-th percentile of n sorted values (nearest rank). */
static inline uint64_t bench_percentile(const uint64_t *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    return sorted[(rank > n ? n : rank) - 1];
}

/* "4096", "16K", "1M", "1G" (binary units); 0 on error. */
static inline uint64_t bench_parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return 0;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    return *end == '\0' ? v : 0;
}

#define BENCH_DIE(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(1);                                                                                   \
    } while (0)

#endif
