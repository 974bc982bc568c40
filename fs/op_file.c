/*
 * op_file.c — open files: open, read, write, flush, release, fsync,
 * fallocate, lseek.
 */
#include "storeio.h"
#include "data.h"
#include "inode.h"
#include "killpriv.h"
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <unistd.h>

void op_file_opened(lsmfs *fs, inode *n, struct fuse_file_info *fi)
{
    assert(inode_held(n));
    (void)fs;
    (void)n;
    fi->fh = 0;
    /* Nothing changes a file's data behind the kernel: keep its pages. */
    fi->keep_cache = 1;
}

/* Sent only without no_open (allow_root), so that libfuse can refuse
 * other users here; the handle carries no state. */
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_OPEN]);
    if (fs->no_open) {
        fuse_reply_err(req, ENOSYS); /* the kernel stops sending open */
        return;
    }
    inode *n = op_pin(req, fs, ino, 0);
    if (n == NULL)
        return;
    int err = 0;
    inode_rdlock(n);
    if (n->gone)
        err = ENOENT;
    else if (S_ISDIR(n->rec.mode))
        err = EISDIR;
    else
        op_file_opened(fs, n, fi);
    inode_unlock(n);
    icache_put(fs->icache, n);
    if (err == 0)
        fuse_reply_open(req, fi);
    else
        fuse_reply_err(req, err);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_READ]);
    inode *n = op_pin(req, fs, ino, off < 0 ? EINVAL : 0);
    if (n == NULL)
        return;
    int err = 0;
    char *buf = NULL;
    size_t len = 0;
    inode_rdlock(n);
    err = data_read(fs, n, (uint64_t)off, size, &buf, &len);
    inode_unlock(n);
    icache_put(fs->icache, n);
    if (err != 0)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, len);
    free(buf);
}

/* Writes at least this large are committed with defer_log. */
#define DEFER_LOG_WRITE (128u * 1024)

/* REQUIRES: n->lock held for writing. keep_times: the kernel owns the
 * file's mtime and ctime (see op_write); kill: the write clears set-id
 * bits (killpriv.h), in its own batch. */
static int write_locked(fuse_req_t req, lsmfs *fs, inode *n, const char *buf, size_t size,
                        uint64_t off, bool keep_times, bool kill)
{
    assert(inode_wrheld(n));
    if (n->gone)
        return EIO;
    inode_rec r = n->rec;
    if (kill)
        r.mode = killpriv_mode(req, r.mode, r.gid);
    payload pl = {0};
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    int err = data_write(fs, b, n, &r, &pl, buf, size, off);
    if (err == 0) {
        if (!keep_times)
            r.mtime = r.ctime = ts_now();
        /* Large writes (a file copied or written in big blocks) skip the
         * WAL when their memtable is flushed before anything needs them
         * logged (docs/decisions.md, "Deferred logging"). Small writes, and
         * writes to a file someone fsyncs, are the fsync-heavy kind: they
         * would be logged soon anyway. */
        bool defer =
            size >= DEFER_LOG_WRITE && !atomic_load_explicit(&n->fsynced, memory_order_relaxed);
        err = op_commit_one_as(fs, b, n, &r, &pl, defer ? COMMIT_DEFER_LOG : 0);
    }
    payload_free(&pl);
    lsm_batch_free(b);
    return err;
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi)
{
    lsmfs *fs = op_fs(req);
    /* With the writeback cache the kernel stamps mtime and ctime at
     * write(2) and sends them in a SETATTR of its own; its write-back of
     * the pages, later, keeps them (else the store's mtime is the write-back
     * time, not the one stat showed: test_snapshot_diff). */
    bool keep_times = fs->cfg.writeback && fi != NULL && fi->writepage;
    stats_inc(&fs->stats.ops[OP_WRITE]);
    inode *n = op_pin(req, fs, ino, off < 0 ? EINVAL : 0);
    if (n == NULL)
        return;
    /* A write crossing the largest file size writes what fits (a short
     * write, as ext4's); one starting there fails with EFBIG. */
    const uint64_t max = data_max_size(fs);
    if (off >= 0 && (uint64_t)off < max && size > max - (uint64_t)off)
        size = (size_t)(max - (uint64_t)off);
    /* A write-back of cached pages is never refused: its data was already
     * accepted by write(2), and the kernel's writer is not the user. */
    bool writepage = fi != NULL && fi->writepage;
    int err = writepage ? 0 : reserve_admit(&fs->reserve, req, size);
    if (err != 0) {
        icache_put(fs->icache, n);
        fuse_reply_err(req, err);
        return;
    }
    /* Asked before the lock: it reads the caller's /proc status. A chmod
     * racing with the write is ordered after it either way. */
    inode_rec seen;
    op_read_rec(n, &seen);
    bool kill = killpriv_write_kills(req, seen.mode, writepage);
    inode_wrlock(n);
    err = write_locked(req, fs, n, buf, size, (uint64_t)off, keep_times, kill);
    inode_unlock(n);
    icache_put(fs->icache, n);
    if (err == 0 && kill)
        killpriv_changed(req, ino);
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err, &(op_touched){.ino = {ino}});
    else if (err != 0)
        fuse_reply_err(req, err);
    else
        fuse_reply_write(req, size);
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    stats_inc(&op_fs(req)->stats.ops[OP_FLUSH]);
    /* Nothing is buffered here; ENOSYS tells the kernel to stop asking. */
    fuse_reply_err(req, ENOSYS);
}

