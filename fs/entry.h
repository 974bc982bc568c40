/*
 * entry.h — holding a directory entry across the lock order: unlink, rmdir
 * and rename read an entry under its directory's lock, pin the inode it
 * names, lock all the inodes in inode order and then keep the entry only
 * if the directory did not change it meanwhile (ARCHITECTURE.md,
 * "Concurrency rules").
 */
#ifndef FS_ENTRY_H
#define FS_ENTRY_H

#include "icache.h"
#include "schema.h"
#include "super.h"

#include <stdint.h>

/* Reads the entry (dir, name) under dir's lock and pins the inode it names
 * (ENOENT: no such entry; EIO: an entry without its inode). The lock is
 * dropped before the pin, since that inode may be numbered below dir (the
 * lock order): once both are locked, entry_unchanged checks the
 * entry against *seen, dir's seq when it was read. */
int entry_pin(lsmfs *fs, inode *dir, const char *name, dirent_val *d, uint64_t *seen, inode **out);
/* Is (dir, name) still the entry `was` (still absent when was is NULL),
 * read when dir's seq was `seen`? Every commit that changes dir's entries
 * raises its seq under its lock, so the entry is read again only if one
 * did. Returns 0 if so, ESTALE if it went or changed (the kernel's view of
 * the name is stale: the VFS then looks it up again and retries once), or
 * EIO. REQUIRES: dir locked. */
int entry_unchanged(lsmfs *fs, inode *dir, const char *name, const dirent_val *was, uint64_t seen);

#endif
