/* skiplist.c — arena skiplist with lock-free readers; see skiplist.h. */
#include "skiplist.h"

#include <assert.h>
#include <stdalign.h>

typedef _Atomic(sl_node *) sl_link;

/* A node's memory: [link h-1] ... [link 1] [link 0] [back] [entry bytes].
 * A node pointer addresses link 0, so the entry follows at a fixed offset
 * and link i sits i slots below: the height need not be stored, which
 * keeps each entry's overhead to its links. `back` points at the node
 * before it on level 0 (NULL for the first), so stepping backward costs
 * one load instead of a search from the head. */
struct sl_node {
    sl_link link0;
};

#define NODE_HEADER (2 * sizeof(sl_link)) /* link 0 and back */

static inline sl_link *link_at(const sl_node *x, int level)
{
    return (sl_link *)(uintptr_t)x - level;
}

static inline sl_link *back_of(const sl_node *x)
{
    return (sl_link *)(uintptr_t)x + 1;
}

static inline sl_node *next_of(const sl_node *x, int level)
{
    return atomic_load_explicit(link_at(x, level), memory_order_acquire);
}

static inline char *entry_of(const sl_node *x)
{
    return (char *)(uintptr_t)x + NODE_HEADER;
}

static inline sl_node *node_of(char *entry)
{
    return (sl_node *)(void *)(entry - NODE_HEADER);
}

/* Compares x's key with key. */
static inline int node_cmp(const skiplist *sl, const sl_node *x, const char *key, size_t n)
{
    size_t xn;
    const char *xk = skiplist_entry_key(entry_of(x), &xn);
    return sl->cmp(xk, xn, key, n);
}

static inline int list_height(const skiplist *sl)
{
    /* Relaxed: a stale height only makes a search start lower, and a new
     * one may show head links still NULL, which read as "end of level". */
    return atomic_load_explicit(&sl->height, memory_order_relaxed);
}

/* Memory for a node of height h with `extra` entry bytes; NULL if OOM. */
static sl_node *node_alloc(skiplist *sl, int h, size_t extra)
{
    size_t links = (size_t)h * sizeof(sl_link) + sizeof(sl_link); /* + back */
    if (extra > SIZE_MAX - links)
        return NULL;
    char *base = arena_alloc_aligned(sl->arena, links + extra, alignof(sl_link));
    if (base == NULL)
        return NULL;
    return (sl_node *)(void *)(base + (size_t)h * sizeof(sl_link) - sizeof(sl_link));
}

bool skiplist_init(skiplist *sl, arena *a, iter_cmp_fn cmp)
{
    sl->cmp = cmp;
    sl->arena = a;
    sl->rnd = UINT64_C(0x9e3779b97f4a7c15);
    atomic_init(&sl->height, 1);
    sl->head = node_alloc(sl, SKIPLIST_MAX_HEIGHT, 0);
    if (sl->head == NULL)
        return false;
    for (int i = 0; i < SKIPLIST_MAX_HEIGHT; i++)
        atomic_init(link_at(sl->head, i), NULL);
    atomic_init(back_of(sl->head), NULL);
    for (int i = 0; i < SKIPLIST_MAX_HEIGHT; i++)
        sl->pred[i] = sl->head;
    sl->last = sl->head;
    sl->last_height = SKIPLIST_MAX_HEIGHT;
    sl->near = true;
    return true;
}

/* xorshift64*: only the writer draws, so the state needs no atomics. */
static uint32_t next_random(skiplist *sl)
{
    uint64_t x = sl->rnd;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    sl->rnd = x;
    return (uint32_t)((x * UINT64_C(0x2545f4914f6cdd1d)) >> 32);
}

static int random_height(skiplist *sl)
{
    int h = 1;
    while (h < SKIPLIST_MAX_HEIGHT && next_random(sl) % SKIPLIST_BRANCHING == 0)
        h++;
    return h;
}

char *skiplist_alloc(skiplist *sl, size_t n)
{
    assert(n > 0);
    int h = random_height(sl);
    sl_node *x = node_alloc(sl, h, n);
    if (x == NULL)
        return NULL;
    /* Until insert links it, link 0 is unused: it carries the height there,
     * so the node needs no height field. */
    atomic_store_explicit(link_at(x, 0), (sl_node *)(uintptr_t)h, memory_order_relaxed);
    return entry_of(x);
}

