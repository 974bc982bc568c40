/* mempool.c — the process's pooled memory; see mempool.h. */
#include "mempool.h"
#include "arena.h"
#include "bufpool.h"
#include "lsm_malloc.h"

size_t mempool_bytes(void)
{
    return bufpool_bytes() + arena_pool_bytes();
}

void mempool_release(void)
{
    bufpool_drain();
    arena_pool_drain();
    lsm_malloc_trim();
}
