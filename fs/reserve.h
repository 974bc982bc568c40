/*
 * reserve.h — the root reserve: a share of the disk under the store that
 * only root may fill, as ext4's reserved blocks (mkfs.ext4 -m, tune2fs -m,
 * -o resuid/resgid), so that a user who fills an allow_other mount leaves
 * root room to work. Set by mkfs.lsmfs -m/-U/-G in the superblock; a mount
 * option (-o reserve=PCT,resuid=UID,resgid=GID) overrides it for a mount.
 *
 * A change that adds data (a write, a new name, a new xattr) by a caller
 * who is not privileged is refused with ENOSPC once the disk's free space
 * (the env's disk_free) would fall into the reserve. Privileged, as ext4's
 * ext4_has_free_clusters: fsuid equal to resuid (default 0, root), a
 * member of resgid (when not 0), or a holder of CAP_SYS_RESOURCE. statfs
 * shows it as ext4 does: in f_bfree, not in f_bavail.
 *
 * Free space is looked up (disk_free) at most every REFRESH_MS while it is
 * far above the reserve, less what was let in since; near it, at every
 * change. Deletes and truncates are never refused. A flush or compaction
 * holds its output beside its inputs until it ends, so before refusing, the
 * reserve waits (up to SETTLE_MS) for those running to end and looks again,
 * as ext4 commits its journal and retries before an ENOSPC.
 */
#ifndef FS_RESERVE_H
#define FS_RESERVE_H

#include "env.h"
#include "lsm.h"
#include "fuse_api.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct root_reserve {
    uint32_t pct;     /* [const] of the disk's size; 0: no reserve */
    uid_t uid;        /* [const] resuid */
    gid_t gid;        /* [const] resgid; 0: no group */
    lsm_env *env;     /* [const] the env holding the store (disk_free) */
    const char *path; /* [const] the store's path in env */
    lsm_db *db;       /* [const] the store (its background work); NULL: none */
    /* Bytes free above the reserve at the last look, less those let in
     * since, and when that look was (monotonic ns). Atomics. */
    _Atomic int64_t left;
    _Atomic uint64_t looked_ns;
} root_reserve;

/* Sets up r for the store db at path in env (kept, not copied; db may be
 * NULL: no background work is waited for). */
void reserve_init(root_reserve *r, lsm_db *db, lsm_env *env, const char *path, uint32_t pct,
                  uid_t uid, gid_t gid);

/* May req's caller add about `bytes` to the store? 0, or ENOSPC when that
 * would reach into the reserve and the caller is not privileged (a failed
 * disk_free lets the change through: the store reports a full disk itself).
 * req NULL: a caller without privilege (tests). */
int reserve_admit(root_reserve *r, fuse_req_t req, uint64_t bytes);

/* The reserve in blocks of bsize of a disk of `blocks` such blocks. */
uint64_t reserve_blocks(const root_reserve *r, uint64_t blocks);

#endif
