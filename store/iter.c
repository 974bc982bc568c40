/* iter.c — the empty and the merging iterator; see iter.h. */
#include "iter.h"
#include "lsm_malloc.h"

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
    return status_new(LSM_NO_MEMORY, "out of memory (iterator)");
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
    empty_iter *e = lsm_malloc(sizeof(*e));
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
 * the current one sits at its first entry after the current entry in that
 * order; backward, at its last entry before it. Changing direction re-seeks
 * the others to restore that, as LevelDB's merging iterator does.
 *
 * The children are the leaves of a tournament tree ("loser tree") on
 * (key, index) in the current direction, exhausted children ranking last:
 * each inner node keeps the loser of the match played there and node 0 the
 * overall winner, whose child yields the current entry. A step moves the
 * winner's child and replays only the matches on its path to the root:
 * ceil(log2 n) key comparisons, against n for a linear scan. Each child's
 * current key is cached beside it (the pointer stays valid until that
 * child moves), so matches make no indirect calls to fetch keys. */
enum direction { FORWARD, REVERSE };

typedef struct merge_child {
    iter *it;
    bool valid;      /* cached iter_valid(it) */
    const char *key; /* cached iter_key(it) while valid */
    size_t klen;
} merge_child;

typedef struct merging_iter {
    iter base;
    iter_cmp_fn cmp;
    enum direction dir;
    int n;
    int *tree; /* [0]: the winner; [1..n): losers; then n ints of scratch */
    merge_child child[];
} merging_iter;

/* Whether child a's entry comes before child b's in the current direction;
 * exhausted children come after every other. */
static inline bool before(const merging_iter *m, int a, int b)
{
    const merge_child *x = &m->child[a], *y = &m->child[b];
    if (!x->valid || !y->valid)
        return x->valid;
    int r = m->cmp(x->key, x->klen, y->key, y->klen);
    if (r == 0)
        r = a - b; /* ties: the lower index first going forward */
    return m->dir == FORWARD ? r < 0 : r > 0;
}

/* Re-reads child i's position. */
static inline void load_child(merging_iter *m, int i)
{
    merge_child *c = &m->child[i];
    c->valid = iter_valid(c->it);
    if (c->valid)
        c->key = iter_key(c->it, &c->klen);
}

/* Leaves are nodes n..2n-1 (child i at n+i), so node k's parent is k/2
 * for any n. Replays the matches from child i's leaf to the root. */
static void replay(merging_iter *m, int i)
{
    int winner = i;
    for (int node = (i + m->n) / 2; node > 0; node /= 2) {
        if (before(m, m->tree[node], winner)) {
            int t = m->tree[node];
            m->tree[node] = winner;
            winner = t;
        }
    }
    m->tree[0] = winner;
}

/* Re-reads every child and plays the whole tournament (after all moved). */
static void rebuild(merging_iter *m)
{
    int n = m->n, *win = m->tree + n; /* win[k]: the winner below inner node k */
    for (int i = 0; i < n; i++)
        load_child(m, i);
    for (int k = n - 1; k >= 1; k--) {
        int l = 2 * k < n ? win[2 * k] : 2 * k - n;
        int r = 2 * k + 1 < n ? win[2 * k + 1] : 2 * k + 1 - n;
        bool lw = !before(m, r, l);
        win[k] = lw ? l : r;
        m->tree[k] = lw ? r : l;
    }
    m->tree[0] = win[1];
}

static inline int current_child(const merging_iter *m)
{
    assert(m->child[m->tree[0]].valid);
    return m->tree[0];
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
static void seek_after_current(merging_iter *m, int i, int cur, const char *key, size_t n)
{
    iter *c = m->child[i].it;
    iter_seek(c, key, n);
    if (i < cur)
        skip_equal(m, c, key, n);
}

static void switch_to_forward(merging_iter *m)
{
    int cur = current_child(m);
    const char *key = m->child[cur].key;
    size_t n = m->child[cur].klen;
    for (int i = 0; i < m->n; i++)
        if (i != cur)
            seek_after_current(m, i, cur, key, n);
    m->dir = FORWARD;
    rebuild(m); /* cur comes first again: the others sort after it */
}

static void switch_to_reverse(merging_iter *m)
{
    int cur = current_child(m);
    const char *key = m->child[cur].key;
    size_t n = m->child[cur].klen;
    for (int i = 0; i < m->n; i++) {
        if (i == cur)
            continue;
        iter *c = m->child[i].it;
        seek_after_current(m, i, cur, key, n);
        if (iter_valid(c))
            iter_prev(c);
        else
            iter_seek_last(c);
    }
    m->dir = REVERSE;
    rebuild(m);
}

static bool mg_valid(const iter *it)
{
    const merging_iter *m = (const merging_iter *)it;
    return m->child[m->tree[0]].valid;
}

static void mg_seek_first(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_seek_first(m->child[i].it);
    m->dir = FORWARD;
    rebuild(m);
}

static void mg_seek_last(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_seek_last(m->child[i].it);
    m->dir = REVERSE;
    rebuild(m);
}

static void mg_seek(iter *it, const char *key, size_t n)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_seek(m->child[i].it, key, n);
    m->dir = FORWARD;
    rebuild(m);
}

static void mg_next(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    if (m->dir != FORWARD)
        switch_to_forward(m);
    int cur = current_child(m);
    iter_next(m->child[cur].it);
    load_child(m, cur);
    replay(m, cur);
}

static void mg_prev(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    if (m->dir != REVERSE)
        switch_to_reverse(m);
    int cur = current_child(m);
    iter_prev(m->child[cur].it);
    load_child(m, cur);
    replay(m, cur);
}

static const char *mg_key(const iter *it, size_t *n)
{
    const merging_iter *m = (const merging_iter *)it;
    const merge_child *c = &m->child[current_child(m)];
    *n = c->klen;
    return c->key;
}

static const char *mg_value(const iter *it, size_t *n)
{
    const merging_iter *m = (const merging_iter *)it;
    return iter_value(m->child[current_child(m)].it, n);
}

/* The error of the lowest-index child that has one. */
static lsm_status *mg_status(const iter *it)
{
    const merging_iter *m = (const merging_iter *)it;
    for (int i = 0; i < m->n; i++) {
        lsm_status *s = iter_status(m->child[i].it);
        if (s != NULL)
            return s;
    }
    return NULL;
}

static void mg_free(iter *it)
{
    merging_iter *m = (merging_iter *)it;
    for (int i = 0; i < m->n; i++)
        iter_free(m->child[i].it);
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
    size_t head = sizeof(merging_iter) + (size_t)n * sizeof(merge_child);
    merging_iter *m = lsm_malloc(head + 2 * (size_t)n * sizeof(int));
    if (m == NULL) {
        for (int i = 0; i < n; i++)
            iter_free(children[i]);
        return iter_new_empty(status_new(LSM_NO_MEMORY, "out of memory (merging iterator)"));
    }
    m->base.ops = &merging_ops;
    m->cmp = cmp;
    m->dir = FORWARD;
    m->n = n;
    m->tree = (int *)(void *)((char *)m + head);
    for (int i = 0; i < n; i++) {
        m->child[i].it = children[i];
        m->child[i].valid = false;
        m->child[i].key = NULL;
        m->child[i].klen = 0;
    }
    for (int k = 0; k < n; k++)
        m->tree[k] = k; /* any permutation: nothing is valid yet */
    return &m->base;
}
