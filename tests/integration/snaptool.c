/*
 * snaptool.c — lsmctl and snapshot mounts for the snapshot tests (see
 * snaptool.h).
 */
#include "snaptool.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include "snapshot.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int tm_lsmctl(char *out, size_t cap, const char *fmt, ...)
{
    char args[PATH_MAX + 256], cmd[2 * PATH_MAX + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout -s KILL 120 %s %s 2>&1", tm_bin("lsmctl"), args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct tmount *tm_mount_snapshot(const struct tmount *m, const char *name)
{
    struct tmount *s = tm_new_external();
    assert_non_null(s);
    char snap[PATH_MAX + 64];
    snprintf(snap, sizeof snap, "%s/" LSMFS_SNAPSHOT_DIR "/%s", m->store, name);
    assert_int_equal(rmdir(s->store), 0);
    assert_int_equal(symlink(snap, s->store), 0);
    snprintf(s->opts, sizeof s->opts, "ro");
    if (tm_mount(s) != 0) {
        tm_free(s);
        fail_msg("mounting snapshot %s read-only failed", snap);
    }
    return s;
}
