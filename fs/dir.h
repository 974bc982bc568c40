/*
 * dir.h — directory entries. Each entry is two keys written and removed
 * together: 'D' parent name (for lookup) and 'C' parent cookie (for
 * readdir). The cookie comes from the parent's next_cookie counter, which
 * only grows, so it is a readdir offset that stays valid while the
 * directory changes: a listing resumes after the last cookie it returned,
 * and an entry that was not touched keeps its place.
 */
#ifndef FS_DIR_H
#define FS_DIR_H

#include "schema.h"
#include "super.h"

/* Returns 0, ENOENT or EIO. */
int dir_lookup(lsmfs *fs, uint64_t parent, const char *name, dirent_val *d);
/* Adds both keys of an entry to b. Returns 0 or ENOMEM. */
int dir_batch_add(lsm_batch *b, uint64_t parent, const char *name, uint64_t ino, uint8_t type,
                  uint64_t cookie);
int dir_batch_remove(lsm_batch *b, uint64_t parent, const char *name, uint64_t cookie);

/* Called for each entry in cookie order; returns non-zero to stop. */
typedef int (*dir_visit_fn)(void *ctx, uint64_t cookie, uint64_t ino, uint8_t type,
                            const char *name, size_t nlen);
/* Visits the entries of `parent` with cookie >= from, in a consistent
 * snapshot. Returns 0, EIO (damaged entry or store error) or ENOMEM. */
int dir_scan(lsmfs *fs, uint64_t parent, uint64_t from, dir_visit_fn fn, void *ctx);

/* Is `name` acceptable as an entry name? Returns 0, ENAMETOOLONG or EINVAL. */
int dir_check_name(const char *name);

#endif
