/*
 * op_rename.c — rename, with RENAME_NOREPLACE and RENAME_EXCHANGE, as one
 * batch: the old entry goes, the new one comes, a replaced target loses a
 * link (and becomes an orphan or is deleted when that was its last). With
 * RENAME_WHITEOUT (overlayfs; the VFS requires CAP_MKNOD) the old name
 * goes to a new whiteout, a character device 0:0, as on ext4.
 */
#include "storeio.h"
#include "dir.h"
#include "entry.h"
#include "inode.h"
#include "lsmfs.h"
#include "ops.h"
#include "orphan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct rename_op {
    lsmfs *fs;
    inode *old_dir, *new_dir, *src, *dst; /* old/new parent, source, replaced target */
    dirent_val src_ent, dst_ent;          /* the source and target entries */
    const char *name, *newname;
    unsigned int flags;
    uint64_t whiteout;   /* RENAME_WHITEOUT: the new whiteout's inode number */
    uint32_t uid, gid;   /* the caller's, for the whiteout */
    uint64_t new_cookie; /* the moved entry's cookie in its new directory */
    bool reclaim;        /* the replaced target must go to the reclaimer */
} rename_op;

/* Is directory `dir` equal to or below directory `top`? The kernel makes
 * this check itself, on its dentries, under the mount's rename mutex
 * (lock_rename), which also serialises every cross-directory rename: so
 * parents are stable here without a lock of ours, and this walk only keeps
 * a kernel that let a loop through from detaching a subtree. It reads the
 * cached parents (the kernel holds every ancestor of a directory it works
 * in); a chain longer than the inodes in use is a loop in the store. */
static int is_within(lsmfs *fs, uint64_t dir, uint64_t top, bool *within)
{
    *within = false;
    uint64_t live = lsmfs_inodes_bound(fs);
    for (uint64_t steps = 0; steps <= live; steps++) {
        if (dir == top) {
            *within = true;
            return 0;
        }
        if (dir == SCHEMA_ROOT_INO)
            return 0;
        uint64_t parent;
        if (!icache_cached_parent(fs->icache, dir, &parent)) {
            inode_rec r;
            int err = inode_load(fs, dir, &r, NULL, NULL);
            if (err != 0)
                return err == ENOENT ? EIO : err;
            parent = r.parent;
        }
        dir = parent;
    }
    return EIO;
}

/* The checks POSIX and Linux make before a rename; 0 to go ahead. */
static int check(rename_op *x)
{
    const inode_rec *src_rec = &x->src->rec, *dst_rec = x->dst ? &x->dst->rec : NULL;
    if (x->old_dir->gone || x->new_dir->gone || x->new_dir->rec.nlink == 0)
        return ENOENT;
    if ((x->flags & RENAME_NOREPLACE) && dst_rec != NULL)
        return EEXIST;
    if ((x->flags & RENAME_EXCHANGE) && dst_rec == NULL)
        return ENOENT;
    if (!(x->flags & RENAME_EXCHANGE) && dst_rec != NULL) {
        if (S_ISDIR(src_rec->mode) && !S_ISDIR(dst_rec->mode))
            return ENOTDIR;
        if (!S_ISDIR(src_rec->mode) && S_ISDIR(dst_rec->mode))
            return EISDIR;
        if (S_ISDIR(dst_rec->mode) && dst_rec->size != 0)
            return ENOTEMPTY;
    }
    if (x->old_dir == x->new_dir)
        return 0;
    bool within = false;
    int err = 0;
    if (S_ISDIR(src_rec->mode))
        err = is_within(x->fs, x->new_dir->ino, x->src->ino, &within);
    if (err == 0 && !within && dst_rec != NULL && (x->flags & RENAME_EXCHANGE) &&
        S_ISDIR(dst_rec->mode))
        err = is_within(x->fs, x->old_dir->ino, x->dst->ino, &within);
    return err != 0 ? err : within ? EINVAL : 0;
}

/* Entries and link counts for an exchange of two names. */
static int exchange(rename_op *x, lsm_batch *b, inode_rec *old_rec, inode_rec *new_rec,
                    inode_rec *src_rec, inode_rec *dst_rec)
{
    int err = dir_batch_add(b, x->old_dir->ino, x->name, x->dst->ino, inode_type(dst_rec),
                            x->src_ent.cookie);
    if (err == 0)
        err = dir_batch_add(b, x->new_dir->ino, x->newname, x->src->ino, inode_type(src_rec),
                            x->dst_ent.cookie);
    if (x->old_dir != x->new_dir) {
        bool src_isdir = S_ISDIR(src_rec->mode), dst_isdir = S_ISDIR(dst_rec->mode);
        if (src_isdir && !dst_isdir) {
            old_rec->nlink--;
            new_rec->nlink++;
        } else if (!src_isdir && dst_isdir) {
            old_rec->nlink++;
            new_rec->nlink--;
        }
        if (src_isdir)
            src_rec->parent = x->new_dir->ino;
        if (dst_isdir)
            dst_rec->parent = x->old_dir->ino;
    }
    return err;
}

