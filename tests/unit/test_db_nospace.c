/*
 * test_db_nospace.c — a full disk during background work: writes that need
 * room fail with LSM_NO_SPACE (never hang, never claim success), nothing
 * acknowledged is lost, and once space is back the store carries on without
 * a reopen.
 */
#include "fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "db_impl.h"
#include "fault_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lsm_db *open_db(lsm_env *env)
{
    lsm_options o;
    tu_db_options(&o, env, 64 << 10);
    o.max_memtable_bytes = 512 << 10;
    return tu_open_with(&o);
}

static void key_value(int i, char *k, char *v)
{
    sprintf(k, "key%07d", i);
    sprintf(v, "value %d %0100d", i, i);
}

static void check_present(lsm_db *db, int n)
{
    char k[32], v[160];
    for (int i = 0; i < n; i++) {
        key_value(i, k, v);
        tu_assert_value(db, k, v);
    }
}

static void test_full_disk_during_flush(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    /* Tables cannot be written: every flush fails with ENOSPC. */
    fault_env_fail(fe, FAULT_WRITE | FAULT_CREATE, ".ldb", ENOSPC, 0, -1);
    char k[32], v[160];
    int acked = 0;
    lsm_status *s = NULL;
    for (int i = 0; i < 100000; i++) {
        key_value(i, k, v);
        s = lsm_put(db, NULL, k, strlen(k), v, strlen(v));
        if (s)
            break;
        acked = i + 1;
    }
    /* Memory filled up with unflushable memtables: the write is refused. */
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    assert_int_equal(lsm_status_errno(s), ENOSPC);
    lsm_status_free(s);
    check_present(db, acked);
    char *stats = lsm_property(db, "lsm.stats");
    assert_non_null(strstr(stats, "disk full: "));
    assert_null(strstr(stats, "disk full: no"));
    free(stats);
    char *err = lsm_property(db, "lsm.background-error");
    assert_string_equal(err, ""); /* not sticky */
    free(err);

    /* Space comes back: the flush retries and writes go on, no reopen. */
    fault_env_clear_failures(fe);
    int more = acked;
    for (int refused = 0; refused < 300 && more < acked + 2000;) {
        key_value(more, k, v);
        s = lsm_put(db, NULL, k, strlen(k), v, strlen(v));
        if (s) { /* until the retried flush has made room */
            assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
            lsm_status_free(s);
            refused++;
            usleep(20000);
            continue;
        }
        more++;
    }
    assert_int_equal(more, acked + 2000);
    check_present(db, more);
    assert_null(lsm_close(db));
    db = open_db(fault_env_env(fe));
    check_present(db, more);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

static uint64_t full_disk_events(lsm_db *db)
{
    uint64_t n = 0;
    assert_true(lsm_property_u64(db, "lsm.full-disk-events", &n));
    return n;
}

static void *close_thread(void *arg)
{
    return lsm_close(arg);
}

/* The flush thread's wait before a full-disk retry is a wait on what close
 * signals: with a retry delay of an hour, the thread waits (no retry comes
 * in between), close's flush makes it retry once at once (it fails: close
 * reports the full disk) and its stop ends the next wait, so close returns
 * (before: a fixed 100 ms sleep, retried every 100 ms whatever the delay,
 * that close had to wait out). */
static void test_close_ends_full_disk_retry(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    o.write_buffer_size = 64 << 10;
    o.full_disk_retry_us = 3600u * 1000000u;
    o.env = fault_env_env(fe);
    lsm_db *db = NULL;
    assert_null(lsm_open(&o, tu_dir, &db));
    fault_env_fail(fe, FAULT_WRITE | FAULT_CREATE, ".ldb", ENOSPC, 0, -1);
    char k[32], v[160];
    int acked = 0;
    for (int i = 0; i < 2000; i++) { /* past a memtable: a flush, which fails */
        key_value(i, k, v);
        lsm_status *s = lsm_put(db, NULL, k, strlen(k), v, strlen(v));
        if (s != NULL) { /* a write that needs room once the disk is full */
            assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
            lsm_status_free(s);
            break;
        }
        acked = i + 1;
    }
    for (int i = 0; i < 1000 && full_disk_events(db) == 0; i++)
        usleep(10000);
    assert_int_equal(full_disk_events(db), 1);
    usleep(300000); /* 3 retries of the old fixed 100 ms sleep */
    assert_int_equal(full_disk_events(db), 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, close_thread, db), 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60; /* a hang, not a measurement: close needs no delay */
    void *res = NULL;
    if (pthread_timedjoin_np(t, &res, &deadline) != 0)
        fail_msg("lsm_close still waits out the full-disk retry delay");
    lsm_status *cs = res;
    assert_int_equal(lsm_status_code(cs), LSM_NO_SPACE); /* the retry close asked for */
    lsm_status_free(cs);
    fault_env_clear_failures(fe);
    o.create_if_missing = false;
    assert_null(lsm_open(&o, tu_dir, &db));
    check_present(db, acked);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Compaction hitting a full disk keeps the store consistent and resumes. */
static void test_full_disk_during_compaction(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    char k[32], v[160];
    for (int i = 0; i < 3000; i++) {
        key_value(i, k, v);
        assert_null(lsm_put(db, NULL, k, strlen(k), v, strlen(v)));
    }
    /* Let some tables exist, then fill the disk for a while. */
    fault_env_fail(fe, FAULT_WRITE | FAULT_CREATE, ".ldb", ENOSPC, 2, 50);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    if (s) {
        assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
        lsm_status_free(s);
    }
    check_present(db, 3000);
    fault_env_clear_failures(fe);
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    check_present(db, 3000);
    assert_null(lsm_verify(db, NULL, NULL));
    assert_null(lsm_close(db));
    db = open_db(fault_env_env(fe));
    check_present(db, 3000);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Whether key i reads back as its value (true) or is absent (false). */
static bool read_key(lsm_db *db, int i)
{
    char k[32], v[160];
    key_value(i, k, v);
    char *got = NULL;
    size_t gn = 0;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &got, &gn);
    if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        return false;
    }
    if (s)
        fail_msg("%s: %s", k, lsm_status_message(s));
    assert_int_equal(gn, strlen(v));
    assert_memory_equal(got, v, gn);
    free(got);
    return true;
}

static lsm_status *put_key(lsm_db *db, int i, bool sync)
{
    char k[32], v[160];
    key_value(i, k, v);
    lsm_write_options wo = {.sync = sync};
    return lsm_put(db, &wo, k, strlen(k), v, strlen(v));
}

/* The status s must have `code`; frees it. */
static void expect_code(lsm_status *s, int code)
{
    assert_int_equal(lsm_status_code(s), code);
    lsm_status_free(s);
}

/* A store with a 1 MiB reserve, through fe. */
static lsm_db *open_reserved(fault_env *fe, size_t write_buffer)
{
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    if (write_buffer)
        o.write_buffer_size = write_buffer;
    o.reserve_bytes = 1 << 20;
    o.env = fault_env_env(fe);
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, tu_dir, &db);
    if (s)
        fail_msg("open: %s", lsm_status_message(s));
    return db;
}

