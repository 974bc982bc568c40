/*
 * lsm_malloc.h — every heap allocation of the store, and the seam through
 * which a test makes one of them fail (allocation-failure injection, as
 * SQLite's malloc tests; the counting hook is tests/support/alloc_fail.c).
 *
 * lsm_malloc, lsm_calloc, lsm_realloc, lsm_strdup and lsm_aligned_alloc
 * behave as the C library's (their memory is released with free()). With
 * no hook set, each costs one relaxed atomic load more than the C library's.
 */
#ifndef LSM_MALLOC_H
#define LSM_MALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *lsm_malloc(size_t n);
void *lsm_calloc(size_t n, size_t size);
/* On failure p is left as it was (as realloc). */
void *lsm_realloc(void *p, size_t n);
char *lsm_strdup(const char *s);
void *lsm_aligned_alloc(size_t align, size_t n);

/* Called (when set) before every allocation above, from any thread; true
 * makes that allocation return NULL. Tests only: NULL in the product. */
typedef bool (*lsm_alloc_fail_fn)(void);
void lsm_alloc_set_fail_hook(lsm_alloc_fail_fn fn);

#endif
