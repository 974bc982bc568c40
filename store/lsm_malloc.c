/* lsm_malloc.c — the store's allocations and their failure seam; see lsm_malloc.h. */
#include "lsm_malloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic(lsm_alloc_fail_fn) fail_hook;

static inline bool fails(void)
{
    lsm_alloc_fail_fn fn = atomic_load_explicit(&fail_hook, memory_order_relaxed);
    return fn != NULL && fn();
}

void *lsm_malloc(size_t n)
{
    return fails() ? NULL : malloc(n);
}

void *lsm_calloc(size_t n, size_t size)
{
    return fails() ? NULL : calloc(n, size);
}

void *lsm_realloc(void *p, size_t n)
{
    return fails() ? NULL : realloc(p, n);
}

char *lsm_strdup(const char *s)
{
    return fails() ? NULL : strdup(s);
}

void *lsm_aligned_alloc(size_t align, size_t n)
{
    return fails() ? NULL : aligned_alloc(align, n);
}

void lsm_alloc_set_fail_hook(lsm_alloc_fail_fn fn)
{
    atomic_store(&fail_hook, fn);
}
