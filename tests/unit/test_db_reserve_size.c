/*
 * test_db_reserve_size.c — the space reserve is sized to the store (a floor,
 * a sixteenth of its tables, at most the option), and near a full disk the
 * memtables are capped so that what sits unflushed fits in it (issue 30.5,
 * issue 29.1a).
 */
#include "testutil.h"

#include "arena.h"
#include "db_impl.h"
#include "fault_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "rsize");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

static lsm_db *open_sized(lsm_env *env, size_t reserve, size_t write_buffer)
{
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    o.compression = false; /* table bytes follow the values written */
    o.write_buffer_size = write_buffer;
    o.max_memtable_bytes = 4 * write_buffer;
    o.reserve_bytes = reserve;
    o.full_disk_retry_us = 20000;
    o.env = env;
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, dir, &db);
    if (s)
        fail_msg("open: %s", lsm_status_message(s));
    return db;
}

#define prop tu_prop

static uint64_t reserve_file_size(void)
{
    char path[300];
    uint64_t size = 0;
    snprintf(path, sizeof(path), "%s/RESERVE", dir);
    lsm_status *s = tu_env()->file_size(tu_env(), path, &size);
    lsm_status_free(s);
    return s ? 0 : size;
}

/* Puts key i with `len` bytes of a value no compressor shrinks. */
static lsm_status *try_put_value(lsm_db *db, int i, size_t len)
{
    static char v[64 << 10];
    char k[32];
    assert_true(len <= sizeof(v));
    for (size_t j = 0; j < len; j++)
        v[j] = (char)((uint32_t)(i * 2654435761u + j * 40503u) >> 13);
    snprintf(k, sizeof(k), "key%08d", i);
    lsm_write_options wo = {.sync = false};
    return lsm_put(db, &wo, k, strlen(k), v, len);
}

static void put_value(lsm_db *db, int i, size_t len)
{
    lsm_status *s = try_put_value(db, i, len);
    if (s)
        fail_msg("put %d: %s", i, lsm_status_message(s));
}

/* Fills a store past 32x the floor and compacts it, so the reserve's rule
 * asks for a larger one; returns the size it asks (RESERVE_CHUNK-rounded). */
static uint64_t grow_tables(lsm_db *db)
{
    for (int i = 0; i < 1200; i++) /* 75 MiB */
        put_value(db, i, 64 << 10);
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    uint64_t tables = prop(db, "lsm.total-table-bytes");
    assert_true(tables >= (64u << 20));
    usleep(150000); /* past the reserve's retry delay */
    return (tables / 16 + (64u << 10) - 1) / (64u << 10) * (64u << 10);
}

static bool reserve_new_exists(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/RESERVE.new", dir);
    return tu_env()->file_exists(tu_env(), path);
}

/* A new, small store holds the floor (2 MiB), not the option's 12 MiB. */
static void test_small_store_gets_the_floor(void **state)
{
    (void)state;
    lsm_db *db = open_sized(tu_env(), 12u << 20, 8u << 20);
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    assert_int_equal(prop(db, "lsm.reserve-bytes"), 2u << 20);
    assert_int_equal(reserve_file_size(), 2u << 20);
    assert_null(lsm_close(db));
    /* An option below the floor is the size. */
    db = open_sized(tu_env(), 1u << 20, 8u << 20);
    assert_int_equal(prop(db, "lsm.reserve-bytes"), 1u << 20);
    assert_int_equal(reserve_file_size(), 1u << 20);
    assert_null(lsm_close(db));
}

/* As the tables grow past 32× the floor, the reserve is made again at a
 * sixteenth of them (by a write, each time that doubled it: so it stays
 * between a 32nd and a 16th), and at reopen too. */
static void test_reserve_grows_with_the_store(void **state)
{
    (void)state;
    lsm_db *db = open_sized(tu_env(), 64u << 20, 4u << 20);
    assert_int_equal(prop(db, "lsm.reserve-bytes"), 2u << 20);
    uint64_t want = grow_tables(db);
    put_value(db, 5000, 100);
    uint64_t got = prop(db, "lsm.reserve-bytes");
    assert_int_equal(prop(db, "lsm.reserve-held"), 1);
    assert_true(got >= (4u << 20) && got <= want && 2 * got > want);
    assert_int_equal(reserve_file_size(), got);
    assert_null(lsm_close(db));
    db = open_sized(tu_env(), 64u << 20, 4u << 20);
    assert_true(prop(db, "lsm.reserve-bytes") >= (4u << 20));
    assert_int_equal(reserve_file_size(), prop(db, "lsm.reserve-bytes"));
    assert_null(lsm_close(db));
}

/* A larger reserve that cannot be written (its write, sync or rename
 * fails) leaves the old one held, whole: ordinary writes go on, nothing of
 * the new one is left, and the next try grows it. */
