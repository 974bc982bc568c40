/*
 * lsm_malloc.h — every heap allocation of the store, and the seam through
 * which a test makes one of them fail (allocation-failure injection, as
 * SQLite's malloc tests; the counting hook is tests/support/alloc_fail.c).
 *
 * lsm_malloc, lsm_calloc, lsm_realloc, lsm_strdup, lsm_strndup and
 * lsm_aligned_alloc behave as the C library's (their memory is released
 * with free()). With no hook set, each costs one relaxed atomic load more
 * than the C library's. lsm_asprintf is the store's asprintf: the
 * formatted text, or NULL (never an undefined pointer) out of memory.
 */
#ifndef LSM_MALLOC_H
#define LSM_MALLOC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

void *lsm_malloc(size_t n);
void *lsm_calloc(size_t n, size_t size);
/* On failure p is left as it was (as realloc). */
void *lsm_realloc(void *p, size_t n);
char *lsm_strdup(const char *s);
char *lsm_strndup(const char *s, size_t n);
/* The text fmt makes, malloc'd; NULL if out of memory (or a bad format). */
char *lsm_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *lsm_vasprintf(const char *fmt, va_list ap);
void *lsm_aligned_alloc(size_t align, size_t n);

/* Gives the C library's free heap memory back to the OS where it keeps it
 * (glibc: malloc_trim; elsewhere nothing). Costs a walk of every malloc
 * arena: for after a big release (mempool.h), not a hot path. */
void lsm_malloc_trim(void);

/* Called (when set) before every allocation above, from any thread; true
 * makes that allocation return NULL. Tests only: NULL in the product. */
typedef bool (*lsm_alloc_fail_fn)(void);
void lsm_alloc_set_fail_hook(lsm_alloc_fail_fn fn);

#endif
