/*
 * op_rename.c — rename, with RENAME_NOREPLACE and RENAME_EXCHANGE, as one
 * batch: the old entry goes, the new one comes, a replaced target loses a
 * link (and becomes an orphan or is deleted when that was its last). With
 * RENAME_WHITEOUT (overlayfs; the VFS requires CAP_MKNOD) the old name
 * goes to a new whiteout, a character device 0:0, as on ext4.
 */
#include "commit.h"
#include "dir.h"
#include "inode.h"
#include "ops.h"
#include "orphan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct rename_op {
    lsmfs *fs;
    inode *op, *np, *s, *d; /* old/new parent, source, replaced target */
    dirent_val sd, dd;      /* the source and target entries */
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
    int64_t live = atomic_load(&fs->inodes);
    for (int64_t steps = 0; steps <= live; steps++) {
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
    const inode_rec *S = &x->s->rec, *D = x->d ? &x->d->rec : NULL;
    if (x->op->gone || x->np->gone || x->np->rec.nlink == 0)
        return ENOENT;
    if ((x->flags & RENAME_NOREPLACE) && D != NULL)
        return EEXIST;
    if ((x->flags & RENAME_EXCHANGE) && D == NULL)
        return ENOENT;
    if (!(x->flags & RENAME_EXCHANGE) && D != NULL) {
        if (S_ISDIR(S->mode) && !S_ISDIR(D->mode))
            return ENOTDIR;
        if (!S_ISDIR(S->mode) && S_ISDIR(D->mode))
            return EISDIR;
        if (S_ISDIR(D->mode) && D->size != 0)
            return ENOTEMPTY;
    }
    if (x->op == x->np)
        return 0;
    bool within = false;
    int err = 0;
    if (S_ISDIR(S->mode))
        err = is_within(x->fs, x->np->ino, x->s->ino, &within);
    if (err == 0 && !within && D != NULL && (x->flags & RENAME_EXCHANGE) && S_ISDIR(D->mode))
        err = is_within(x->fs, x->op->ino, x->d->ino, &within);
    return err != 0 ? err : within ? EINVAL : 0;
}

/* Entries and link counts for an exchange of two names. */
static int exchange(rename_op *x, lsm_batch *b, inode_rec *po, inode_rec *pn, inode_rec *S,
                    inode_rec *D)
{
    int err = dir_batch_add(b, x->op->ino, x->name, x->d->ino, inode_type(D), x->sd.cookie);
    if (err == 0)
        err = dir_batch_add(b, x->np->ino, x->newname, x->s->ino, inode_type(S), x->dd.cookie);
    if (x->op != x->np) {
        bool sdir = S_ISDIR(S->mode), ddir = S_ISDIR(D->mode);
        if (sdir && !ddir) {
            po->nlink--;
            pn->nlink++;
        } else if (!sdir && ddir) {
            po->nlink++;
            pn->nlink--;
        }
        if (sdir)
            S->parent = x->np->ino;
        if (ddir)
            D->parent = x->op->ino;
    }
    return err;
}

/* The whiteout taking the old name (in the old entry's place, with its
 * cookie), for RENAME_WHITEOUT. */
static int add_whiteout(rename_op *x, lsm_batch *b, ts now)
{
    inode_rec w;
    inode_init(&w, S_IFCHR, x->uid, x->gid, 0, &x->op->rec);
    w.atime = w.mtime = w.ctime = now;
    int err = inode_batch_put(b, x->whiteout, &w, NULL, 0);
    if (err == 0)
        err = dir_batch_add(b, x->op->ino, x->name, x->whiteout, inode_type(&w), x->sd.cookie);
    return err;
}

