/* memtable.c — internal keys in an arena skiplist; see memtable.h.
 *
 * Entry format (one arena allocation together with its skiplist node):
 *   varint32 ikey_len | internal key | varint32 vlen | value
 */
#include "memtable.h"

#include "arena.h"
#include "skiplist.h"
#include "status.h"

#include <stdatomic.h>
#include <stdlib.h>

struct memtable {
    arena arena;              /* allocation: writer only; usage: read by anyone */
    skiplist list;            /* one writer (caller-serialised), lock-free readers */
    _Atomic uint64_t entries; /* written by the writer, read by anyone */
    atomic_int refs;
};

static int ikey_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    return ikey_compare(a, alen, b, blen);
}

memtable *memtable_new(void)
{
    memtable *m = malloc(sizeof(*m));
    if (m == NULL)
        return NULL;
    arena_init(&m->arena, 0);
    if (!skiplist_init(&m->list, &m->arena, ikey_cmp)) {
        arena_destroy(&m->arena);
        free(m);
        return NULL;
    }
    atomic_init(&m->entries, 0);
    atomic_init(&m->refs, 1);
    return m;
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
        arena_destroy(&m->arena);
        free(m);
    }
}

bool memtable_add(memtable *m, uint64_t seq, enum value_type type, const void *key, size_t klen,
                  const void *val, size_t vlen)
{
    /* Lengths the entry format cannot carry fail like an allocation would
     * (batches never produce them). */
    if (klen > UINT32_MAX - IKEY_TRAILER || vlen > UINT32_MAX)
        return false;
    uint32_t ilen = (uint32_t)klen + IKEY_TRAILER;
    size_t n = (size_t)varint_length(ilen) + ilen + (size_t)varint_length(vlen) + vlen;
    char *e = skiplist_alloc(&m->list, n);
    if (e == NULL)
        return false;
    char *p = encode_varint32(e, ilen);
    if (klen)
        memcpy(p, key, klen);
    encode_fixed64(p + klen, pack_seq_type(seq, type));
    p = encode_varint32(p + ilen, (uint32_t)vlen);
    if (vlen)
        memcpy(p, val, vlen);
    skiplist_insert(&m->list, e);
    atomic_store_explicit(&m->entries, atomic_load_explicit(&m->entries, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return true;
}

/* The value that follows an entry's internal key. */
static const char *entry_value(const char *ikey, size_t ilen, size_t *vlen)
{
    const char *p = ikey + ilen;
    uint32_t n;
    p = decode_varint32(p, p + VARINT32_MAX, &n);
    assert(p != NULL); /* we wrote it */
    *vlen = n;
    return p;
}

/* Lookup keys up to this size are built on the stack: no malloc per get. */
#define LOOKUP_STACK 256

/* MEMTABLE_NOMEM is also returned when a lookup key longer than
 * LOOKUP_STACK cannot be allocated. */
enum memtable_get_result memtable_get(memtable *m, const void *key, size_t klen, uint64_t seq,
                                      char **val, size_t *vlen)
{
    char stack[LOOKUP_STACK];
    char *lk = stack;
    size_t n = klen + IKEY_TRAILER;
    if (n > sizeof(stack) && (lk = malloc(n)) == NULL)
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
    if (bytes_compare(ik, ikey_user_len(ilen), key, klen) != 0)
        return MEMTABLE_ABSENT;
    if ((ikey_tag(ik, ilen) & 0xff) == TYPE_DELETION)
        return MEMTABLE_DELETED;
    size_t len;
    const char *v = entry_value(ik, ilen, &len);
    char *copy = malloc(len ? len : 1);
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
    return arena_memory_usage(&m->arena);
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
    mem_iter *mi = malloc(sizeof(*mi));
    if (mi == NULL)
        return iter_new_empty(status_new(LSM_IO_ERROR, "out of memory (memtable iterator)"));
    mi->base.ops = &mem_iter_ops;
    memtable_ref(m);
    mi->mem = m;
    skiplist_pos_init(&mi->pos, &m->list);
    return &mi->base;
}
