/*
 * test_db_manifest_faults.c — failures while writing the MANIFEST or
 * CURRENT never cost data: after one, no file the disk may still name is
 * deleted, and the store reopens with everything it acknowledged. Also the
 * file-number and CURRENT edge cases of recovery.
 */
#include "fixture.h"

#include "fault_env.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NKEYS = 500 };

/* Opens dir through env (NULL: the default env); NKEYS keys stay in one
 * memtable. */
static lsm_status *try_open(lsm_env *env, lsm_db **db)
{
    lsm_options o;
    tu_db_options(&o, env, 1 << 20);
    return lsm_open(&o, tu_dir, db);
}

static void key_value(int i, int version, char *k, char *v)
{
    sprintf(k, "key%05d", i);
    sprintf(v, "value %d of key %d %080d", version, i, i);
}

static void put_all(lsm_db *db, int version)
{
    char k[32], v[160];
    for (int i = 0; i < NKEYS; i++) {
        key_value(i, version, k, v);
        lsm_status *s = lsm_put(db, NULL, k, strlen(k), v, strlen(v));
        if (s)
            fail_msg("put %s: %s", k, lsm_status_message(s));
    }
}

static void check_all(lsm_db *db, int version)
{
    char k[32], v[160];
    for (int i = 0; i < NKEYS; i++) {
        key_value(i, version, k, v);
        tu_assert_value(db, k, v);
    }
}

static void report(void *ctx, const char *msg)
{
    (void)ctx;
    fail_msg("verify: %s", msg);
}

/* Reopens with a clean env: everything of `version` is there, twice (the
 * second open sees what the first one's sweep left). */
static void reopen_and_check(int version)
{
    for (int round = 0; round < 2; round++) {
        lsm_db *db = tu_open(NULL, 1 << 20);
        check_all(db, version);
        assert_null(lsm_verify(db, report, NULL));
        assert_null(lsm_close(db));
    }
}

static void close_ignoring_error(lsm_db *db)
{
    lsm_status_free(lsm_close(db));
}

/* Opens the store through fe with version 1 of the keys in a level-1 table
 * and version 2 in the memtable: the next lsm_compact_range flushes it to a
 * level-0 table and merges that with the level-1 one. */
static lsm_db *open_with_two_levels(fault_env *fe)
{
    lsm_db *db = tu_open(fault_env_env(fe), 1 << 20);
    put_all(db, 1);
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    put_all(db, 2);
    return db;
}

/* Bug 2 of issue 14: the MANIFEST's fdatasync fails with EIO after a
 * compaction's edit was written. The failed compaction must not delete its
 * outputs: the edit is in the MANIFEST, and the reopen applies it. */
static void test_compaction_manifest_sync_failure_keeps_outputs(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_with_two_levels(fe);
    /* The flush's MANIFEST sync succeeds, the compaction's (level-0 table
     * merged with the level-1 one) fails, and every later one. */
    fault_env_fail(fe, FAULT_SYNC, "MANIFEST", EIO, 1, -1);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    lsm_status_free(s);
    close_ignoring_error(db);
    fault_env_free(fe);
    reopen_and_check(2);
}

/* The same for a full disk, which is not sticky: the next compaction writes
 * a new MANIFEST from the in-memory state and carries on without a reopen. */
static void test_compaction_manifest_full_disk_recovers(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_with_two_levels(fe);
    fault_env_fail(fe, FAULT_SYNC, "MANIFEST", ENOSPC, 1, 1);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    check_all(db, 2);
    /* Held off until its holdoff runs out (db_holdoff.c: the disk's
     * figure did not grow), then it succeeds. */
    for (int i = 0;
         i < 100 && lsm_status_code(s = lsm_compact_range(db, NULL, 0, NULL, 0)) == LSM_NO_SPACE;
         i++) {
        lsm_status_free(s);
        usleep(50 * 1000);
    }
    assert_null(s);
    check_all(db, 2);
    assert_null(lsm_close(db));
    fault_env_free(fe);
    reopen_and_check(2);
}

/* The same for a flush: its MANIFEST sync fails, the process exits. */
static void test_flush_manifest_sync_failure_keeps_data(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 1 << 20);
    put_all(db, 1);
    assert_null(lsm_sync(db));
    fault_env_fail(fe, FAULT_SYNC, "MANIFEST", EIO, 0, -1);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    assert_non_null(s);
    lsm_status_free(s);
    close_ignoring_error(db);
    fault_env_free(fe);
    reopen_and_check(1);
}

