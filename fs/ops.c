/*
 * ops.c — the helpers the op_*.c files share (ops.h); the table that calls
 * them is op_table.c's.
 */
#include "ops.h"

#include "storeio.h"
#include "inode.h"
#include "orphan.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ops_state *op_state(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

lsmfs *op_fs(fuse_req_t req)
{
    return op_state(req)->fs;
}

inode *op_pin(fuse_req_t req, lsmfs *fs, fuse_ino_t ino, int err)
{
    inode *n = NULL;
    if (err == 0)
        err = icache_get(fs, ino, &n);
    if (err != 0) {
        fuse_reply_err(req, err);
        return NULL;
    }
    return n;
}

void op_read_rec(inode *n, inode_rec *r)
{
    inode_rdlock(n);
    *r = n->rec;
    inode_unlock(n);
}

bool op_get_rec(fuse_req_t req, lsmfs *fs, fuse_ino_t ino, inode_rec *r)
{
    inode *n = op_pin(req, fs, ino, 0);
    if (n == NULL)
        return false;
    op_read_rec(n, r);
    icache_put(fs->icache, n);
    return true;
}

int op_commit_one(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, const payload *pl)
{
    assert(inode_wrheld(n));
    return op_commit_one_as(fs, b, n, r, pl, false);
}

int op_commit_one_as(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, const payload *pl,
                     unsigned flags)
{
    assert(inode_wrheld(n));
    char *kept = NULL; /* the new payload's copy, made before the commit (ops.h) */
    bool replace = pl != NULL && pl->replace;
    if (replace && pl->len > 0 && (kept = lsm_malloc(pl->len)) == NULL)
        return ENOMEM;
    if (kept != NULL)
        memcpy(kept, pl->data, pl->len);
    int err = inode_batch_finish(fs, b, n, r, pl);
    if (err == 0)
        err = fs_commit_as(fs, b, &n, 1, flags);
    if (err == 0)
        n->rec = *r;
    if (err == 0 && replace)
        icache_payload_keep(fs->icache, n, kept, pl->len);
    else
        free(kept);
    return err;
}

void op_fill_entry(lsmfs *fs, uint64_t ino, const inode_rec *r, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = ino;
    e->generation = r->generation;
    e->attr_timeout = fs->cfg.timeout;
    e->entry_timeout = fs->cfg.timeout;
    inode_to_stat(ino, r, fs->sb.chunk_size, &e->attr);
}

void op_reply_entry(fuse_req_t req, lsmfs *fs, inode *n, const inode_rec *r, uint64_t parent,
                    const char *name)
{
    struct fuse_entry_param e;
    op_fill_entry(fs, n->ino, r, &e);
    icache_lookup_inc(fs->icache, n, parent, name, S_ISDIR(r->mode));
    /* A reply the kernel never got leaves it holding no reference. */
    if (fuse_reply_entry(req, &e) != 0)
        op_forget_refs(fs, n->ino, 1);
}

void op_reply_attr(fuse_req_t req, lsmfs *fs, uint64_t ino, const inode_rec *r)
{
    struct stat st;
    inode_to_stat(ino, r, fs->sb.chunk_size, &st);
    fuse_reply_attr(req, &st, fs->cfg.timeout);
}

int op_drop_inode(lsmfs *fs, lsm_batch *b, inode *child, inode_rec *r, bool *reclaim_after,
                  bool *destroyed)
{
    assert(inode_wrheld(child));
    *reclaim_after = false;
    *destroyed = false;
    /* A mark left by a failed commit is harmless: the record still has
     * links when the last forget comes. */
    bool used = orphan_in_use(fs, child);
    if (used || orphan_needs_reclaim(fs, r)) {
        /* Keep the inode until the last forget, or until the reclaimer
         * frees the chunks. The mark alone says it has no names: r goes
         * to the cache only (orphan_batch_mark). */
        int err = orphan_batch_mark(b, child->ino);
        *reclaim_after = !used && err == 0;
        return err;
    }
    *destroyed = true;
    return orphan_batch_destroy(fs, b, child->ino, r);
}