/* The whiteout taking the old name (in the old entry's place, with its
 * cookie), for RENAME_WHITEOUT. */
static int add_whiteout(rename_op *x, lsm_batch *b, ts now)
{
    inode_rec w;
    inode_init(&w, S_IFCHR, x->uid, x->gid, 0, &x->old_dir->rec);
    w.atime = w.mtime = w.ctime = now;
    int err = inode_batch_put(b, x->whiteout, &w, NULL, 0);
    if (err == 0)
        err = dir_batch_add(b, x->old_dir->ino, x->name, x->whiteout, inode_type(&w),
                            x->src_ent.cookie);
    return err;
}

/* Entries and link counts for a move (replacing the target if any). */
static int move(rename_op *x, lsm_batch *b, inode_rec *old_rec, inode_rec *new_rec,
                inode_rec *src_rec, inode_rec *dst_rec)
{
    int err = 0;
    if (x->flags & RENAME_WHITEOUT) {
        err = add_whiteout(x, b, ts_now());
    } else {
        err = dir_batch_remove(b, x->old_dir->ino, x->name, x->src_ent.cookie);
        old_rec->size--;
    }
    if (err == 0 && x->dst != NULL) {
        err = dir_batch_remove(b, x->new_dir->ino, x->newname, x->dst_ent.cookie);
        new_rec->size--;
        if (S_ISDIR(dst_rec->mode)) {
            new_rec->nlink--; /* the replaced directory's ".." */
            dst_rec->nlink = 0;
        } else {
            dst_rec->nlink--;
        }
    }
    x->new_cookie = new_rec->next_cookie++;
    if (err == 0)
        err = dir_batch_add(b, x->new_dir->ino, x->newname, x->src->ino, inode_type(src_rec),
                            x->new_cookie);
    new_rec->size++;
    if (S_ISDIR(src_rec->mode) && x->old_dir != x->new_dir) {
        old_rec->nlink--;
        new_rec->nlink++;
        src_rec->parent = x->new_dir->ino;
    }
    return err;
}

/* The committed rename, made to the directories' listings in memory. */
static void rename_cached(rename_op *x, const inode_rec *src_rec, const inode_rec *dst_rec)
{
    lsmfs *fs = x->fs;
    if (x->flags & RENAME_EXCHANGE) {
        dir_cached_retarget(fs, x->old_dir, x->name, x->dst->ino, inode_type(dst_rec));
        dir_cached_retarget(fs, x->new_dir, x->newname, x->src->ino, inode_type(src_rec));
        return;
    }
    if (x->flags & RENAME_WHITEOUT)
        dir_cached_retarget(fs, x->old_dir, x->name, x->whiteout, DT_CHR);
    else
        dir_cached_remove(fs, x->old_dir, x->name);
    if (x->dst != NULL) {
        dir_cached_remove(fs, x->new_dir, x->newname);
        if (S_ISDIR(dst_rec->mode))
            dir_cache_drop(fs, x->dst);
    }
    dir_cached_add(fs, x->new_dir, x->newname, x->src->ino, inode_type(src_rec), x->new_cookie);
}

/* REQUIRES: old_dir, new_dir, src, dst locked for writing; src_ent and
 * dst_ent checked under those locks (entry_unchanged). */
