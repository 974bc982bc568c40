/*
 * test_db_nospace.c — a full disk during background work: writes that need
 * room fail with LSM_NO_SPACE (never hang, never claim success), nothing
 * acknowledged is lost, and once space is back the store carries on without
 * a reopen.
 */
#include "testutil.h"

#include "fault_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/lsm-test-nospace-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static lsm_db *open_db(lsm_env *env)
{
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    o.write_buffer_size = 64 << 10;
    o.max_memtable_bytes = 512 << 10;
    o.env = env;
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, dir, &db);
    if (s)
        fail_msg("open: %s", lsm_status_message(s));
    return db;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_full_disk_during_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_during_compaction, setup, teardown),
    };
    return cmocka_run_group_tests_name("db_nospace", tests, NULL, NULL);
}
