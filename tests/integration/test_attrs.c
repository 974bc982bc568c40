/*
 * test_attrs — the attributes the kernel caches after each metadata change.
 *
 * lsmfs gives the kernel long attribute and entry timeouts (3600 s) and
 * counts on the kernel forgetting what each of its own changes touched.
 * After every kind of change, for the touched inode, its parent
 * directory(ies) and a neighbour, three views must agree: what a second
 * process sees (the kernel's cache, asked first), what this process sees,
 * and what the daemon has (statx with AT_STATX_FORCE_SYNC, one GETATTR);
 * and they must follow ext4's rules: the parents' mtime and ctime move on
 * create, unlink and rename, link counts follow mkdir, rmdir, link and a
 * directory's rename across parents, a renamed or linked inode's ctime
 * moves, sizes follow write and truncate, the neighbour stays as it was.
 * A cache that keeps what a change made stale fails here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* statx */
#endif
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_attrs test", NULL);
}

/* The fields a stat compares by (atime left out: noatime mounts). */
typedef struct attrs {
    long long ino, mode, nlink, uid, gid, size, mtime, ctime;
} attrs;

static attrs from_stat(const struct stat *st)
{
    return (attrs){(long long)st->st_ino,
                   st->st_mode,
                   (long long)st->st_nlink,
                   st->st_uid,
                   st->st_gid,
                   (long long)st->st_size,
                   st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
                   st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec};
}

/* lstat of path in a child process: what another process is told. */
static attrs other_process(const char *path)
{
    int p[2];
    TM_OK(pipe(p));
    pid_t pid = fork();
    TM_OK(pid);
    if (pid == 0) {
        struct stat st;
        attrs a = {0};
        if (lstat(path, &st) == 0)
            a = from_stat(&st);
        _exit(write(p[1], &a, sizeof a) == (ssize_t)sizeof a ? 0 : 1);
    }
    close(p[1]);
    attrs a;
    ssize_t got = read(p[0], &a, sizeof a);
    close(p[0]);
    int status;
    TM_OK(waitpid(pid, &status, 0));
    if (got != (ssize_t)sizeof a || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the second process could not stat %s", path);
    if (a.ino == 0)
        fail_msg("the second process could not stat %s", path);
    return a;
}

static attrs from_daemon(const char *path)
{
    struct statx sx;
    TM_OK(statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &sx));
    return (attrs){(long long)sx.stx_ino,
                   sx.stx_mode,
                   sx.stx_nlink,
                   sx.stx_uid,
                   sx.stx_gid,
                   (long long)sx.stx_size,
                   sx.stx_mtime.tv_sec * 1000000000LL + sx.stx_mtime.tv_nsec,
                   sx.stx_ctime.tv_sec * 1000000000LL + sx.stx_ctime.tv_nsec};
}

static void check_same(const char *path, const char *view, attrs a, attrs b)
{
#define SAME(f)                                                                                    \
    if (a.f != b.f)                                                                                \
        fail_msg("%s: " #f " %lld from the kernel's cache (%s), %lld from the daemon", path, a.f,  \
                 view, b.f);
    SAME(ino) SAME(mode) SAME(nlink) SAME(uid) SAME(gid) SAME(size) SAME(mtime) SAME(ctime)
#undef SAME
}

/* path's attributes once the three views agree: the cached ones first (a
 * forced stat would refresh the cache). */
static attrs snap(const char *path)
{
    attrs other = other_process(path);
    struct stat st;
    TM_OK(lstat(path, &st));
    attrs mine = from_stat(&st);
    attrs daemon = from_daemon(path);
    check_same(path, "second process", other, daemon);
    check_same(path, "this process", mine, daemon);
    return daemon;
}

/* Time stamps have nanoseconds; make sure the clock moved. */
static void tick(void)
{
    tm_sleep_ms(2);
}

static void moved(const char *what, long long before, long long after)
{
    if (after <= before)
        fail_msg("%s did not move (%lld -> %lld)", what, before, after);
}

/* The state every test starts from: d and e, neighbour d/n, file d/f.
 * Their attributes are cached in the kernel before the change. */
typedef struct scene {
    attrs d, e, n, f;
} scene;

static scene start(const struct tmount *m)
{
    TM_OK(mkdir(P("d"), 0755));
    TM_OK(mkdir(P("e"), 0755));
    tm_make_file(P("d/n"), 10, 1);
    tm_make_file(P("d/f"), 100, 2);
    scene s = {snap(P("d")), snap(P("e")), snap(P("d/n")), snap(P("d/f"))};
    tick();
    return s;
}

static void neighbour_unchanged(const struct tmount *m, const scene *s)
{
    check_same(P("d/n"), "before the change", s->n, snap(P("d/n")));
}

static void dir_changed(const char *what, attrs before, attrs after, long long nlink_delta)
{
    moved(what, before.mtime, after.mtime);
    moved(what, before.ctime, after.ctime);
    if (after.nlink != before.nlink + nlink_delta)
        fail_msg("%s: nlink %lld, expected %lld", what, after.nlink, before.nlink + nlink_delta);
}