/* Entries and link counts for a move (replacing the target if any). */
static int move(rename_op *x, lsm_batch *b, inode_rec *po, inode_rec *pn, inode_rec *S,
                inode_rec *D)
{
    int err = 0;
    if (x->flags & RENAME_WHITEOUT) {
        err = add_whiteout(x, b, ts_now());
    } else {
        err = dir_batch_remove(b, x->op->ino, x->name, x->sd.cookie);
        po->size--;
    }
    if (err == 0 && x->d != NULL) {
        err = dir_batch_remove(b, x->np->ino, x->newname, x->dd.cookie);
        pn->size--;
        if (S_ISDIR(D->mode)) {
            pn->nlink--; /* the replaced directory's ".." */
            D->nlink = 0;
        } else {
            D->nlink--;
        }
    }
    x->new_cookie = pn->next_cookie++;
    if (err == 0)
        err = dir_batch_add(b, x->np->ino, x->newname, x->s->ino, inode_type(S), x->new_cookie);
    pn->size++;
    if (S_ISDIR(S->mode) && x->op != x->np) {
        po->nlink--;
        pn->nlink++;
        S->parent = x->np->ino;
    }
    return err;
}

/* The committed rename, made to the directories' listings in memory. */
static void rename_cached(rename_op *x, const inode_rec *S, const inode_rec *D)
{
    lsmfs *fs = x->fs;
    if (x->flags & RENAME_EXCHANGE) {
        dir_cached_retarget(fs, x->op, x->name, x->d->ino, inode_type(D));
        dir_cached_retarget(fs, x->np, x->newname, x->s->ino, inode_type(S));
        return;
    }
    if (x->flags & RENAME_WHITEOUT)
        dir_cached_retarget(fs, x->op, x->name, x->whiteout, DT_CHR);
    else
        dir_cached_remove(fs, x->op, x->name);
    if (x->d != NULL) {
        dir_cached_remove(fs, x->np, x->newname);
        if (S_ISDIR(D->mode))
            dir_cache_drop(fs, x->d);
    }
    dir_cached_add(fs, x->np, x->newname, x->s->ino, inode_type(S), x->new_cookie);
}

/* REQUIRES: op, np, s, d locked for writing; entries re-read under them. */
static int rename_locked(rename_op *x)
{
    if (x->d != NULL && x->d == x->s)
        return 0; /* two names of one inode: POSIX says do nothing */
    int err = check(x);
    if (err != 0)
        return err;
    bool cross = x->op != x->np;
    inode_rec po = x->op->rec, pn_own = x->np->rec, *pn = cross ? &pn_own : &po;
    inode_rec S = x->s->rec, D = x->d ? x->d->rec : (inode_rec){0};
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    ts now = ts_now();
    if (x->flags & RENAME_EXCHANGE)
        err = exchange(x, b, &po, pn, &S, &D);
    else
        err = move(x, b, &po, pn, &S, &D);
    S.ctime = D.ctime = now;
    po.mtime = po.ctime = pn->mtime = pn->ctime = now;
    if (err == 0)
        err = inode_batch_update(x->fs, b, x->op, &po);
    if (err == 0 && cross)
        err = inode_batch_update(x->fs, b, x->np, pn);
    if (err == 0)
        err = inode_batch_update(x->fs, b, x->s, &S);
    bool destroyed = false;
    if (err == 0 && x->d != NULL && D.nlink == 0)
        err = op_drop_inode(x->fs, b, x->d, &D, &x->reclaim, &destroyed);
    else if (err == 0 && x->d != NULL)
        err = inode_batch_update(x->fs, b, x->d, &D);
    if (err == 0)
        err = fs_commit(x->fs, b, (inode *const[]){x->op, x->np, x->s, x->d}, 4);
    lsm_batch_free(b);
    if (err != 0) {
        x->reclaim = false;
        return err;
    }
    x->op->rec = po;
    if (x->flags & RENAME_WHITEOUT)
        atomic_fetch_add(&x->fs->inodes, 1);
    if (cross)
        x->np->rec = *pn;
    x->s->rec = S;
    atomic_store(&x->s->parent, S.parent);
    rename_cached(x, &S, &D);
    if (x->d != NULL) {
        x->d->rec = D;
        atomic_store(&x->d->parent, D.parent);
        op_dropped(x->fs, x->d, destroyed);
    }
    return 0;
}

