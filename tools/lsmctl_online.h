/*
 * lsmctl_online.h — maintenance of a mounted lsmfs through its daemon
 * (fs/maint.h), while it serves: `lsmctl compact MNT`, `lsmctl check MNT`.
 */
#ifndef LSMCTL_ONLINE_H
#define LSMCTL_ONLINE_H

/* Compacts the whole store, one key kind at a time (the progress), and ends
 * with a before/after line of the tables' size. 0, or 1 after saying why. */
int lsmctl_online_compact(const char *mnt);

/* Verifies every table's checksums, level by level, then the filesystem's
 * invariants as of one snapshot; read-only. 0 sound, 1 damaged or failed. */
int lsmctl_online_check(const char *mnt);

#endif
