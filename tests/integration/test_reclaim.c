/*
 * test_reclaim — a deleted big file's space comes back without a tombstone
 * per chunk: the reclaimer drops the tables that hold only the file's
 * chunks (lsm_delete_files_in_range) and writes tombstones only for the
 * rest; a crash after the drop and before the last batch is redone by the
 * next mount; a file written beside others at once is dropped too.
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
#include <sys/xattr.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 180
#define BIG (64 * MiB)
#define CHUNK 4096 /* mkfs's default chunk size */
#define RECLAIM_WAIT_S 60.0
#define CRASH_ROUNDS 8
#define AT_ONCE_FILES 4
#define AT_ONCE_BYTES (4 * MiB) /* all four: two memtables, no compaction yet */

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_reclaim test", NULL);
}

/* A counter of the metrics xattr ("NAME VALUE" lines); the test fails if
 * it is not there. */
static uint64_t metric(const struct tmount *m, const char *name)
{
    static char buf[65536];
    ssize_t n = getxattr(m->mnt, "user.lsmfs.metrics", buf, sizeof buf - 1);
    if (n <= 0)
        fail_msg("getxattr user.lsmfs.metrics: %s", tm_errname(errno));
    buf[n] = '\0';
    size_t len = strlen(name);
    for (const char *p = buf; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ' ')
            return strtoull(p + len + 1, NULL, 10);
    fail_msg("no metric %s", name);
    return 0;
}

static void wait_reclaimed(const struct tmount *m, uint64_t n)
{
    double end = tm_now() + RECLAIM_WAIT_S;
    while (metric(m, "fs_orphans_reclaimed") < n && tm_now() < end)
        tm_sleep_ms(20);
    if (metric(m, "fs_orphans_reclaimed") < n)
        fail_msg("the big file was not reclaimed within %.0f s", RECLAIM_WAIT_S);
}

/* 64 MiB is 16,384 chunks, 64 batches of tombstones before (and as many
 * store writes); now only the chunks still in memtables (two at most, 8 MiB
 * each) get tombstones, and most of the file's table bytes are gone when
 * the reclaim ends, before any compaction. */
static void test_big_file_tables_dropped(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("big"), BIG, 1);
    tm_fsync_path(P("big"), false);
    for (int i = 0; i < 3000 && metric(m, "store_background_busy") != 0; i++)
        tm_sleep_ms(10);
    uint64_t tables = metric(m, "store_total_table_bytes");
    uint64_t w0 = metric(m, "fs_store_writes"), d0 = metric(m, "store_tables_dropped");
    uint64_t r0 = metric(m, "fs_orphans_reclaimed");
    TM_OK(unlink(P("big")));
    wait_reclaimed(m, r0 + 1);
    uint64_t writes = metric(m, "fs_store_writes") - w0;
    uint64_t dropped = metric(m, "store_tables_dropped") - d0;
    uint64_t left = metric(m, "store_total_table_bytes");
    uint64_t per_chunk_batches = BIG / CHUNK / 256;
    if (dropped < 4 || writes > per_chunk_batches / 2 || left > tables / 2)
        fail_msg("reclaiming %ld MiB: %llu tables dropped, %llu store writes (%llu batches "
                 "of tombstones for every chunk), table bytes %llu -> %llu",
                 BIG / MiB, (unsigned long long)dropped, (unsigned long long)writes,
                 (unsigned long long)per_chunk_batches, (unsigned long long)tables,
                 (unsigned long long)left);
    tm_remount_checked(m);
}

/* One of the files written at once: its path and the write's errno. */
struct at_once {
    char path[PATH_MAX];
    int seed, err;
};

static void *write_one(void *arg)
{
    struct at_once *a = arg;
    size_t size = AT_ONCE_BYTES;
    char *buf = malloc(size);
    a->err = buf ? 0 : ENOMEM;
    if (buf) {
        tm_fill(buf, size, (uint64_t)a->seed, 0);
        a->err = -tm_write_file(a->path, buf, size, 0644);
    }
    if (a->err == 0)
        a->err = -tm_sync_path(a->path, false);
    free(buf);
    return NULL;
}

/* Four files written at once share every flush; still, a deleted one's
 * flushed bytes go with whole level-0 tables of its own, before any
 * compaction (which a full disk may not allow): before, each table held all
 * four files and none went. */
