/*
 * icount.h — the number of live inode records (statfs's files in use),
 * kept across a clean unmount so that a mount reads one key instead of
 * every inode record (with its inline data).
 *
 * The 'N' record holds the count and its own sequence number. It is
 * trusted only while the store's last sequence is still that number: any
 * write after it (this lsmfs, an older one that does not know the record,
 * fsck -y, a snapshot restore) makes it stale, and a crash leaves it stale
 * or exactly true (recovery keeps a prefix). A stale record costs one scan.
 */
#ifndef FS_ICOUNT_H
#define FS_ICOUNT_H

#include "lsm.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A scan in the background, for a mount whose record is stale (after a
 * crash): it counts what the store holds when it starts (a snapshot, kept
 * until counted), while the mount's own creates and deletes go to the same
 * total from 0, so the total is exact once the scan has added its count
 * (then *known turns true). A scan out of memory counts again from the
 * start of the snapshot, after a growing pause; other errors end it
 * (*known stays false: statfs shows fewer). */
typedef struct icount_job icount_job;
/* Takes the store's state now (before the mount writes) and counts its
 * first few thousand inode keys at once: a store with no more is counted
 * (*known) when it returns, with *out NULL; else a thread counts the rest.
 * 0 or an errno (EIO, ENOMEM, or pthread_create's). */
int icount_start(lsm_db *db, _Atomic int64_t *total, _Atomic bool *known, icount_job **out);
/* Stops the scan (early if need be: *known stays false) and frees it.
 * NULL: nothing. Before the store closes. */
void icount_stop(icount_job *j);
/* Counts every inode key (the slow way). */
int icount_scan(lsm_db *db, int64_t *count);
/* Whether the record is current and, if so, its count. A damaged record is
 * not current. 0, ENOMEM or EIO (the store's errno: lsm_status_errno). */
int icount_current(lsm_db *db, bool *current, uint64_t *count);
/* Writes the record, synced. Called with no other writer left (a clean
 * unmount); a write after it only makes it stale. 0 or an errno. */
int icount_save(lsm_db *db, int64_t count);

#endif
