/*
 * perm.h — POSIX permission checks made by the daemon itself.
 *
 * Without the kernel's default_permissions (root-private mounts, see
 * main.c) the kernel asks the daemon (FUSE_ACCESS) whether access(2),
 * faccessat(2) and chdir(2) may proceed; this answers with the rules the
 * kernel's generic_permission applies, for a caller identified by its ids.
 */
#ifndef FS_PERM_H
#define FS_PERM_H

#include "fuse_api.h"

#include <stddef.h>
#include <sys/types.h>

#define PERM_INLINE_GROUPS 32

/* Who asks. */
typedef struct perm_cred {
    uid_t uid;
    gid_t gid;
    size_t ngroups;
    gid_t *groups; /* supplementary groups: `inline_groups` or malloc'd */
    gid_t inline_groups[PERM_INLINE_GROUPS];
} perm_cred;

/* May `c` access a file of this mode and owner for `mask` (R_OK, W_OK,
 * X_OK bits; F_OK is 0)? 0 or EACCES. Only the first matching class
 * (owner, then group, then other) counts, as in POSIX. uid 0 may read and
 * write anything, search any directory and execute any file with an
 * execute bit. */
int perm_check(const perm_cred *c, mode_t mode, uid_t uid, gid_t gid, int mask);

/* The caller of `req`: its filesystem uid and gid and its supplementary
 * groups (read by libfuse from /proc/TID/status). Groups that cannot be
 * read (the caller is gone, no memory) are left out: a check may then deny
 * what their bits would allow, never allow what they deny. Release with
 * perm_cred_release. */
void perm_cred_of_req(fuse_req_t req, perm_cred *c);
void perm_cred_release(perm_cred *c);

#endif
