/*
 * lsmctl_snapshot.h — `lsmctl snapshot`: snapshots of a mounted lsmfs,
 * taken and deleted by its daemon (fs/snapshot.h), listed here.
 */
#ifndef LSMCTL_SNAPSHOT_H
#define LSMCTL_SNAPSHOT_H

/* lsmctl snapshot MNT NAME | MNT --list | MNT --delete NAME: argv holds
 * the words after "snapshot". Returns the exit status (0, 1 failed, 2
 * usage). */
int lsmctl_snapshot(int argc, char **argv);

struct lsmfs_snap_create;
/* Takes snapshot c->name of the lsmfs mounted at mnt (c as the ioctl
 * wants it; the daemon fills in the results). First syncfs(2) on the
 * mount, so that data the kernel still caches (-o writeback: files open
 * for writing, mmap) reaches the daemon and is in the snapshot; on FUSE
 * that writes the pages back to the daemon and syncs no disk. Returns 0,
 * or 1 after saying why on stderr. */
int lsmctl_snapshot_take(const char *mnt, struct lsmfs_snap_create *c);

#endif
