/*
 * op_ns.c — operations on names: mknod, mkdir, symlink, create, link,
 * unlink, rmdir. (rename lives in op_rename.c.)
 */
#include "storeio.h"
#include "dir.h"
#include "entry.h"
#include "inode.h"
#include "ops.h"
#include "orphan.h"
#include "xattr.h"

#include <errno.h>
#include <string.h>

/* ext4's limit: beyond it link() fails with EMLINK. */
#define LINK_MAX_COUNT 65000u

/* What a new inode is. */
typedef struct new_node {
    mode_t mode;
    dev_t rdev;
    const char *target;        /* symlinks */
    struct fuse_file_info *fi; /* create: open it too */
} new_node;

/* Adds the entry (parent, name) -> ino to b and updates *p (the parent's
 * new record) for it. */
static int add_entry(lsm_batch *b, inode *parent, inode_rec *p, const char *name, uint64_t ino,
                     const inode_rec *child, ts now)
{
    int err = dir_batch_add(b, parent->ino, name, ino, inode_type(child), p->next_cookie);
    p->next_cookie++;
    p->size++;
    if (S_ISDIR(child->mode))
        p->nlink++;
    p->mtime = p->ctime = now;
    return err;
}

/* Is the locked directory able to take a new entry `name`? */
static int check_new_name(lsmfs *fs, inode *parent, const char *name)
{
    if (parent->gone || parent->rec.nlink == 0)
        return ENOENT;
    if (!S_ISDIR(parent->rec.mode))
        return ENOTDIR;
    dirent_val d;
    int err = dir_find(fs, parent, name, &d);
    return err == 0 ? EEXIST : err == ENOENT ? 0 : err;
}

/* REQUIRES: parent->lock held for writing. On success *out is the new
 * pinned inode and *rec its record. */
static int make_locked(fuse_req_t req, lsmfs *fs, inode *parent, const char *name, uint64_t ino,
                       const new_node *nn, inode **out, inode_rec *rec)
{
    assert(inode_wrheld(parent));
    int err = check_new_name(fs, parent, name);
    if (err != 0)
        return err;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    inode_rec r;
    inode_init(&r, nn->mode, ctx->uid, ctx->gid, nn->rdev, &parent->rec);
    size_t plen = 0;
    if (S_ISLNK(nn->mode))
        r.size = plen = strlen(nn->target);
    if (S_ISREG(nn->mode) && fs->sb.inline_limit > 0)
        r.flags |= INODE_F_INLINE;
    if (S_ISDIR(nn->mode))
        r.parent = parent->ino;
    inode_rec p = parent->rec;
    uint64_t cookie = p.next_cookie;
    if ((err = icache_reserve(fs->icache, ino, out)) != 0)
        return err;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        err = ENOMEM;
    if (err == 0)
        err = xattr_inherit(fs, b, parent->ino, &parent->rec, ino, &r, ctx->umask);
    if (err == 0)
        err = inode_batch_put(b, ino, &r, nn->target, plen);
    if (err == 0)
        err = add_entry(b, parent, &p, name, ino, &r, r.ctime);
    if (err == 0)
        err = inode_batch_update(fs, b, parent, &p);
    if (err == 0)
        err = fs_commit(fs, b, &parent, 1);
    lsm_batch_free(b);
    if (err != 0) {
        icache_put(fs->icache, *out);
        *out = NULL;
        return err;
    }
    parent->rec = p;
    dir_cached_add(fs, parent, name, ino, inode_type(&r), cookie);
    atomic_fetch_add(&fs->inodes, 1);
    icache_fill(fs, *out, &r);
    if (nn->fi != NULL || S_ISDIR(r.mode)) {
        /* The newest inode: locking it under its parent is in order.
         * (The handle is filled, and a new directory's listing started, before
         * the parent unlocks.) */
        inode_wrlock(*out);
        if (nn->fi != NULL)
            op_file_opened(fs, *out, nn->fi);
        else
            dir_cache_start(fs, *out);
        inode_unlock(*out);
    }
    *rec = r;
    return err;
}

