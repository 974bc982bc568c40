/* arena.c — block bump allocator; see arena.h. */
#include "arena.h"
#include "lsm_malloc.h"

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

/* Each block starts with this header; the payload after it keeps malloc's
 * max_align_t alignment so aligned requests can be met at a block start. */
struct arena_block {
    alignas(max_align_t) arena_block *next;
    size_t size; /* bytes, this header included */
};

/* The freed ARENA_POOLED_BLOCK blocks kept for the next pooled arena. */
static struct {
    pthread_mutex_t mu;
    arena_block *free; /* [mu] a list through next */
    size_t bytes;      /* [mu] held in free, headers included */
} pool = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

#define POOLED_TOTAL (sizeof(arena_block) + ARENA_POOLED_BLOCK)

static arena_block *pool_take(void)
{
    pthread_mutex_lock(&pool.mu);
    arena_block *b = pool.free;
    if (b != NULL) {
        pool.free = b->next;
        pool.bytes -= POOLED_TOTAL;
    }
    pthread_mutex_unlock(&pool.mu);
    return b;
}

/* Keeps b for reuse if the pool has room; else frees it. */
static void pool_give(arena_block *b)
{
    pthread_mutex_lock(&pool.mu);
    bool keep = pool.bytes + POOLED_TOTAL <= ARENA_POOL_MAX_BYTES;
    if (keep) {
        b->next = pool.free;
        pool.free = b;
        pool.bytes += POOLED_TOTAL;
    }
    pthread_mutex_unlock(&pool.mu);
    if (!keep)
        free(b);
}

size_t arena_pool_bytes(void)
{
    pthread_mutex_lock(&pool.mu);
    size_t n = pool.bytes;
    pthread_mutex_unlock(&pool.mu);
    return n;
}

void arena_pool_drain(void)
{
    pthread_mutex_lock(&pool.mu);
    arena_block *b = pool.free;
    pool.free = NULL;
    pool.bytes = 0;
    pthread_mutex_unlock(&pool.mu);
    while (b != NULL) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
}

static void init(arena *a, size_t block_size, bool pooled)
{
    a->ptr = NULL;
    a->remaining = 0;
    a->blocks = NULL;
    a->block_size = block_size;
    a->pooled = pooled;
    atomic_init(&a->usage, 0);
}

void arena_init(arena *a, size_t block_size)
{
    init(a, block_size ? block_size : ARENA_DEFAULT_BLOCK, false);
}

void arena_init_pooled(arena *a)
{
    init(a, ARENA_POOLED_BLOCK, true);
}

/* Whether a block of `total` bytes goes to and comes from the pool. */
static bool poolable(const arena *a, size_t total)
{
    return a->pooled && total == POOLED_TOTAL;
}

void arena_destroy(arena *a)
{
    arena_block *b = a->blocks;
    while (b != NULL) {
        arena_block *next = b->next;
        if (poolable(a, b->size))
            pool_give(b);
        else
            free(b);
        b = next;
    }
    init(a, a->block_size, a->pooled);
}

/* A new block with `payload` usable bytes, linked in; NULL if out of memory. */
static char *new_block(arena *a, size_t payload)
{
    if (payload > SIZE_MAX - sizeof(arena_block))
        return NULL;
    size_t total = sizeof(arena_block) + payload;
    arena_block *b = poolable(a, total) ? pool_take() : NULL;
    if (b == NULL)
        b = lsm_malloc(total);
    if (b == NULL)
        return NULL;
    b->size = total;
    b->next = a->blocks;
    a->blocks = b;
    atomic_store_explicit(&a->usage, atomic_load_explicit(&a->usage, memory_order_relaxed) + total,
                          memory_order_relaxed);
    return (char *)(b + 1);
}

/* Slow path: the current block cannot hold n bytes. */
static void *alloc_fallback(arena *a, size_t n)
{
    if (n > a->block_size / 4)
        return new_block(a, n); /* the current block stays in use */
    char *p = new_block(a, a->block_size);
    if (p == NULL)
        return NULL;
    a->ptr = p + n;
    a->remaining = a->block_size - n;
    return p;
}

void *arena_alloc(arena *a, size_t n)
{
    assert(n > 0);
    if (n <= a->remaining) {
        char *p = a->ptr;
        a->ptr += n;
        a->remaining -= n;
        return p;
    }
    return alloc_fallback(a, n);
}

void *arena_alloc_aligned(arena *a, size_t n, size_t align)
{
    assert(n > 0);
    assert(align > 0 && (align & (align - 1)) == 0 && align <= alignof(max_align_t));
    size_t pad = (size_t)(-(uintptr_t)a->ptr) & (align - 1);
    if (a->remaining >= pad && n <= a->remaining - pad) {
        char *p = a->ptr + pad;
        a->ptr = p + n;
        a->remaining -= pad + n;
        return p;
    }
    /* Block payloads are max_align_t aligned, so the fallback is too. */
    void *p = alloc_fallback(a, n);
    assert(((uintptr_t)p & (align - 1)) == 0);
    return p;
}
