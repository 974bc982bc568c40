/*
 * lsmctl_snapshot.h — `lsmctl snapshot`: snapshots of a mounted lsmfs,
 * taken and deleted by its daemon (fs/snapshot.h), listed here.
 */
#ifndef LSMCTL_SNAPSHOT_H
#define LSMCTL_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>

/* lsmctl snapshot MNT NAME | MNT --list | MNT --delete NAME: argv holds
 * the words after "snapshot". Returns the exit status (0, 1 failed, 2
 * usage). */
int lsmctl_snapshot(int argc, char **argv);

/* For other commands (lsmctl backup): whether path is the root of a
 * mounted lsmfs (its daemon answers the snapshot ioctls); taking snapshot
 * name into *dir (its directory, cap bytes) and deleting it, 0 or 1 after
 * saying why. A snapshot whose directory (as the daemon names it) is not
 * the mounting user's is deleted again and refused. */
int lsmctl_is_lsmfs_mount(const char *path);
int lsmctl_snapshot_take(const char *mnt, const char *name, char *dir, size_t cap);
int lsmctl_snapshot_delete(const char *mnt, const char *name);
/* An ioctl on mount mnt's root (req, arg as fs/snapshot.h and fs/fsinfo.h
 * define them); 0, or 1 after saying why (`what` names it). */
int lsmctl_root_ioctl(const char *mnt, unsigned long req, void *arg, const char *what);
/* The mount's snapshot directory (STORE/snapshots) into dir; 0, or 1 after
 * saying why. */
int lsmctl_snapshot_dir(const char *mnt, char *dir, size_t cap);
/* Deletes (best effort, saying so) every snapshot of mnt whose name begins
 * with prefix and that stale() calls a leftover. */
void lsmctl_snapshot_sweep(const char *mnt, const char *prefix, bool (*stale)(const char *name));

#endif
