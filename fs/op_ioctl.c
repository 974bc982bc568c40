/*
 * op_ioctl.c — ioctl on the root directory: the snapshot requests of
 * snapshot.h, the info of fsinfo.h and the maintenance of maint.h. Taking or
 * deleting or listing snapshots (the store is private: as its directory
 * listing would be), the info (a scan of every inode) and maintenance
 * (a compaction, a full read) are for a caller with CAP_SYS_ADMIN and for
 * the user who mounted (the daemon's user) unless that is root; where
 * snapshots are, for anyone who may enter (the store's path is the mount's
 * source in /proc/self/mountinfo anyway).
 */
#include "caller.h"
#include "fsinfo.h"
#include "maint.h"
#include "ops.h"
#include "snapshot.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Whether the caller may change snapshots: the mounting user, or a holder
 * of CAP_SYS_ADMIN. A root mount's user is uid 0, which alone proves no
 * privilege: a root that dropped its capabilities is refused. */
static bool may_manage(fuse_req_t req)
{
    uid_t uid = fuse_req_ctx(req)->uid;
    if (uid == getuid() && uid != 0)
        return true;
    return caller_capable(req, CAP_SYS_ADMIN);
}

static void snap_create(fuse_req_t req, lsmfs *fs, const void *in, size_t insz)
{
    struct lsmfs_snap_create c;
    if (!op_ioctl_arg(req, in, insz, 0, false, &c, sizeof c))
        return;
    c.name[sizeof c.name - 1] = '\0';
    char err[512];
    int e = snapshot_create(fs, &c, err, sizeof err);
    if (e != 0) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: %s\n", err);
        fuse_reply_err(req, e);
        return;
    }
    fuse_reply_ioctl(req, 0, &c, sizeof c);
}

static void snap_delete(fuse_req_t req, lsmfs *fs, const void *in, size_t insz)
{
    struct lsmfs_snap_name n;
    if (!op_ioctl_arg(req, in, insz, 0, false, &n, sizeof n))
        return;
    n.name[sizeof n.name - 1] = '\0';
    char err[512];
    int e = snapshot_delete(fs, n.name, err, sizeof err);
    if (e != 0) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: %s\n", err);
        fuse_reply_err(req, e);
        return;
    }
    fuse_reply_ioctl(req, 0, NULL, 0);
}

static void snap_dir(fuse_req_t req, lsmfs *fs, size_t outsz)
{
    struct lsmfs_snap_dir d;
    memset(&d, 0, sizeof d);
    if (outsz < sizeof d ||
        snprintf(d.path, sizeof d.path, "%s/" LSMFS_SNAPSHOT_DIR, fs->dir) >= (int)sizeof d.path) {
        fuse_reply_err(req, outsz < sizeof d ? EINVAL : ENAMETOOLONG);
        return;
    }
    fuse_reply_ioctl(req, 0, &d, sizeof d);
}

static void snap_next(fuse_req_t req, lsmfs *fs, const void *in, size_t insz, size_t outsz)
{
    struct lsmfs_snap_entry e;
    if (!op_ioctl_arg(req, in, insz, outsz, true, &e, sizeof e))
        return;
    char err[512];
    int r = snapshot_next(fs, &e, err, sizeof err);
    if (r != 0) {
        if (r != ENOENT)
            fuse_log(FUSE_LOG_ERR, "lsmfs: %s\n", err);
        fuse_reply_err(req, r);
        return;
    }
    fuse_reply_ioctl(req, 0, &e, sizeof e);
}

static void info(fuse_req_t req, lsmfs *fs, size_t outsz)
{
    struct lsmfs_info in;
    char err[512];
    if (outsz < sizeof in) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    int e = fs_info_scan(fs->db, fs->dir, &in, err, sizeof err);
    if (e == 0)
        e = fs_info_files(fs->env, fs->path, fs->dir, &in, err, sizeof err);
    if (e != 0) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: %s\n", err);
        fuse_reply_err(req, e);
        return;
    }
    fuse_reply_ioctl(req, 0, &in, sizeof in);
}

void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi,
              unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
    (void)arg;
    (void)fi;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_IOCTL]);
    unsigned int c = cmd;
    if (ino != SCHEMA_ROOT_INO || (flags & FUSE_IOCTL_COMPAT)) {
        fuse_reply_err(req, ENOTTY);
        return;
    }
    if ((c == LSMFS_IOC_SNAP_CREATE || c == LSMFS_IOC_SNAP_DELETE || c == LSMFS_IOC_SNAP_NEXT ||
         c == LSMFS_IOC_INFO || maint_ioctl_cmd(c)) &&
        !may_manage(req)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (c == LSMFS_IOC_SNAP_CREATE)
        snap_create(req, fs, in_buf, in_bufsz);
    else if (c == LSMFS_IOC_SNAP_DELETE)
        snap_delete(req, fs, in_buf, in_bufsz);
    else if (c == LSMFS_IOC_SNAP_DIR)
        snap_dir(req, fs, out_bufsz);
    else if (c == LSMFS_IOC_SNAP_NEXT)
        snap_next(req, fs, in_buf, in_bufsz, out_bufsz);
    else if (c == LSMFS_IOC_INFO)
        info(req, fs, out_bufsz);
    else if (maint_ioctl_cmd(c))
        maint_ioctl(req, fs, c, in_buf, in_bufsz, out_bufsz);
    else
        fuse_reply_err(req, ENOTTY);
}
