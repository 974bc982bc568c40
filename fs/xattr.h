/*
 * xattr.h — extended attributes as 'X' ino name keys. The set/remove
 * functions add to a batch; the caller commits it together with the
 * inode's ctime (and INODE_F_XATTR flag) update.
 */
#ifndef FS_XATTR_H
#define FS_XATTR_H

#include "super.h"

#include <sys/types.h>

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
/* Is name in a namespace lsmfs keeps, as ext4: user., trusted. (the
 * kernel requires CAP_SYS_ADMIN), security. and the two POSIX ACL names of
 * system.? Every other name is refused with EOPNOTSUPP. */
bool xattr_supported(const char *name);
/* A name read from an 'X' key (nlen bytes, no NUL): is it one lsmfs keeps
 * (non-empty, at most SCHEMA_XATTR_NAME_MAX bytes, xattr_supported)? Names
 * an earlier version stored outside those namespaces are not listed, and
 * fsck deletes them. */
bool xattr_stored_name_kept(const char *name, size_t nlen);
/* Checks a name and value size: 0, ERANGE (name too long or empty),
 * EOPNOTSUPP (!xattr_supported), E2BIG. */
int xattr_check(const char *name, size_t size);

/* May ino take a new attribute `name`? Its names must stay listable in one
 * listxattr (XATTR_LIST_MAX, 64 KiB; beyond it the kernel answers E2BIG to
 * everyone, and tar --xattrs fails): 0, ENOSPC (as ext4 when an inode's
 * attribute space is full) or an errno. */
int xattr_room_for(lsmfs *fs, uint64_t ino, const char *name);
/* chmod: adds to b the access ACL of ino (if it has one) rewritten for the
 * new r->mode (acl_chmod). 0 or an errno. */
int xattr_acl_chmod(lsmfs *fs, lsm_batch *b, uint64_t ino, const inode_rec *r);
/* A new inode ino (record *r, mode as asked) in directory dir (record *d):
 * with a default ACL there, narrows r->mode and adds to b the inherited
 * access ACL (when not equivalent to the mode) and, for a directory, the
 * default ACL; without one, applies umask to r->mode. Symlinks are left
 * as they are. Sets INODE_F_XATTR in r->flags when it adds one. */
int xattr_inherit(lsmfs *fs, lsm_batch *b, uint64_t dir, const inode_rec *d, uint64_t ino,
                  inode_rec *r, mode_t umask);

#endif
