/*
 * icache.c — sharded hash table of inodes (see icache.h for the locking).
 */
#include "icache.h"

#include "storeio.h"
#include "inode.h"
#include "mutex.h"
#include "lsm_malloc.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 64
#define INITIAL_BUCKETS 64

typedef struct shard {
    mutex mu; /* store/mutex.h: knows its owner, for the REQUIRES below */
    inode **buckets; /* [mu] */
    size_t nbuckets; /* [mu] a power of two */
    size_t count;    /* [mu] */
} shard;

struct icache {
    shard shards[SHARDS];
    _Atomic size_t count; /* entries, all shards: icache_count */
    /* icache_victims's clock hand: a shard and a bucket in it [the one
     * thread that calls icache_victims]. */
    size_t hand_shard, hand_bucket;
    _Atomic int64_t dcache_bytes;  /* see icache_dcache_charge */
    _Atomic int64_t payload_bytes; /* see icache_payload_keep */
    _Atomic uint32_t forget_epoch; /* see icache_forget_epoch */
};

static uint64_t hash_ino(uint64_t ino)
{
    return ino * 0x9E3779B97F4A7C15ULL;
}

static shard *shard_of(icache *c, uint64_t ino)
{
    return &c->shards[(hash_ino(ino) >> 58) % SHARDS];
}

static size_t bucket_of(const shard *s, uint64_t ino)
{
    return (size_t)(hash_ino(ino) >> 16) & (s->nbuckets - 1);
}

icache *icache_new(void)
{
    icache *c = lsm_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    atomic_init(&c->forget_epoch, 1);
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        mutex_init(&s->mu);
        s->nbuckets = INITIAL_BUCKETS;
        s->buckets = lsm_calloc(s->nbuckets, sizeof *s->buckets);
        if (s->buckets == NULL) {
            s->nbuckets = 0;
            icache_free(c);
            return NULL;
        }
    }
    return c;
}

/* Frees n's kept payload and refunds it. REQUIRES: n->lock held for
 * writing, or n unreachable. */
static void payload_drop(icache *c, inode *n)
{
    if (n->pay_kept)
        atomic_fetch_sub(&c->payload_bytes, (int64_t)n->pay_len);
    free(n->pay);
    n->pay = NULL;
    n->pay_len = 0;
    n->pay_kept = false;
}

void icache_payload_keep(icache *c, inode *n, char *p, size_t len)
{
    payload_drop(c, n);
    int64_t was = atomic_fetch_add(&c->payload_bytes, (int64_t)len);
    if (was + (int64_t)len > ICACHE_PAYLOAD_BUDGET) {
        atomic_fetch_sub(&c->payload_bytes, (int64_t)len);
        free(p);
        return;
    }
    n->pay = p;
    n->pay_len = len;
    n->pay_kept = true;
}

int64_t icache_payload_bytes(icache *c)
{
    return atomic_load_explicit(&c->payload_bytes, memory_order_relaxed);
}

static void inode_free(icache *c, inode *n)
{
    payload_drop(c, n);
    if (n->dc != NULL) {
        icache_dcache_charge(c, -(int64_t)dcache_bytes(n->dc));
        dcache_free(n->dc);
    }
    pthread_rwlock_destroy(&n->lock);
    free(n->kname);
    free(n);
}

void icache_dcache_charge(icache *c, int64_t delta)
{
    atomic_fetch_add_explicit(&c->dcache_bytes, delta, memory_order_relaxed);
}

int64_t icache_dcache_bytes(icache *c)
{
    return atomic_load_explicit(&c->dcache_bytes, memory_order_relaxed);
}

void icache_free(icache *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        for (size_t b = 0; b < s->nbuckets; b++) {
            inode *n = s->buckets[b];
            while (n != NULL) {
                inode *next = n->next;
                inode_free(c, n);
                n = next;
            }
        }
        free(s->buckets);
        mutex_destroy(&s->mu);
    }
    free(c);
}

/* REQUIRES: s->mu held. */
static inode *find(shard *s, uint64_t ino)
{
    assert(mutex_held(&s->mu));
    for (inode *n = s->buckets[bucket_of(s, ino)]; n != NULL; n = n->next)
        if (n->ino == ino)
            return n;
    return NULL;
}

/* REQUIRES: s->mu held. Doubling is best effort: without memory the
 * chains just get longer. */
static void maybe_grow(shard *s)
{
    assert(mutex_held(&s->mu));
    if (s->count < s->nbuckets * 2)
        return;
    size_t nb = s->nbuckets * 2;
    inode **buckets = lsm_calloc(nb, sizeof *buckets);
    if (buckets == NULL)
        return;
    inode **old = s->buckets;
    size_t oldn = s->nbuckets;
    s->buckets = buckets;
    s->nbuckets = nb;
    for (size_t b = 0; b < oldn; b++) {
        inode *n = old[b];
        while (n != NULL) {
            inode *next = n->next;
            size_t i = bucket_of(s, n->ino);
            n->next = buckets[i];
            buckets[i] = n;
            n = next;
        }
    }
    free(old);
}