/* Bug 3 of issue 14: one transient EIO of a directory fsync, at any point of
 * an open (which writes a new MANIFEST and CURRENT), may fail that open but
 * never leaves the store unopenable or without its data. */
static void test_one_dir_sync_failure_during_open(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 1 << 20);
    put_all(db, 1);
    assert_null(lsm_close(db));
    int failed_opens = 0;
    for (int skip = 0; skip < 8; skip++) {
        fault_env *fe = fault_env_new(lsm_env_default());
        fault_env_fail(fe, FAULT_SYNC_DIR, NULL, EIO, skip, 1);
        lsm_status *s = try_open(fault_env_env(fe), &db);
        if (s) {
            failed_opens++;
            lsm_status_free(s);
        } else {
            close_ignoring_error(db);
        }
        fault_env_free(fe);
        reopen_and_check(1);
    }
    assert_true(failed_opens > 0); /* the fault did hit the opens */
}

/* The same for a failed CURRENT rename and data sync of its temp file. */
static void test_one_current_failure_during_open(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 1 << 20);
    put_all(db, 1);
    assert_null(lsm_close(db));
    const unsigned ops[] = {FAULT_RENAME, FAULT_SYNC, FAULT_CREATE, FAULT_WRITE};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        fault_env *fe = fault_env_new(lsm_env_default());
        fault_env_fail(fe, ops[i], ".dbtmp", EIO, 0, 1);
        lsm_status *s = try_open(fault_env_env(fe), &db);
        assert_non_null(s);
        lsm_status_free(s);
        fault_env_free(fe);
        reopen_and_check(1);
    }
}

/* Whether dir holds a file whose name starts with prefix. */
static bool has_file(const char *prefix)
{
    DIR *d = opendir(tu_dir);
    assert_non_null(d);
    bool found = false;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        found = found || strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

/* A stray file numbered UINT64_MAX is not the store's: the file counter
 * does not wrap to 0 (new files would reuse old numbers). */
static void test_huge_file_number_ignored(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof(path), "%s/18446744073709551615.ldb", tu_dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    lsm_db *db = tu_open(NULL, 1 << 20); /* a new store in a directory holding it */
    put_all(db, 1);
    assert_false(has_file("000000.") || has_file("MANIFEST-000000"));
    assert_null(lsm_close(db));
    db = tu_open(NULL, 1 << 20);
    put_all(db, 2);
    assert_false(has_file("000000.") || has_file("MANIFEST-000000") || has_file("000001."));
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_null(lsm_close(db));
    assert_true(access(path, F_OK) == 0); /* not ours: left alone */
    reopen_and_check(2);
}

/* A CURRENT that exists but cannot be read is reported as the read error,
 * not as "not an lsmfs store". */
static void test_unreadable_current_reports_the_error(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 1 << 20);
    assert_null(lsm_close(db));
    fault_env *fe = fault_env_new(lsm_env_default());
    fault_env_fail(fe, FAULT_READ, "CURRENT", EIO, 0, -1);
    lsm_status *s = try_open(fault_env_env(fe), &db);
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    assert_int_equal(lsm_status_errno(s), EIO);
    assert_null(strstr(lsm_status_message(s), "not an lsmfs store"));
    lsm_status_free(s);
    fault_env_free(fe);
    /* Absent: that is "not a store". */
    snprintf(tu_dir + strlen(tu_dir), sizeof(tu_dir) - strlen(tu_dir), "/none");
    lsm_options o;
    lsm_options_init(&o);
    s = lsm_open(&o, tu_dir, &db);
    tu_dir[strlen(tu_dir) - strlen("/none")] = '\0';
    assert_int_equal(lsm_status_code(s), LSM_INVALID_ARGUMENT);
    assert_non_null(strstr(lsm_status_message(s), "not an lsmfs store"));
    lsm_status_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_compaction_manifest_sync_failure_keeps_outputs),
        TU_TEST(test_compaction_manifest_full_disk_recovers),
        TU_TEST(test_flush_manifest_sync_failure_keeps_data),
        TU_TEST(test_one_dir_sync_failure_during_open),
        TU_TEST(test_one_current_failure_during_open),
        TU_TEST(test_huge_file_number_ignored),
        TU_TEST(test_unreadable_current_reports_the_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
