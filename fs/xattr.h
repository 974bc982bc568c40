/*
 * xattr.h — extended attributes as 'X' ino name keys. The set/remove
 * functions add to a batch; the caller commits it together with the
 * inode's ctime (and INODE_F_XATTR flag) update.
 */
#ifndef FS_XATTR_H
#define FS_XATTR_H

#include "super.h"

/* Returns 0, ENODATA or EIO; *val is malloc'd (NULL when *len is 0). */
int xattr_get(lsmfs *fs, uint64_t ino, const char *name, char **val, size_t *len);
/* Does the attribute exist? 0 = yes, ENODATA = no, or EIO. */
int xattr_exists(lsmfs *fs, uint64_t ino, const char *name);
int xattr_batch_set(lsm_batch *b, uint64_t ino, const char *name, const char *val, size_t len);
int xattr_batch_remove(lsm_batch *b, uint64_t ino, const char *name);
/* Adds deletes of every xattr of ino to b. */
int xattr_batch_remove_all(lsmfs *fs, lsm_batch *b, uint64_t ino);
/* The NUL-separated list of names (malloc'd; NULL when *len is 0). */
int xattr_list(lsmfs *fs, uint64_t ino, char **out, size_t *len);
/* Checks a name and value size: 0, ERANGE (name too long or empty), E2BIG. */
int xattr_check(const char *name, size_t size);

#endif
