/*
 * grow.h — room in a growable array: the one doubling rule every list of
 * the store and the filesystem uses (names, indexes, entries, queues).
 */
#ifndef LSM_GROW_H
#define LSM_GROW_H

#include <stddef.h>

/* Returns an array with room for at least `need` elements of `elem` bytes:
 * `items` itself when *cap >= need, else `items` reallocated (through
 * lsm_realloc) to the first of first_cap, 2 * first_cap, ... or of *cap
 * doubled, that holds need, with *cap set to it. Returns NULL when out of
 * memory or when the size would overflow; then `items` and *cap are
 * unchanged (and still the caller's to free). first_cap > 0. */
void *lsm_grow(void *items, size_t *cap, size_t need, size_t elem, size_t first_cap);

#endif
