/*
 * cache.h — a sharded LRU cache of reference-counted entries: the block cache
 * (decoded table blocks) and the table cache (open tables) are both one.
 *
 * Keys are byte strings (copied in); values are opaque pointers with a
 * "charge" (bytes for blocks, 1 for tables). When the summed charge of the
 * entries exceeds the capacity, the least recently used entries that no one
 * holds a handle on are dropped. An entry's deleter runs once, when it has
 * left the cache (evicted, erased or replaced) and its last handle is
 * released — so a handle pins its value. With capacity 0 nothing is kept:
 * insert hands back a handle whose value is deleted on release.
 *
 * Concurrency: every function may be called from any thread at once. The
 * key space is split over 16 shards by hash; each shard has its own mutex,
 * so threads touching different shards never contend. Deleters run with no
 * cache lock held (they may take other locks or do I/O).
 */
#ifndef LSM_CACHE_H
#define LSM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cache cache;
typedef struct cache_handle cache_handle;
typedef void (*cache_deleter)(const char *key, size_t klen, void *value);

cache *cache_new(size_t capacity); /* 16 shards; NULL if out of memory */
/* 2^shard_bits shards (0..8), each with capacity/2^shard_bits. One shard
 * makes the LRU order exact across all keys (tests). */
cache *cache_new_sharded(size_t capacity, int shard_bits);
/* REQUIRES: no handle is outstanding. Deletes every entry still cached. */
void cache_free(cache *c);

/* Inserts key -> value (replacing any entry of that key) and returns a handle
 * on it, to be released with cache_release(). NULL only if out of memory, in
 * which case nothing changed and the caller still owns value. */
cache_handle *cache_insert(cache *c, const char *key, size_t klen, void *value, size_t charge,
                           cache_deleter deleter);
/* A handle on the entry for key, or NULL (counted as a hit or a miss). */
cache_handle *cache_lookup(cache *c, const char *key, size_t klen);
void cache_release(cache *c, cache_handle *h);
void *cache_value(const cache_handle *h);

/* Drops the entry for key from the cache (holders of handles keep it). */
void cache_erase(cache *c, const char *key, size_t klen);
/* Drops every entry no one holds. */
void cache_prune(cache *c);

/* A number never returned before by this cache: a prefix that keeps the keys
 * of different clients (e.g. different tables) apart. */
uint64_t cache_new_id(cache *c);

size_t cache_capacity(const cache *c);
size_t cache_total_charge(cache *c); /* of the entries in the cache */
/* Lookups that found their key / did not, since cache_new. */
void cache_stats(cache *c, uint64_t *hits, uint64_t *misses);

#endif