#define WAL_KEYS 600

/* Appends to the WAL find the disk full: a torn record stays behind the
 * first failure, then new logs cannot be created for a while. Those writes
 * fail with LSM_NO_SPACE and only they; the store is not stopped, writes
 * resume by themselves, and after a close (or a power cut) every
 * acknowledged write is there, no failed one, and no torn bytes. */
static void full_disk_on_wal(bool crash)
{
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    bool acked[WAL_KEYS] = {false};
    for (int i = 0; i < 200; i++) {
        assert_null(put_key(db, i, i % 2 == 0));
        acked[i] = true;
    }
    /* With a crash to come, no flush may delete the log being cut. */
    if (crash)
        fault_env_fail(fe, FAULT_CREATE, ".ldb", ENOSPC, 0, -1);
    /* The next record's header reaches the log, its payload does not. */
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 1, 1);
    fault_env_fail(fe, FAULT_CREATE, ".log", ENOSPC, 0, 3);
    int failed = 0;
    for (int i = 200; i < WAL_KEYS; i++) {
        lsm_status *s = put_key(db, i, i % 3 != 0);
        if (s) {
            expect_code(s, LSM_NO_SPACE);
            failed++;
            continue;
        }
        acked[i] = true;
    }
    assert_in_range(failed, 2, 4);
    assert_true(acked[WAL_KEYS - 1]);
    char *err = lsm_property(db, "lsm.background-error");
    assert_string_equal(err, ""); /* not sticky */
    free(err);
    for (int i = 0; i < WAL_KEYS; i++)
        assert_int_equal(read_key(db, i), acked[i]);
    assert_null(lsm_sync(db));
    if (crash) {
        uint64_t imm = 0; /* the cut log is still there to replay */
        assert_true(lsm_property_u64(db, "lsm.immutable-memtables", &imm));
        assert_true(imm >= 1);
        assert_null(fault_env_power_cut(fe));
    }
    lsm_status *cs = lsm_close(db);
    if (!crash)
        assert_null(cs);
    lsm_status_free(cs);
    fault_env_clear_failures(fe); /* the disk has room again */

    lsm_options o;
    lsm_options_init(&o);
    o.env = fault_env_env(fe);
    o.paranoid_checks = true;
    assert_null(lsm_open(&o, tu_dir, &db));
    for (int i = 0; i < WAL_KEYS; i++)
        assert_int_equal(read_key(db, i), acked[i]);
    uint64_t torn = 1;
    assert_true(lsm_property_u64(db, "lsm.recovered-torn-bytes", &torn));
    assert_int_equal(torn, 0);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

