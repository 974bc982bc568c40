/*
 * op_entry.c — lookup, forget, getattr, setattr, readlink.
 */
#include "storeio.h"
#include "data.h"
#include "dir.h"
#include "inode.h"
#include "killpriv.h"
#include "ops.h"
#include "xattr.h"

#include <errno.h>
#include <string.h>

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_LOOKUP]);
    dirent_val d;
    inode *dir = op_pin(req, fs, parent, 0);
    if (dir == NULL)
        return;
    inode_rdlock(dir);
    int err = dir_find(fs, dir, name, &d);
    inode_unlock(dir); /* before pinning the entry: lock order */
    icache_put(fs->icache, dir);
    if (err == ENOENT) {
        /* Negative entry: nothing changes the store behind the kernel. */
        struct fuse_entry_param e = {.ino = 0, .entry_timeout = fs->cfg.timeout};
        fuse_reply_entry(req, &e);
        return;
    }
    inode *n = NULL;
    if (err == 0)
        err = icache_get(fs, d.ino, &n);
    if (err != 0) {
        fuse_reply_err(req, err == ENOENT ? EIO : err); /* entry without inode */
        return;
    }
    inode_rec r;
    op_read_rec(n, &r);
    if (!S_ISDIR(r.mode))
        op_listing_wants_attrs(op_state(req));
    op_reply_entry(req, fs, n, &r, parent, name);
    icache_put(fs->icache, n);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_FORGET]);
    op_forget_refs(fs, ino, nlookup);
    fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_FORGET]);
    for (size_t i = 0; i < count; i++)
        op_forget_refs(fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_GETATTR]);
    inode_rec r;
    if (op_get_rec(req, fs, ino, &r))
        op_reply_attr(req, fs, ino, &r);
}

static ts time_arg(int to_set, int now_flag, struct timespec t, ts now)
{
    return (to_set & now_flag) ? now : ts_from_timespec(t);
}

/* Applies the non-size attributes of a setattr to r. */
static void apply_attrs(inode_rec *r, const struct stat *attr, int to_set, ts now)
{
    if (to_set & FUSE_SET_ATTR_MODE)
        r->mode = (r->mode & S_IFMT) | (attr->st_mode & 07777);
    if (to_set & FUSE_SET_ATTR_UID)
        r->uid = attr->st_uid;
    if (to_set & FUSE_SET_ATTR_GID)
        r->gid = attr->st_gid;
    if (to_set & FUSE_SET_ATTR_ATIME)
        r->atime = time_arg(to_set, FUSE_SET_ATTR_ATIME_NOW, attr->st_atim, now);
    if (to_set & FUSE_SET_ATTR_MTIME)
        r->mtime = time_arg(to_set, FUSE_SET_ATTR_MTIME_NOW, attr->st_mtim, now);
    r->ctime = (to_set & FUSE_SET_ATTR_CTIME) ? ts_from_timespec(attr->st_ctim) : now;
}

/* With -o writeback the kernel follows a write-back with a SETATTR of the
 * times (at close, fsync, or when it writes the inode). Committed logged,
 * it would carry the large writes deferred just before into the WAL, so
 * their bytes reach the disk twice (test_fsynced_large_file_survives_crash
 * on a writeback mount): it is deferred after a deferred change of the
 * inode, and then a crash loses it with them, as a prefix.
 * REQUIRES: n->lock held for writing. */
static bool defers_times(const lsmfs *fs, const inode *n, int to_set)
{
    const int times = FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME;
    return fs->cfg.writeback && n->deferred_last && (to_set & ~times) == 0;
}

/* REQUIRES: n->lock held for writing. The kernel sets
 * FUSE_SET_ATTR_KILL_SUID (FATTR_KILL_SUIDGID) on a truncate or chown that
 * clears set-id bits (killpriv.h); which ones is decided by the file's
 * group before a chown, as ext4 does. */
static int setattr_locked(fuse_req_t req, lsmfs *fs, inode *n, const struct stat *attr, int to_set,
                          inode_rec *out)
{
    assert(inode_wrheld(n));
    if (n->gone)
        return ENOENT;
    inode_rec r = n->rec;
    payload pl = {0};
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    ts now = ts_now();
    int err = 0;
    bool shrinks = (to_set & FUSE_SET_ATTR_SIZE) && attr->st_size < (off_t)r.size;
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (S_ISDIR(r.mode))
            err = EISDIR;
        else if (!S_ISREG(r.mode))
            err = EINVAL;
        else if (attr->st_size < 0)
            err = EINVAL;
        else if ((uint64_t)attr->st_size != r.size) {
            err = data_truncate(fs, b, n, &r, &pl, (uint64_t)attr->st_size);
            r.mtime = now;
        }
    }
    if (err == 0) {
        gid_t gid = r.gid;
        apply_attrs(&r, attr, to_set, now);
        if ((to_set & FUSE_SET_ATTR_KILL_SUID) && !S_ISDIR(r.mode))
            r.mode = killpriv_mode(req, r.mode, gid);
        if (to_set & FUSE_SET_ATTR_MODE)
            err = xattr_acl_chmod(fs, b, n->ino, &r);
    }
    if (err == 0) {
        unsigned flags = shrinks ? COMMIT_FREES_SPACE : 0;
        if (defers_times(fs, n, to_set))
            flags |= COMMIT_DEFER_LOG;
        err = op_commit_one_as(fs, b, n, &r, &pl, flags);
    }
    *out = r;
    payload_free(&pl);
    lsm_batch_free(b);
    return err;
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi)
{
    (void)fi;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_SETATTR]);
    inode *n = op_pin(req, fs, ino, 0);
    if (n == NULL)
        return;
    int err = 0;
    inode_rec r;
    inode_wrlock(n);
    err = setattr_locked(req, fs, n, attr, to_set, &r);
    inode_unlock(n);
    icache_put(fs->icache, n);
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err, &(op_touched){.ino = {ino}});
    else if (err != 0)
        fuse_reply_err(req, err);
    else
        op_reply_attr(req, fs, ino, &r);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_READLINK]);
    inode_rec r;
    char *p = NULL;
    size_t plen = 0;
    int err = inode_load(fs, ino, &r, &p, &plen);
    if (err == 0 && !S_ISLNK(r.mode))
        err = EINVAL;
    if (err == 0 && (plen == 0 || plen > SCHEMA_SYMLINK_MAX || memchr(p, 0, plen)))
        err = EIO;
    if (err != 0) {
        free(p);
        fuse_reply_err(req, err);
        return;
    }
    char target[SCHEMA_SYMLINK_MAX + 1];
    memcpy(target, p, plen);
    target[plen] = '\0';
    free(p);
    fuse_reply_readlink(req, target);
}
