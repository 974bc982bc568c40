/*
 * lsmfs.h — opening and closing a mounted filesystem (struct lsmfs,
 * super.h).
 */
#ifndef FS_LSMFS_H
#define FS_LSMFS_H

#include "super.h"

#include <stddef.h>
#include <stdint.h>

/* Opens the store at cfg->store_dir, checks the superblock, loads the
 * allocator, reads the inode count or starts counting (icount.h), starts the orphan reclaimer (which also
 * picks up orphans left by a crash). On failure returns an errno and a
 * message for the user in err. */
int lsmfs_open(const lsmfs_config *cfg, lsmfs **out, char *err, size_t errlen);
/* Stops background work, drops the inode cache, saves the inode count (a
 * read-write mount, if known) and closes the store.
 * Returns 0 or EIO if the store reported an error while closing. */
int lsmfs_close(lsmfs *fs);
/* An upper bound of the live inodes: their count once known, else the
 * allocator's next number. */
uint64_t lsmfs_inodes_bound(lsmfs *fs);

#endif