static int rename_locked(rename_op *x)
{
    assert(inode_wrheld(x->old_dir) && inode_wrheld(x->new_dir) && inode_wrheld(x->src));
    assert(x->dst == NULL || inode_wrheld(x->dst));
    if (x->dst != NULL && x->dst == x->src)
        return 0; /* two names of one inode: POSIX says do nothing */
    int err = check(x);
    if (err != 0)
        return err;
    bool cross = x->old_dir != x->new_dir;
    inode_rec old_rec = x->old_dir->rec, new_own = x->new_dir->rec,
              *new_rec = cross ? &new_own : &old_rec;
    inode_rec src_rec = x->src->rec, dst_rec = x->dst ? x->dst->rec : (inode_rec){0};
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    ts now = ts_now();
    if (x->flags & RENAME_EXCHANGE)
        err = exchange(x, b, &old_rec, new_rec, &src_rec, &dst_rec);
    else
        err = move(x, b, &old_rec, new_rec, &src_rec, &dst_rec);
    src_rec.ctime = dst_rec.ctime = now;
    old_rec.mtime = old_rec.ctime = new_rec->mtime = new_rec->ctime = now;
    if (err == 0)
        err = inode_batch_update(x->fs, b, x->old_dir, &old_rec);
    if (err == 0 && cross)
        err = inode_batch_update(x->fs, b, x->new_dir, new_rec);
    if (err == 0)
        err = inode_batch_update(x->fs, b, x->src, &src_rec);
    bool destroyed = false;
    if (err == 0 && x->dst != NULL && dst_rec.nlink == 0)
        err = op_drop_inode(x->fs, b, x->dst, &dst_rec, &x->reclaim, &destroyed);
    else if (err == 0 && x->dst != NULL)
        err = inode_batch_update(x->fs, b, x->dst, &dst_rec);
    if (err == 0)
        err = fs_commit(x->fs, b, (inode *const[]){x->old_dir, x->new_dir, x->src, x->dst}, 4);
    lsm_batch_free(b);
    if (err != 0) {
        x->reclaim = false;
        return err;
    }
    x->old_dir->rec = old_rec;
    if (x->flags & RENAME_WHITEOUT)
        atomic_fetch_add(&x->fs->inodes, 1);
    if (cross)
        x->new_dir->rec = *new_rec;
    x->src->rec = src_rec;
    atomic_store(&x->src->parent, src_rec.parent);
    rename_cached(x, &src_rec, &dst_rec);
    if (x->dst != NULL) {
        x->dst->rec = dst_rec;
        atomic_store(&x->dst->parent, dst_rec.parent);
        op_dropped(x->fs, x->dst, destroyed);
    }
    return 0;
}

/* Renames: pins the two entries' inodes, locks all four in the lock order
 * and checks the entries under the locks. The kernel holds both
 * directories' i_rwsem (and, across directories, the mount's rename mutex)
 * from its lookups of the names to our reply, so the entries cannot change
 * in between; should they all the same, this fails with ESTALE, changing
 * nothing (entry_unchanged). */
static int rename_entries(rename_op *x)
{
    lsmfs *fs = x->fs;
    uint64_t src_seen, dst_seen;
    int err = entry_pin(fs, x->old_dir, x->name, &x->src_ent, &src_seen, &x->src);
    if (err != 0)
        return err;
    err = entry_pin(fs, x->new_dir, x->newname, &x->dst_ent, &dst_seen, &x->dst);
    bool have_dst = err == 0;
    if (err != 0 && err != ENOENT)
        return err;
    inode *v[4] = {x->old_dir, x->new_dir, x->src, x->dst};
    inode_wrlock_all(v, 4);
    err = entry_unchanged(fs, x->old_dir, x->name, &x->src_ent, src_seen);
    if (err == 0)
        err = entry_unchanged(fs, x->new_dir, x->newname, have_dst ? &x->dst_ent : NULL, dst_seen);
    if (err == 0)
        err = rename_locked(x);
    inode_unlock_all(v, 4);
    return err;
}

static int check_args(const char *name, const char *newname, unsigned int flags)
{
    if (flags & ~(unsigned int)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
        return EINVAL;
    if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT)))
        return EINVAL;
    if (strlen(name) > SCHEMA_NAME_MAX)
        return ENAMETOOLONG;
    return dir_check_name(newname);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_RENAME]);
    rename_op x = {.fs = fs, .name = name, .newname = newname, .flags = flags};
    int err = check_args(name, newname, flags);
    if (err == 0 && (flags & RENAME_WHITEOUT)) {
        const struct fuse_ctx *ctx = fuse_req_ctx(req);
        x.uid = ctx->uid;
        x.gid = ctx->gid;
        err = alloc_ino(&fs->alloc, &x.whiteout);
    }
    if (err != 0) {
        fuse_reply_err(req, err);
        return;
    }
    err = icache_get(fs, parent, &x.old_dir);
    if (err == 0)
        err = icache_get(fs, newparent, &x.new_dir);
    if (err == 0)
        err = rename_entries(&x);
    uint64_t target = x.dst ? x.dst->ino : 0;
    icache_put(fs->icache, x.old_dir);
    icache_put(fs->icache, x.new_dir);
    icache_put(fs->icache, x.src);
    icache_put(fs->icache, x.dst);
    if (x.reclaim)
        reclaimer_enqueue(fs->reclaim, target);
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err,
                           &(op_touched){.dir = {parent, newparent}, .name = {name, newname}});
    else
        fuse_reply_err(req, err);
}