void op_dropped(lsmfs *fs, inode *child, bool destroyed)
{
    assert(inode_held(child));
    if (destroyed) {
        child->gone = true;
        atomic_fetch_sub(&fs->inodes, 1);
    }
}

int op_free_orphan(lsmfs *fs, inode *n, bool *reclaim)
{
    assert(inode_wrheld(n));
    *reclaim = false;
    if (n->gone || n->rec.nlink != 0)
        return 0;
    if (orphan_needs_reclaim(fs, &n->rec)) {
        *reclaim = true; /* its orphan record is already committed */
        return 0;
    }
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    int err = orphan_batch_destroy(fs, b, n->ino, &n->rec);
    if (err == 0)
        err = fs_commit(fs, b, NULL, 0);
    lsm_batch_free(b);
    if (err == 0)
        op_dropped(fs, n, true);
    return err;
}

void op_forget_refs(lsmfs *fs, uint64_t ino, uint64_t count)
{
    assert(inode_locks_held() == 0);
    inode *n = icache_forget(fs->icache, ino, count);
    if (n == NULL)
        return;
    /* Not on this thread, and not one store write per orphan: the
     * reclaimer frees many in one batch (an unlinked file's FORGET comes
     * right after its UNLINK, so a second commit each halved unlink rates). */
    if (reclaimer_free_later(fs->reclaim, n))
        return;
    bool reclaim = false;
    int err = 0;
    inode_wrlock(n);
    if (!orphan_in_use(fs, n)) /* else a later forget frees it */
        err = op_free_orphan(fs, n, &reclaim);
    inode_unlock(n);
    icache_put(fs->icache, n);
    if (reclaim)
        reclaimer_enqueue(fs->reclaim, ino);
    /* A failed delete leaves the orphan mark for the next mount. */
    (void)err;
}

typedef struct undurable {
    ops_state *st;
    op_touched t;
    char name[2][SCHEMA_NAME_MAX + 1];
} undurable;

static void *notify_main(void *arg)
{
    undurable *u = arg;
    (void)pthread_setname_np(pthread_self(), "lsmfs-notify");
    for (int i = 0; i < 2; i++)
        if (u->t.dir[i] != 0)
            fuse_lowlevel_notify_inval_entry(u->st->se, u->t.dir[i], u->name[i],
                                             strlen(u->name[i]));
    for (int i = 0; i < 2; i++)
        if (u->t.ino[i] != 0)
            fuse_lowlevel_notify_inval_inode(u->st->se, u->t.ino[i], -1, 0);
    atomic_fetch_sub(&u->st->notifying, 1);
    free(u);
    return NULL;
}

void op_reply_undurable(fuse_req_t req, int err, const op_touched *t)
{
    ops_state *st = op_state(req);
    undurable *u = st->se != NULL ? lsm_calloc(1, sizeof *u) : NULL;
    if (u != NULL) {
        u->st = st;
        u->t = *t;
        for (int i = 0; i < 2; i++)
            if (t->dir[i] != 0)
                snprintf(u->name[i], sizeof u->name[i], "%s", t->name[i]);
    }
    fuse_reply_err(req, err);
    if (u == NULL)
        return;
    pthread_attr_t a;
    pthread_t th;
    atomic_fetch_add(&st->notifying, 1);
    bool started = pthread_attr_init(&a) == 0 &&
                   pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
                   pthread_create(&th, &a, notify_main, u) == 0;
    pthread_attr_destroy(&a);
    if (!started) {
        atomic_fetch_sub(&st->notifying, 1);
        free(u);
        fuse_log(FUSE_LOG_ERR, "lsmfs: cannot invalidate the kernel's entries after a failed sync\n");
    }
}

void op_notify_drain(ops_state *st)
{
    for (int i = 0; i < 500 && atomic_load(&st->notifying) > 0; i++)
        usleep(10000);
}

bool op_ioctl_arg(fuse_req_t req, const void *in, size_t insz, size_t outsz, bool want_out,
                  void *arg, size_t n)
{
    if (insz < n || (want_out && outsz < n)) {
        fuse_reply_err(req, EINVAL);
        return false;
    }
    memcpy(arg, in, n);
    return true;
}