static void test_failed_growth_keeps_the_old(void **state)
{
    (void)state;
    static const unsigned ops[] = {FAULT_WRITE, FAULT_SYNC, FAULT_RENAME, FAULT_CREATE};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        fault_env *fe = fault_env_new(tu_env());
        lsm_db *db = open_sized(fault_env_env(fe), 64u << 20, 4u << 20);
        assert_int_equal(prop(db, "lsm.reserve-bytes"), 2u << 20);
        fault_env_fail(fe, ops[k], "RESERVE", k % 2 ? EIO : ENOSPC, 0, -1);
        uint64_t want = grow_tables(db);
        put_value(db, 5000, 100); /* tries to grow it again: fails, the write goes on */
        assert_int_equal(prop(db, "lsm.reserve-held"), 1);
        assert_int_equal(prop(db, "lsm.reserve-bytes"), 2u << 20);
        assert_int_equal(reserve_file_size(), 2u << 20);
        assert_false(reserve_new_exists());
        fault_env_clear_failures(fe);
        usleep(150000);
        put_value(db, 5001, 100);
        uint64_t got = prop(db, "lsm.reserve-bytes");
        assert_true(got >= (4u << 20) && got <= want);
        assert_int_equal(reserve_file_size(), got);
        assert_false(reserve_new_exists());
        assert_null(lsm_close(db));
        fault_env_free(fe);
        tu_rmtree(dir);
        tu_mkdtemp(dir, sizeof(dir), "rsize");
    }
}

/* A larger reserve left half written by a crash goes at open. */
static void test_open_removes_a_half_grown_reserve(void **state)
{
    (void)state;
    lsm_db *db = open_sized(tu_env(), 12u << 20, 4u << 20);
    assert_null(lsm_close(db));
    char path[300];
    snprintf(path, sizeof(path), "%s/RESERVE.new", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("half", f);
    fclose(f);
    db = open_sized(tu_env(), 12u << 20, 4u << 20);
    assert_false(reserve_new_exists());
    assert_int_equal(reserve_file_size(), 2u << 20);
    assert_null(lsm_close(db));
}

/* Near a full disk (disk_free reports little beyond the reserve) the
 * memtable is capped at a quarter of the reserve, also the one already
 * filling when the disk got low: what sits unflushed stays within half the
 * reserve (plus an arena block each), with flushes slow. */
static void test_low_disk_caps_the_memtable(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    lsm_db *db = open_sized(fault_env_env(fe), 12u << 20, 4u << 20);
    uint64_t reserve = prop(db, "lsm.reserve-bytes");
    assert_int_equal(reserve, 2u << 20);
    assert_int_equal(prop(db, "lsm.memtable-cap"), 4u << 20); /* room: no cap */
    fault_env_set_sync_delay_us(fe, 20000);
    fault_env_set_disk_avail(fe, true, reserve + (3u << 20));
    uint64_t most = 0;
    for (int i = 0; i < 3000; i++) { /* 3 MiB */
        put_value(db, i, 1024);
        uint64_t mem = prop(db, "lsm.mem-usage");
        most = mem > most ? mem : most;
    }
    assert_int_equal(prop(db, "lsm.memtable-cap"), reserve / 4);
    /* A 4 MiB write buffer's memtables count whole pooled arena blocks
     * (db_view.c): each may be a block past what it holds. */
    assert_true(most <= reserve / 2 + 2 * ARENA_POOLED_BLOCK);
    /* Room again: the next memtable is full size. */
    fault_env_set_disk_avail(fe, false, 0);
    fault_env_set_sync_delay_us(fe, 0);
    for (int i = 3000; i < 4000; i++)
        put_value(db, i, 1024);
    assert_int_equal(prop(db, "lsm.memtable-cap"), 4u << 20);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* On a full disk (every table write fails ENOSPC) after writing near it,
 * what is unflushed fits in the reserve: deletes still succeed, and once
 * the reserve's space serves the flush everything written is there. */
static void test_full_disk_after_low_disk_empties(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    lsm_db *db = open_sized(fault_env_env(fe), 12u << 20, 4u << 20);
    uint64_t reserve = prop(db, "lsm.reserve-bytes");
    fault_env_set_disk_avail(fe, true, reserve + (2u << 20));
    for (int i = 0; i < 1500; i++)
        put_value(db, i, 1024);
    fault_env_fail(fe, FAULT_WRITE | FAULT_CREATE, ".ldb", ENOSPC, 0, -1);
    uint64_t unflushed = 0;
    bool refused = false;
    for (int i = 1500; i < 20000 && !refused; i++) { /* until ordinary writes are refused */
        lsm_status *s = try_put_value(db, i, 1024);
        refused = s != NULL;
        if (s)
            assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
        lsm_status_free(s);
        uint64_t mem = prop(db, "lsm.mem-usage");
        unflushed = mem > unflushed ? mem : unflushed;
    }
    assert_true(refused);
    assert_true(unflushed <= reserve / 2 + (64u << 10));
    lsm_write_options fw = {.sync = true, .frees_space = true};
    assert_null(lsm_delete(db, &fw, "key00000000", 11));
    assert_int_equal(prop(db, "lsm.reserve-held"), 0); /* it served the delete */
    fault_env_clear_failures(fe);
    fault_env_set_disk_avail(fe, false, 0);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_store_gets_the_floor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve_grows_with_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_growth_keeps_the_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_removes_a_half_grown_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_low_disk_caps_the_memtable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_after_low_disk_empties, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