static void test_full_disk_on_wal(void **state)
{
    (void)state;
    full_disk_on_wal(false);
}

static void test_full_disk_on_wal_then_power_cut(void **state)
{
    (void)state;
    full_disk_on_wal(true);
}

/* A WAL append that fails with EIO stops the store: data may be lost. */
static void test_wal_eio_stays_sticky(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    assert_null(put_key(db, 0, true));
    fault_env_fail(fe, FAULT_WRITE, ".log", EIO, 0, 1);
    expect_code(put_key(db, 1, true), LSM_IO_ERROR);
    expect_code(put_key(db, 2, true), LSM_IO_ERROR);
    expect_code(lsm_close(db), LSM_IO_ERROR);
    fault_env_free(fe);
}

/* Cutting the torn record back fails: the store stops (sticky), as the log
 * may end in damage. */
static void test_wal_cut_failure_is_sticky(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    assert_null(put_key(db, 0, true));
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 1, 1);
    fault_env_fail(fe, FAULT_WRITE, ".log", EIO, 0, 1); /* the truncate */
    expect_code(put_key(db, 1, true), LSM_NO_SPACE);
    fault_env_clear_failures(fe);
    lsm_status *s = put_key(db, 2, true);
    assert_non_null(strstr(lsm_status_message(s), "cutting back"));
    expect_code(s, LSM_IO_ERROR);
    expect_code(lsm_close(db), LSM_IO_ERROR);
    fault_env_free(fe);
}

static uint64_t prop(lsm_db *db, const char *name)
{
    uint64_t v = 0;
    assert_true(lsm_property_u64(db, name, &v));
    return v;
}

static bool reserve_file_exists(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/RESERVE", tu_dir);
    return access(path, F_OK) == 0;
}

/* The reserve: made at open; kept when the flush of the writes that filled
 * the disk finds it full (they must not eat it); given up once a write that
 * frees space comes, so the flushes go on in its space; then only writes
 * that free space go ahead (ordinary ones get LSM_NO_SPACE, a delete too
 * without the flag); made again once the disk has room, and ordinary writes
 * resume. */
