/*
 * dcache.c — a directory's entries in memory: cookie-ordered array, names
 * back to back, open-addressing hash by name (see dcache.h).
 */
#include "dcache.h"

#include "schema.h"
#include "grow.h"
#include "siphash.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOT_EMPTY (-1)
#define SLOT_DELETED (-2)
#define MIN_SLOTS 16u
/* Dead entries tolerated before compaction (and never more than live). */
#define MIN_DEAD 64u

typedef struct ent {
    uint64_t cookie;
    uint64_t ino;
    uint32_t name_off; /* into names */
    uint32_t hint;
    uint8_t nlen; /* 1..SCHEMA_NAME_MAX */
    uint8_t type;
    bool live;
} ent;

struct dcache {
    ent *ents; /* cookie order; dead ones stay until compaction */
    size_t nents, cap, live;
    char *names; /* the names of ents, back to back */
    size_t names_len, names_cap;
    int32_t *slots; /* SLOT_EMPTY, SLOT_DELETED, or the index of a live ent */
    size_t nslots;  /* a power of two */
    size_t used;    /* slots not SLOT_EMPTY */
    siphash_key key; /* the process's key when made: a table's hash never changes */
};

/* The key new listings take: random once per process (= per mount), or the
 * one dcache_set_key gave. [set once before any listing exists; then read] */
static siphash_key the_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void random_key(void)
{
    if (siphash_random_key(&the_key) == 0)
        return;
    /* No getrandom: weaker, but never the same key twice. */
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    the_key.k0 = (uint64_t)t.tv_nsec << 32 ^ (uint64_t)t.tv_sec ^ (uint64_t)(uintptr_t)&t;
    the_key.k1 = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&the_key;
}

void dcache_set_key(uint64_t k0, uint64_t k1)
{
    pthread_once(&key_once, random_key);
    the_key = (siphash_key){k0, k1};
}

static uint64_t name_hash(const dcache *c, const char *s, size_t n)
{
    return siphash13(&c->key, s, n);
}

static bool same_name(const dcache *c, const ent *e, const char *name, size_t nlen)
{
    return e->nlen == nlen && memcmp(c->names + e->name_off, name, nlen) == 0;
}

/* The slot holding `name`, or -1. */
static long find_slot(const dcache *c, const char *name, size_t nlen)
{
    size_t mask = c->nslots - 1;
    size_t i = (size_t)name_hash(c, name, nlen) & mask;
    for (size_t probes = 0; probes < c->nslots; probes++, i = (i + 1) & mask) {
        int32_t e = c->slots[i];
        if (e == SLOT_EMPTY)
            return -1;
        if (e >= 0 && same_name(c, &c->ents[e], name, nlen))
            return (long)i;
    }
    return -1;
}

/* Puts ents[idx] in the first free slot of its probe sequence. REQUIRES:
 * a free slot exists (the load factor is kept below 3/4). */
static void place(dcache *c, size_t idx)
{
    const ent *e = &c->ents[idx];
    size_t mask = c->nslots - 1;
    size_t i = (size_t)name_hash(c, c->names + e->name_off, e->nlen) & mask;
    while (c->slots[i] >= 0)
        i = (i + 1) & mask;
    if (c->slots[i] == SLOT_EMPTY)
        c->used++;
    c->slots[i] = (int32_t)idx;
}

static size_t slots_for(size_t live)
{
    size_t n = MIN_SLOTS;
    while (n < live * 2 + 2)
        n *= 2;
    return n;
}

/* Replaces the slot table by `slots` (n of them) indexing the live ents. */
static void refill(dcache *c, int32_t *slots, size_t n)
{
    free(c->slots);
    c->slots = slots;
    c->nslots = n;
    c->used = 0;
    for (size_t i = 0; i < n; i++)
        slots[i] = SLOT_EMPTY;
    for (size_t i = 0; i < c->nents; i++)
        if (c->ents[i].live)
            place(c, i);
}

/* A slot table sized for `live` entries; 0 or ENOMEM (then unchanged). */
static int rehash(dcache *c, size_t live)
{
    size_t n = slots_for(live);
    int32_t *slots = lsm_malloc(n * sizeof *slots);
    if (slots == NULL)
        return ENOMEM;
    refill(c, slots, n);
    return 0;
}

