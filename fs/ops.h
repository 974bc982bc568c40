/*
 * ops.h — the FUSE low-level operations of lsmfs. Each op_*.c file
 * implements one group; ops.c holds the helpers they share; op_table.c
 * assembles the table (and op_waits[]), calling them, called by none. The
 * session's userdata is the lsmfs.
 *
 * Pattern of a state-changing op: pin the inodes (icache_get), lock them
 * in inode order, re-check what was looked up before locking, build ONE
 * batch, fs_commit it, update the cached records, unlock, then fs_durable
 * (a sync barrier under -o sync, taken with no lock held) and reply.
 *
 * Replies after the commit point. Once the batch is committed the change is
 * made: every later request sees it, and it survives a daemon crash. So
 * nothing may fail between the commit and the reply but the durability
 * barrier: whatever else can fail (allocation, pinning the new inode:
 * icache_reserve) is done before the commit. When the barrier fails the
 * reply is its error (the caller must not count on the change surviving a
 * power cut), through op_reply_undurable, which then has the kernel drop
 * what it cached of the names and inodes the change touched: it would
 * otherwise keep, for the cache timeout, entries that say the change was
 * not made.
 */
#ifndef FS_OPS_H
#define FS_OPS_H

#include "fuse_api.h"
#include "icache.h"
#include "inode.h"
#include "super.h"

/* Session-wide settings negotiated in init (written once before any other
 * request is served, read-only afterwards). */
typedef struct ops_state {
    lsmfs *fs;
    /* [const once mounted] for the kernel notifications of
     * op_reply_undurable; NULL: none are sent */
    struct fuse_session *se;
    _Atomic int notifying; /* op_reply_undurable threads still running */
    /* Listing entries that may still load their inode's record (op_dir.c's
     * listing-attributes rule); atomic, no lock. */
    _Atomic uint64_t list_attrs;
} ops_state;

const struct fuse_lowlevel_ops *lsmfs_ops(void);
/* For the request loop (loop.h): whether a request may wait on a sync or a
 * stalled store, or is a large transfer. state is the ops_state. */
struct fuse_in_header;
bool lsmfs_request_may_wait(void *state, const struct fuse_in_header *in, size_t len);

/* What a change touched: entries (dir, name), 0 dir for none, and inodes,
 * 0 for none. */
typedef struct op_touched {
    fuse_ino_t dir[2];
    const char *name[2];
    fuse_ino_t ino[2];
} op_touched;
/* Replies err for a committed change whose durability barrier failed (see
 * above) and invalidates the kernel's entries and attributes for `t`, from
 * a thread of its own: a notification waits for the directory lock the
 * kernel holds until the reply, and the thread replying may be the only
 * one reading /dev/fuse. */
void op_reply_undurable(fuse_req_t req, int err, const op_touched *t);
/* Waits (at most a few seconds) for those threads. Before the session is
 * destroyed. */
void op_notify_drain(ops_state *st);

/* Helpers shared by the op files. */
ops_state *op_state(fuse_req_t req);
lsmfs *op_fs(fuse_req_t req);
void op_fill_entry(lsmfs *fs, uint64_t ino, const inode_rec *r, struct fuse_entry_param *e);
/* Replies with an entry for pinned n (a copy of whose record is r), the
 * entry `name` of directory `parent`, and counts the kernel's new lookup
 * reference. */
void op_reply_entry(fuse_req_t req, lsmfs *fs, inode *n, const inode_rec *r, uint64_t parent,
                    const char *name);
void op_reply_attr(fuse_req_t req, lsmfs *fs, uint64_t ino, const inode_rec *r);
/* An ioctl's argument struct of n bytes into arg: false, having replied
 * EINVAL, unless the caller sent n bytes and (want_out) has room for n back. */
bool op_ioctl_arg(fuse_req_t req, const void *in, size_t insz, size_t outsz, bool want_out,
                  void *arg, size_t n);
/* Pins inode ino for a request, unless err (an error found before, such as
 * a bad offset) is set. On failure replies with the error and returns NULL:
 * the caller just returns. */
inode *op_pin(fuse_req_t req, lsmfs *fs, fuse_ino_t ino, int err);
/* Takes a snapshot of n->rec under its read lock. */
void op_read_rec(inode *n, inode_rec *r);
/* A snapshot of inode ino's record, for a request that changes nothing.
 * On failure replies with the error and returns false. */
bool op_get_rec(fuse_req_t req, lsmfs *fs, fuse_ino_t ino, inode_rec *r);
/* Ends a single-inode change: adds n's new record r (payload decision pl,
 * NULL to keep the stored payload) to b, commits b, and on success makes r
 * the cached record and a replaced payload the kept one (icache.h): the
 * only commit that changes an existing inode's payload.
 * REQUIRES: n->lock held for writing. */
int op_commit_one(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, const payload *pl);
/* op_commit_one with fs_commit_as's COMMIT_* flags. */
int op_commit_one_as(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, const payload *pl,
                     unsigned flags);
/* Drops the last link of child (whose new record r has nlink 0) inside the
 * batch: deletes it now (with its chunks, if it has few), or marks it an
 * orphan. *reclaim_after says the
 * caller must queue it for the reclaimer after committing; *destroyed that
 * its record is deleted. REQUIRES: child->lock held for writing. */
int op_drop_inode(lsmfs *fs, lsm_batch *b, inode *child, inode_rec *r, bool *reclaim_after,
                  bool *destroyed);
/* After a commit that ran op_drop_inode. REQUIRES: child->lock held. */
void op_dropped(lsmfs *fs, inode *child, bool destroyed);
/* Frees an unlinked inode nothing uses any more: deletes it now, or sets
 * *reclaim when the caller must queue it for the reclaimer (after
 * unlocking). REQUIRES: n->lock held for writing. */
int op_free_orphan(lsmfs *fs, inode *n, bool *reclaim);
/* Drops `count` kernel references to ino; an orphan whose last reference
 * that was is freed soon after, in a batch with others (orphan.h).
 * REQUIRES: no inode lock held. */
void op_forget_refs(lsmfs *fs, uint64_t ino, uint64_t count);

/* op_entry.c */
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi);
void op_readlink(fuse_req_t req, fuse_ino_t ino);

/* op_ns.c: names */
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);

/* op_rename.c */
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags);

/* op_file.c */
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  struct fuse_file_info *fi);
void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
/* fsync/fsyncdir of ino: its last change made durable, then the reply. */
void op_sync_inode(fuse_req_t req, fuse_ino_t ino);
/* Fills a new handle of n (open, create): handles carry no state, and an
 * unlinked file is kept by the kernel's reference, not its handles
 * (orphan_in_use), so a handle the kernel never got needs no undoing.
 * REQUIRES: n->lock held. */
void op_file_opened(lsmfs *fs, inode *n, struct fuse_file_info *fi);

/* op_dir.c */
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* A LOOKUP found a file that is not a directory: the caller wants files'
 * attributes, so listings load them again for a while (op_dir.c). */
void op_listing_wants_attrs(ops_state *st);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* op_xattr.c */
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags);
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* op_ioctl.c: the snapshot requests on the root (snapshot.h) */
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi,
              unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz);

/* op_statfs.c */
void op_statfs(fuse_req_t req, fuse_ino_t ino);

#endif
