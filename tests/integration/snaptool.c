/*
 * snaptool.c — snapshot mounts for the snapshot tests (see snaptool.h).
 */
#include "snaptool.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "snapshot.h"

#include <stdio.h>
#include <unistd.h>

struct tmount *tm_mount_ro_dir(const char *dir, const char *what)
{
    struct tmount *s = tm_new_external();
    assert_non_null(s);
    assert_int_equal(rmdir(s->store), 0);
    assert_int_equal(symlink(dir, s->store), 0);
    snprintf(s->opts, sizeof s->opts, "ro");
    if (tm_mount(s) != 0) {
        tm_free(s);
        fail_msg("mounting %s %s read-only failed", what, dir);
    }
    return s;
}

struct tmount *tm_mount_snapshot(const struct tmount *m, const char *name)
{
    char snap[PATH_MAX + 64];
    snprintf(snap, sizeof snap, "%s/" LSMFS_SNAPSHOT_DIR "/%s", m->store, name);
    return tm_mount_ro_dir(snap, "snapshot");
}
