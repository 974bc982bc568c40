/*
 * keycmp.h — key comparisons for the read path's inner loops.
 *
 * Same results as bytes_compare (coding.h) and ikey_compare (dbformat.h),
 * shaped for short keys: the first 16 bytes are compared 8 at a time
 * without a call (keys usually differ there), longer common prefixes go to
 * memcmp. Merging, block seeks and the memtable skiplist compare keys
 * millions of times a second, so a call per comparison shows in a scan
 * (docs/decisions.md).
 */
#ifndef LSM_KEYCMP_H
#define LSM_KEYCMP_H

#include "dbformat.h"

#include <stdint.h>
#include <string.h>

/* Bytewise order, a shorter string before its extensions. */
static inline int keycmp_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
    const unsigned char *x = a, *y = b;
    size_t n = alen < blen ? alen : blen, i = 0;
    for (; i < 16 && n - i >= 8; i += 8) {
        uint64_t p, q;
        memcpy(&p, x + i, 8);
        memcpy(&q, y + i, 8);
        if (p != q) /* the first differing byte decides: compare big-endian */
            return __builtin_bswap64(p) < __builtin_bswap64(q) ? -1 : 1;
    }
    if (n - i >= 8) {
        int r = memcmp(x + i, y + i, n - i);
        if (r != 0)
            return r;
    } else {
        for (; i < n; i++)
            if (x[i] != y[i])
                return x[i] < y[i] ? -1 : 1;
    }
    return (alen > blen) - (alen < blen);
}

/* Internal-key order: user key ascending, then (sequence, type) descending.
 * REQUIRES: both keys are at least IKEY_TRAILER bytes. */
static inline int keycmp_ikey(const char *a, size_t alen, const char *b, size_t blen)
{
    int r = keycmp_bytes(a, alen - IKEY_TRAILER, b, blen - IKEY_TRAILER);
    if (r != 0)
        return r;
    uint64_t ta = ikey_tag(a, alen), tb = ikey_tag(b, blen);
    return (ta > tb) ? -1 : (ta < tb);
}

#endif