static void test_reserve_serves_deletes(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_reserved(fe, 64 << 10);
    assert_int_equal(prop(db, "lsm.reserve-bytes"), 1 << 20);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    assert_true(reserve_file_exists());
    for (int i = 0; i < 2000; i++)
        assert_null(put_key(db, i, false));
    /* The disk is full: the next table cannot be written once. */
    fault_env_set_disk_avail(fe, true, 0);
    fault_env_fail(fe, FAULT_CREATE, ".ldb", ENOSPC, 0, -1);
    lsm_status_free(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_true(prop(db, "lsm.full-disk-events") >= 1);
    assert_int_equal(prop(db, "lsm.reserve-releases"), 0);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    assert_true(reserve_file_exists());
    /* What ordinary writes add could not be flushed either: refused. */
    expect_code(put_key(db, 4999, false), LSM_NO_SPACE);
    char k[32], v[160];
    lsm_status *s;
    lsm_write_options freeing = {.sync = true, .frees_space = true};
    for (int i = 0; i < 1000; i++) {
        key_value(i, k, v);
        assert_null(lsm_delete(db, &freeing, k, strlen(k)));
    }
    assert_true(prop(db, "lsm.reserve-releases") >= 1);
    assert_int_equal(prop(db, "lsm.reserve-held"), 0);
    assert_false(reserve_file_exists());
    fault_env_clear_failures(fe); /* the reserve's space: tables can be written */
    expect_code(put_key(db, 5000, false), LSM_NO_SPACE);
    key_value(1, k, v);
    expect_code(lsm_delete(db, NULL, k, strlen(k)), LSM_NO_SPACE);
    assert_false(read_key(db, 0));
    assert_true(read_key(db, 1000));
    /* Space is back: the reserve is made again and ordinary writes go on. */
    fault_env_set_disk_avail(fe, false, 0);
    for (int tries = 0; (s = put_key(db, 5000, false)) != NULL && tries < 100; tries++) {
        assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
        lsm_status_free(s);
        usleep(20000);
    }
    assert_null(s);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    assert_true(reserve_file_exists());
    assert_null(lsm_close(db));
    db = open_reserved(fe, 64 << 10);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(read_key(db, i), i >= 1000);
    assert_true(read_key(db, 5000));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* The env cannot say how much is free (disk_free fails: a RADOS cluster's
 * statistics time out): the reserve is made all the same, and ordinary
 * writes go on (before: no reserve, so every ordinary write was refused
 * as "the disk is full"). */
static void test_unknown_free_space_makes_the_reserve(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    fault_env_fail(fe, FAULT_DISK_FREE, NULL, EIO, 0, -1);
    lsm_db *db = open_reserved(fe, 64 << 10);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    assert_true(reserve_file_exists());
    for (int i = 0; i < 2000; i++)
        assert_null(put_key(db, i, false));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A write that frees space still goes through when the WAL finds the disk
 * full: the reserve is given up and the write retried in a new log. An
 * ordinary write in the same spot just fails. */
static void test_reserve_serves_freeing_wal_append(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_reserved(fe, 0);
    for (int i = 0; i < 10; i++)
        assert_null(put_key(db, i, true));
    fault_env_set_disk_avail(fe, true, 0);
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    expect_code(put_key(db, 10, true), LSM_NO_SPACE);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1); /* not for that one */
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    char k[32], v[160];
    key_value(3, k, v);
    lsm_write_options freeing = {.sync = true, .frees_space = true};
    assert_null(lsm_delete(db, &freeing, k, strlen(k)));
    assert_int_equal(prop(db, "lsm.reserve-held"), 0);
    assert_false(read_key(db, 3));
    fault_env_set_disk_avail(fe, false, 0);
    assert_null(lsm_close(db));
    db = open_reserved(fe, 0);
    for (int i = 0; i < 11; i++)
        assert_int_equal(read_key(db, i), i != 3 && i != 10);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A store with 64 KiB memtables (256 KiB in all), the given reserve and
 * full-disk retry delay, through fe. */
static lsm_db *open_retrying(fault_env *fe, size_t reserve, uint32_t retry_us)
{
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    o.write_buffer_size = 64 << 10;
    o.max_memtable_bytes = 256 << 10;
    o.reserve_bytes = reserve;
    o.full_disk_retry_us = retry_us;
    o.env = fault_env_env(fe);
    lsm_db *db = NULL;
    assert_null(lsm_open(&o, tu_dir, &db));
    return db;
}

/* The memtables are full and their flush found the disk full: an ordinary
 * write gets LSM_NO_SPACE at once, but a delete that frees space waits for
 * the flush's retry, which it starts at once. (No reserve here: so the
 * ordinary writes fail for memtable room, not for the reserve.) */
static void test_delete_waits_for_the_retry(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    /* no retry of its own within this test */
    lsm_db *db = open_retrying(fe, 0, 30 * 1000000);
    fault_env_fail(fe, FAULT_CREATE, ".ldb", ENOSPC, 0, 1);
    lsm_status *s = NULL;
    int n = 0;
    while (n < 100000 && (s = put_key(db, n, false)) == NULL)
        n++;
    expect_code(s, LSM_NO_SPACE);
    expect_code(put_key(db, n, false), LSM_NO_SPACE);
    char k[32], v[160];
    key_value(0, k, v);
    lsm_write_options freeing = {.frees_space = true};
    assert_null(lsm_delete(db, &freeing, k, strlen(k)));
    assert_false(read_key(db, 0));
    assert_true(read_key(db, n - 1));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Deferred writes (in no log), then the disk is full for tables: a delete
 * that frees space must not log them late (as much room again as they
 * hold, before their flush needs it too): their memtable is flushed first,
 * in the reserve's space. If even that fails, the delete fails and loses
 * nothing. */
static void delete_after_deferred(bool flush_fails)
{
    fault_env *fe = fault_env_new(lsm_env_default());
    /* When the flush can succeed, no retry of its own within this test (the
     * delete must ask for it); when it never can, the delete gives up after
     * two failed retries, which come every second. */
    lsm_db *db = open_retrying(fe, 1 << 20, flush_fails ? 1000000 : 30 * 1000000);
    char k[32], v[160];
    lsm_write_options deferred = {.defer_log = true};
    for (int i = 0; i < 20; i++) {
        key_value(i, k, v);
        assert_null(lsm_put(db, &deferred, k, strlen(k), v, strlen(v)));
    }
    fault_env_fail(fe, FAULT_CREATE, ".ldb", ENOSPC, 0, flush_fails ? -1 : 1);
    lsm_status_free(lsm_compact_range(db, NULL, 0, NULL, 0)); /* its flush: full */
    assert_true(prop(db, "lsm.full-disk-events") >= 1);
    key_value(0, k, v);
    lsm_write_options freeing = {.frees_space = true};
    lsm_status *s = lsm_delete(db, &freeing, k, strlen(k));
    assert_int_equal(prop(db, "lsm.late-logged-bytes"), 0);
    if (flush_fails) {
        expect_code(s, LSM_NO_SPACE);
    } else {
        assert_null(s);
        assert_int_equal(prop(db, "lsm.reserve-held"), 0); /* it served the flush */
    }
    fault_env_clear_failures(fe);
    assert_null(lsm_close(db));
    db = open_retrying(fe, 1 << 20, 20000);
    for (int i = 0; i < 20; i++)
        assert_int_equal(read_key(db, i), i != 0 || flush_fails);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

static void test_delete_flushes_deferred_on_full_disk(void **state)
{
    (void)state;
    delete_after_deferred(false);
}

static void test_delete_after_deferred_flush_fails(void **state)
{
    (void)state;
    delete_after_deferred(true);
}

/* Near a full disk (with a reserve), memtables do not pile up behind slow
 * flushes: what they hold unflushed must fit beside the reserve, or a
 * delete after the disk fills finds more to flush than the reserve takes. */
static void test_low_disk_keeps_memtables_few(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_retrying(fe, 1 << 20, 20000);
    fault_env_set_sync_delay_us(fe, 30000); /* slow flushes */
    fault_env_set_disk_avail(fe, true, (1 << 20) + (128 << 10));
    uint64_t most = 0;
    for (int i = 0; i < 3000; i++) {
        assert_null(put_key(db, i, false));
        uint64_t imm = prop(db, "lsm.immutable-memtables");
        most = imm > most ? imm : most;
    }
    assert_true(most <= 1);
    fault_env_set_sync_delay_us(fe, 0);
    fault_env_set_disk_avail(fe, false, 0);
    check_present(db, 3000);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A memtable waits for a flush the full disk refuses even with the
 * reserve, the disk is too low for another memtable, and the log broke on
 * the full disk: a delete still goes through (a new memtable and log of
 * its own; before: LSM_NO_SPACE, the delete waited for that flush, issue
 * 29), and is there after a reopen with room again. */
static void test_delete_switches_past_stuck_flush(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_retrying(fe, 1 << 20, 20000);
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    int n = 0;
    while (prop(db, "lsm.immutable-memtables") == 0 && n < 3000)
        assert_null(put_key(db, n++, true));
    assert_int_equal(prop(db, "lsm.immutable-memtables"), 1);
    fault_env_set_disk_avail(fe, true, 64 << 10);
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    expect_code(put_key(db, n, true), LSM_NO_SPACE);
    char k[32], v[160];
    key_value(1, k, v);
    lsm_write_options freeing = {.sync = true, .frees_space = true};
    lsm_status *s = lsm_delete(db, &freeing, k, strlen(k));
    if (s != NULL)
        fail_msg("the delete: %s", lsm_status_message(s));
    assert_false(read_key(db, 1));
    fault_env_clear_failures(fe);
    fault_env_set_disk_avail(fe, false, 0);
    assert_null(lsm_close(db));
    db = open_retrying(fe, 1 << 20, 20000);
    for (int i = 0; i < n; i++)
        assert_int_equal(read_key(db, i), i != 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

struct freeing_delete {
    lsm_db *db;
    lsm_status *s;
    atomic_bool done;
};

static void *delete_key1(void *arg)
{
    struct freeing_delete *fd = arg;
    char k[32], v[160];
    key_value(1, k, v);
    lsm_write_options freeing = {.sync = true, .frees_space = true};
    fd->s = lsm_delete(fd->db, &freeing, k, strlen(k));
    atomic_store(&fd->done, true);
    return NULL;
}

static void set_frees_holding(lsm_db *db, bool on)
{
    mutex_lock(&db->mu);
    db->frees_holding = on;
    pthread_cond_broadcast(&db->work_cv);
    mutex_unlock(&db->mu);
}

/* Level 0 at its stop while a freeing write holds compactions off (as its
 * retries on a full disk do, frees_holding) and the memtable is full: the
 * delete switches to a new memtable rather than wait for a compaction that
 * cannot start (before: it waited on room_cv for good, and every write
 * queued behind it; test_fullfs hung 2 runs in 15 with the reserve-sized
 * memtable cap, whose small flushes fill level 0). */
static void test_delete_switches_past_level0_stop(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_retrying(fe, 1 << 20, 20000);
    set_frees_holding(db, true); /* no compaction from here on */
    int n = 0;
    while (n < 200000) {
        while (prop(db, "lsm.immutable-memtables") > 0) /* flushes: l0 up to date */
            usleep(1000);
        bool stop = prop(db, "lsm.level0-load") >= L0_STOP;
        if (stop && prop(db, "lsm.mem-usage") >= (64u << 10))
            break; /* the next write must switch, at the stop */
        assert_null(put_key(db, n++ % 64, false)); /* every table overlaps the others */
    }
    assert_true(prop(db, "lsm.level0-load") >= L0_STOP);
    struct freeing_delete fd = {.db = db};
    atomic_init(&fd.done, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, delete_key1, &fd), 0);
    for (int i = 0; i < 5000 && !atomic_load(&fd.done); i++)
        usleep(1000);
    bool done = atomic_load(&fd.done);
    set_frees_holding(db, false); /* lets a stuck delete through, to end the test */
    pthread_join(t, NULL);
    assert_true(done);
    assert_null(fd.s);
    assert_false(read_key(db, 1));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

static bool compacting(lsm_db *db)
{
    mutex_lock(&db->mu);
    bool c = db->compacting;
    mutex_unlock(&db->mu);
    return c;
}

static void *compact_all(void *arg)
{
    return lsm_compact_range(arg, NULL, 0, NULL, 0);
}

struct space_back {
    lsm_db *db;
    fault_env *fe;
};

/* The compaction's output held the disk's last bytes: once it has ended
 * (and its inputs are gone), the disk has room again. */
static void *space_back_after_compaction(void *arg)
{
    struct space_back *sb = arg;
    while (compacting(sb->db))
        usleep(1000);
    fault_env_clear_failures(sb->fe);
    return NULL;
}

/* A compaction runs (slow syncs) and its output has taken the disk's last
 * bytes, so a delete's log append finds the disk full: the delete waits
 * for the compaction to end, which gives the space back, and then goes
 * through (before: one retry at once, then LSM_NO_SPACE, issue 29). */
static void test_delete_waits_for_running_compaction(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_retrying(fe, 0, 20000);
    for (int i = 0; i < 2000; i++)
        assert_null(put_key(db, i, false));
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    for (int i = 0; i < 1000; i++) /* level 0 tables over the compacted ones */
        assert_null(put_key(db, i, false));
    assert_null(db_flush_memtables(db, 0));
    fault_env_set_sync_delay_us(fe, 200000);
    pthread_t compactor, freer;
    assert_int_equal(pthread_create(&compactor, NULL, compact_all, db), 0);
    while (!compacting(db))
        usleep(1000);
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, -1);
    struct space_back sb = {.db = db, .fe = fe};
    assert_int_equal(pthread_create(&freer, NULL, space_back_after_compaction, &sb), 0);
    char k[32], v[160];
    key_value(5, k, v);
    lsm_write_options freeing = {.frees_space = true};
    lsm_status *s = lsm_delete(db, &freeing, k, strlen(k));
    if (s)
        fail_msg("the delete during the compaction: %s", lsm_status_message(s));
    /* The log it moved to took only a small step of room on the full disk. */
    mutex_lock(&db->mu);
    unsigned long long wal = (unsigned long long)db->wal_number;
    mutex_unlock(&db->mu);
    struct stat st;
    char log[300];
    snprintf(log, sizeof(log), "%s/%06llu.log", tu_dir, wal);
    assert_int_equal(stat(log, &st), 0);
    assert_true(st.st_size <= 64 << 10);
    void *cs = NULL;
    pthread_join(compactor, &cs);
    assert_null(cs);
    pthread_join(freer, NULL);
    fault_env_set_sync_delay_us(fe, 0);
    assert_false(read_key(db, 5));
    assert_null(lsm_close(db));
    db = open_retrying(fe, 0, 20000);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(read_key(db, i), i != 5);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

struct maker {
    lsm_db *db;
    bool held;
};

static void *make_reserve(void *arg)
{
    struct maker *mk = arg;
    mutex_lock(&mk->db->mu);
    mk->db->reserve_tried_us = 0; /* no retry delay */
    mk->held = db_reserve_make(mk->db);
    mutex_unlock(&mk->db->mu);
    return NULL;
}

/* A release (a flush finding the disk full, with a delete waiting) while
 * the reserve is being made again (its sync slowed): the maker must not
 * then claim a reserve whose file the release removed. */
static void test_release_while_making_the_reserve(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_retrying(fe, 1 << 20, 20000);
    mutex_lock(&db->mu);
    assert_true(db_reserve_release(db));
    mutex_unlock(&db->mu);
    assert_false(reserve_file_exists());
    fault_env_set_sync_delay_us(fe, 300000);
    struct maker mk = {.db = db};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, make_reserve, &mk), 0);
    usleep(100000); /* the maker is in its sync */
    mutex_lock(&db->mu);
    assert_true(reserve_file_exists()); /* being written: else the test proves nothing */
    assert_true(db_reserve_release(db));
    mutex_unlock(&db->mu);
    pthread_join(t, NULL);
    assert_false(mk.held);
    assert_int_equal(prop(db, "lsm.reserve-held"), 0);
    assert_false(reserve_file_exists());
    fault_env_set_sync_delay_us(fe, 0);
    /* Made again later, it is held and there. */
    make_reserve(&mk);
    assert_true(mk.held);
    assert_true(reserve_file_exists());
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

static void sync_hung(int sig)
{
    (void)sig;
    static const char m[] = "a sync after a full disk broke the log never returned\n";
    (void)!write(2, m, sizeof m - 1);
    _exit(1);
}

/* A deferred write, then a logged write whose append finds the disk full
 * (its late copy of the deferred one goes back): the log is cut back, and
 * a sync must still make the deferred write durable, by leaving that log,
 * instead of waiting forever for a sync no one may start on it. */
static void test_sync_after_full_wal_with_deferred(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    char v[4096];
    memset(v, 'd', sizeof v);
    lsm_write_options dw = {.defer_log = true};
    assert_null(lsm_put(db, &dw, "deferred", 8, v, sizeof v));
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    lsm_status *s = put_key(db, 1, false);
    expect_code(s, LSM_NO_SPACE);
    signal(SIGALRM, sync_hung);
    alarm(20);
    assert_null(lsm_sync(db));
    alarm(0);
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    fault_env_clear_failures(fe);
    lsm_options o;
    lsm_options_init(&o);
    o.env = fault_env_env(fe);
    assert_null(lsm_open(&o, tu_dir, &db));
    char *got = NULL;
    size_t n = 0;
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    assert_null(lsm_get(db, &ro, "deferred", 8, &got, &n));
    assert_int_equal(n, sizeof v);
    free(got);
    assert_false(read_key(db, 1));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A barrier after a full disk broke the WAL leaves that log: its memtable
 * turns immutable and the flush thread must be woken to write it (it was
 * not, and waited with the memtable held until some later switch). */
static void test_barrier_leaving_full_wal_wakes_flush(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    lsm_write_options dw = {.defer_log = true};
    assert_null(lsm_put(db, &dw, "deferred", 8, "d", 1)); /* small: the sync is a barrier */
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    expect_code(put_key(db, 1, false), LSM_NO_SPACE);
    assert_null(lsm_sync(db)); /* its barrier leaves the broken log */
    uint64_t busy = 1;
    for (int i = 0; i < 4000 && busy != 0; i++) { /* up to 2 s: a flush of one key */
        usleep(500);
        busy = prop(db, "lsm.background-busy");
    }
    assert_int_equal(busy, 0);
    assert_int_equal(prop(db, "lsm.num-files-at-level0") + prop(db, "lsm.num-files-at-level1") +
                         prop(db, "lsm.num-files-at-level2"),
                     1);
    assert_false(read_key(db, 1));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_full_disk_during_flush),
        TU_TEST(test_full_disk_during_compaction),
        TU_TEST(test_close_ends_full_disk_retry),
        TU_TEST(test_full_disk_on_wal),
        TU_TEST(test_full_disk_on_wal_then_power_cut),
        TU_TEST(test_sync_after_full_wal_with_deferred),
        TU_TEST(test_wal_eio_stays_sticky),
        TU_TEST(test_wal_cut_failure_is_sticky),
        TU_TEST(test_barrier_leaving_full_wal_wakes_flush),
        TU_TEST(test_reserve_serves_deletes),
        TU_TEST(test_unknown_free_space_makes_the_reserve),
        TU_TEST(test_reserve_serves_freeing_wal_append),
        TU_TEST(test_delete_waits_for_the_retry),
        TU_TEST(test_delete_waits_for_running_compaction),
        TU_TEST(test_release_while_making_the_reserve),
        TU_TEST(test_delete_flushes_deferred_on_full_disk),
        TU_TEST(test_delete_after_deferred_flush_fails),
        TU_TEST(test_low_disk_keeps_memtables_few),
        TU_TEST(test_delete_switches_past_stuck_flush),
        TU_TEST(test_delete_switches_past_level0_stop),
    };
    return cmocka_run_group_tests_name("db_nospace", tests, NULL, NULL);
}