static void make_node(fuse_req_t req, fuse_ino_t parent_ino, const char *name, const new_node *nn)
{
    lsmfs *fs = op_fs(req);
    int err = dir_check_name(name);
    if (err == 0)
        err = reserve_admit(&fs->reserve, req, strlen(name) + INODE_HDR_MAX);
    inode *parent = NULL, *n = NULL;
    uint64_t ino = 0;
    if (err == 0)
        err = icache_get(fs, parent_ino, &parent);
    if (err == 0)
        err = alloc_ino(&fs->alloc, &ino);
    inode_rec r;
    if (err == 0) {
        inode_wrlock(parent);
        err = make_locked(req, fs, parent, name, ino, nn, &n, &r);
        inode_unlock(parent);
    }
    icache_put(fs->icache, parent);
    if (err == 0 && (err = fs_durable(fs)) != 0) {
        icache_put(fs->icache, n);
        op_reply_undurable(req, err, &(op_touched){.dir = {parent_ino}, .name = {name}});
        return;
    }
    if (err != 0) {
        icache_put(fs->icache, n);
        fuse_reply_err(req, err);
        return;
    }
    if (nn->fi != NULL) {
        struct fuse_entry_param e;
        op_fill_entry(fs, ino, &r, &e);
        icache_lookup_inc(fs->icache, n, parent_ino, name, S_ISDIR(r.mode));
        if (fuse_reply_create(req, &e, nn->fi) != 0)
            op_forget_refs(fs, ino, 1);
    } else {
        op_reply_entry(req, fs, n, &r, parent_ino, name);
    }
    icache_put(fs->icache, n);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    stats_inc(&op_fs(req)->stats.ops[OP_MKNOD]);
    mode_t type = mode & S_IFMT;
    if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR &&
        type != S_IFBLK) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    new_node nn = {.mode = mode, .rdev = (type == S_IFCHR || type == S_IFBLK) ? rdev : 0};
    make_node(req, parent, name, &nn);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    stats_inc(&op_fs(req)->stats.ops[OP_MKDIR]);
    new_node nn = {.mode = S_IFDIR | (mode & 07777)};
    make_node(req, parent, name, &nn);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    stats_inc(&op_fs(req)->stats.ops[OP_SYMLINK]);
    size_t len = strlen(link);
    if (len == 0 || len > SCHEMA_SYMLINK_MAX) {
        fuse_reply_err(req, len == 0 ? ENOENT : ENAMETOOLONG);
        return;
    }
    new_node nn = {.mode = S_IFLNK | 0777, .target = link};
    make_node(req, parent, name, &nn);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_CREATE]);
    if (fs->no_open) {
        /* The kernel then makes new files with MKNOD and opens them without
         * asking, as any other file: no RELEASE at their close (a CREATE
         * hands out a handle the kernel must release). It remembers. */
        fuse_reply_err(req, ENOSYS);
        return;
    }
    new_node nn = {.mode = S_IFREG | (mode & 07777), .fi = fi};
    make_node(req, parent, name, &nn);
}

/* REQUIRES: n and parent locked for writing. */
static int link_locked(lsmfs *fs, inode *n, inode *parent, const char *name, inode_rec *out)
{
    assert(inode_wrheld(n) && inode_wrheld(parent));
    if (S_ISDIR(n->rec.mode))
        return EPERM;
    if (n->gone || n->rec.nlink == 0)
        return ENOENT;
    if (n->rec.nlink >= LINK_MAX_COUNT)
        return EMLINK;
    int err = check_new_name(fs, parent, name);
    if (err != 0)
        return err;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    ts now = ts_now();
    inode_rec r = n->rec, p = parent->rec;
    uint64_t cookie = p.next_cookie;
    r.nlink++;
    r.ctime = now;
    err = add_entry(b, parent, &p, name, n->ino, &r, now);
    if (err == 0)
        err = inode_batch_update(fs, b, n, &r);
    if (err == 0)
        err = inode_batch_update(fs, b, parent, &p);
    if (err == 0)
        err = fs_commit(fs, b, (inode *const[]){n, parent}, 2);
    lsm_batch_free(b);
    if (err == 0) {
        n->rec = r;
        parent->rec = p;
        dir_cached_add(fs, parent, name, n->ino, inode_type(&r), cookie);
        *out = r;
    }
    return err;
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_LINK]);
    inode *v[2] = {NULL, NULL};
    int err = dir_check_name(newname);
    if (err == 0)
        err = reserve_admit(&fs->reserve, req, strlen(newname) + INODE_HDR_MAX);
    if (err == 0)
        err = icache_get(fs, ino, &v[0]);
    if (err == 0)
        err = icache_get(fs, newparent, &v[1]);
    inode_rec r;
    if (err == 0) {
        inode_wrlock_all(v, 2);
        err = link_locked(fs, v[0], v[1], newname, &r);
        inode_unlock_all(v, 2);
    }
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err,
                           &(op_touched){.dir = {newparent}, .name = {newname}, .ino = {ino}});
    else if (err != 0)
        fuse_reply_err(req, err);
    else
        op_reply_entry(req, fs, v[0], &r, newparent, newname);
    icache_put(fs->icache, v[0]);
    icache_put(fs->icache, v[1]);
}

