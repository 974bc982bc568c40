/* memtable.c — internal keys in an arena skiplist; see memtable.h.
 *
 * Entry format (one arena allocation together with its skiplist node):
 *   varint32 ikey_len | internal key | varint64 (vlen << 1 | kept) | value
 * where, if `kept`, the value is not there but 8 bytes pointing at it in a
 * buffer the memtable keeps (memtable_keep; the rule is `refers`).
 *
 * A get may have to look in several memtables (the active one and those
 * waiting to be flushed), and a skiplist search is some twenty comparisons
 * at scattered addresses. So each memtable also keeps a bloom filter of its
 * user keys: a get for a key the memtable never held almost always stops
 * after one cache line. The filter is blocked (all of a key's bits in one
 * 64-byte line) and of fixed size; once a memtable holds far more keys than
 * it was sized for it just answers "maybe" more often.
 */
#include "memtable.h"
#include "lsm_malloc.h"

#include "arena.h"
#include "bufpool.h"
#include "keycmp.h"
#include "skiplist.h"
#include "status.h"

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define FILTER_LINES 2048 /* 128 KiB: ~18 bits a key in 8 MiB of 150-byte entries */
#define FILTER_PROBES 4

/* A buffer of batch bytes the memtable keeps (memtable_keep), in its arena. */
struct kept {
    struct kept *next;
    buf bytes;
    uint64_t entries; /* the memtable's when it was kept (memtable_unkeep) */
};

struct memtable {
    arena arena;                /* allocation: writer only; usage: read by anyone */
    skiplist list;              /* one writer (caller-serialised), lock-free readers */
    _Atomic uint64_t entries;   /* written by the writer, read by anyone */
    _Atomic uint64_t deletions; /* entries that are deletions; as entries */
    atomic_int refs;
    struct kept *kept;       /* newest first; writer only, freed with m */
    _Atomic size_t kept_len; /* their bytes; written by the writer, read by anyone */
    /* Bloom filter of the user keys: bits are only ever set, by the writer,
     * before the entry is linked into the list (relaxed: readers that may
     * see the entry are ordered after it by the list's release store or by
     * whatever published its sequence number). */
    _Alignas(64) _Atomic uint64_t filter[FILTER_LINES][8];
};

static int ikey_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    return keycmp_ikey(a, alen, b, blen);
}

/* 64-bit hash of a user key (any good mix will do: it is never stored). */
static uint64_t key_hash(const char *k, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    for (; n >= 8; k += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, k, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, k, n);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
    }
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 32);
}

/* The filter line for h, and the bit (0..511) of each probe: nine bits of
 * the hash per probe, from a second mix so they do not repeat the line's. */
static inline _Atomic uint64_t *filter_line(memtable *m, uint64_t h)
{
    return m->filter[(h >> 40) % FILTER_LINES];
}

static inline unsigned probe_bit(uint64_t h, int i)
{
    return (unsigned)(h >> (9 * i)) & 511u;
}

static void filter_add(memtable *m, const char *key, size_t klen)
{
    uint64_t h = key_hash(key, klen);
    _Atomic uint64_t *line = filter_line(m, h);
    for (int i = 0; i < FILTER_PROBES; i++) {
        unsigned b = probe_bit(h, i);
        /* One writer: a plain read-modify-write of the word is enough. */
        uint64_t w = atomic_load_explicit(&line[b / 64], memory_order_relaxed);
        atomic_store_explicit(&line[b / 64], w | (UINT64_C(1) << (b % 64)), memory_order_relaxed);
    }
}

static bool filter_may_hold(memtable *m, const char *key, size_t klen)
{
    uint64_t h = key_hash(key, klen);
    _Atomic uint64_t *line = filter_line(m, h);
    for (int i = 0; i < FILTER_PROBES; i++) {
        unsigned b = probe_bit(h, i);
        if (!(atomic_load_explicit(&line[b / 64], memory_order_relaxed) &
              (UINT64_C(1) << (b % 64))))
            return false;
    }
    return true;
}

static memtable *make(bool pooled)
{
    memtable *m = lsm_aligned_alloc(64, sizeof(memtable));
    if (m == NULL)
        return NULL;
    for (int i = 0; i < FILTER_LINES; i++)
        for (int j = 0; j < 8; j++)
            atomic_init(&m->filter[i][j], 0);
    if (pooled)
        arena_init_pooled(&m->arena);
    else
        arena_init(&m->arena, 0);
    if (!skiplist_init(&m->list, &m->arena, ikey_cmp)) {
        arena_destroy(&m->arena);
        free(m);
        return NULL;
    }
    atomic_init(&m->entries, 0);
    atomic_init(&m->deletions, 0);
    atomic_init(&m->refs, 1);
    m->kept = NULL;
    atomic_init(&m->kept_len, 0);
    return m;
}