static void test_create_and_mkdir(void **state)
{
    struct tmount *m = *state;
    scene s = start(m);
    tm_touch(P("d/c"));
    attrs c = snap(P("d/c"));
    assert_int_equal(c.nlink, 1);
    attrs d = snap(P("d"));
    dir_changed("d after create", s.d, d, 0);
    tick();
    TM_OK(mkdir(P("d/sub"), 0700));
    attrs sub = snap(P("d/sub"));
    assert_int_equal(sub.nlink, 2);
    assert_int_equal(sub.mode, S_IFDIR | 0700);
    dir_changed("d after mkdir", d, snap(P("d")), 1);
    tick();
    TM_OK(symlink("somewhere", P("d/sym")));
    assert_int_equal(snap(P("d/sym")).size, 9);
    d = snap(P("d"));
    tick();
    TM_OK(rmdir(P("d/sub")));
    dir_changed("d after rmdir", d, snap(P("d")), -1);
    neighbour_unchanged(m, &s);
}

static void test_link_and_unlink(void **state)
{
    struct tmount *m = *state;
    scene s = start(m);
    TM_OK(link(P("d/f"), P("e/g")));
    attrs f = snap(P("d/f"));
    assert_int_equal(f.nlink, 2);
    moved("ctime of the linked inode", s.f.ctime, f.ctime);
    assert_int_equal(f.mtime, s.f.mtime);
    check_same(P("e/g"), "the other name", snap(P("e/g")), f);
    dir_changed("e after link", s.e, snap(P("e")), 0);
    check_same(P("d"), "before the link", s.d, snap(P("d")));
    attrs e = snap(P("e"));
    tick();
    /* Unlink through the second name: the first one's inode must follow. */
    TM_OK(unlink(P("e/g")));
    attrs f2 = snap(P("d/f"));
    assert_int_equal(f2.nlink, 1);
    moved("ctime of the unlinked inode", f.ctime, f2.ctime);
    dir_changed("e after unlink", e, snap(P("e")), 0);
    attrs d = snap(P("d"));
    tick();
    TM_OK(unlink(P("d/f")));
    dir_changed("d after unlink", d, snap(P("d")), 0);
    neighbour_unchanged(m, &s);
}

static void test_renames(void **state)
{
    struct tmount *m = *state;
    scene s = start(m);
    TM_OK(rename(P("d/f"), P("d/f2")));
    attrs f = snap(P("d/f2"));
    moved("ctime of the renamed inode", s.f.ctime, f.ctime);
    assert_int_equal(f.nlink, 1);
    attrs d = snap(P("d"));
    dir_changed("d after rename", s.d, d, 0);
    tick();
    /* A directory across parents: both link counts, both times. */
    TM_OK(mkdir(P("d/sub"), 0755));
    d = snap(P("d"));
    attrs sub = snap(P("d/sub"));
    tick();
    TM_OK(rename(P("d/sub"), P("e/sub")));
    dir_changed("d after the directory left", d, snap(P("d")), -1);
    dir_changed("e after the directory came", s.e, snap(P("e")), 1);
    attrs sub2 = snap(P("e/sub"));
    moved("ctime of the moved directory", sub.ctime, sub2.ctime);
    assert_int_equal(sub2.nlink, 2);
    tick();
    /* Over an existing file: the replaced inode loses its link. */
    tm_make_file(P("e/victim"), 5, 3);
    TM_OK(link(P("e/victim"), P("d/keep")));
    attrs keep = snap(P("d/keep"));
    tick();
    TM_OK(rename(P("d/f2"), P("e/victim")));
    attrs keep2 = snap(P("d/keep"));
    assert_int_equal(keep2.nlink, keep.nlink - 1);
    moved("ctime of the replaced inode", keep.ctime, keep2.ctime);
    assert_int_equal(snap(P("e/victim")).ino, f.ino);
    neighbour_unchanged(m, &s);
}

static void test_setattr_and_write(void **state)
{
    struct tmount *m = *state;
    scene s = start(m);
    TM_OK(chmod(P("d/f"), 0600));
    attrs f = snap(P("d/f"));
    assert_int_equal(f.mode, S_IFREG | 0600);
    moved("ctime after chmod", s.f.ctime, f.ctime);
    check_same(P("d"), "before chmod", s.d, snap(P("d")));
    tick();
    TM_OK(truncate(P("d/f"), 50000));
    attrs f2 = snap(P("d/f"));
    assert_int_equal(f2.size, 50000);
    moved("mtime after truncate", f.mtime, f2.mtime);
    tick();
    int fd = open(P("d/f"), O_WRONLY | O_APPEND);
    TM_OK(fd);
    assert_int_equal(write(fd, "abc", 3), 3);
    struct stat st;
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, 50003);
    TM_OK(close(fd));
    attrs f3 = snap(P("d/f"));
    assert_int_equal(f3.size, 50003);
    moved("mtime after write", f2.mtime, f3.mtime);
    check_same(P("d"), "before the file's changes", s.d, snap(P("d")));
    neighbour_unchanged(m, &s);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_create_and_mkdir, setup),
        TM_TEST(test_link_and_unlink, setup),
        TM_TEST(test_renames, setup),
        TM_TEST(test_setattr_and_write, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
