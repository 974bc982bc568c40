/*
 * ops.c — the fuse_lowlevel_ops table, session setup (init), and the
 * helpers the op_*.c files share.
 */
#include "ops.h"

#include "commit.h"
#include "inode.h"
#include "orphan.h"

#include <errno.h>
#include <linux/fuse.h>
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

int op_commit_one(lsmfs *fs, lsm_batch *b, inode *n, const inode_rec *r, const payload *pl)
{
    return op_commit_one_as(fs, b, n, r, pl, false);
}

int op_commit_one_as(lsmfs *fs, lsm_batch *b, inode *n, const inode_rec *r, const payload *pl,
                     unsigned flags)
{
    char *kept = NULL; /* the new payload's copy, made before the commit (ops.h) */
    bool replace = pl != NULL && pl->replace;
    if (replace && pl->len > 0 && (kept = malloc(pl->len)) == NULL)
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
    if (destroyed) {
        child->gone = true;
        atomic_fetch_sub(&fs->inodes, 1);
    }
}

int op_free_orphan(lsmfs *fs, inode *n, bool *reclaim)
{
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
    undurable *u = st->se != NULL ? calloc(1, sizeof *u) : NULL;
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

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    ops_state *st = userdata;
    /* Not the first killpriv: the INIT reply asks for the second
     * (FUSE_HANDLE_KILLPRIV_V2, killpriv.h), which libfuse 3.14 cannot. */
    conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
    /* Truncation on open arrives as a setattr (keeps suid clearing exact). */
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
    /* Every change passes through this mount, so the kernel's pages stay
     * right: no dropping a file's whole cache when its mtime moves. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
        conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    /* Directory handles carry no state either, but no OPENDIR would make
     * the kernel cache every listing (op_opendir says why it should not). */
    /* File handles carry none either (unlinked files are kept by the
     * kernel's references: orphan_in_use): no OPEN, no RELEASE.
     * Not with allow_root: libfuse refuses other users there per request
     * but lets READ and WRITE through, counting on OPEN being refused. */
    if ((conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) && !st->fs->cfg.allow_root) {
        conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
        st->fs->no_open = true;
    }
    /* Opt-in: the kernel gathers small writes in its page cache and sends
     * them at fsync, close or writeback; fsync still makes exactly what was
     * written durable (the kernel writes the pages back before FSYNC). */
    if (st->fs->cfg.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    else
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    /* The kernel enforces POSIX ACLs (acl.h); the umask is then ours to
     * apply, as only we know whether a default ACL replaces it. */
    if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
        conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    conn->max_write = 1u << 20;
    if (conn->max_readahead < (1u << 20))
        conn->max_readahead = 1u << 20;
    conn->time_gran = 1;
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
    .create = op_create,
    .fallocate = op_fallocate,
    .lseek = op_lseek,
    .ioctl = op_ioctl,
};

const struct fuse_lowlevel_ops *lsmfs_ops(void)
{
    return &ops;
}

/* How each request may wait on the disk, by opcode: a SYNCS request
 * always (it syncs, or ends the session), a COMMITS one when the store may
 * stall or every change is synced (-o sync). Every handler in `ops` that can
 * reach a store write or sync has its opcode here: test_fs_ops derives those
 * handlers from the code and checks this table against them. */
enum { NO_WAIT, COMMITS, SYNCS };
/* clang-format off */
static const unsigned char op_waits[] = {
    /* An unlinked file's last reference frees it: when forgotten, or when
     * the kernel never got the LOOKUP reply that gave it. */
    [FUSE_LOOKUP] = COMMITS,
    [FUSE_FORGET] = COMMITS,
    [FUSE_BATCH_FORGET] = COMMITS,
    [FUSE_SETATTR] = COMMITS,
    [FUSE_SYMLINK] = COMMITS,
    [FUSE_MKNOD] = COMMITS,
    [FUSE_MKDIR] = COMMITS,
    [FUSE_UNLINK] = COMMITS,
    [FUSE_RMDIR] = COMMITS,
    [FUSE_RENAME] = COMMITS,
    [FUSE_RENAME2] = COMMITS,
    [FUSE_LINK] = COMMITS,
    [FUSE_WRITE] = COMMITS,
    [FUSE_SETXATTR] = COMMITS,
    [FUSE_REMOVEXATTR] = COMMITS,
    [FUSE_CREATE] = COMMITS,
    [FUSE_FALLOCATE] = COMMITS,
    [FUSE_FSYNC] = SYNCS,
    [FUSE_FSYNCDIR] = SYNCS,
    [FUSE_DESTROY] = SYNCS,
    [FUSE_IOCTL] = SYNCS, /* a snapshot flushes the memtable */
};
/* clang-format on */

static int waits(uint32_t opcode)
{
    return opcode < sizeof op_waits ? op_waits[opcode] : NO_WAIT;
}

/* A READ or WRITE larger than this takes long enough that other requests
 * should not wait behind it (docs/decisions.md, "Our own request loop");
 * and large transfers come several at a time (readahead, big writes), which
 * two workers then serve side by side. */
#define LONG_TRANSFER (128u * 1024)

/* The size of a READ or WRITE request's transfer (0 if malformed: the
 * request's own handler rejects it). */
static uint32_t transfer_size(const struct fuse_in_header *in, size_t len)
{
    if (in->opcode == FUSE_READ && len >= sizeof(*in) + sizeof(struct fuse_read_in))
        return ((const struct fuse_read_in *)(in + 1))->size;
    if (in->opcode == FUSE_WRITE && len >= sizeof(*in) + sizeof(struct fuse_write_in))
        return ((const struct fuse_write_in *)(in + 1))->size;
    return 0;
}

bool lsmfs_request_may_wait(void *state, const struct fuse_in_header *in, size_t len)
{
    lsmfs *fs = ((ops_state *)state)->fs;
    int w = waits(in->opcode);
    if (w == SYNCS || transfer_size(in, len) > LONG_TRANSFER)
        return true;
    return w == COMMITS && (fs->cfg.sync_all || lsm_write_may_wait(fs->db));
}
