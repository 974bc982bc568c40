/* cache.c — sharded LRU cache; see cache.h.
 *
 * Each shard keeps its entries in a chained hash table and on one of two
 * lists: `lru` holds the entries only the cache references (evictable,
 * least recently used first), `in_use` those that some handle also pins.
 * Moving an entry between the lists on the 1 <-> 2 reference transitions
 * makes eviction O(1): the victim is always lru's head.
 */
#include "cache.h"
#include "lsm_malloc.h"

#include "mutex.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SHARD_BITS 4
#define MAX_SHARD_BITS 8
#define MIN_BUCKETS 16

typedef struct lru_link {
    struct lru_link *next, *prev;
} lru_link;

/* A cache entry. `node` must stay first: list links are cast back to it. */
struct cache_handle {
    lru_link node;                  /* in lru or in_use while in_cache (shard mu) */
    struct cache_handle *next_hash; /* bucket chain; the dead list once freed (shard mu) */
    uint32_t refs;                  /* handles, plus one while in_cache (shard mu) */
    bool in_cache;                  /* reachable through the hash table (shard mu) */
    /* Immutable after insert: */
    uint32_t hash;
    void *value;
    cache_deleter deleter;
    size_t charge;
    size_t klen;
    char key[];
};
typedef struct cache_handle entry;

typedef struct shard {
    _Alignas(64) mutex mu; /* own cache line: shards must not false-share */
    size_t capacity;       /* immutable after cache_new */
    /* Guarded by mu: */
    size_t usage;    /* summed charge of entries in_cache */
    lru_link lru;    /* refs == 1 && in_cache; oldest first */
    lru_link in_use; /* refs >= 2 && in_cache */
    entry **buckets;
    uint32_t nbuckets; /* a power of two */
    uint32_t elems;
    uint64_t hits, misses;
} shard;

struct cache {
    size_t capacity;
    int shard_bits;
    int nshards;
    _Atomic uint64_t last_id;
    shard shards[];
};

/* Not stored anywhere: only has to spread keys over shards and buckets. */
static uint32_t hash_key(const char *k, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, k, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        k += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, k, n);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return (uint32_t)h;
}

static shard *shard_for(cache *c, uint32_t hash)
{
    return c->shard_bits ? &c->shards[hash >> (32 - c->shard_bits)] : &c->shards[0];
}

static void list_init(lru_link *l)
{
    l->next = l->prev = l;
}
static void list_remove(lru_link *e)
{
    e->next->prev = e->prev;
    e->prev->next = e->next;
}
static void list_append(lru_link *head, lru_link *e)
{
    e->next = head;
    e->prev = head->prev;
    e->prev->next = e;
    head->prev = e;
}

/* ------------------------------------------------------------ hash table */

/* The slot that points at the entry for key, or the NULL slot ending its
 * chain. REQUIRES: s->mu held. */
static entry **find_slot(shard *s, uint32_t hash, const char *key, size_t klen)
{
    entry **p = &s->buckets[hash & (s->nbuckets - 1)];
    while (*p && ((*p)->hash != hash || (*p)->klen != klen || memcmp((*p)->key, key, klen) != 0))
        p = &(*p)->next_hash;
    return p;
}

/* Doubles the bucket array; on allocation failure the table just keeps its
 * longer chains. REQUIRES: s->mu held. */
static void grow(shard *s)
{
    uint32_t n = s->nbuckets * 2;
    entry **nb = lsm_calloc(n, sizeof(*nb));
    if (nb == NULL)
        return;
    for (uint32_t i = 0; i < s->nbuckets; i++) {
        entry *e = s->buckets[i];
        while (e) {
            entry *next = e->next_hash;
            entry **slot = &nb[e->hash & (n - 1)];
            e->next_hash = *slot;
            *slot = e;
            e = next;
        }
    }
    free(s->buckets);
    s->buckets = nb;
    s->nbuckets = n;
}

/* Links e in; returns the entry it replaced (now unlinked) or NULL.
 * REQUIRES: s->mu held. */
