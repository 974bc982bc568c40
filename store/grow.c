/*
 * grow.c — room in a growable array (grow.h).
 */
#include "grow.h"

#include <assert.h>
#include <stdint.h>

#include "lsm_malloc.h"

void *lsm_grow(void *items, size_t *cap, size_t need, size_t elem, size_t first_cap)
{
    assert(first_cap > 0 && elem > 0);
    if (need <= *cap)
        return items;
    size_t n = *cap ? *cap : first_cap;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return NULL;
        n *= 2;
    }
    if (n > SIZE_MAX / elem)
        return NULL;
    void *p = lsm_realloc(items, n * elem);
    if (p != NULL)
        *cap = n;
    return p;
}
