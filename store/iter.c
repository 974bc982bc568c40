/* iter.c — the empty and the merging iterator; see iter.h. */
#include "iter.h"

#include "status.h"

#include <assert.h>
#include <stdlib.h>

/* --------------------------------------------------------------- empty */

typedef struct empty_iter {
    iter base;
    lsm_status *st; /* owned; NULL for a plain empty iterator */
} empty_iter;

static bool ei_valid(const iter *it)
{
    (void)it;
    return false;
}
static void ei_move(iter *it)
{
    (void)it;
}
static void ei_seek(iter *it, const char *key, size_t n)
{
    (void)it;
    (void)key;
    (void)n;
}
static void ei_step(iter *it)
{
    (void)it;
    assert(!"an empty iterator is never valid");
}
static const char *ei_bytes(const iter *it, size_t *n)
{
    (void)it;
    assert(!"an empty iterator is never valid");
    *n = 0;
    return "";
}
static lsm_status *ei_status(const iter *it)
{
    return status_copy(((const empty_iter *)it)->st);
}
static void ei_free(iter *it)
{
    empty_iter *e = (empty_iter *)it;
    lsm_status_free(e->st);
    free(e);
}

static const struct iter_ops empty_ops = {
    .valid = ei_valid,
    .seek_first = ei_move,
    .seek_last = ei_move,
    .seek = ei_seek,
    .next = ei_step,
    .prev = ei_step,
    .key = ei_bytes,
    .value = ei_bytes,
    .status = ei_status,
    .free = ei_free,
};

/* When even an empty iterator cannot be allocated: a shared immutable one
 * that reports running out of memory and is never freed, so constructors
 * here never return NULL. */
static lsm_status *oom_status(const iter *it)
{
    (void)it;
    return status_new(LSM_IO_ERROR, "out of memory (iterator)");
}
static void oom_free(iter *it)
{
    (void)it;
}
static const struct iter_ops oom_ops = {
    .valid = ei_valid,
    .seek_first = ei_move,
    .seek_last = ei_move,
    .seek = ei_seek,
    .next = ei_step,
    .prev = ei_step,
    .key = ei_bytes,
    .value = ei_bytes,
    .status = oom_status,
    .free = oom_free,
};
static const iter oom_iter = {&oom_ops};

iter *iter_new_empty(lsm_status *st)
{
    empty_iter *e = malloc(sizeof(*e));
    if (e == NULL) {
        lsm_status_free(st);
        return (iter *)(uintptr_t)&oom_iter; /* its ops never write to it */
    }
    e->base.ops = &empty_ops;
    e->st = st;
    return &e->base;
}

/* ------------------------------------------------------------- merging */

/* Order of the merged stream: by key, then child index, then position in
 * the child; backward is the exact reverse. Forward, every child other than
 * `cur` sits at its first entry after cur's in that order; backward, at its
 * last entry before it. Changing direction re-seeks the others to restore
 * that, as LevelDB's merging iterator does. */
enum direction { FORWARD, REVERSE };

typedef struct merging_iter {
    iter base;
    iter_cmp_fn cmp;
    int cur; /* child yielding the current entry; -1: not valid */
    enum direction dir;
    int n;
    iter *child[];
} merging_iter;

static int child_cmp(const merging_iter *m, int a, int b)
{
    size_t an, bn;
    const char *ak = iter_key(m->child[a], &an);
    const char *bk = iter_key(m->child[b], &bn);
    return m->cmp(ak, an, bk, bn);
}

/* Ties go to the lower index. */
static void find_smallest(merging_iter *m)
{
    int best = -1;
    for (int i = 0; i < m->n; i++)
        if (iter_valid(m->child[i]) && (best < 0 || child_cmp(m, i, best) < 0))
            best = i;
    m->cur = best;
}

/* Ties go to the higher index. */
static void find_largest(merging_iter *m)
{
    int best = -1;
    for (int i = m->n - 1; i >= 0; i--)
        if (iter_valid(m->child[i]) && (best < 0 || child_cmp(m, i, best) > 0))
            best = i;
    m->cur = best;
}

