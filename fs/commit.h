/*
 * commit.h — how the fs talks to the store's write path. Every state
 * change is one batch handed to fs_commit (atomic across crashes); the
 * caller may hold inode locks across fs_commit because it never syncs.
 * Durability is a separate step, fs_durable, taken with no lock held so
 * that concurrent fsyncs meet in the store's writer queue and share one WAL
 * sync.
 *
 * Store errors become errnos: ENOSPC for a full disk, EIO otherwise. The
 * first failure is logged; the store stays in its sticky error state, so
 * later writes fail too while reads keep working.
 */
#ifndef FS_COMMIT_H
#define FS_COMMIT_H

#include "super.h"

/* Applies b without syncing. Returns 0 or an errno. */
int fs_commit(lsmfs *fs, lsm_batch *b);
/* Makes every acknowledged write durable (fsync, fsyncdir). */
int fs_sync(lsmfs *fs);
/* After a state change, before replying: a sync barrier under -o sync,
 * nothing otherwise. REQUIRES: no inode lock held. */
int fs_durable(lsmfs *fs);
/* Converts a store status from a read to an errno (ENOENT for not found),
 * freeing it. */
int fs_read_errno(lsmfs *fs, lsm_status *s, const char *what);

#endif
