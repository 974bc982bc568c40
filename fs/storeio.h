/*
 * storeio.h — how a mounted filesystem reads and writes its store: the
 * one path of every request's store access. Every state change is one
 * batch handed to fs_commit (atomic across crashes); the caller may hold
 * inode locks across fs_commit because it never syncs. Durability is a
 * separate step taken with no lock held. Reads go through fs_get and
 * fs_iter_new (counted in the stats, errors mapped alike).
 *
 * The exception: modules that work on a bare lsm_db, because mkfs, fsck
 * and lsmctl use them with no mount, or because they run while a mount
 * opens or closes (no request is served, no inode is cached), call the
 * store directly: super.c (the superblock; its format upgrade at a
 * read-write open), alloc.c (its record at open, and each range
 * reservation: a put of the 'A' key under the allocator's mutex), icount.c
 * (the inode count at open and close), fsinfo.c and fsck.c; and orphan.c
 * drops and compacts a freed inode's chunk range (nothing there is live;
 * its orphan record, deleted through fs_commit last, makes a crash redo
 * them). Each of their
 * writes is synced by itself (fsck's last one of a run) since no fsync
 * covers them: they stamp no inode and leave committed_seq and durable_seq
 * alone; each reports its own error.
 *
 * Durability by sequence number: fs_commit stamps every inode the batch
 * changed (its record, its directory entries, its data) with the batch's
 * sequence number. fsync/fsyncdir then only need "everything up to this
 * inode's stamp is on disk" (fs_sync_upto): when a sync made for someone
 * else already covered it, the answer costs no disk access at all; when a
 * sync is in flight that will cover it, it waits for that one; otherwise it
 * leads a sync that also covers every other writer waiting. So concurrent
 * fsyncs and fsyncdirs of a maildir delivery share WAL syncs, and an fsync
 * never syncs twice for the same writes.
 *
 * Store errors become errnos: ENOSPC for a full disk, ENOMEM for out of
 * memory, EIO otherwise. The
 * first failure is logged; the store stays in its sticky error state, so
 * later writes fail too while reads keep working.
 */
#ifndef FS_STOREIO_H
#define FS_STOREIO_H

#include "schema.h"
#include "super.h"

typedef struct inode inode;

/* Applies b without syncing and stamps the `n` inodes of `touched` (NULL
 * entries allowed) with its sequence number, and their deferred_last with
 * whether b was kept out of the WAL. REQUIRES: each touched inode's
 * lock held for writing (so stamps only grow). Returns 0 or an errno. */
int fs_commit(lsmfs *fs, lsm_batch *b, inode *const *touched, int n);
/* How fs_commit_as writes a batch (flags, or-ed). */
enum {
    /* b's bytes may stay out of the store's WAL (lsm_write_options.
     * defer_log; ignored under -o sync): for large writes of file data,
     * which then reach the disk once. */
    COMMIT_DEFER_LOG = 1,
    /* b frees space (unlink, rmdir, truncating down, freeing orphans): it
     * may use the store's reserve, so it succeeds on a full disk
     * (lsm_write_options.frees_space). */
    COMMIT_FREES_SPACE = 2,
};
/* fs_commit with COMMIT_* flags. */
int fs_commit_as(lsmfs *fs, lsm_batch *b, inode *const *touched, int n, unsigned flags);
/* Makes every write with a sequence number <= seq durable, sharing or
 * skipping syncs as described above. REQUIRES: no inode lock held. */
int fs_sync_upto(lsmfs *fs, uint64_t seq);
/* fsync/fsyncdir of inode n: fs_sync_upto(n's stamp). */
int fs_sync_inode(lsmfs *fs, inode *n);
/* After a state change, before replying: everything committed so far made
 * durable under -o sync, nothing otherwise. REQUIRES: no inode lock held. */
int fs_durable(lsmfs *fs);
/* The sequence number a newly cached inode is stamped with: every change
 * the store holds for it is at or below this. */
uint64_t fs_committed_seq(lsmfs *fs);
/* Reads one key (lsm_get with default options), counted in the stats.
 * Returns NULL with a malloc'd *v (NULL when empty) or the store status. */
lsm_status *fs_get(lsmfs *fs, const schema_key *k, char **v, size_t *vlen);
/* Converts a store status from a read to an errno (ENOENT for not found,
 * ENOMEM for out of memory, else EIO, logged), freeing it. */
int fs_read_errno(lsmfs *fs, lsm_status *s, const char *what);
/* A store iterator for a scan (fill_cache: whether its blocks should stay
 * cached); NULL when out of memory. */
lsm_iter *fs_iter_new(lsmfs *fs, bool fill_cache);
/* Positions it at the last key before `key` (not valid if there is none):
 * the last key of a range, given the first key past it. */
void fs_iter_seek_before(lsm_iter *it, const void *key, size_t klen);
/* Ends a scan: frees it and returns err, or when the scan itself found no
 * error (err 0), the iterator's status as an errno (logged as `what`). */
int fs_iter_end(lsmfs *fs, lsm_iter *it, int err, const char *what);

#endif
