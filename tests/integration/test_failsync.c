/*
 * test_failsync — a sync that fails on the store's disk reaches the caller.
 *
 * The daemon runs with the shim tests/shim/failsync.c preloaded: while a
 * trigger file exists, every fsync and fdatasync of the daemon fails with
 * EIO (a disk that lost the write). Then:
 *  - fsync() of a file fails with EIO, never 0; every later change fails
 *    (the store's error is sticky); reads still serve what is there; after
 *    a remount with a good disk everything synced before is intact and
 *    fsck is clean;
 *  - under -o sync, each kind of change (create, mkdir, mknod, symlink,
 *    link, unlink, rmdir, rename, chmod, truncate, write, fallocate,
 *    setxattr, removexattr) fails with EIO when its sync fails: a change is
 *    never acknowledged on a -o sync mount unless it is on disk.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 120

static char trigger[PATH_MAX + 16];

/* Mounts m (unmounted) with the shim preloaded in the daemon only. */
static void mount_with_shim(struct tmount *m)
{
    snprintf(trigger, sizeof(trigger), "%s/fail-syncs", m->root);
    if (tm_mount_with_shim(m, "libfailsync.so", "LSMFS_FAILSYNC", trigger) != 0)
        fail_msg("mount with the failsync shim failed");
}

static void syncs_fail(bool on)
{
    if (on)
        tm_touch(trigger);
    else if (unlink(trigger) != 0 && errno != ENOENT)
        fail_msg("unlink %s: %s", trigger, strerror(errno));
}

/* Unmounts after a failure (the daemon's exit status reports it: not
 * checked), requires the mount gone and a clean fsck, mounts again. */
static void remount_after_failure(struct tmount *m)
{
    syncs_fail(false);
    (void)tm_unmount(m);
    if (tm_is_mounted(m->mnt))
        fail_msg("the mount is still there after the unmount");
    if (tm_fsck(m) != 0)
        fail_msg("fsck after a failed sync is not clean");
    if (tm_mount(m) != 0)
        fail_msg("remount after a failed sync failed");
}

static void same_file(const char *path, size_t size, uint64_t seed)
{
    char *want = malloc(size), *got = malloc(size + 1);
    assert_non_null(want);
    assert_non_null(got);
    tm_fill(want, size, seed, 0);
    ssize_t n = tm_read_file(path, got, size + 1);
    if (n != (ssize_t)size || memcmp(want, got, size) != 0)
        fail_msg("%s: read %zd bytes, not the %zu written", path, n, size);
    free(want);
    free(got);
}

static void test_failed_fsync_is_reported(void **state)
{
    (void)state;
    if (tm_plain())
        skip();
    tm_watchdog(TEST_TIMEOUT_S, "test_failed_fsync_is_reported");
    struct tmount *m = tm_new(NULL);
    assert_non_null(m);
    tm_make_file(P("kept"), 20000, 1);
    tm_fsync_path(P("kept"), false);
    assert_int_equal(tm_unmount(m), 0);
    mount_with_shim(m);
    tm_make_file(P("before"), 5000, 2);
    tm_fsync_path(P("before"), false); /* the shim passes syncs on */

    int fd;
    TM_OK(fd = open(P("lost"), O_CREAT | O_WRONLY, 0644));
    char buf[4096];
    tm_fill(buf, sizeof(buf), 3, 0);
    TM_OK(write(fd, buf, sizeof(buf))); /* in the store, not yet on disk */
    syncs_fail(true);
    TM_ERR(fsync(fd), EIO);
    (void)close(fd);
    TM_ERR(open(P("after"), O_CREAT | O_WRONLY, 0644), EIO); /* sticky */
    TM_ERR(mkdir(P("dir-after"), 0755), EIO);
    same_file(P("kept"), 20000, 1); /* reads still work */
    same_file(P("before"), 5000, 2);

    remount_after_failure(m);
    same_file(P("kept"), 20000, 1);
    same_file(P("before"), 5000, 2);
    tm_make_file(P("new"), 3000, 4); /* a good disk takes writes again */
    tm_fsync_path(P("new"), false);
    assert_int_equal(tm_free(m), 0);
    tm_watchdog(0, NULL);
}

