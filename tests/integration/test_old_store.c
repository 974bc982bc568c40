/*
 * test_old_store — stores made and written by older lsmfs versions
 * (tests/data/make_old_store.sh with that lsmfs's mkfs and daemon): format 2
 * (fixed-size inode records) and format 3 (compact records, an inline
 * file's bytes in its record). Each passes fsck, reads back as it was
 * written through a read-only mount that changes no byte of the store
 * (nor does fsck -n), then mounts read-write: every file's type, mode,
 * owner, size, link count, mtime, bytes, xattr and symlink target. Files
 * changed then get records of format 4, an inline file's bytes moved apart
 * ('L' key) in the same batch; the others keep theirs: fsck takes both, and
 * a remount reads both back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60

/* What make_format2_store.sh wrote; size -1: not checked (a directory),
 * seed -1: no bytes to compare. */
static const struct expect {
    const char *path;
    mode_t mode; /* type and permission bits */
    uid_t uid;
    gid_t gid;
    long long size;
    nlink_t nlink;
    long long mtime_sec;
    long mtime_nsec;
    int seed;
} expect[] = {
    {"small", S_IFREG | 0640, 1234, 5678, 1024, 1, 1577934245, 123456789, 1},
    {"empty", S_IFREG | 0644, 0, 0, 0, 1, 1577934245, 123456789, -1},
    {"big", S_IFREG | 04755, 0, 0, 10000, 1, 1577934245, 123456789, 2},
    {"dir", S_IFDIR | 0750, 0, 0, -1, 2, 1623053350, 0, -1},
    {"dir/inner", S_IFREG | 0644, 0, 0, 100, 2, 1577934245, 123456789, 3},
    {"hard", S_IFREG | 0644, 0, 0, 100, 2, 1577934245, 123456789, 3},
    {"link", S_IFLNK | 0777, 0, 0, 5, 1, 1577934245, 123456789, -1},
    {"fifo", S_IFIFO | 0600, 0, 0, 0, 1, 1577934245, 123456789, -1},
};
#define NEXPECT (sizeof expect / sizeof *expect)

/* The script's byte pattern. */
static void pattern(unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)((i * 7 + (size_t)seed) % 251);
}

static void check_one(const struct tmount *m, const struct expect *e)
{
    const char *p = tm_path(m, "%s", e->path);
    struct stat st;
    if (lstat(p, &st) != 0)
        fail_msg("%s: %s", e->path, strerror(errno));
    if (st.st_mode != e->mode || st.st_uid != e->uid || st.st_gid != e->gid ||
        st.st_nlink != e->nlink || st.st_mtim.tv_sec != e->mtime_sec ||
        st.st_mtim.tv_nsec != e->mtime_nsec || (e->size >= 0 && st.st_size != e->size))
        fail_msg("%s: mode %o uid %u gid %u nlink %lu size %lld mtime %lld.%09ld; want mode %o "
                 "uid %u gid %u nlink %lu size %lld mtime %lld.%09ld",
                 e->path, st.st_mode, st.st_uid, st.st_gid, (unsigned long)st.st_nlink,
                 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, e->mode,
                 e->uid, e->gid, (unsigned long)e->nlink, e->size, e->mtime_sec, e->mtime_nsec);
    if (e->seed < 0)
        return;
    unsigned char want[10000], got[10001];
    pattern(want, (size_t)e->size, e->seed);
    ssize_t n = tm_read_file(p, got, sizeof got);
    assert_int_equal(n, e->size);
    tm_check_bytes(got, want, (size_t)n, e->path, 0);
}

static void check_all(const struct tmount *m)
{
    for (size_t i = 0; i < NEXPECT; i++)
        check_one(m, &expect[i]);
    char v[16] = {0}, target[16] = {0};
    assert_int_equal(getxattr(tm_path(m, "small"), "user.k", v, sizeof v), 5);
    assert_string_equal(v, "value");
    assert_int_equal(readlink(tm_path(m, "link"), target, sizeof target), 5);
    assert_string_equal(target, "small");
}

/* The store of tarball (tests/data/) in a temp dir of its own (removed by
 * the caller). */
