/*
 * iter.h — the internal iterator interface, over internal keys.
 *
 * Memtables, table blocks, tables, levels and the merge of all of them are
 * iterators of this one shape, so they nest (a merging iterator merges any
 * set of them). key() is an internal key (see dbformat.h) except where an
 * iterator's header says it yields plain keys (block/index iterators).
 * key()/value() pointers stay valid until the iterator moves or is freed.
 * An iterator that meets an error becomes invalid and reports it in status().
 */
#ifndef LSM_ITER_H
#define LSM_ITER_H

#include "lsm.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct iter iter;
struct iter_ops {
    bool (*valid)(const iter *it);
    void (*seek_first)(iter *it);
    void (*seek_last)(iter *it);
    void (*seek)(iter *it, const char *key, size_t n); /* first entry >= key */
    void (*next)(iter *it);                            /* REQUIRES: valid */
    void (*prev)(iter *it);                            /* REQUIRES: valid */
    const char *(*key)(const iter *it, size_t *n);     /* REQUIRES: valid */
    const char *(*value)(const iter *it, size_t *n);   /* REQUIRES: valid */
    /* A copy of the first error met (caller frees), or NULL. */
    lsm_status *(*status)(const iter *it);
    void (*free)(iter *it);
};
struct iter {
    const struct iter_ops *ops;
};

static inline bool iter_valid(const iter *it)
{
    return it->ops->valid(it);
}
static inline void iter_seek_first(iter *it)
{
    it->ops->seek_first(it);
}
static inline void iter_seek_last(iter *it)
{
    it->ops->seek_last(it);
}
static inline void iter_seek(iter *it, const char *k, size_t n)
{
    it->ops->seek(it, k, n);
}
static inline void iter_next(iter *it)
{
    it->ops->next(it);
}
static inline void iter_prev(iter *it)
{
    it->ops->prev(it);
}
static inline const char *iter_key(const iter *it, size_t *n)
{
    return it->ops->key(it, n);
}
static inline const char *iter_value(const iter *it, size_t *n)
{
    return it->ops->value(it, n);
}
static inline lsm_status *iter_status(const iter *it)
{
    return it->ops->status(it);
}
static inline void iter_free(iter *it)
{
    if (it)
        it->ops->free(it);
}

/* An iterator with no entries and the given status (owned; may be NULL). */
iter *iter_new_empty(lsm_status *st);

/* Merges `n` child iterators (ownership taken; the array is copied) over the
 * comparison `cmp` into one sorted stream; duplicates are all yielded, the
 * child with the lower index first. Works in both directions. */
typedef int (*iter_cmp_fn)(const char *a, size_t alen, const char *b, size_t blen);
iter *iter_new_merging(iter **children, int n, iter_cmp_fn cmp);

#endif