/* First node with key >= key (NULL if none), searching from node x (before
 * key) at `level` down; prev[], unless NULL, gets per level from `level`
 * down the last node before key. gt, unless NULL, is a node known to lie
 * after key: a walk that meets it stops without comparing (nor compares a
 * node again one level down). */
static sl_node *find_ge_from(const skiplist *sl, const sl_node *x, int level, const sl_node *gt,
                             const char *key, size_t n, sl_node **prev)
{
    for (;;) {
        sl_node *next = next_of(x, level);
        if (next != NULL && next != gt && node_cmp(sl, next, key, n) < 0) {
            x = next;
            continue;
        }
        gt = next;
        if (prev != NULL)
            prev[level] = (sl_node *)(uintptr_t)x;
        if (level == 0)
            return next;
        level--;
    }
}

static sl_node *find_ge(const skiplist *sl, const char *key, size_t n, sl_node **prev)
{
    return find_ge_from(sl, sl->head, list_height(sl) - 1, NULL, key, n, prev);
}

/* The last node of `level` at or before the last insert (head if none). */
static inline sl_node *splice_at(const skiplist *sl, int level)
{
    return level < sl->last_height ? sl->last : sl->pred[level];
}

/* Where a finger search for key starts: the lowest level whose splice
 * node lies before key and its successor on that level after it (`level`,
 * the list height if none). Every level above a bracketing one brackets
 * too (its node is at or before the lower one's, its successor at or
 * after), so the climb stops at the first. The climb's comparisons are not
 * made again: `from` is the furthest node known before key on the level
 * below (where the descent starts), `gt` a node known after it (where a
 * walk stops without comparing). A node met again one level up is not
 * compared again. */
typedef struct finger {
    int level;
    bool after;          /* key follows the last insert: splice_at, else pred */
    const sl_node *from; /* before key, on level `level` - 1 */
    const sl_node *gt;   /* after key, or NULL */
} finger;

static finger splice_level(const skiplist *sl, int height, const char *key, size_t n)
{
    finger f = {.after = sl->last == sl->head || node_cmp(sl, sl->last, key, n) < 0,
                .from = sl->head};
    const sl_node *seen = sl->last; /* known to lie on the wrong side */
    for (f.level = 0; f.level < height; f.level++) {
        int level = f.level;
        if (f.after) {
            const sl_node *s = next_of(splice_at(sl, level), level);
            if (s == NULL)
                return f;
            if (s != seen && node_cmp(sl, s, key, n) > 0) {
                f.gt = s;
                return f;
            }
            f.from = seen = s; /* before key */
        } else {
            const sl_node *s = sl->pred[level];
            if (s == sl->head || (s != seen && node_cmp(sl, s, key, n) < 0)) {
                f.from = s;
                return f;
            }
            f.gt = seen = s; /* after key */
        }
    }
    if (!f.after)
        f.from = sl->head;
    return f;
}

/* A key whose search path joins the last insert's at this level or below
 * is near it: the next insert searches from the splice. */
#define NEAR_LEVEL 2

/* prev[] for key on every level below the list height: by a finger search
 * from the last insert's path while keys land near each other, else from
 * the head; sl->near says which the next insert takes. */
static void find_prev(skiplist *sl, const char *key, size_t n, sl_node **prev)
{
    int height = list_height(sl);
    if (!sl->near) {
        find_ge(sl, key, n, prev);
        int level = height - 1 < NEAR_LEVEL ? height - 1 : NEAR_LEVEL;
        sl->near = prev[level] == splice_at(sl, level) || prev[level] == sl->pred[level];
    } else {
        finger f = splice_level(sl, height, key, n);
        for (int i = f.level; i < height; i++)
            prev[i] = f.after ? splice_at(sl, i) : sl->pred[i];
        if (f.level > 0)
            find_ge_from(sl, f.from, f.level - 1, f.gt, key, n, prev);
        sl->near = f.level <= NEAR_LEVEL;
    }
    /* The splice's own check; also "no entry with an equal key". */
    assert(next_of(prev[0], 0) == NULL || node_cmp(sl, next_of(prev[0], 0), key, n) > 0);
}

