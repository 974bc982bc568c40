/*
 * maint.h — online maintenance of a mounted filesystem, asked of its daemon
 * by ioctls on the root (lsmctl compact MNT, lsmctl check MNT): compacting
 * a key range, verifying one level's tables, checking the filesystem's
 * invariants as of a store snapshot. Only root and the user who mounted may
 * ask (op_ioctl.c): they cost a full read of the store.
 *
 * lsmctl drives them a step at a time (a key range, a level), which is its
 * progress. The ioctl numbers and structures are the interface lsmctl uses;
 * maint_ioctl is the daemon's (libfs).
 */
#ifndef FS_MAINT_H
#define FS_MAINT_H

#include "fuse_api.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define LSMFS_MAINT_KEY_MAX 16

/* Compact keys [begin, end] (a length of 0: unbounded on that side). */
struct lsmfs_compact {
    uint8_t begin[LSMFS_MAINT_KEY_MAX], end[LSMFS_MAINT_KEY_MAX];
    uint32_t blen, elen;
};

/* Verify the tables of `level` (in); the rest is out. */
struct lsmfs_check_tables {
    int32_t level;
    uint32_t problems;
    uint64_t tables, bytes;
    char first[512]; /* the first problem's message ("" when none) */
};

/* The fs invariants as of one snapshot (fsck_live); all out. */
struct lsmfs_check_fs {
    int32_t status; /* FSCK_CLEAN, FSCK_UNFIXED or FSCK_OPERATIONAL */
    uint32_t problems;
    uint64_t inodes, entries;
    char report[8192]; /* the problem lines (cut at the size) */
};

#define LSMFS_IOC_COMPACT _IOW('L', 0x55, struct lsmfs_compact)
#define LSMFS_IOC_CHECK_TABLES _IOWR('L', 0x56, struct lsmfs_check_tables)
#define LSMFS_IOC_CHECK_FS _IOR('L', 0x57, struct lsmfs_check_fs)

struct lsmfs;

/* Whether cmd is one of the ioctls above. */
bool maint_ioctl_cmd(unsigned int cmd);
/* Serves one of them on fs and replies to req. */
void maint_ioctl(fuse_req_t req, struct lsmfs *fs, unsigned int cmd, const void *in, size_t insz,
                 size_t outsz);

#endif