dcache *dcache_new(void)
{
    pthread_once(&key_once, random_key);
    dcache *c = lsm_calloc(1, sizeof *c);
    if (c != NULL)
        c->key = the_key;
    if (c != NULL && rehash(c, 0) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

void dcache_free(dcache *c)
{
    if (c == NULL)
        return;
    free(c->ents);
    free(c->names);
    free(c->slots);
    free(c);
}

size_t dcache_count(const dcache *c)
{
    return c->live;
}

size_t dcache_bytes(const dcache *c)
{
    return sizeof *c + c->cap * sizeof(ent) + c->names_cap + c->nslots * sizeof(int32_t);
}

/* Room for one more entry named with nlen bytes; 0 or ENOMEM (unchanged). */
static int reserve(dcache *c, size_t nlen)
{
    if (c->nents >= INT32_MAX || c->names_len + nlen > UINT32_MAX)
        return ENOMEM;
    if ((c->used + 1) * 4 > c->nslots * 3 && rehash(c, c->live + 1) != 0)
        return ENOMEM;
    ent *ents = lsm_grow(c->ents, &c->cap, c->nents + 1, sizeof *ents, 16);
    if (ents == NULL)
        return ENOMEM;
    c->ents = ents;
    char *names = lsm_grow(c->names, &c->names_cap, c->names_len + nlen, 1, 256);
    if (names == NULL)
        return ENOMEM;
    c->names = names;
    return 0;
}

int dcache_add(dcache *c, const char *name, size_t nlen, uint64_t ino, uint8_t type,
               uint64_t cookie, uint32_t hint)
{
    if (nlen == 0 || nlen > SCHEMA_NAME_MAX)
        return EINVAL;
    if (c->nents > 0 && cookie <= c->ents[c->nents - 1].cookie)
        return EINVAL;
    if (find_slot(c, name, nlen) >= 0)
        return EEXIST;
    int err = reserve(c, nlen);
    if (err != 0)
        return err;
    memcpy(c->names + c->names_len, name, nlen);
    c->ents[c->nents] = (ent){.cookie = cookie,
                              .ino = ino,
                              .name_off = (uint32_t)c->names_len,
                              .hint = hint,
                              .nlen = (uint8_t)nlen,
                              .type = type,
                              .live = true};
    c->names_len += nlen;
    place(c, c->nents++);
    c->live++;
    return 0;
}

/* Drops the dead entries and their names, keeping cookie order. Best
 * effort: without memory for a new slot table it stays as it is. */
static void compact(dcache *c)
{
    size_t n = slots_for(c->live);
    int32_t *slots = lsm_malloc(n * sizeof *slots);
    if (slots == NULL)
        return;
    size_t j = 0, off = 0;
    for (size_t i = 0; i < c->nents; i++) {
        ent e = c->ents[i];
        if (!e.live)
            continue;
        memmove(c->names + off, c->names + e.name_off, e.nlen); /* off <= name_off */
        e.name_off = (uint32_t)off;
        off += e.nlen;
        c->ents[j++] = e;
    }
    c->nents = j;
    c->names_len = off;
    refill(c, slots, n);
}

int dcache_remove(dcache *c, const char *name, size_t nlen)
{
    long s = find_slot(c, name, nlen);
    if (s < 0)
        return ENOENT;
    c->ents[c->slots[s]].live = false;
    c->slots[s] = SLOT_DELETED;
    c->live--;
    size_t dead = c->nents - c->live;
    if (dead > MIN_DEAD && dead > c->live)
        compact(c);
    return 0;
}

int dcache_retarget(dcache *c, const char *name, size_t nlen, uint64_t ino, uint8_t type,
                    uint32_t hint)
{
    long s = find_slot(c, name, nlen);
    if (s < 0)
        return ENOENT;
    ent *e = &c->ents[c->slots[s]];
    e->ino = ino;
    e->type = type;
    e->hint = hint;
    return 0;
}

bool dcache_find(const dcache *c, const char *name, size_t nlen, uint64_t *ino, uint8_t *type,
                 uint64_t *cookie)
{
    long s = find_slot(c, name, nlen);
    if (s < 0)
        return false;
    const ent *e = &c->ents[c->slots[s]];
    *ino = e->ino;
    *type = e->type;
    *cookie = e->cookie;
    return true;
}

size_t dcache_longest_probe(const dcache *c)
{
    size_t mask = c->nslots - 1, longest = 0;
    for (size_t i = 0; i < c->nslots; i++) {
        int32_t e = c->slots[i];
        if (e < 0)
            continue;
        const ent *x = &c->ents[e];
        size_t home = (size_t)name_hash(c, c->names + x->name_off, x->nlen) & mask;
        size_t probes = ((i - home) & mask) + 1;
        longest = probes > longest ? probes : longest;
    }
    return longest;
}

int dcache_scan(const dcache *c, uint64_t from, dcache_visit_fn fn, void *ctx)
{
    size_t lo = 0, hi = c->nents; /* first entry with cookie >= from */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->ents[mid].cookie < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < c->nents; i++) {
        const ent *e = &c->ents[i];
        if (!e->live)
            continue;
        int r = fn(ctx, e->cookie, e->ino, e->type, c->names + e->name_off, e->nlen, e->hint);
        if (r != 0)
            return r;
    }
    return 0;
}