/* Last node, or the head if the list is empty. */
static const sl_node *find_last(const skiplist *sl)
{
    const sl_node *x = sl->head;
    int level = list_height(sl) - 1;
    for (;;) {
        const sl_node *next = next_of(x, level);
        if (next != NULL) {
            x = next;
            continue;
        }
        if (level == 0)
            return x;
        level--;
    }
}

void skiplist_insert(skiplist *sl, char *entry)
{
    sl_node *x = node_of(entry);
    int h = (int)(uintptr_t)atomic_load_explicit(link_at(x, 0), memory_order_relaxed);
    assert(h >= 1 && h <= SKIPLIST_MAX_HEIGHT);
    size_t n;
    const char *key = skiplist_entry_key(entry, &n);
    sl_node *prev[SKIPLIST_MAX_HEIGHT];
    find_prev(sl, key, n, prev);
    int height = list_height(sl);
    if (h > height) {
        for (int i = height; i < h; i++)
            prev[i] = sl->head;
        atomic_store_explicit(&sl->height, h, memory_order_relaxed);
    }
    /* Bottom up: a reader reaching x through level i then walks x's links
     * below i, which the release store of level i has published. x's back
     * link is set before x is published; the successor's back link moves
     * to x only after, so a reader walking backward either still skips x
     * (as if it came later) or meets it complete. */
    sl_node *succ0 = atomic_load_explicit(link_at(prev[0], 0), memory_order_relaxed);
    atomic_store_explicit(back_of(x), prev[0] == sl->head ? NULL : prev[0], memory_order_relaxed);
    for (int i = 0; i < h; i++) {
        sl_node *succ = atomic_load_explicit(link_at(prev[i], i), memory_order_relaxed);
        atomic_store_explicit(link_at(x, i), succ, memory_order_relaxed);
        atomic_store_explicit(link_at(prev[i], i), x, memory_order_release);
    }
    if (succ0 != NULL)
        atomic_store_explicit(back_of(succ0), x, memory_order_release);
    for (int i = 0; i < (h > height ? h : height); i++)
        sl->pred[i] = prev[i];
    sl->last = x;
    sl->last_height = h;
}

bool skiplist_contains(const skiplist *sl, const char *key, size_t n)
{
    const sl_node *x = find_ge(sl, key, n, NULL);
    return x != NULL && node_cmp(sl, x, key, n) == 0;
}

void skiplist_pos_init(skiplist_pos *p, const skiplist *sl)
{
    p->list = sl;
    p->node = NULL;
}

const char *skiplist_pos_entry(const skiplist_pos *p)
{
    assert(p->node != NULL);
    return entry_of(p->node);
}

/* Scans touch one node after another at arena addresses in insertion
 * order, i.e. scattered: asking for the next one a step early hides much
 * of the miss behind the caller's work on this one. */
static inline void prefetch_next(const sl_node *x, int dir)
{
    if (x != NULL) {
        const sl_node *y =
            atomic_load_explicit(dir > 0 ? link_at(x, 0) : back_of(x), memory_order_relaxed);
        if (y != NULL)
            __builtin_prefetch(y);
    }
}

void skiplist_pos_next(skiplist_pos *p)
{
    assert(p->node != NULL);
    p->node = next_of(p->node, 0);
    prefetch_next(p->node, 1);
}

void skiplist_pos_prev(skiplist_pos *p)
{
    assert(p->node != NULL);
    p->node = atomic_load_explicit(back_of(p->node), memory_order_acquire);
    prefetch_next(p->node, -1);
}

void skiplist_pos_seek(skiplist_pos *p, const char *key, size_t n)
{
    p->node = find_ge(p->list, key, n, NULL);
}

void skiplist_pos_seek_first(skiplist_pos *p)
{
    p->node = next_of(p->list->head, 0);
}

void skiplist_pos_seek_last(skiplist_pos *p)
{
    const sl_node *x = find_last(p->list);
    p->node = (x == p->list->head) ? NULL : x;
}