static void unpack(const char *tarball, char *dir, char *store)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    /* BUILD/tests/test_old_store: the repository is two levels up. */
    char *repo = dirname(dirname(dirname(exe)));
    assert_int_equal(tm_mkdtemp(dir, "oldstore"), 0);
    char out[4096];
    if (tm_sh(out, sizeof out, "tar -C '%s' -xzf '%s/tests/data/%s'", dir, repo, tarball) != 0)
        fail_msg("unpacking %s: %s", tarball, out);
    if (snprintf(store, PATH_MAX, "%.*s/store", PATH_MAX - 16, dir) >= PATH_MAX)
        fail_msg("path too long");
}

static void expect_fsck_clean(struct tmount *m, const char *when)
{
    if (tm_fsck(m) != 0)
        fail_msg("fsck.lsmfs -n %s found problems", when);
}

/* A checksum of every file of the store (names and bytes) into sum. */
static void store_sum(const char *store, char *sum, size_t cap)
{
    if (tm_sh(sum, cap, "cd '%s' && find . -type f | sort | xargs sha256sum | sha256sum", store) !=
        0)
        fail_msg("checksumming the store: %s", sum);
}

/* How many 'L' keys (inline bytes apart) the unmounted store holds. */
static int inline_keys(const char *store)
{
    char out[4096];
    if (tm_sh(out, sizeof out, "'%s' dump '%s' L M | wc -l", tm_bin("lsmctl"), store) != 0)
        fail_msg("lsmctl dump: %s", out);
    return atoi(out);
}

static void old_store_reads_back(const char *tarball)
{
    char dir[PATH_MAX], store[PATH_MAX], out[4096], before[256], after[256];
    unpack(tarball, dir, store);
    store_sum(store, before, sizeof before);
    if (tm_sh(out, sizeof out, "'%s' -n '%s' 2>&1", tm_bin("fsck.lsmfs"), store) != 0)
        fail_msg("fsck.lsmfs -n of %s: %s", tarball, out);
    struct tmount *m = tm_new_at("ro", store, false);
    if (m == NULL)
        fail_msg("%s did not mount read-only", tarball);
    check_all(m);
    assert_int_equal(tm_unmount(m), 0);
    store_sum(store, after, sizeof after);
    if (strcmp(before, after) != 0)
        fail_msg("fsck -n or a read-only mount changed %s", tarball);
    snprintf(m->opts, sizeof m->opts, "%s", "");
    assert_int_equal(tm_mount(m), 0);
    check_all(m);
    /* Changed: new records; dir/inner's bytes leave its record (an xattr
     * changes no byte); the rest keep their old ones. */
    const struct timespec t[2] = {{.tv_nsec = UTIME_OMIT}, {1700000000, 42}};
    assert_int_equal(utimensat(AT_FDCWD, tm_path(m, "empty"), t, 0), 0);
    assert_int_equal(chmod(tm_path(m, "big"), 0700), 0);
    assert_int_equal(setxattr(tm_path(m, "dir/inner"), "user.moved", "1", 1, 0), 0);
    assert_int_equal(tm_unmount(m), 0);
    expect_fsck_clean(m, "after changes");
    assert_int_equal(inline_keys(store), 1); /* inner's; small's stay in its record */
    assert_int_equal(tm_mount(m), 0);
    struct stat st;
    assert_int_equal(stat(tm_path(m, "empty"), &st), 0);
    assert_true(st.st_mtim.tv_sec == 1700000000 && st.st_mtim.tv_nsec == 42);
    assert_int_equal(stat(tm_path(m, "big"), &st), 0);
    assert_int_equal(st.st_mode, S_IFREG | 0700);
    for (size_t i = 0; i < NEXPECT; i++)
        if (strcmp(expect[i].path, "empty") != 0 && strcmp(expect[i].path, "big") != 0)
            check_one(m, &expect[i]);
    if (tm_lsmctl(out, sizeof out, "info %s", m->mnt) != 0)
        fail_msg("lsmctl info: %s", out);
    if (strstr(out, "Format version:      4") == NULL)
        fail_msg("a read-write mount did not mark the store format 4:\n%s", out);
    assert_int_equal(tm_free(m), 0);
    assert_int_equal(tm_rmtree(dir), 0);
}

static void test_format2_store_reads_back(void **state)
{
    (void)state;
    old_store_reads_back("format2_store.tar.gz");
}

static void test_format3_store_reads_back(void **state)
{
    (void)state;
    old_store_reads_back("format3_store.tar.gz");
}

int main(void)
{
    tm_init();
    tm_watchdog(TEST_TIMEOUT_S, "test_old_store");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format2_store_reads_back),
        cmocka_unit_test(test_format3_store_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