/* One change on a -o sync mount; -1 with errno set if it failed. */
typedef int (*change_fn)(struct tmount *m);

static int do_create(struct tmount *m)
{
    int fd = open(P("new-file"), O_CREAT | O_EXCL | O_WRONLY, 0644);
    return fd < 0 ? -1 : close(fd);
}
static int do_mkdir(struct tmount *m)
{
    return mkdir(P("new-dir"), 0755);
}
static int do_mknod(struct tmount *m)
{
    return mknod(P("new-fifo"), S_IFIFO | 0644, 0);
}
static int do_symlink(struct tmount *m)
{
    return symlink("file", P("new-link"));
}
static int do_link(struct tmount *m)
{
    return link(P("file"), P("new-hardlink"));
}
static int do_unlink(struct tmount *m)
{
    return unlink(P("file"));
}
static int do_rmdir(struct tmount *m)
{
    return rmdir(P("dir"));
}
static int do_rename(struct tmount *m)
{
    return rename(P("file"), P("dir/renamed"));
}
static int do_chmod(struct tmount *m)
{
    return chmod(P("file"), 0600);
}
static int do_truncate(struct tmount *m)
{
    return truncate(P("file"), 100);
}
static int do_write(struct tmount *m)
{
    int fd = open(P("file"), O_WRONLY);
    if (fd < 0)
        return -1;
    ssize_t n = pwrite(fd, "changed", 7, 0);
    int err = errno;
    int c = close(fd);
    errno = n < 0 ? err : errno;
    return n < 0 || c < 0 ? -1 : 0;
}
static int do_fallocate(struct tmount *m)
{
    int fd = open(P("file"), O_WRONLY);
    if (fd < 0)
        return -1;
    int r = fallocate(fd, 0, 0, 1 << 20);
    int err = errno;
    (void)close(fd);
    errno = err;
    return r;
}
static int do_setxattr(struct tmount *m)
{
    return setxattr(P("file"), "user.new", "v", 1, 0);
}
static int do_removexattr(struct tmount *m)
{
    return removexattr(P("file"), "user.old");
}

static const struct {
    const char *name;
    change_fn fn;
} changes[] = {
    {"create", do_create},     {"mkdir", do_mkdir},
    {"mknod", do_mknod},       {"symlink", do_symlink},
    {"link", do_link},         {"unlink", do_unlink},
    {"rmdir", do_rmdir},       {"rename", do_rename},
    {"chmod", do_chmod},       {"truncate", do_truncate},
    {"write", do_write},       {"fallocate", do_fallocate},
    {"setxattr", do_setxattr}, {"removexattr", do_removexattr},
};

/* What every change above starts from: dir/ (empty), file (with user.old). */
static void make_tree(struct tmount *m)
{
    if (access(P("dir"), F_OK) != 0)
        TM_OK(mkdir(P("dir"), 0755));
    if (access(P("file"), F_OK) != 0)
        tm_make_file(P("file"), 5000, 5);
    TM_OK(setxattr(P("file"), "user.old", "v", 1, 0));
}

static void test_sync_mount_reports_failed_syncs(void **state)
{
    (void)state;
    if (tm_plain())
        skip();
    tm_watchdog(TEST_TIMEOUT_S, "test_sync_mount_reports_failed_syncs");
    struct tmount *m = tm_new("sync");
    assert_non_null(m);
    make_tree(m);
    assert_int_equal(tm_unmount(m), 0);
    mount_with_shim(m);
    for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
        make_tree(m);
        syncs_fail(true);
        errno = 0;
        int r = changes[i].fn(m);
        int err = errno;
        if (r != -1 || err != EIO)
            fail_msg("%s on a -o sync mount whose sync failed: %d, errno %s (expected EIO)",
                     changes[i].name, r, r == -1 ? tm_errname(err) : "-");
        syncs_fail(false);
        (void)tm_unmount(m);
        if (tm_is_mounted(m->mnt))
            fail_msg("the mount is still there after the unmount");
        if (tm_fsck(m) != 0)
            fail_msg("fsck after the failed %s is not clean", changes[i].name);
        mount_with_shim(m);
    }
    (void)tm_free(m);
    tm_watchdog(0, NULL);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_fsync_is_reported),
        cmocka_unit_test(test_sync_mount_reports_failed_syncs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
