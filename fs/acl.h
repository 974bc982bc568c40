/*
 * acl.h — POSIX ACLs in their xattr form (system.posix_acl_access,
 * system.posix_acl_default), with the rules ext4 follows through the
 * kernel's fs/posix_acl.c. The kernel enforces an ACL (FUSE_CAP_POSIX_ACL);
 * the filesystem validates the bytes, keeps the mode and the access ACL in
 * step and makes new inodes inherit their directory's default ACL.
 *
 * The form: a little-endian u32 version (2), then entries of u16 tag,
 * u16 perm, u32 id. Pure functions on bytes; no store access.
 */
#ifndef FS_ACL_H
#define FS_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ACL_NAME_ACCESS "system.posix_acl_access"
#define ACL_NAME_DEFAULT "system.posix_acl_default"

#define ACL_HEADER_SIZE 4
#define ACL_ENTRY_SIZE 8

/* Is name one of the two ACL attributes? */
bool acl_is_access(const char *name);
bool acl_is_default(const char *name);

/* Checks an ACL as the kernel's posix_acl_valid does: version 2, a whole
 * number of entries, at least one, known tags, perms within rwx, exactly
 * one owner, owning group and other entry, at most one mask (required when
 * there are named user or group entries), named entries sorted by id
 * without duplicates, entries in tag order. 0 or EINVAL. */
int acl_valid(const void *buf, size_t len);

/* The mode an access ACL gives a file of `mode`: the owner, group (the mask
 * entry if there is one, else the owning group's) and other bits replaced
 * from the ACL; type and set-id/sticky bits kept. *equiv: the ACL says no
 * more than that mode (only the three base entries), so it is stored as the
 * mode alone. REQUIRES: acl_valid(buf, len) == 0. */
mode_t acl_mode(const void *buf, size_t len, mode_t mode, bool *equiv);

/* chmod of a file with an access ACL: rewrites buf in place so its owner,
 * other and mask entries (the owning group's without a mask) carry the
 * new mode's bits, as the kernel's posix_acl_chmod. REQUIRES: acl_valid. */
void acl_chmod(void *buf, size_t len, mode_t mode);

/* A new inode of `*mode` (type and permission bits as asked, no umask)
 * created in a directory whose default ACL is buf: rewrites buf in place
 * into the new inode's access ACL and narrows *mode, as the kernel's
 * posix_acl_create_masq. Returns whether the access ACL must be stored
 * (false: the mode says all). REQUIRES: acl_valid. */
bool acl_inherit(void *buf, size_t len, mode_t *mode);

#endif
