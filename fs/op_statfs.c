/*
 * op_statfs.c — statfs: space from the disk under the store, "used" being
 * what the store's files occupy, and the live inode count. The store's
 * space reserve (lsm_options.reserve_bytes) counts neither as used nor as
 * free: it is for deletes only. The root reserve (reserve.h) is in
 * f_bfree but not in f_bavail, as ext4's reserved blocks.
 */
#include "ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/statvfs.h>

/* Bytes of disk the store directory's files occupy, but for the reserve
 * (the store's RESERVE file: lsm_options.reserve_bytes). */
static uint64_t store_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (strcmp(e->d_name, "RESERVE") != 0 &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_blocks * 512;
    }
    closedir(d);
    return total;
}

/* Inode numbers are 64-bit and never run out; report a large free count. */
#define FREE_INODES (1ULL << 32)

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_STATFS]);
    struct statvfs host;
    if (statvfs(fs->dir, &host) != 0) {
        fuse_reply_err(req, errno);
        return;
    }
    uint64_t bsize = host.f_frsize ? host.f_frsize : 4096;
    uint64_t used = (store_bytes(fs->dir) + bsize - 1) / bsize;
    /* A reserve not held (given up to a full disk) is missing from the
     * free space, as if it were still there. */
    uint64_t reserve = 0, held = 1;
    (void)lsm_property_u64(fs->db, "lsm.reserve-bytes", &reserve);
    (void)lsm_property_u64(fs->db, "lsm.reserve-held", &held);
    uint64_t missing = held ? 0 : (reserve + bsize - 1) / bsize;
    uint64_t avail = host.f_bavail > missing ? host.f_bavail - missing : 0;
    /* The root reserve is free, but not available to others (ext4). */
    uint64_t kept = reserve_blocks(&fs->reserve, host.f_blocks);
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
