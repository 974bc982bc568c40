/*
 * op_statfs.c — statfs: space from the disk (or pool) under the store, "used" being
 * what the store's files occupy (store_usage.h: listed at most every
 * STORE_USAGE_LIST_MS), and the live inode count. The store's
 * space reserve (lsm_options.reserve_bytes) counts neither as used nor as
 * free: it is for deletes only. The root reserve (reserve.h) is in
 * f_bfree but not in f_bavail, as ext4's reserved blocks.
 */
#include "ops.h"

#include "store_usage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

/* Inode numbers are 64-bit and never run out; report a large free count. */
#define FREE_INODES (1ULL << 32)

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_STATFS]);
    uint64_t total, free_bytes;
    lsm_status *s = fs->env->disk_free(fs->env, fs->path, &total, &free_bytes);
    if (s != NULL) {
        int e = lsm_status_errno(s);
        lsm_status_free(s);
        fuse_reply_err(req, e ? e : EIO);
        return;
    }
    uint64_t bsize = 4096;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec;
    uint64_t used =
        (store_usage_bytes(&fs->usage, fs->db, fs->env, fs->path, now_ns) + bsize - 1) / bsize;
    /* A reserve not held (given up to a full disk) is missing from the
     * free space, as if it were still there. */
    uint64_t reserve = 0, held = 1;
    (void)lsm_property_u64(fs->db, "lsm.reserve-bytes", &reserve);
    (void)lsm_property_u64(fs->db, "lsm.reserve-held", &held);
    uint64_t missing = held ? 0 : (reserve + bsize - 1) / bsize;
    uint64_t host_avail = free_bytes / bsize;
    uint64_t avail = host_avail > missing ? host_avail - missing : 0;
    /* The root reserve is free, but not available to others (ext4). */
    uint64_t kept = reserve_blocks(&fs->reserve, total / bsize);
    int64_t inodes = atomic_load(&fs->inodes);
    struct statvfs st = {
        .f_bsize = bsize,
        .f_frsize = bsize,
        .f_blocks = used + avail,
        .f_bfree = avail,
        .f_bavail = avail > kept ? avail - kept : 0,
        .f_files = (fsfilcnt_t)(inodes > 0 ? inodes : 0) + FREE_INODES,
        .f_ffree = FREE_INODES,
        .f_favail = FREE_INODES,
        .f_namemax = SCHEMA_NAME_MAX,
    };
    fuse_reply_statfs(req, &st);
}