/* REQUIRES: s->mu held. */
static void unlink_entry(shard *s, inode *n)
{
    assert(mutex_held(&s->mu));
    inode **pp = &s->buckets[bucket_of(s, n->ino)];
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    s->count--;
}

/* An entry more (delta 1) or fewer (-1), for icache_count. */
static void count_entry(icache *c, int delta)
{
    atomic_fetch_add_explicit(&c->count, (size_t)delta, memory_order_relaxed);
}

/* Finds or creates the entry and pins it. */
static inode *pin(icache *c, uint64_t ino)
{
    shard *s = shard_of(c, ino);
    mutex_lock(&s->mu);
    inode *n = find(s, ino);
    if (n == NULL && (n = lsm_calloc(1, sizeof *n)) != NULL) {
        n->ino = ino;
        pthread_rwlock_init(&n->lock, NULL);
        size_t b = bucket_of(s, ino);
        n->next = s->buckets[b];
        s->buckets[b] = n;
        s->count++;
        count_entry(c, 1);
        maybe_grow(s);
    }
    if (n != NULL) {
        n->refs++;
        n->referenced = true;
    }
    mutex_unlock(&s->mu);
    return n;
}

/* Loads n's record, keeping an inline file's bytes when the record holds
 * them (a store before format 4); bytes apart are read when first needed
 * (inode_payload), so loading attributes reads no file data, and a
 * symlink's target at readlink. Out of memory fails the load, as any
 * error: the store's read of the record may be what failed. REQUIRES:
 * n->lock held for writing. */
static int load(lsmfs *fs, inode *n)
{
    char *p;
    size_t len;
    int err = inode_load(fs, n->ino, &n->rec, &p, &len);
    if (err != 0)
        return err;
    if (S_ISREG(n->rec.mode) && (n->rec.flags & INODE_F_INLINE) && !inode_bytes_apart(&n->rec))
        icache_payload_keep(fs->icache, n, p, len);
    else
        free(p);
    return 0;
}

int icache_get(lsmfs *fs, uint64_t ino, inode **out)
{
    inode *n = pin(fs->icache, ino);
    if (n == NULL)
        return ENOMEM;
    int err = 0;
    if (!atomic_load_explicit(&n->loaded, memory_order_acquire)) {
        inode_wrlock(n);
        if (!atomic_load_explicit(&n->loaded, memory_order_relaxed)) {
            /* Whatever the store holds for it was committed by now. */
            atomic_store(&n->seq, fs_committed_seq(fs));
            err = load(fs, n);
            atomic_store(&n->parent, n->rec.parent);
            if (err == 0)
                atomic_store_explicit(&n->loaded, true, memory_order_release);
        }
        inode_unlock(n);
    }
    if (err != 0) {
        icache_put(fs->icache, n);
        return err;
    }
    *out = n;
    return 0;
}

inode *icache_get_cached(icache *c, uint64_t ino)
{
    shard *s = shard_of(c, ino);
    mutex_lock(&s->mu);
    inode *n = find(s, ino);
    if (n != NULL && atomic_load_explicit(&n->loaded, memory_order_acquire)) {
        n->refs++;
        n->referenced = true;
    } else {
        n = NULL;
    }
    mutex_unlock(&s->mu);
    return n;
}

int icache_reserve(icache *c, uint64_t ino, inode **out)
{
    *out = pin(c, ino);
    return *out == NULL ? ENOMEM : 0;
}

void icache_fill(lsmfs *fs, inode *n, const inode_rec *rec)
{
    assert(inode_pinned(n));
    inode_wrlock(n);
    n->rec = *rec;
    atomic_store(&n->parent, rec->parent);
    n->gone = false;
    atomic_store(&n->seq, fs_committed_seq(fs)); /* its creation is committed */
    atomic_store_explicit(&n->loaded, true, memory_order_release);
    inode_unlock(n);
}

/* REQUIRES: s->mu held. The root stays for the life of the mount (with
 * its listing): the kernel never looks it up, so its nlookup stays 0 and it
 * would otherwise be freed, and its listing rebuilt, after every request. */
static void maybe_evict(icache *c, shard *s, inode *n)
{
    assert(mutex_held(&s->mu));
    if (n->refs == 0 && n->nlookup == 0 && !n->orphan && n->ino != SCHEMA_ROOT_INO) {
        unlink_entry(s, n);
        count_entry(c, -1);
        inode_free(c, n);
    }
}

