/*
 * status.h — building lsm_status values inside the store.
 *
 * A status is NULL (OK) or a heap object with a code and a message. When
 * memory for a message cannot be had, a static status of the right code is
 * returned instead; lsm_status_free() knows not to free those.
 */
#ifndef LSM_STATUS_H
#define LSM_STATUS_H

#include "lsm.h"

#include <stdarg.h>

/* printf-style constructor. code must not be LSM_OK. */
lsm_status *status_new(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A status for an errno from a system call: ENOSPC and EDQUOT become
 * LSM_NO_SPACE, everything else LSM_IO_ERROR. `what` names the operation and
 * file, e.g. "write /x/000003.log". */
lsm_status *status_from_errno(int err, const char *what);
/* The shared, never-freed NOT_FOUND status (lookups miss often; no malloc). */
lsm_status *status_not_found(void);
/* The shared, never-freed NO_MEMORY status ("out of memory"; no malloc). */
lsm_status *status_no_memory(void);
/* A copy of s (NULL for NULL). */
lsm_status *status_copy(const lsm_status *s);
/* Keeps the first error of a sequence of steps: *first becomes s if it is
 * NULL (OK), else s is freed. Takes ownership of s. */
void status_keep_first(lsm_status **first, lsm_status *s);
/* Prefixes the message of s with context; returns s (or a replacement). */
lsm_status *status_wrap(lsm_status *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline bool status_ok(const lsm_status *s)
{
    return s == NULL;
}
static inline bool status_is(const lsm_status *s, int code)
{
    return lsm_status_code(s) == code;
}

#endif