memtable *memtable_new(void)
{
    return make(false);
}

memtable *memtable_new_pooled(void)
{
    return make(true);
}

void memtable_ref(memtable *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void memtable_unref(memtable *m)
{
    if (m == NULL)
        return;
    int old = atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel);
    assert(old > 0);
    if (old == 1) {
        /* No entry outlives this: the kept bytes go with the arena. */
        for (struct kept *k = m->kept; k != NULL; k = k->next)
            bufpool_release(&k->bytes);
        arena_destroy(&m->arena);
        free(m);
    }
}

/* Kept bytes counted in the usage. [writer] */
static void add_kept_len(memtable *m, ptrdiff_t n)
{
    size_t len = atomic_load_explicit(&m->kept_len, memory_order_relaxed);
    atomic_store_explicit(&m->kept_len, len + (size_t)n, memory_order_relaxed);
}

bool memtable_keep(memtable *m, buf *bytes)
{
    struct kept *k = arena_alloc_aligned(&m->arena, sizeof(*k), alignof(struct kept));
    if (k == NULL)
        return false;
    k->bytes = *bytes;
    k->entries = memtable_entries(m);
    buf_init(bytes);
    k->next = m->kept;
    m->kept = k;
    add_kept_len(m, (ptrdiff_t)k->bytes.len);
    return true;
}

void memtable_unkeep(memtable *m, buf *bytes)
{
    struct kept *k = m->kept;
    assert(k != NULL && k->entries == memtable_entries(m)); /* none points into it */
    *bytes = k->bytes;
    m->kept = k->next; /* its node stays in the arena */
    add_kept_len(m, -(ptrdiff_t)bytes->len);
}

/* The one rule of references: an entry points at its value instead of
 * holding a copy when the value is MEMTABLE_REF_MIN bytes or more and lies
 * in the newest buffer m keeps. Those bytes are freed only with m
 * (memtable_unref), so they outlive every entry, iterator and get. */
static bool refers(const memtable *m, const void *val, size_t vlen)
{
    if (vlen < MEMTABLE_REF_MIN || m->kept == NULL)
        return false;
    uintptr_t lo = (uintptr_t)m->kept->bytes.data, v = (uintptr_t)val;
    size_t len = m->kept->bytes.len;
    return v >= lo && v - lo <= len && vlen <= len - (v - lo);
}