static entry *table_insert(shard *s, entry *e)
{
    entry **slot = find_slot(s, e->hash, e->key, e->klen);
    entry *old = *slot;
    e->next_hash = old ? old->next_hash : NULL;
    *slot = e;
    if (old == NULL && ++s->elems > s->nbuckets)
        grow(s);
    return old;
}

/* REQUIRES: s->mu held. */
static entry *table_remove(shard *s, uint32_t hash, const char *key, size_t klen)
{
    entry **slot = find_slot(s, hash, key, klen);
    entry *e = *slot;
    if (e) {
        *slot = e->next_hash;
        s->elems--;
    }
    return e;
}

/* ------------------------------------------------------- reference counts */

static void ref_locked(shard *s, entry *e)
{
    assert(mutex_held(&s->mu));
    if (e->refs == 1 && e->in_cache) {
        list_remove(&e->node);
        list_append(&s->in_use, &e->node);
    }
    e->refs++;
}

/* Entries whose last reference went are pushed on *dead, to have their
 * deleters run once the lock is dropped. REQUIRES: s->mu held. */
static void unref_locked(shard *s, entry *e, entry **dead)
{
    assert(mutex_held(&s->mu));
    assert(e->refs > 0);
    e->refs--;
    if (e->refs == 0) {
        e->next_hash = *dead;
        *dead = e;
    } else if (e->in_cache && e->refs == 1) {
        list_remove(&e->node);
        list_append(&s->lru, &e->node);
    }
}

/* e has just been unlinked from the hash table: drop the cache's reference.
 * REQUIRES: s->mu held. */
static void finish_erase(shard *s, entry *e, entry **dead)
{
    assert(e->in_cache);
    list_remove(&e->node);
    e->in_cache = false;
    s->usage -= e->charge;
    unref_locked(s, e, dead);
}

static void run_deleters(entry *dead)
{
    while (dead) {
        entry *next = dead->next_hash;
        if (dead->deleter)
            dead->deleter(dead->key, dead->klen, dead->value);
        free(dead);
        dead = next;
    }
}

/* Evicts until the shard fits its capacity or nothing more is evictable.
 * REQUIRES: s->mu held. */
static void evict_over_capacity(shard *s, entry **dead)
{
    while (s->usage > s->capacity && s->lru.next != &s->lru) {
        entry *old = (entry *)s->lru.next;
        assert(old->refs == 1);
        table_remove(s, old->hash, old->key, old->klen);
        finish_erase(s, old, dead);
    }
}

/* ---------------------------------------------------------------- public */

cache *cache_new(size_t capacity)
{
    return cache_new_sharded(capacity, DEFAULT_SHARD_BITS);
}

cache *cache_new_sharded(size_t capacity, int shard_bits)
{
    assert(shard_bits >= 0 && shard_bits <= MAX_SHARD_BITS);
    int nshards = 1 << shard_bits;
    size_t size = (sizeof(cache) + (size_t)nshards * sizeof(shard) + 63) & ~(size_t)63;
    cache *c = lsm_aligned_alloc(64, size);
    if (c == NULL)
        return NULL;
    memset(c, 0, size);
    c->capacity = capacity;
    c->shard_bits = shard_bits;
    c->nshards = nshards;
    atomic_init(&c->last_id, 0);
    size_t per_shard = capacity / (size_t)nshards + (capacity % (size_t)nshards != 0);
    for (int i = 0; i < nshards; i++) {
        shard *s = &c->shards[i];
        s->buckets = lsm_calloc(MIN_BUCKETS, sizeof(*s->buckets));
        if (s->buckets == NULL) {
            for (int j = 0; j < i; j++) {
                free(c->shards[j].buckets);
                mutex_destroy(&c->shards[j].mu);
            }
            free(c);
            return NULL;
        }
        mutex_init(&s->mu);
        s->capacity = per_shard;
        s->nbuckets = MIN_BUCKETS;
        list_init(&s->lru);
        list_init(&s->in_use);
    }
    return c;
}

