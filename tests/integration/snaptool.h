/*
 * snaptool.h — for the snapshot tests: running lsmctl, and mounting a
 * snapshot of a test's store read-only. cmocka checks: main thread only.
 */
#ifndef LSMFS_TEST_SNAPTOOL_H
#define LSMFS_TEST_SNAPTOOL_H

#include "mount.h"

#include <stddef.h>

/* Runs `lsmctl ARGS` (under a 120 s timeout), its stdout and stderr in out
 * (cap bytes, NUL-terminated); returns its exit status, -1 if it died. */
int tm_lsmctl(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A read-only mount of snapshot `name` of m's store (several may run at
 * once); fails the test if it does not mount. */
struct tmount *tm_mount_snapshot(const struct tmount *m, const char *name);

#endif
