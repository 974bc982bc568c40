/*
 * inode_lock.h — an inode's rwlock taken and released in the lock order,
 * and, for assertions, who holds it.
 */
#ifndef FS_INODE_LOCK_H
#define FS_INODE_LOCK_H

#include "icache.h"

#include <assert.h>
#include <stdbool.h>

/* Inode locks taken in the lock order (ARCHITECTURE.md, "Concurrency
 * rules"): ascending inode number. Each thread records the inode locks it
 * holds through these, and taking one numbered at or below one of them
 * fails an assertion. Every inode lock goes through these except the
 * orphan reclaimer's batch (inode_wrlock_unordered). Each asserts the inode
 * pinned. Pair each lock with inode_unlock (or the _all forms). */
void inode_wrlock(inode *n);
void inode_rdlock(inode *n);
void inode_unlock(inode *n);
/* Locks up to INODE_LOCKS_MAX pinned inodes for writing in ascending inode
 * order; NULLs and duplicates are allowed (each inode is locked once). */
#define INODE_LOCKS_MAX 4
void inode_wrlock_all(inode *const *v, int n);
void inode_unlock_all(inode *const *v, int n);
/* The orphan reclaimer's batch (ascending too, wider than the per-thread
 * record): n locked for writing, and unlocked, outside the record. */
void inode_wrlock_unordered(inode *n);
void inode_unlock_unordered(inode *n);

/* For assertions of "REQUIRES: n->lock held (for writing)" and "no inode
 * lock held". inode_wrheld knows the writer in every build (struct inode's
 * `writer`); inode_held knows readers through the per-thread record of
 * inode_rdlock, which NDEBUG builds keep none of (there it says only
 * whether the caller writes, but no assertion runs); inode_locks_held
 * counts that record (0 under NDEBUG). */
bool inode_wrheld(inode *n);
bool inode_held(inode *n);
int inode_locks_held(void);

#endif
