/*
 * lsmctl_info.h — `lsmctl info STORE|MNT`: what a filesystem is (format,
 * chunk size, inline limit, created), what it holds (files, directories,
 * bytes stored), what that costs on disk (tables per level, logs, the
 * reserve) and its snapshots, as dumpe2fs -h or juicefs status show.
 */
#ifndef LSMCTL_INFO_H
#define LSMCTL_INFO_H

#include "lsm.h"

/* Opens a store no one has open, read-only; NULL after saying why. */
typedef lsm_db *(*lsmctl_open_ro_fn)(const char *dir);

/* path: a mount point of a running lsmfs (asked of its daemon) or a store
 * directory no one has open. Returns the exit status (0, or 1 after saying
 * why). */
int lsmctl_info(const char *path, lsmctl_open_ro_fn open_ro);

#endif