bool memtable_add(memtable *m, uint64_t seq, enum value_type type, const void *key, size_t klen,
                  const void *val, size_t vlen)
{
    /* Lengths the entry format cannot carry fail like an allocation would
     * (batches never produce them). */
    if (klen > UINT32_MAX - IKEY_TRAILER || vlen > UINT32_MAX)
        return false;
    bool ref = refers(m, val, vlen);
    uint32_t ilen = (uint32_t)klen + IKEY_TRAILER;
    uint64_t vtag = (uint64_t)vlen << 1 | ref;
    size_t stored = ref ? sizeof(const char *) : vlen;
    size_t n = (size_t)varint_length(ilen) + ilen + (size_t)varint_length(vtag) + stored;
    char *e = skiplist_alloc(&m->list, n);
    if (e == NULL)
        return false;
    char *p = encode_varint32(e, ilen);
    if (klen)
        memcpy(p, key, klen);
    encode_fixed64(p + klen, pack_seq_type(seq, type));
    p = encode_varint64(p + ilen, vtag);
    if (ref)
        memcpy(p, &val, sizeof(val));
    else if (vlen)
        memcpy(p, val, vlen);
    filter_add(m, key, klen);
    skiplist_insert(&m->list, e);
    atomic_store_explicit(&m->entries, atomic_load_explicit(&m->entries, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (type == TYPE_DELETION)
        atomic_store_explicit(&m->deletions,
                              atomic_load_explicit(&m->deletions, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    return true;
}

/* The value that follows an entry's internal key. */
static const char *entry_value(const char *ikey, size_t ilen, size_t *vlen)
{
    const char *p = ikey + ilen;
    uint64_t vtag;
    p = decode_varint64(p, p + VARINT64_MAX, &vtag);
    assert(p != NULL); /* we wrote it */
    *vlen = (size_t)(vtag >> 1);
    if (!(vtag & 1))
        return p;
    const char *kept;
    memcpy(&kept, p, sizeof(kept));
    return kept;
}

/* Lookup keys up to this size are built on the stack: no malloc per get. */
#define LOOKUP_STACK 256

/* MEMTABLE_NOMEM is also returned when a lookup key longer than
 * LOOKUP_STACK cannot be allocated. */
enum memtable_get_result memtable_get(memtable *m, const void *key, size_t klen, uint64_t seq,
                                      char **val, size_t *vlen)
{
    if (!filter_may_hold(m, key, klen))
        return MEMTABLE_ABSENT;
    char stack[LOOKUP_STACK];
    char *lk = stack;
    size_t n = klen + IKEY_TRAILER;
    if (n > sizeof(stack) && (lk = lsm_malloc(n)) == NULL)
        return MEMTABLE_NOMEM;
    if (klen)
        memcpy(lk, key, klen);
    encode_fixed64(lk + klen, pack_seq_type(seq > MAX_SEQUENCE ? MAX_SEQUENCE : seq, TYPE_SEEK));
    skiplist_pos pos;
    skiplist_pos_init(&pos, &m->list);
    skiplist_pos_seek(&pos, lk, n);
    if (lk != stack)
        free(lk);
    if (!skiplist_pos_valid(&pos))
        return MEMTABLE_ABSENT;

    size_t ilen;
    const char *ik = skiplist_entry_key(skiplist_pos_entry(&pos), &ilen);
    if (keycmp_bytes(ik, ikey_user_len(ilen), key, klen) != 0)
        return MEMTABLE_ABSENT;
    if ((ikey_tag(ik, ilen) & 0xff) == TYPE_DELETION)
        return MEMTABLE_DELETED;
    size_t len;
    const char *v = entry_value(ik, ilen, &len);
    char *copy = lsm_malloc(len ? len : 1);
    if (copy == NULL)
        return MEMTABLE_NOMEM;
    if (len)
        memcpy(copy, v, len);
    *val = copy;
    *vlen = len;
    return MEMTABLE_FOUND;
}

size_t memtable_memory_usage(const memtable *m)
{
    return arena_memory_usage(&m->arena) + atomic_load_explicit(&m->kept_len, memory_order_relaxed);
}

size_t memtable_kept_bytes(const memtable *m)
{
    return atomic_load_explicit(&m->kept_len, memory_order_relaxed);
}

bool memtable_mostly_kept(const memtable *m)
{
    size_t used = memtable_memory_usage(m);
    return used > 0 && 2 * memtable_kept_bytes(m) >= used;
}

uint64_t memtable_deletions(const memtable *m)
{
    return atomic_load_explicit(&m->deletions, memory_order_relaxed);
}

uint64_t memtable_entries(const memtable *m)
{
    return atomic_load_explicit(&m->entries, memory_order_relaxed);
}

/* ------------------------------------------------------------ iterator */

typedef struct mem_iter {
    iter base;
    memtable *mem; /* a reference, dropped by free */
    skiplist_pos pos;
} mem_iter;

static bool mi_valid(const iter *it)
{
    return skiplist_pos_valid(&((const mem_iter *)it)->pos);
}
static void mi_seek_first(iter *it)
{
    skiplist_pos_seek_first(&((mem_iter *)it)->pos);
}
static void mi_seek_last(iter *it)
{
    skiplist_pos_seek_last(&((mem_iter *)it)->pos);
}
static void mi_seek(iter *it, const char *key, size_t n)
{
    skiplist_pos_seek(&((mem_iter *)it)->pos, key, n);
}
static void mi_next(iter *it)
{
    skiplist_pos_next(&((mem_iter *)it)->pos);
}
static void mi_prev(iter *it)
{
    skiplist_pos_prev(&((mem_iter *)it)->pos);
}
static const char *mi_key(const iter *it, size_t *n)
{
    return skiplist_entry_key(skiplist_pos_entry(&((const mem_iter *)it)->pos), n);
}
static const char *mi_value(const iter *it, size_t *n)
{
    size_t ilen;
    const char *ik = mi_key(it, &ilen);
    return entry_value(ik, ilen, n);
}
static lsm_status *mi_status(const iter *it)
{
    (void)it;
    return NULL; /* memory cannot fail a read */
}
static void mi_free(iter *it)
{
    mem_iter *mi = (mem_iter *)it;
    memtable_unref(mi->mem);
    free(mi);
}

static const struct iter_ops mem_iter_ops = {
    .valid = mi_valid,
    .seek_first = mi_seek_first,
    .seek_last = mi_seek_last,
    .seek = mi_seek,
    .next = mi_next,
    .prev = mi_prev,
    .key = mi_key,
    .value = mi_value,
    .status = mi_status,
    .free = mi_free,
};

/* Never NULL: without memory it is an empty iterator whose status says so. */
iter *memtable_iter_new(memtable *m)
{
    mem_iter *mi = lsm_malloc(sizeof(*mi));
    if (mi == NULL)
        return iter_new_empty(status_new(LSM_NO_MEMORY, "out of memory (memtable iterator)"));
    mi->base.ops = &mem_iter_ops;
    memtable_ref(m);
    mi->mem = m;
    skiplist_pos_init(&mi->pos, &m->list);
    return &mi->base;
}
