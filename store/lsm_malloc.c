/* lsm_malloc.c — the store's allocations and their failure seam; see lsm_malloc.h. */
#include "lsm_malloc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__ /* defined by the headers above */
#include <malloc.h>
#endif

static _Atomic(lsm_alloc_fail_fn) fail_hook;

static inline bool fails(void)
{
    lsm_alloc_fail_fn fn = atomic_load_explicit(&fail_hook, memory_order_relaxed);
    return fn != NULL && fn();
}

void lsm_malloc_trim(void)
{
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
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

char *lsm_strndup(const char *s, size_t n)
{
    return fails() ? NULL : strndup(s, n);
}

char *lsm_vasprintf(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *p = n < 0 ? NULL : lsm_malloc((size_t)n + 1);
    if (p != NULL)
        vsnprintf(p, (size_t)n + 1, fmt, again);
    va_end(again);
    return p;
}

char *lsm_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = lsm_vasprintf(fmt, ap);
    va_end(ap);
    return p;
}

void *lsm_aligned_alloc(size_t align, size_t n)
{
    return fails() ? NULL : aligned_alloc(align, n);
}

void lsm_alloc_set_fail_hook(lsm_alloc_fail_fn fn)
{
    atomic_store(&fail_hook, fn);
}