/* REQUIRES: parent and child locked for writing; d is the entry, checked
 * under those locks (entry_unchanged). */
static int remove_locked(lsmfs *fs, inode *parent, inode *child, const char *name,
                         const dirent_val *d, bool dir, bool *reclaim)
{
    assert(inode_wrheld(parent) && inode_wrheld(child));
    *reclaim = false;
    if (dir && !S_ISDIR(child->rec.mode))
        return ENOTDIR;
    if (!dir && S_ISDIR(child->rec.mode))
        return EISDIR;
    if (dir && child->rec.size != 0)
        return ENOTEMPTY;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    ts now = ts_now();
    inode_rec p = parent->rec, c = child->rec;
    p.size--;
    p.mtime = p.ctime = now;
    if (dir)
        p.nlink--;
    c.nlink = dir ? 0 : c.nlink - 1;
    c.ctime = now;
    bool destroyed = false;
    int err = dir_batch_remove(b, parent->ino, name, d->cookie);
    if (err == 0)
        err = inode_batch_update(fs, b, parent, &p);
    if (err == 0 && c.nlink == 0)
        err = op_drop_inode(fs, b, child, &c, reclaim, &destroyed);
    else if (err == 0)
        err = inode_batch_update(fs, b, child, &c);
    if (err == 0)
        err = fs_commit_as(fs, b, (inode *const[]){parent, child}, 2, COMMIT_FREES_SPACE);
    lsm_batch_free(b);
    if (err != 0) {
        *reclaim = false;
        return err;
    }
    parent->rec = p;
    child->rec = c;
    dir_cached_remove(fs, parent, name);
    if (dir)
        dir_cache_drop(fs, child);
    op_dropped(fs, child, destroyed);
    return 0;
}

/* Removes (parent, name): pins the entry's inode, locks both in the lock
 * order and checks the entry under the locks. The kernel holds the
 * parent's i_rwsem from its lookup of the name to our reply, so the entry
 * cannot change in between; should it all the same, this fails with
 * ESTALE, changing nothing (entry_unchanged). *child is the pinned
 * inode the entry named, if any. */
static int remove_name(lsmfs *fs, inode *parent, const char *name, bool dir, inode **child,
                       bool *reclaim)
{
    dirent_val d;
    uint64_t seen;
    int err = entry_pin(fs, parent, name, &d, &seen, child);
    if (err != 0)
        return err;
    inode *v[2] = {parent, *child};
    inode_wrlock_all(v, 2);
    err = entry_unchanged(fs, parent, name, &d, seen);
    if (err == 0)
        err = remove_locked(fs, parent, *child, name, &d, dir, reclaim);
    inode_unlock_all(v, 2);
    return err;
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent_ino, const char *name, bool dir)
{
    lsmfs *fs = op_fs(req);
    if (strlen(name) > SCHEMA_NAME_MAX) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    inode *parent = NULL, *child = NULL;
    bool reclaim = false;
    int err = icache_get(fs, parent_ino, &parent);
    if (err == 0)
        err = remove_name(fs, parent, name, dir, &child, &reclaim);
    uint64_t child_ino = child ? child->ino : 0;
    icache_put(fs->icache, parent);
    icache_put(fs->icache, child);
    if (reclaim)
        reclaimer_enqueue(fs->reclaim, child_ino);
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err,
                           &(op_touched){.dir = {parent_ino}, .name = {name}, .ino = {child_ino}});
    else
        fuse_reply_err(req, err);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    stats_inc(&op_fs(req)->stats.ops[OP_UNLINK]);
    remove_entry(req, parent, name, false);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    stats_inc(&op_fs(req)->stats.ops[OP_RMDIR]);
    remove_entry(req, parent, name, true);
}
