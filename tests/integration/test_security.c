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
#include <sys/mount.h>
#include <sys/statvfs.h>
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
    char got[256];
    const char *err = list_names(tm_path(m, "f"), got, sizeof got);
    if (err != NULL)
        return err;
    TM_EXPECT(strcmp(got, arg) == 0, "listxattr lists \"%.200s\"; expected \"%.200s\"", got,
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

/* -------------------------------------------- set-id bits and killpriv */

enum setid_op { WRITE, TRUNCATE, CHOWN };

struct setid_case {
    struct tm_cred who;
    enum setid_op op;
    mode_t before, after; /* after: what ext4 leaves (same kernel, same calls) */
};

static const char *do_setid_op(const struct tmount *m, void *arg)
{
    const struct setid_case *c = arg;
    const char *f = tm_path(m, "f");
    if (c->op == TRUNCATE) {
        TM_EXPECT_OK(truncate(f, 1));
    } else if (c->op == CHOWN) {
        TM_EXPECT_OK(chown(f, 0, 0));
    } else {
        int fd = open(f, O_WRONLY | O_APPEND);
        TM_EXPECT_OK(fd);
        ssize_t w = write(fd, "y\n", 2);
        close(fd);
        TM_EXPECT(w == 2, "write: %zd (%s)", w, tm_errname(errno));
    }
    struct stat st;
    TM_EXPECT_OK(stat(f, &st)); /* as the caller sees it, at once */
    TM_EXPECT((st.st_mode & 07777) == c->after, "mode %o after, expected %o",
              st.st_mode & 07777, c->after);
    return NULL;
}

#define NOBODY_IN_4242 {.uid = 65534, .gid = 65534, .ngroups = 1, .groups = {4242}}
#define NO_FSETID {.drop_caps = 1ull << CAP_FSETID}

/* A write or truncate by a caller without CAP_FSETID clears S_ISUID, and
 * S_ISGID when group-execute is set or the caller is outside the file's
 * group (mode 2666 becomes 666, as on ext4); a member keeps S_ISGID without
 * group-execute; root with its capabilities keeps both; a chown clears
 * S_ISUID even for root. Each row is what ext4 does on this kernel. */
static void test_setid_cleared_as_ext4(void **state)
{
    struct tmount *m = *state;
    const struct setid_case cases[] = {
        {TM_NOBODY, WRITE, 02666, 0666},
        {TM_NOBODY, TRUNCATE, 02666, 0666},
        {TM_NOBODY, WRITE, 04666, 0666},
        {TM_NOBODY, WRITE, 02676, 0676},
        {NOBODY_IN_4242, WRITE, 02666, 02666},
        {NOBODY_IN_4242, TRUNCATE, 02666, 02666},
        {NOBODY_IN_4242, WRITE, 06676, 0676},
        {TM_CAPLESS_ROOT, WRITE, 02666, 0666},
        {TM_CAPLESS_ROOT, TRUNCATE, 02666, 0666},
        {NO_FSETID, WRITE, 02666, 0666},
        {NO_FSETID, WRITE, 04666, 0666},
        {{.drop_caps = 0}, WRITE, 06676, 06676},
        {{.drop_caps = 0}, TRUNCATE, 06666, 06666},
        {{.drop_caps = 0}, CHOWN, 04755, 0755},
        {{.drop_caps = 0}, CHOWN, 06644, 02644},
        {{.drop_caps = 0}, CHOWN, 02755, 0755},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct setid_case *c = &cases[i];
        unlink(P("f"));
        TM_OK(tm_write_file(P("f"), "x\n", 2, 0600));
        TM_OK(chown(P("f"), 0, 4242));
        TM_OK(chmod(P("f"), c->before));
        print_message("case %zu: uid %d, op %d, mode %o\n", i, (int)c->who.uid, (int)c->op,
                      c->before);
        tm_as(&c->who, do_setid_op, m, (void *)c);
        if (!m->plain)
            tm_remount_checked(m); /* and the store says the same */
        struct stat st;
        TM_OK(stat(P("f"), &st));
        assert_int_equal(st.st_mode & 07777, c->after);
    }
}

/* A file capability (security.capability) goes at the next write, also
 * when the file was written before it was set (the kernel then marked the
 * inode clean, S_NOSEC, and asks nothing before its writes). */
static void test_capability_removed_by_write(void **state)
{
    struct tmount *m = *state;
    int fd = open(P("f"), O_CREAT | O_WRONLY | O_APPEND, 0755);
    TM_OK(fd);
    for (int i = 0; i < 3; i++)
        TM_OK(write(fd, "x", 1));
    /* struct vfs_cap_data, revision 2, effective: cap_net_raw */
    const uint32_t cap[5] = {0x02000001, 1u << CAP_NET_RAW, 0, 0, 0};
    TM_OK(setxattr(P("f"), "security.capability", cap, sizeof cap, 0));
    char buf[64];
    assert_int_equal(getxattr(P("f"), "security.capability", buf, sizeof buf), sizeof cap);
    TM_OK(write(fd, "x", 1));
    close(fd);
    TM_ERR(getxattr(P("f"), "security.capability", buf, sizeof buf), ENODATA);
}

/* The kernel asks GETXATTR security.capability before a write only while
 * it does not know the inode clean: once per file, not once per write
 * (issue 30: it was one more request per WRITE). */
static void test_writes_ask_no_capability(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    int fd = open(P("f"), O_CREAT | O_WRONLY, 0644);
    TM_OK(fd);
    /* Reading the counters is itself a GETXATTR or two (measured). */
    uint64_t w0 = tm_stats_requests(m, "write");
    uint64_t g0 = tm_stats_requests(m, "getxattr");
    uint64_t g1 = tm_stats_requests(m, "getxattr");
    for (int i = 0; i < 100; i++)
        TM_OK(pwrite(fd, "0123456789", 10, i * 10));
    uint64_t g2 = tm_stats_requests(m, "getxattr");
    close(fd);
    uint64_t writes = tm_stats_requests(m, "write") - w0;
    uint64_t asked = g2 - g1 - (g1 - g0);
    print_message("100 writes: %llu WRITE, %llu GETXATTR requests\n", (unsigned long long)writes,
                  (unsigned long long)asked);
    if (!tm_has_opt(m, "writeback")) /* else the kernel gathers them */
        assert_int_equal(writes, 100);
    assert_true(asked <= 1);
}

/* --------------------------------------------------------- root reserve */

static char host[PATH_MAX]; /* a tmpfs of the test's own under the store */
static bool host_mounted;
static struct tmount *host_mount; /* the lsmfs on it, while the test runs */

/* Only once lsmfs is gone: it keeps the store open. */
static void host_umount(void)
{
    if (host_mounted && umount2(host, MNT_DETACH) == 0)
        host_mounted = false;
    if (host[0])
        rmdir(host);
}

#define FILL_FILE (256 * KiB)
#define RESERVE_PCT 20

/* As another user: write FILL_FILE files (each fsynced) until refused;
 * the refusal is ENOSPC while statfs still shows the reserve free. */
static const char *fill_until_refused(const struct tmount *m, void *arg)
{
    (void)arg;
    static char buf[FILL_FILE];
    for (int i = 0; i < 1000; i++) {
        tm_fill(buf, sizeof buf, (uint64_t)i, 0); /* incompressible */
        int fd = open(tm_path(m, "u/%d", i), O_CREAT | O_WRONLY, 0644);
        ssize_t w = fd >= 0 ? write(fd, buf, sizeof buf) : -1;
        int r = w == (ssize_t)sizeof buf ? fsync(fd) : -1;
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (r == 0)
            continue;
        TM_EXPECT(e == ENOSPC, "file %d: %s, expected ENOSPC", i, tm_errname(e));
        struct statvfs v;
        TM_EXPECT_OK(statvfs(m->mnt, &v));
        TM_EXPECT(v.f_bavail * v.f_frsize < 2 * FILL_FILE &&
                      (v.f_bfree - v.f_bavail) * v.f_frsize > 64 * MiB * RESERVE_PCT / 200,
                  "refused with %llu bytes available and %llu free",
                  (unsigned long long)(v.f_bavail * v.f_frsize),
                  (unsigned long long)(v.f_bfree * v.f_frsize));
        return NULL;
    }
    return "1000 files of 256 KiB written to a 64 MiB disk: never refused";
}

/* An allow_other mount on a 64 MiB disk with a 20% reserve (the mount
 * option; mkfs's default, 5%, shows in statfs too): a user who fills it
 * gets ENOSPC with the reserve still free, and root then writes and
 * fsyncs a line, as on ext4 (mkfs.ext4 -m). Without a reserve root got
 * ENOSPC as well. */
static void test_root_reserve_keeps_room_for_root(void **state)
{
    (void)state;
    if (geteuid() != 0 || tm_plain())
        skip();
    char store[PATH_MAX + 8];
    int made = tm_tmpfs_store(host, "reserve-host", "64m", store);
    host_mounted = host[0] != 0 && made == 0;
    assert_int_equal(made, 0);
    struct tmount *m = host_mount = tm_new_in("allow_other", store);
    assert_non_null(m);
    struct statvfs v;
    TM_OK(statvfs(m->mnt, &v)); /* mkfs's default: 5% of the disk */
    assert_true((v.f_bfree - v.f_bavail) * v.f_frsize >= 3 * MiB);
    snprintf(m->opts, sizeof m->opts, "allow_other,reserve=%d", RESERVE_PCT);
    tm_remount_checked(m);
    TM_OK(mkdir(P("u"), 0777));
    struct tm_cred nobody = TM_NOBODY;
    tm_as(&nobody, fill_until_refused, m, NULL);
    int fd = open(P("root-line"), O_CREAT | O_WRONLY, 0600);
    TM_OK(fd);
    TM_OK(write(fd, "root still writes\n", 18));
    TM_OK(fsync(fd));
    close(fd);
    tm_remount_checked(m);
    char buf[64];
    assert_int_equal(tm_read_file(P("root-line"), buf, sizeof buf), 18);
    assert_int_equal(tm_free(m), 0);
    host_mount = NULL;
    host_umount();
}

int main(void)
{
    atexit(host_umount); /* registered first: runs after the harness's cleanup */
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_snapshot_ioctls_need_cap_sys_admin, setup_allow_other),
        TM_TEST(test_trusted_names_listed_to_cap_sys_admin, setup_allow_other),
        TM_TEST(test_setid_cleared_as_ext4, setup_allow_other),
        TM_TEST(test_capability_removed_by_write, setup_allow_other),
        TM_TEST(test_writes_ask_no_capability, setup_allow_other),
        cmocka_unit_test(test_root_reserve_keeps_room_for_root),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (host_mount != NULL) /* a failed test left it mounted */
        tm_free(host_mount);
    host_umount();
    return rc;
}