/* The usual case, entries whose inodes are numbered above both directories
 * (created after them): lock order allows locking the directories first, so
 * each name is read once, under the locks. Sets *done unless an entry is
 * numbered lower (then nothing was changed or pinned, and the caller takes
 * the general path). */
static int rename_parents_first(rename_op *x, bool *done)
{
    lsmfs *fs = x->fs;
    inode *parents[2] = {x->op, x->np};
    icache_lock_many(parents, 2);
    uint64_t top = x->op->ino > x->np->ino ? x->op->ino : x->np->ino;
    bool have_d = false;
    int err = dir_find(fs, x->op, x->name, &x->sd);
    if (err == 0) {
        err = dir_find(fs, x->np, x->newname, &x->dd);
        have_d = err == 0;
        err = err == ENOENT ? 0 : err;
    }
    *done = err != 0 || (x->sd.ino > top && (!have_d || x->dd.ino > top));
    if (err == 0 && *done) { /* icache_get may lock them to load them: in order */
        err = icache_get(fs, x->sd.ino, &x->s);
        if (err == 0 && have_d)
            err = icache_get(fs, x->dd.ino, &x->d);
        err = err == ENOENT ? EIO : err; /* an entry without its inode */
    }
    if (err == 0 && *done) {
        inode *children[2] = {x->s, x->d};
        icache_lock_many(children, 2);
        err = rename_locked(x);
        icache_unlock_many(children, 2);
    }
    icache_unlock_many(parents, 2);
    return err;
}

/* Looks the two names up, pins their inodes, locks all four and checks
 * the names still point where they did; loops if they moved. */
static int rename_pinned(rename_op *x)
{
    lsmfs *fs = x->fs;
    bool done = false;
    int first = rename_parents_first(x, &done);
    if (done)
        return first;
    for (int tries = 0; tries < 100; tries++) {
        int err = dir_lookup(fs, x->op->ino, x->name, &x->sd);
        if (err != 0)
            return err;
        err = dir_lookup(fs, x->np->ino, x->newname, &x->dd);
        bool have_d = err == 0;
        if (err != 0 && err != ENOENT)
            return err;
        if ((err = icache_get(fs, x->sd.ino, &x->s)) != 0)
            return err == ENOENT ? EIO : err;
        if (have_d && (err = icache_get(fs, x->dd.ino, &x->d)) != 0)
            return err == ENOENT ? EIO : err;
        inode *v[4] = {x->op, x->np, x->s, x->d};
        icache_lock_many(v, 4);
        dirent_val s2, d2;
        bool same = dir_find(fs, x->op, x->name, &s2) == 0 && s2.ino == x->sd.ino &&
                    s2.cookie == x->sd.cookie;
        int derr = dir_find(fs, x->np, x->newname, &d2);
        same = same && (have_d ? derr == 0 && d2.ino == x->dd.ino && d2.cookie == x->dd.cookie
                               : derr == ENOENT);
        if (same)
            err = rename_locked(x);
        icache_unlock_many(v, 4);
        if (same)
            return err;
        icache_put(fs->icache, x->s);
        icache_put(fs->icache, x->d);
        x->s = x->d = NULL;
    }
    return EAGAIN;
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
    err = icache_get(fs, parent, &x.op);
    if (err == 0)
        err = icache_get(fs, newparent, &x.np);
    if (err == 0)
        err = rename_pinned(&x);
    uint64_t target = x.d ? x.d->ino : 0;
    icache_put(fs->icache, x.op);
    icache_put(fs->icache, x.np);
    icache_put(fs->icache, x.s);
    icache_put(fs->icache, x.d);
    if (x.reclaim)
        reclaimer_enqueue(fs->reclaim, target);
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err,
                           &(op_touched){.dir = {parent, newparent}, .name = {name, newname}});
    else
        fuse_reply_err(req, err);
}