void cache_free(cache *c)
{
    if (c == NULL)
        return;
    entry *dead = NULL;
    for (int i = 0; i < c->nshards; i++) {
        shard *s = &c->shards[i];
        mutex_lock(&s->mu);
        assert(s->in_use.next == &s->in_use); /* a handle is still outstanding */
        while (s->lru.next != &s->lru) {
            entry *e = (entry *)s->lru.next;
            table_remove(s, e->hash, e->key, e->klen);
            finish_erase(s, e, &dead);
        }
        mutex_unlock(&s->mu);
        free(s->buckets);
        mutex_destroy(&s->mu);
    }
    run_deleters(dead);
    free(c);
}

cache_handle *cache_insert(cache *c, const char *key, size_t klen, void *value, size_t charge,
                           cache_deleter deleter)
{
    entry *e = lsm_malloc(sizeof(*e) + klen);
    if (e == NULL)
        return NULL;
    e->hash = hash_key(key, klen);
    e->value = value;
    e->deleter = deleter;
    e->charge = charge;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->refs = 1; /* the handle returned */
    e->in_cache = false;
    e->next_hash = NULL;

    shard *s = shard_for(c, e->hash);
    entry *dead = NULL;
    mutex_lock(&s->mu);
    if (s->capacity > 0) {
        e->refs++;
        e->in_cache = true;
        list_append(&s->in_use, &e->node);
        s->usage += charge;
        entry *old = table_insert(s, e);
        if (old)
            finish_erase(s, old, &dead);
    }
    evict_over_capacity(s, &dead);
    mutex_unlock(&s->mu);
    run_deleters(dead);
    return e;
}

cache_handle *cache_lookup(cache *c, const char *key, size_t klen)
{
    uint32_t hash = hash_key(key, klen);
    shard *s = shard_for(c, hash);
    mutex_lock(&s->mu);
    entry *e = *find_slot(s, hash, key, klen);
    if (e) {
        ref_locked(s, e);
        s->hits++;
    } else {
        s->misses++;
    }
    mutex_unlock(&s->mu);
    return e;
}

void cache_release(cache *c, cache_handle *h)
{
    shard *s = shard_for(c, h->hash);
    entry *dead = NULL;
    mutex_lock(&s->mu);
    unref_locked(s, h, &dead);
    mutex_unlock(&s->mu);
    run_deleters(dead);
}

void *cache_value(const cache_handle *h)
{
    return h->value;
}

void cache_erase(cache *c, const char *key, size_t klen)
{
    uint32_t hash = hash_key(key, klen);
    shard *s = shard_for(c, hash);
    entry *dead = NULL;
    mutex_lock(&s->mu);
    entry *e = table_remove(s, hash, key, klen);
    if (e)
        finish_erase(s, e, &dead);
    mutex_unlock(&s->mu);
    run_deleters(dead);
}

void cache_prune(cache *c)
{
    for (int i = 0; i < c->nshards; i++) {
        shard *s = &c->shards[i];
        entry *dead = NULL;
        mutex_lock(&s->mu);
        while (s->lru.next != &s->lru) {
            entry *e = (entry *)s->lru.next;
            table_remove(s, e->hash, e->key, e->klen);
            finish_erase(s, e, &dead);
        }
        mutex_unlock(&s->mu);
        run_deleters(dead);
    }
}

uint64_t cache_new_id(cache *c)
{
    return atomic_fetch_add_explicit(&c->last_id, 1, memory_order_relaxed) + 1;
}

size_t cache_capacity(const cache *c)
{
    return c->capacity;
}

size_t cache_total_charge(cache *c)
{
    size_t total = 0;
    for (int i = 0; i < c->nshards; i++) {
        mutex_lock(&c->shards[i].mu);
        total += c->shards[i].usage;
        mutex_unlock(&c->shards[i].mu);
    }
    return total;
}

void cache_stats(cache *c, uint64_t *hits, uint64_t *misses)
{
    uint64_t h = 0, m = 0;
    for (int i = 0; i < c->nshards; i++) {
        mutex_lock(&c->shards[i].mu);
        h += c->shards[i].hits;
        m += c->shards[i].misses;
        mutex_unlock(&c->shards[i].mu);
    }
    *hits = h;
    *misses = m;
}
