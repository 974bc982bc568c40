/*
 * dir.h — directory entries. Each entry is two keys written and removed
 * together: 'D' parent name (for lookup) and 'C' parent cookie (for
 * readdir). The cookie comes from the parent's next_cookie counter, which
 * only grows, so it is a readdir offset that stays valid while the
 * directory changes: a listing resumes after the last cookie it returned,
 * and an entry that was not touched keeps its place.
 *
 * A directory's entries may also be held in memory, all of them, in its
 * inode's `dc` (dcache.h): then lookups and listings need no store access.
 * A listing starts with mkdir (empty) or with the first readdir (one store
 * scan); every change to the directory's entries is made to it, under the
 * directory's write lock, right after the batch that made it in the store
 * was committed. One that cannot follow (no memory, over the budget of
 * DIR_CACHE_BUDGET bytes for all of them) is dropped, never left partial.
 * Listings go with their inodes when the kernel forgets them.
 */
#ifndef FS_DIR_H
#define FS_DIR_H

#include "icache.h"
#include "schema.h"
#include "super.h"

/* Memory for directory listings, all directories together. */
#define DIR_CACHE_BUDGET ((int64_t)64 << 20)
/* Directories with more entries are listed from the store. */
#define DIR_CACHE_MAX_ENTRIES 100000u

/* Looks `name` up in the store. Returns 0, ENOENT, ENAMETOOLONG or EIO. */
int dir_lookup(lsmfs *fs, uint64_t parent, const char *name, dirent_val *d);
/* dir_lookup through dir's listing in memory when it has one.
 * REQUIRES: dir->lock held (for reading or writing). */
int dir_find(lsmfs *fs, inode *dir, const char *name, dirent_val *d);
/* Adds both keys of an entry to b. Returns 0 or ENOMEM. */
int dir_batch_add(lsm_batch *b, uint64_t parent, const char *name, uint64_t ino, uint8_t type,
                  uint64_t cookie);
int dir_batch_remove(lsm_batch *b, uint64_t parent, const char *name, uint64_t cookie);

/* Called for each entry in cookie order; returns non-zero to stop. `hint`
 * is an entry's hint from its listing in memory (0 from the store): see
 * dir_kernel_holds. */
typedef dcache_visit_fn dir_visit_fn;
/* The told rule, all of it here. Readdirplus sends a plain entry (no
 * attributes, no reference) for an inode the kernel holds: its attributes
 * there are valid, as nothing changes them behind its back. Does the kernel
 * hold ino, named by an entry whose hint is `hint`? An entry added or moved
 * through the kernel (dir_cached_add, dir_cached_retarget) is told: its
 * hint is the icache's forget epoch of the moment, never 0
 * (icache_forget_epoch; asserted), and while no inode has been forgotten
 * since, the kernel still holds its inode. Any other entry (hint 0, from
 * the store, or an older epoch) asks the inode cache (icache_kernel_knows).
 * A false answer costs only the attributes sent; a stale true one is
 * harmless too (the kernel looks the name up when it needs it). */
bool dir_kernel_holds(lsmfs *fs, uint64_t ino, uint32_t hint);
/* Visits the entries of `parent` with cookie >= from in the store, in a
 * consistent snapshot. Returns 0, EIO (damaged entry or store error) or
 * ENOMEM. */
int dir_scan(lsmfs *fs, uint64_t parent, uint64_t from, dir_visit_fn fn, void *ctx);
/* Visits dir's entries with cookie >= from, at least as many as `room`
 * bytes of readdir reply can hold (fn stops it), from its listing in memory
 * (made first when it may be), else from the store. fn runs with no lock
 * held. REQUIRES: dir pinned, its lock not held. */
int dir_list(lsmfs *fs, inode *dir, uint64_t from, size_t room, dir_visit_fn fn, void *ctx);

/* Keeping a listing in step; each after the commit of the change it
 * mirrors. REQUIRES: dir->lock held for writing. */
void dir_cached_add(lsmfs *fs, inode *dir, const char *name, uint64_t ino, uint8_t type,
                    uint64_t cookie);
void dir_cached_remove(lsmfs *fs, inode *dir, const char *name);
void dir_cached_retarget(lsmfs *fs, inode *dir, const char *name, uint64_t ino, uint8_t type);
/* A new directory (mkdir): an empty listing. */
void dir_cache_start(lsmfs *fs, inode *dir);
/* Frees dir's listing (a removed directory). */
void dir_cache_drop(lsmfs *fs, inode *dir);

/* Is `name` acceptable as an entry name? Returns 0, ENAMETOOLONG or EINVAL. */
int dir_check_name(const char *name);

#endif
