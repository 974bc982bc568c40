/* bloom.c — cache-local bloom filters with double hashing; see bloom.h. */
#include "bloom.h"
#include "grow.h"
#include "lsm_malloc.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES 64
#define BLOCK_BITS (BLOCK_BYTES * 8)
#define MAX_PROBES 30

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t final_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

static inline uint64_t mix_word(uint64_t h, uint64_t w)
{
    w *= 0x87c37b91114253d5ull;
    w = rotl64(w, 31) * 0x4cf5ad432745937full;
    h ^= w;
    return rotl64(h, 27) * 5 + 0x52dce729;
}

uint64_t bloom_hash(const void *key, size_t n)
{
    const char *p = key;
    uint64_t h = 0x243f6a8885a308d3ull ^ (n * 0x9e3779b97f4a7c15ull);
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* little-endian: the format assumes x86-64 order */
        h = mix_word(h, w);
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = mix_word(h, w);
    }
    return final_mix(h);
}

/* ~ln 2 * bits per key minimises false positives; a little fewer suits the
 * blocked layout (bits within a block fill unevenly) and probes less. */
static int probes_for(int bits_per_key)
{
    int k = bits_per_key * 69 / 100;
    return k < 1 ? 1 : k > MAX_PROBES ? MAX_PROBES : k;
}

void bloom_builder_init(bloom_builder *b, int bits_per_key)
{
    b->bits_per_key = bits_per_key < 1 ? 1 : bits_per_key;
    b->hashes = NULL;
    b->n = b->cap = 0;
}

void bloom_builder_destroy(bloom_builder *b)
{
    free(b->hashes);
    b->hashes = NULL;
    b->n = b->cap = 0;
}

bool bloom_builder_add_hash(bloom_builder *b, uint64_t hash)
{
    if (b->n > 0 && b->hashes[b->n - 1] == hash)
        return true;
    if (b->n == b->cap) {
        uint64_t *h = lsm_grow(b->hashes, &b->cap, b->n + 1, sizeof(*h), 1024);
        if (h == NULL)
            return false;
        b->hashes = h;
    }
    b->hashes[b->n++] = hash;
    return true;
}

bool bloom_builder_add(bloom_builder *b, const void *key, size_t n)
{
    return bloom_builder_add_hash(b, bloom_hash(key, n));
}

size_t bloom_builder_count(const bloom_builder *b)
{
    return b->n;
}

static inline uint32_t pick_block(uint64_t hash, uint32_t nblocks)
{
    return (uint32_t)(((hash >> 32) * (uint64_t)nblocks) >> 32);
}

static void set_bits(unsigned char *block, uint64_t hash, int k)
{
    uint32_t pos = (uint32_t)hash;
    uint32_t delta = (uint32_t)(hash >> 32) | 1; /* odd: k distinct bits */
    for (int i = 0; i < k; i++, pos += delta)
        block[(pos % BLOCK_BITS) >> 3] |= (unsigned char)(1u << (pos & 7));
}

bool bloom_builder_finish(bloom_builder *b, buf *dst)
{
    uint64_t bits = (uint64_t)b->n * (uint64_t)b->bits_per_key;
    uint64_t nblocks64 = (bits + BLOCK_BITS - 1) / BLOCK_BITS;
    uint32_t nblocks = nblocks64 == 0           ? 1
                       : nblocks64 > UINT32_MAX ? UINT32_MAX
                                                : (uint32_t)nblocks64;
    size_t bytes = (size_t)nblocks * BLOCK_BYTES;
    int k = probes_for(b->bits_per_key);
    if (!buf_reserve(dst, bytes + 1))
        return false;
    unsigned char *array = (unsigned char *)dst->data + dst->len;
    memset(array, 0, bytes);
    for (size_t i = 0; i < b->n; i++) {
        uint64_t h = b->hashes[i];
        set_bits(array + (size_t)pick_block(h, nblocks) * BLOCK_BYTES, h, k);
    }
    array[bytes] = (unsigned char)k;
    dst->len += bytes + 1;
    b->n = 0;
    return true;
}

bool bloom_create(int bits_per_key, const char *const *keys, const size_t *lens, size_t n, buf *dst)
{
    bloom_builder b;
    bloom_builder_init(&b, bits_per_key);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++)
        ok = bloom_builder_add(&b, keys[i], lens[i]);
    ok = ok && bloom_builder_finish(&b, dst);
    bloom_builder_destroy(&b);
    return ok;
}

bool bloom_may_match_hash(const char *filter, size_t len, uint64_t hash)
{
    if (len < BLOCK_BYTES + 1 || (len - 1) % BLOCK_BYTES != 0)
        return true; /* not a filter we know: do not filter */
    int k = (unsigned char)filter[len - 1];
    if (k < 1 || k > MAX_PROBES)
        return true;
    size_t nblocks = (len - 1) / BLOCK_BYTES;
    if (nblocks > UINT32_MAX)
        return true;
    const unsigned char *block =
        (const unsigned char *)filter + (size_t)pick_block(hash, (uint32_t)nblocks) * BLOCK_BYTES;
    uint32_t pos = (uint32_t)hash;
    uint32_t delta = (uint32_t)(hash >> 32) | 1;
    for (int i = 0; i < k; i++, pos += delta) {
        uint32_t bit = pos % BLOCK_BITS;
        if (!(block[bit >> 3] & (1u << (bit & 7))))
            return false;
    }
    return true;
}

bool bloom_may_match(const char *filter, size_t len, const void *key, size_t n)
{
    return bloom_may_match_hash(filter, len, bloom_hash(key, n));
}
