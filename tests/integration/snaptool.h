/*
 * snaptool.h — for the snapshot tests: mounting a snapshot of a test's
 * store read-only (lsmctl itself: tm_lsmctl, mount.h). cmocka checks:
 * main thread only.
 */
#ifndef LSMFS_TEST_SNAPTOOL_H
#define LSMFS_TEST_SNAPTOOL_H

#include "mount.h"

/* A read-only mount of snapshot `name` of m's store (several may run at
 * once); fails the test if it does not mount. */
struct tmount *tm_mount_snapshot(const struct tmount *m, const char *name);
/* Mounts store directory dir read-only at a fresh mount point (what names
 * it in the failure message); tm_free it. Fails the test if it cannot. */
struct tmount *tm_mount_ro_dir(const char *dir, const char *what);

#endif
