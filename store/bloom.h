/*
 * bloom.h — the bloom filter policy of tables: "may this key be here?"
 * without touching a data block. No false negatives; about 1% false
 * positives at 10 bits per key.
 *
 * Cache-local layout: the filter is an array of 64-byte (512-bit) blocks;
 * a key's 64-bit hash picks one block with its high half, and its probes
 * (double hashing: low half + i * high half, so each key sets k distinct
 * bits) all fall inside that block — one cache miss per check instead of k.
 *
 * On-disk format (stable: the hash and probe scheme are part of it):
 *   nblocks * 64 bytes of bits | 1 byte k (number of probes)
 * A filter of any other shape, or with k outside 1..30, matches everything
 * (so an unknown filter costs reads, never correctness).
 *
 * Tables add USER keys (not internal keys): all versions of a key share
 * one filter entry, and a get checks the user key it looks for.
 */
#ifndef LSM_BLOOM_H
#define LSM_BLOOM_H

#include "coding.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The 64-bit hash the filter uses (fixed forever: it is in the format). */
uint64_t bloom_hash(const void *key, size_t n);

/* Collects the hashes of the keys of one filter. Not thread-safe. */
typedef struct bloom_builder {
    int bits_per_key;
    uint64_t *hashes; /* one per distinct consecutive key */
    size_t n, cap;
} bloom_builder;

void bloom_builder_init(bloom_builder *b, int bits_per_key); /* bits_per_key >= 1 */
void bloom_builder_destroy(bloom_builder *b);
/* Adds a key; a key equal to the previous one (another version of the same
 * user key) is counted once. false if out of memory (nothing added). */
bool bloom_builder_add(bloom_builder *b, const void *key, size_t n);
bool bloom_builder_add_hash(bloom_builder *b, uint64_t hash);
size_t bloom_builder_count(const bloom_builder *b);
/* Appends the filter of every key added to dst and empties the builder.
 * false if out of memory (dst unchanged, keys kept). */
bool bloom_builder_finish(bloom_builder *b, buf *dst);

/* One-shot: the filter for keys[0..n) appended to dst. */
bool bloom_create(int bits_per_key, const char *const *keys, const size_t *lens, size_t n,
                  buf *dst);

/* false only if key was certainly not among the filter's keys. */
bool bloom_may_match(const char *filter, size_t len, const void *key, size_t n);
bool bloom_may_match_hash(const char *filter, size_t len, uint64_t hash);

#endif
