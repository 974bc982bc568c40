/*
 * test_durability — fsync by sequence number, and unlinked files kept by
 * the kernel's references (issue 6, on top of issue 5's semantics).
 *
 * lsmfs stamps every inode with the sequence number of the last batch that
 * changed it; fsync, fdatasync and fsyncdir make everything up to that
 * stamp durable, so an fsync of something a sync already covered costs no
 * WAL sync at all. These tests read the store's WAL sync counter from the
 * root's user.lsmfs.stats attribute around each call: a sync where nothing
 * new was written fails them, and so does a missing sync after a change.
 *
 * Files are opened without OPEN/RELEASE requests when the kernel allows it
 * (FUSE_CAP_NO_OPEN_SUPPORT), so an unlinked file must live exactly as long
 * as the kernel references it: readable while open, gone (no inode left in
 * statfs, clean fsck) once the last descriptor is closed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_durability test", NULL);
}

static uint64_t wal_syncs(const struct tmount *m)
{
    return tm_stats_counter(m, "wal syncs");
}

/* A second fsync, an fdatasync, and an fsync of the directory whose last
 * change (the create) the first fsync covered: no WAL sync for any. */
static void test_fsync_of_durable_costs_no_sync(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("d"), 0755));
    int fd = open(P("d/f"), O_CREAT | O_EXCL | O_WRONLY, 0644);
    TM_OK(fd);
    char buf[3000];
    tm_fill(buf, sizeof buf, 1, 0);
    /* Counted around write + fsync: under -o sync the write syncs itself
     * and the fsync is free; otherwise the fsync syncs. */
    uint64_t s0 = wal_syncs(m);
    TM_OK(tm_pwrite_all(fd, buf, sizeof buf, 0));
    TM_OK(fsync(fd));
    uint64_t s1 = wal_syncs(m);
    assert_int_equal(s1, s0 + 1);
    uint64_t free0 = tm_stats_counter(m, "fs fsyncs already durable");
    TM_OK(fsync(fd));
    TM_OK(fdatasync(fd));
    tm_fsync_path(P("d"), true);
    assert_int_equal(wal_syncs(m), s1);
    assert_int_equal(tm_stats_counter(m, "fs fsyncs already durable"), free0 + 3);
    TM_OK(close(fd));
}

/* Every change after a sync needs its own: a write for the file, a rename
 * for both directories; the renamed file's fsync then rides on the
 * directory's (the rename stamped it too). Counted around change + fsync
 * pairs, so the counts hold under -o sync as well. */
static void test_changes_after_a_sync_are_synced(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("tmp"), 0700));
    TM_OK(mkdir(P("new"), 0700));
    int fd = open(P("tmp/msg"), O_CREAT | O_EXCL | O_WRONLY, 0600);
    TM_OK(fd);
    TM_OK(tm_pwrite_all(fd, "hello", 5, 0));
    TM_OK(fsync(fd));
    uint64_t s0 = wal_syncs(m);
    TM_OK(tm_pwrite_all(fd, " world", 6, 5));
    TM_OK(fsync(fd));
    assert_int_equal(wal_syncs(m), s0 + 1);
    TM_OK(close(fd));
    TM_OK(rename(P("tmp/msg"), P("new/msg")));
    tm_fsync_path(P("new"), true);
    assert_int_equal(wal_syncs(m), s0 + 2);
    tm_fsync_path(P("tmp"), true);
    tm_fsync_path(P("new/msg"), false);
    assert_int_equal(wal_syncs(m), s0 + 2);
    char back[32];
    assert_int_equal(tm_read_file(P("new/msg"), back, sizeof back), 11);
    assert_memory_equal(back, "hello world", 11);
}

static long used_inodes(const struct tmount *m)
{
    struct statvfs sv;
    TM_OK(statvfs(m->mnt, &sv));
    return (long)(sv.f_files - sv.f_ffree);
}

/* Waits (the kernel forgets an inode asynchronously) until statfs shows
 * `want` inodes; fails after 5 s. */
static void expect_inodes(const struct tmount *m, long want, const char *when)
{
    long have = used_inodes(m);
    for (int i = 0; i < 500 && have != want; i++) {
        tm_sleep_ms(10);
        have = used_inodes(m);
    }
    if (have != want)
        fail_msg("%s: %ld inodes in use, expected %ld", when, have, want);
}

/* Unlinked while open, an inline and a chunked file stay readable and
 * writable; the last close frees both; the store is clean afterwards. */
static void test_unlinked_open_files_live_until_closed(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    long base = used_inodes(m);
    static char big[300 * 1024], back[sizeof big];
    tm_fill(big, sizeof big, 7, 0);
    TM_OK(tm_write_file(P("small"), big, 1000, 0644));
    TM_OK(tm_write_file(P("big"), big, sizeof big, 0644));
    expect_inodes(m, base + 2, "after creating two files");
    int fs = open(P("small"), O_RDWR), fb = open(P("big"), O_RDONLY);
    TM_OK(fs);
    TM_OK(fb);
    TM_OK(unlink(P("small")));
    TM_OK(unlink(P("big")));
    TM_ERR(access(P("small"), F_OK), ENOENT);
    expect_inodes(m, base + 2, "unlinked but open");
    assert_int_equal(tm_pread_all(fb, back, sizeof back, 0), (ssize_t)sizeof big);
    assert_memory_equal(back, big, sizeof big);
    TM_OK(tm_pwrite_all(fs, "appended", 8, 1000));
    assert_int_equal(tm_pread_all(fs, back, 2000, 0), 1008);
    assert_memory_equal(back, big, 1000);
    assert_memory_equal(back + 1000, "appended", 8);
    TM_OK(close(fs));
    TM_OK(close(fb));
    expect_inodes(m, base, "after the last close");
    tm_remount_checked(m);
    assert_int_equal(used_inodes(m), base);
}

/* A file replaced by rename while open is kept the same way. */
static void test_replaced_open_file_lives_until_closed(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    long base = used_inodes(m);
    TM_OK(tm_write_file(P("old"), "old contents", 12, 0644));
    TM_OK(tm_write_file(P("new"), "new", 3, 0644));
    int fd = open(P("old"), O_RDONLY);
    TM_OK(fd);
    TM_OK(rename(P("new"), P("old")));
    expect_inodes(m, base + 2, "replaced but open");
    char back[32];
    assert_int_equal(tm_pread_all(fd, back, sizeof back, 0), 12);
    assert_memory_equal(back, "old contents", 12);
    TM_OK(close(fd));
    expect_inodes(m, base + 1, "after the last close");
    assert_int_equal(tm_read_file(P("old"), back, sizeof back), 3);
    tm_remount_checked(m);
}

int main(void)
{
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_fsync_of_durable_costs_no_sync, setup),
        TM_TEST(test_changes_after_a_sync_are_synced, setup),
        TM_TEST(test_unlinked_open_files_live_until_closed, setup),
        TM_TEST(test_replaced_open_file_lives_until_closed, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
