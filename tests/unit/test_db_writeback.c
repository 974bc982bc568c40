/* test_db_writeback.c — a table's writeback is started as it is written
 * (wfile start_writeback, every MiB), and a start that fails fails the
 * table like a failed write: a full disk loses nothing (the sync logs the
 * deferred writes instead), an I/O error is reported, never a success. */
#include "fixture.h"

#include "fault_env.h"

#include <errno.h>

enum { VLEN = 16 << 10, N = 160 }; /* 2.5 MiB: past the first MiB of a table */

/* Value i: VLEN bytes lz4 cannot shrink, starting with i's name. */
static void value_of(char *v, int i)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    for (int j = 0; j < VLEN; j++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[j] = (char)x;
    }
    snprintf(v, 16, "v%06d", i);
}

static void put_i(lsm_db *db, int i, bool defer)
{
    char k[32], *v = malloc(VLEN);
    assert_non_null(v);
    snprintf(k, sizeof(k), "k%06d", i);
    value_of(v, i);
    lsm_batch *b = lsm_batch_new();
    assert_non_null(b);
    assert_true(lsm_batch_put(b, k, strlen(k), v, VLEN));
    lsm_write_options wo = {.defer_log = defer};
    ASSERT_OK(lsm_write(db, &wo, b));
    lsm_batch_free(b);
    free(v);
}

/* Every key below n holds its value. */
static void assert_all(lsm_db *db, int n)
{
    char want[VLEN];
    for (int i = 0; i < n; i++) {
        char k[32], *v = NULL;
        size_t len = 0;
        snprintf(k, sizeof(k), "k%06d", i);
        value_of(want, i);
        ASSERT_OK(lsm_get(db, NULL, k, strlen(k), &v, &len));
        assert_int_equal(len, VLEN);
        assert_memory_equal(v, want, VLEN);
        free(v);
    }
}

/* A power cut under the open store, then the store opened again on a disk
 * without the injected failures. */
static lsm_db *cut_and_reopen(fault_env *fe, lsm_db *db)
{
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db)); /* the power is off: it writes nothing */
    fault_env_clear_failures(fe);
    return tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
}

static void count_writebacks(void *ctx, int stream, uint64_t index, enum fault_call c,
                             const char *path)
{
    (void)stream;
    (void)index;
    if (c == FC_WRITEBACK && strstr(path, ".ldb") != NULL)
        ++*(int *)ctx;
}

/* A flush of 2.5 MiB starts the table's writeback twice (at 1 and 2 MiB). */
static void test_flush_starts_writeback(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    for (int i = 0; i < N; i++)
        put_i(db, i, true);
    int starts = 0;
    fault_env_count_start(fe, count_writebacks, &starts);
    assert_null(lsm_sync(db)); /* flushes: a quarter of the memtable is deferred */
    fault_env_count_stop(fe);
    assert_int_equal(tu_prop(db, "lsm.sync-flushes"), 1);
    assert_int_equal(starts, 2);
    assert_all(db, N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* No room for the writeback: the flush fails for space, the sync logs the
 * deferred writes instead, and they survive a power cut. */
static void test_writeback_without_space_loses_nothing(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    for (int i = 0; i < N; i++)
        put_i(db, i, true);
    fault_env_fail(fe, FAULT_WRITEBACK, ".ldb", ENOSPC, 0, -1);
    assert_null(lsm_sync(db));
    assert_int_equal(tu_prop(db, "lsm.sync-flushes"), 0);
    assert_true(tu_prop(db, "lsm.late-logged-bytes") >= (uint64_t)N * VLEN);
    db = cut_and_reopen(fe, db);
    assert_all(db, N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* An I/O error starting the writeback: the sync that needed the flush
 * fails, the writes stay readable, and what was synced before survives. */
static void test_writeback_error_is_reported(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    put_i(db, 0, false);
    assert_null(lsm_sync(db));
    for (int i = 1; i < N; i++)
        put_i(db, i, true);
    fault_env_fail(fe, FAULT_WRITEBACK, ".ldb", EIO, 0, -1);
    lsm_status *s = lsm_sync(db);
    assert_non_null(s);
    lsm_status_free(s);
    assert_all(db, N);
    db = cut_and_reopen(fe, db);
    assert_all(db, 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_flush_starts_writeback),
        TU_TEST(test_writeback_without_space_loses_nothing),
        TU_TEST(test_writeback_error_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