/* Nothing to do: an unlinked file is kept by the kernel's reference, not
 * by its handles (orphan_in_use), and the kernel forgets it after this. */
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    stats_inc(&op_fs(req)->stats.ops[OP_RELEASE]);
    fuse_reply_err(req, 0);
}

/* fsync, fdatasync and fsyncdir: everything up to the inode's last change
 * made durable (usually by a sync some other writer already made). */
void op_sync_inode(fuse_req_t req, fuse_ino_t ino)
{
    lsmfs *fs = op_fs(req);
    inode *n;
    int err = icache_get(fs, ino, &n);
    if (err == 0) {
        atomic_store_explicit(&n->fsynced, true, memory_order_relaxed);
        err = fs_sync_inode(fs, n);
        icache_put(fs->icache, n);
    }
    fuse_reply_err(req, err);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)datasync;
    (void)fi;
    stats_inc(&op_fs(req)->stats.ops[OP_FSYNC]);
    op_sync_inode(req, ino);
}

/* REQUIRES: n->lock held for writing. */
static int fallocate_locked(lsmfs *fs, inode *n, int mode, uint64_t off, uint64_t len)
{
    assert(inode_wrheld(n));
    if (n->gone)
        return EIO;
    if (!S_ISREG(n->rec.mode))
        return ENODEV;
    const uint64_t max = data_max_size(fs);
    if (off >= max || len > max - off)
        return EFBIG;
    inode_rec r = n->rec;
    payload pl = {0};
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    int err = 0;
    ts now = ts_now();
    bool changed = false;
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
        err = data_zero(fs, b, n, &r, &pl, off, len);
        changed = true;
    }
    if (err == 0 && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > r.size) {
        err = data_truncate(fs, b, n, &r, &pl, off + len);
        changed = true;
    }
    if (err == 0 && changed) {
        r.mtime = r.ctime = now;
        err = op_commit_one(fs, b, n, &r, &pl);
    }
    payload_free(&pl);
    lsm_batch_free(b);
    return err;
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  struct fuse_file_info *fi)
{
    (void)fi;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_FALLOCATE]);
    const int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
    int err = 0;
    if ((mode & ~known) != 0)
        err = EOPNOTSUPP;
    else if ((mode & FALLOC_FL_PUNCH_HOLE) &&
             ((mode & FALLOC_FL_ZERO_RANGE) || !(mode & FALLOC_FL_KEEP_SIZE)))
        err = EOPNOTSUPP;
    else if (off < 0 || len <= 0)
        err = EINVAL;
    inode *n = NULL;
    if (err == 0)
        err = icache_get(fs, ino, &n);
    if (err == 0) {
        inode_wrlock(n);
        err = fallocate_locked(fs, n, mode, (uint64_t)off, (uint64_t)len);
        inode_unlock(n);
        icache_put(fs->icache, n);
    }
    if (err == 0 && (err = fs_durable(fs)) != 0)
        op_reply_undurable(req, err, &(op_touched){.ino = {ino}});
    else
        fuse_reply_err(req, err);
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
    (void)fi;
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_LSEEK]);
    /* With the writeback cache the kernel asks without writing back what
     * it caches, so only it knows where the data is: ENOSYS has it answer
     * by itself from now on (all data up to its size, no holes). */
    if (fs->cfg.writeback) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    if (whence != SEEK_DATA && whence != SEEK_HOLE) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    inode *n = op_pin(req, fs, ino, off < 0 ? ENXIO : 0);
    if (n == NULL)
        return;
    int err = 0;
    uint64_t result = 0;
    inode_rdlock(n);
    err = data_seek(fs, n, (uint64_t)off, whence, &result);
    inode_unlock(n);
    icache_put(fs->icache, n);
    if (err != 0)
        fuse_reply_err(req, err);
    else
        fuse_reply_lseek(req, (off_t)result);
}