static void test_files_written_at_once_dropped(void **state)
{
    struct tmount *m = *state;
    struct at_once a[AT_ONCE_FILES];
    for (int i = 0; i < AT_ONCE_FILES; i++) {
        a[i] = (struct at_once){.seed = 10 + i};
        snprintf(a[i].path, sizeof a[i].path, "%s", P("f%d", i));
    }
    tm_run_threads(AT_ONCE_FILES, write_one, a, sizeof a[0]);
    for (int i = 0; i < AT_ONCE_FILES; i++)
        if (a[i].err != 0)
            fail_msg("writing %s: %s", a[i].path, tm_errname(a[i].err));
    for (int i = 0; i < 3000 && metric(m, "store_background_busy") != 0; i++)
        tm_sleep_ms(10);
    uint64_t tables = metric(m, "store_total_table_bytes"), d0 = metric(m, "store_tables_dropped");
    uint64_t r0 = metric(m, "fs_orphans_reclaimed");
    TM_OK(unlink(a[1].path));
    wait_reclaimed(m, r0 + 1);
    uint64_t dropped = metric(m, "store_tables_dropped") - d0;
    uint64_t after = metric(m, "store_total_table_bytes");
    uint64_t freed = tables > after ? tables - after : 0; /* (a flush may add more) */
    if (dropped < 1 || freed < AT_ONCE_BYTES / 4)
        fail_msg("one of %d files of %d MiB written at once deleted: %llu tables dropped, "
                 "%llu table bytes freed",
                 AT_ONCE_FILES, AT_ONCE_BYTES / MiB, (unsigned long long)dropped,
                 (unsigned long long)freed);
    for (int i = 0; i < AT_ONCE_FILES; i++)
        if (i != 1)
            tm_check_file(a[i].path, AT_ONCE_BYTES, (uint64_t)a[i].seed);
    tm_remount_checked(m);
}

/* Polls until the reclaimer has dropped the file's tables but not finished
 * (its orphan record still there), then kills the daemon. Returns whether
 * it caught that window. */
static bool kill_between_drop_and_last_batch(struct tmount *m, uint64_t dropped_before)
{
    double end = tm_now() + RECLAIM_WAIT_S;
    while (tm_now() < end) {
        uint64_t dropped = metric(m, "store_tables_dropped");
        uint64_t reclaimed = metric(m, "fs_orphans_reclaimed");
        if (reclaimed > 0)
            return false; /* too late */
        if (dropped > dropped_before) {
            if (tm_kill(m) != 0)
                fail_msg("the daemon was not running at the kill");
            return true;
        }
    }
    fail_msg("the reclaimer dropped nothing within %.0f s", RECLAIM_WAIT_S);
    return false;
}

/* The big file is an orphan at a crash (unlinked while open); each next
 * mount reclaims it and is killed right after the drop, until one such kill
 * landed. The mount after it redoes the reclaim: the inode goes, fsck finds
 * nothing left of it. */
static void test_crash_after_drop_redone(void **state)
{
    struct tmount *m = *state;
    long long base = tm_inodes_used(m);
    bool caught = false;
    for (int round = 0; round < CRASH_ROUNDS && !caught; round++) {
        tm_make_file(P("big"), BIG, 2);
        int fd = open(P("big"), O_RDONLY);
        TM_OK(fd);
        TM_OK(unlink(P("big")));
        if (tm_kill(m) != 0)
            fail_msg("the daemon was not running at the kill");
        close(fd);
        tm_crash_checked(m, "crash with a big orphan");
        caught = kill_between_drop_and_last_batch(m, 0);
        if (caught)
            tm_crash_checked(m, "crash between the drop and the last batch");
        tm_wait_inodes(m, base, RECLAIM_WAIT_S);
    }
    if (!caught)
        fail_msg("no kill landed between the drop and the last batch in %d rounds", CRASH_ROUNDS);
    tm_remount_checked(m);
    tm_wait_inodes(m, base, RECLAIM_WAIT_S);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_big_file_tables_dropped, setup),
        TM_TEST(test_crash_after_drop_redone, setup),
        TM_TEST(test_files_written_at_once_dropped, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
