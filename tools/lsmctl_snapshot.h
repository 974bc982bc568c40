/*
 * lsmctl_snapshot.h — `lsmctl snapshot`: snapshots of a mounted lsmfs,
 * taken and deleted by its daemon (fs/snapshot.h), listed here.
 */
#ifndef LSMCTL_SNAPSHOT_H
#define LSMCTL_SNAPSHOT_H

#include <stddef.h>

/* lsmctl snapshot MNT NAME | MNT --list | MNT --delete NAME: argv holds
 * the words after "snapshot". Returns the exit status (0, 1 failed, 2
 * usage). */
int lsmctl_snapshot(int argc, char **argv);

/* For other commands (lsmctl backup): whether path is the root of a
 * mounted lsmfs (its daemon answers the snapshot ioctls); taking snapshot
 * name into *dir (its directory, cap bytes) and deleting it, 0 or 1 after
 * saying why. */
int lsmctl_is_lsmfs_mount(const char *path);
int lsmctl_snapshot_take(const char *mnt, const char *name, char *dir, size_t cap);
int lsmctl_snapshot_delete(const char *mnt, const char *name);

#endif
