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

#endif
