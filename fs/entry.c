/*
 * entry.c — an entry held across the lock order (entry.h).
 */
#include "entry.h"

#include "dir.h"
#include "inode.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

int entry_pin(lsmfs *fs, inode *dir, const char *name, dirent_val *d, uint64_t *seen, inode **out)
{
    inode_rdlock(dir);
    *seen = atomic_load(&dir->seq);
    int err = dir_find(fs, dir, name, d);
    inode_unlock(dir);
    if (err == 0 && (err = icache_get(fs, d->ino, out)) == ENOENT)
        err = EIO; /* an entry without its inode */
    return err;
}

int entry_unchanged(lsmfs *fs, inode *dir, const char *name, const dirent_val *was, uint64_t seen)
{
    assert(inode_held(dir));
    if (atomic_load(&dir->seq) == seen)
        return 0;
    dirent_val now;
    int err = dir_find(fs, dir, name, &now);
    if (err != 0 && err != ENOENT)
        return err;
    bool same =
        was == NULL ? err == ENOENT : err == 0 && now.ino == was->ino && now.cookie == was->cookie;
    return same ? 0 : ESTALE;
}
