/*
 * test_security — what another user, or a root without capabilities, may
 * do on an allow_other mount, probed as ext4 answers the same calls
 * (issue 28 items 5-8, issue 30's killpriv): snapshot ioctls need
 * CAP_SYS_ADMIN or the mounting user (not bare uid 0); trusted.* names are
 * listed to CAP_SYS_ADMIN only; a write, truncate or chown clears
 * S_ISUID, S_ISGID and security.capability as ext4 does, with no
 * GETXATTR before each write; the root reserve keeps room for root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "aschild.h"
#include "mount.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define TEST_TIMEOUT_S 120

static int setup_allow_other(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_security test", "allow_other");
}

/* ------------------------------------------------------ snapshot ioctls */

struct snap_probe {
    unsigned long cmd;
    const char *name;
    int want; /* 0 or the errno */
};

static const char *snap_ioctl(const struct tmount *m, void *arg)
{
    const struct snap_probe *p = arg;
    int fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    TM_EXPECT_OK(fd);
    struct lsmfs_snap_create c;
    struct lsmfs_snap_dir d;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", p->name);
    void *buf = p->cmd == LSMFS_IOC_SNAP_DIR ? (void *)&d : (void *)&c;
    int r = ioctl(fd, p->cmd, buf);
    int e = errno;
    close(fd);
    if (p->want == 0)
        TM_EXPECT(r == 0, "ioctl %lx: errno %s", p->cmd, tm_errname(e));
    else
        TM_EXPECT(r == -1 && e == p->want, "ioctl %lx = %d (%s); expected %s", p->cmd, r,
                  tm_errname(e), tm_errname(p->want));
    return NULL;
}

static bool snapshot_exists(const struct tmount *m, const char *name)
{
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/" LSMFS_SNAPSHOT_DIR "/%s", m->store, name);
    return access(path, F_OK) == 0;
}

/* uid 0 without capabilities may neither take nor delete a snapshot of a
 * root mount (the README's rule: CAP_SYS_ADMIN or the mounting user, and
 * uid 0 alone is no privilege); it may ask where they are, which
 * /proc/self/mountinfo tells anyone. Root with its capabilities may. */
static void test_snapshot_ioctls_need_cap_sys_admin(void **state)
{
    struct tmount *m = *state;
    if (m->plain || geteuid() != 0)
        skip();
    struct tm_cred capless = TM_CAPLESS_ROOT;
    struct snap_probe take = {LSMFS_IOC_SNAP_CREATE, "s1", EPERM};
    tm_as(&capless, snap_ioctl, m, &take);
    assert_false(snapshot_exists(m, "s1"));
    struct snap_probe where = {LSMFS_IOC_SNAP_DIR, "", 0};
    tm_as(&capless, snap_ioctl, m, &where);

    struct tm_cred root = {.drop_caps = 0};
    take.want = 0;
    tm_as(&root, snap_ioctl, m, &take);
    assert_true(snapshot_exists(m, "s1"));
    struct snap_probe del = {LSMFS_IOC_SNAP_DELETE, "s1", EPERM};
    tm_as(&capless, snap_ioctl, m, &del);
    assert_true(snapshot_exists(m, "s1"));
    struct tm_cred sysadmin_only = {.drop_caps = ~(1ull << CAP_SYS_ADMIN)};
    del.want = 0;
    tm_as(&sysadmin_only, snap_ioctl, m, &del);
    assert_false(snapshot_exists(m, "s1"));
}

/* ------------------------------------------------------- trusted names */

/* The names listxattr gives, as one comma-separated string in tm_why's
 * neighbour, after checking that the size query agrees. */
static const char *list_names(const char *path, char *out, size_t cap)
{
    char buf[1024];
    ssize_t want = listxattr(path, NULL, 0);
    ssize_t n = listxattr(path, buf, sizeof buf);
    TM_EXPECT(n >= 0 && want == n, "listxattr: %zd, size query %zd (%s)", n, want,
              tm_errname(errno));
    out[0] = 0;
    for (ssize_t at = 0; at < n; at += (ssize_t)strlen(buf + at) + 1)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? "," : "", buf + at);
    return NULL;
}

static const char *lists_exactly(const struct tmount *m, void *arg)
{
    char got[1024];
    const char *err = list_names(tm_path(m, "f"), got, sizeof got);
    if (err != NULL)
        return err;
    TM_EXPECT(strcmp(got, arg) == 0, "listxattr lists \"%s\"; expected \"%s\"", got,
              (const char *)arg);
    return NULL;
}

/* ext4 lists trusted.* names only to CAP_SYS_ADMIN: another user, and a
 * root without capabilities, see the user.* names alone. */
static void test_trusted_names_listed_to_cap_sys_admin(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("f"), "x", 1, 0644));
    TM_OK(setxattr(P("f"), "user.u", "1", 1, 0));
    TM_OK(setxattr(P("f"), "trusted.t", "2", 1, 0));
    TM_OK(setxattr(P("f"), "user.v", "3", 1, 0));
    struct tm_cred nobody = TM_NOBODY, capless = TM_CAPLESS_ROOT, root = {.drop_caps = 0};
    tm_as(&root, lists_exactly, m, "trusted.t,user.u,user.v"); /* key order */
    tm_as(&nobody, lists_exactly, m, "user.u,user.v");
    tm_as(&capless, lists_exactly, m, "user.u,user.v");
}

int main(void)
{
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_snapshot_ioctls_need_cap_sys_admin, setup_allow_other),
        TM_TEST(test_trusted_names_listed_to_cap_sys_admin, setup_allow_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