bool icache_cached_parent(icache *c, uint64_t ino, uint64_t *parent)
{
    shard *s = shard_of(c, ino);
    mutex_lock(&s->mu);
    inode *n = find(s, ino);
    bool ok = n != NULL && atomic_load_explicit(&n->loaded, memory_order_acquire);
    if (ok)
        *parent = atomic_load(&n->parent);
    mutex_unlock(&s->mu);
    return ok;
}

void icache_put(icache *c, inode *n)
{
    if (n == NULL)
        return;
    shard *s = shard_of(c, n->ino);
    mutex_lock(&s->mu);
    assert(n->refs > 0);
    n->refs--;
    maybe_evict(c, s, n);
    mutex_unlock(&s->mu);
}

/* REQUIRES: the shard mutex of n held. Keeps the old name when the new
 * one cannot be copied (the budget may then ask for a stale name: the
 * kernel ignores it). */
static void set_kname(inode *n, uint64_t parent, const char *name)
{
    if (name == NULL || (n->kname != NULL && n->kparent == parent && strcmp(n->kname, name) == 0))
        return;
    char *copy = lsm_strdup(name);
    if (copy == NULL)
        return;
    free(n->kname);
    n->kname = copy;
    n->kparent = parent;
}

void icache_lookup_inc(icache *c, inode *n, uint64_t parent, const char *name, bool is_dir)
{
    shard *s = shard_of(c, n->ino);
    mutex_lock(&s->mu);
    n->nlookup++;
    n->referenced = true;
    if (!is_dir)
        set_kname(n, parent, name);
    mutex_unlock(&s->mu);
}

size_t icache_count(icache *c)
{
    return atomic_load_explicit(&c->count, memory_order_relaxed);
}

/* REQUIRES: s->mu held. Whether n is a victim now; clears its mark. */
static bool victim(inode *n)
{
    if (n->referenced) {
        n->referenced = false;
        return false;
    }
    return n->refs == 0 && n->nlookup > 0 && !n->orphan && n->kname != NULL;
}

size_t icache_victims(icache *c, icache_victim *out, size_t max, size_t scan)
{
    size_t found = 0, seen = 0;
    for (int i = 0; i <= SHARDS && found < max && seen < scan; i++) {
        shard *s = &c->shards[c->hand_shard];
        mutex_lock(&s->mu);
        for (; c->hand_bucket < s->nbuckets && found < max && seen < scan; c->hand_bucket++)
            for (inode *n = s->buckets[c->hand_bucket]; n != NULL; n = n->next, seen++)
                if (found < max && victim(n)) {
                    out[found].parent = n->kparent;
                    snprintf(out[found].name, sizeof out[found].name, "%s", n->kname);
                    found++;
                }
        if (c->hand_bucket >= s->nbuckets) {
            c->hand_bucket = 0;
            c->hand_shard = (c->hand_shard + 1) % SHARDS;
        }
        mutex_unlock(&s->mu);
    }
    return found;
}

bool icache_kernel_knows(icache *c, uint64_t ino)
{
    shard *s = shard_of(c, ino);
    mutex_lock(&s->mu);
    inode *n = find(s, ino);
    bool known = n != NULL && n->nlookup > 0;
    mutex_unlock(&s->mu);
    return known;
}

uint32_t icache_forget_epoch(icache *c)
{
    return atomic_load_explicit(&c->forget_epoch, memory_order_acquire);
}

static void next_epoch(icache *c)
{
    uint32_t e = atomic_load_explicit(&c->forget_epoch, memory_order_relaxed), next;
    do
        next = e + 1 == 0 ? 1 : e + 1;
    while (!atomic_compare_exchange_weak(&c->forget_epoch, &e, next));
}

inode *icache_forget(icache *c, uint64_t ino, uint64_t count)
{
    shard *s = shard_of(c, ino);
    mutex_lock(&s->mu);
    inode *n = find(s, ino);
    inode *out = NULL;
    if (n != NULL) {
        n->nlookup = count > n->nlookup ? 0 : n->nlookup - count;
        if (n->nlookup == 0)
            next_epoch(c);
        if (n->nlookup == 0 && n->orphan) {
            n->refs++;
            out = n;
        } else {
            maybe_evict(c, s, n);
        }
    }
    mutex_unlock(&s->mu);
    return out;
}

bool icache_mark_orphan(icache *c, inode *n)
{
    assert(inode_wrheld(n));
    shard *s = shard_of(c, n->ino);
    mutex_lock(&s->mu);
    n->orphan = n->nlookup > 0;
    bool marked = n->orphan;
    mutex_unlock(&s->mu);
    return marked;
}