/* Moves c past every entry equal to key. */
static void skip_equal(const merging_iter *m, iter *c, const char *key, size_t n)
{
    while (iter_valid(c)) {
        size_t cn;
        const char *ck = iter_key(c, &cn);
        if (m->cmp(ck, cn, key, n) != 0)
            break;
        iter_next(c);
    }
}

/* Seeks child i to its first entry after (key, cur) in merged order:
 * children before cur have already yielded their entries equal to key. */
static void seek_after_current(merging_iter *m, int i, const char *key, size_t n)
{
    iter *c = m->child[i];
    iter_seek(c, key, n);
    if (i < m->cur)
        skip_equal(m, c, key, n);
}

static void switch_to_forward(merging_iter *m)
{
    size_t n;
    const char *key = iter_key(m->child[m->cur], &n);
    for (int i = 0; i < m->n; i++)
        if (i != m->cur)
            seek_after_current(m, i, key, n);
    m->dir = FORWARD;
}

static void switch_to_reverse(merging_iter *m)
{
    size_t n;
    const char *key = iter_key(m->child[m->cur], &n);
    for (int i = 0; i < m->n; i++) {
        if (i == m->cur)
            continue;
        iter *c = m->child[i];
        seek_after_current(m, i, key, n);
        if (iter_valid(c))
            iter_prev(c);
        else
            iter_seek_last(c);
    }
    m->dir = REVERSE;
}

static bool mg_valid(const iter *it)
{
    return ((const merging_iter *)it)->cur >= 0;
}

static void mg_seek_first(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_seek_first(m->child[i]);
    m->dir = FORWARD;
    find_smallest(m);
}

static void mg_seek_last(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_seek_last(m->child[i]);
    m->dir = REVERSE;
    find_largest(m);
}

static void mg_seek(iter *it, const char *key, size_t n)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_seek(m->child[i], key, n);
    m->dir = FORWARD;
    find_smallest(m);
}

static void mg_next(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    assert(m->cur >= 0);
    if (m->dir != FORWARD)
        switch_to_forward(m);
    iter_next(m->child[m->cur]);
    find_smallest(m);
}

static void mg_prev(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    assert(m->cur >= 0);
    if (m->dir != REVERSE)
        switch_to_reverse(m);
    iter_prev(m->child[m->cur]);
    find_largest(m);
}

static const char *mg_key(const iter *it, size_t *n)
{
    const merging_iter *m = (const merging_iter *)it;
    assert(m->cur >= 0);
    return iter_key(m->child[m->cur], n);
}

static const char *mg_value(const iter *it, size_t *n)
{
    const merging_iter *m = (const merging_iter *)it;
    assert(m->cur >= 0);
    return iter_value(m->child[m->cur], n);
}

/* The error of the lowest-index child that has one. */
static lsm_status *mg_status(const iter *it)
{
    const merging_iter *m = (const merging_iter *)it;
    for (int i = 0; i < m->n; i++) {
        lsm_status *s = iter_status(m->child[i]);
        if (s != NULL)
            return s;
    }
    return NULL;
}

static void mg_free(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_free(m->child[i]);
    free(m);
}

static const struct iter_ops merging_ops = {
    .valid = mg_valid,
    .seek_first = mg_seek_first,
    .seek_last = mg_seek_last,
    .seek = mg_seek,
    .next = mg_next,
    .prev = mg_prev,
    .key = mg_key,
    .value = mg_value,
    .status = mg_status,
    .free = mg_free,
};

/* Never NULL: out of memory frees the children and yields an empty
 * iterator whose status says so. */
iter *iter_new_merging(iter **children, int n, iter_cmp_fn cmp)
{
    assert(n >= 0);
    if (n == 0)
        return iter_new_empty(NULL);
    if (n == 1)
        return children[0];
    merging_iter *m = malloc(sizeof(*m) + (size_t)n * sizeof(iter *));
    if (m == NULL) {
        for (int i = 0; i < n; i++)
            iter_free(children[i]);
        return iter_new_empty(status_new(LSM_IO_ERROR, "out of memory (merging iterator)"));
    }
    m->base.ops = &merging_ops;
    m->cmp = cmp;
    m->cur = -1;
    m->dir = FORWARD;
    m->n = n;
    for (int i = 0; i < n; i++)
        m->child[i] = children[i];
    return &m->base;
}
