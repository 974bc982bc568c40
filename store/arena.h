/*
 * arena.h — a bump allocator for the memtable: memory is taken from large
 * blocks and given back all at once when the arena is destroyed.
 *
 * Why: a memtable makes one allocation per insert on the write path; a
 * general-purpose malloc there costs locking and bookkeeping per call,
 * while an arena costs a pointer bump and one malloc per block.
 *
 * Concurrency: allocation is single-threaded (the memtable's one writer);
 * arena_memory_usage() may be called from any thread at any time.
 */
#ifndef LSM_ARENA_H
#define LSM_ARENA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define ARENA_DEFAULT_BLOCK 4096

/* Block size of a pooled arena (arena_init_pooled: the memtables'). Big
 * enough that a file's 4 KiB chunks share blocks rather than take one
 * malloc each; small enough that a nearly empty memtable costs little. */
#define ARENA_POOLED_BLOCK (256u << 10)
/* The pool keeps at most this many bytes of freed blocks for the next
 * pooled arena: memory malloc gets fresh from the kernel costs a page
 * fault per page, a fifth of the daemon's CPU on a big sequential write;
 * two 8 MiB memtables' worth covers a flush freeing one while the next
 * fills. Beyond it, blocks go back to malloc. */
#define ARENA_POOL_MAX_BYTES (16u << 20)

typedef struct arena_block arena_block;

typedef struct arena {
    /* Guarded by the single-writer rule (only the allocating thread). */
    char *ptr;           /* next free byte in the current block */
    size_t remaining;    /* bytes left after ptr in the current block */
    arena_block *blocks; /* every block, newest first */
    size_t block_size;
    bool pooled; /* blocks of block_size come from and go back to the pool */
    /* Written by the allocating thread, read by anyone. */
    _Atomic size_t usage; /* bytes obtained from malloc, headers included */
} arena;

/* block_size 0 selects ARENA_DEFAULT_BLOCK. Allocates nothing yet. */
void arena_init(arena *a, size_t block_size);
/* An arena of ARENA_POOLED_BLOCK blocks taken from the process's pool of
 * freed ones when it has any (thread-safe). Allocates nothing yet. */
void arena_init_pooled(arena *a);
/* Frees every block (a pooled arena's full-size ones to the pool, up to
 * ARENA_POOL_MAX_BYTES). The arena may be re-initialised afterwards. */
void arena_destroy(arena *a);
/* Bytes of blocks the pool holds now. */
size_t arena_pool_bytes(void);
/* Frees every block the pool holds (none is in use: an arena's blocks are
 * its own until arena_destroy). Thread-safe. Who calls it and when:
 * mempool.h. */
void arena_pool_drain(void);

/* n > 0 bytes with no alignment promise; NULL if out of memory.
 * Requests larger than a quarter block get a block of their own, so the
 * current block's tail is not wasted. */
void *arena_alloc(arena *a, size_t n);
/* n > 0 bytes aligned to `align` (a power of two, at most
 * alignof(max_align_t)); NULL if out of memory. */
void *arena_alloc_aligned(arena *a, size_t n, size_t align);

/* Bytes the arena holds from malloc (the memtable's size for switching). */
static inline size_t arena_memory_usage(const arena *a)
{
    return atomic_load_explicit(&a->usage, memory_order_relaxed);
}

#endif
