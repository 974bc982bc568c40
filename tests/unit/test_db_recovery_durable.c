/*
 * test_db_recovery_durable.c — what recovery reads back from a log is made
 * durable from memory (written to tables) before the store relies on it,
 * never trusted to an fdatasync on a new file description: after a WAL
 * fsync failed (its pages lost, as Linux does after a writeback error,
 * though still readable from the page cache), the next process replays
 * them, serves them, and a later synced write must not survive a power cut
 * without them.
 */
#include "fixture.h"

#include "fault_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lsm_status *put(lsm_db *db, const char *k, bool sync)
{
    lsm_write_options wo = {.sync = sync};
    return lsm_put(db, &wo, k, strlen(k), k, strlen(k));
}

static bool has(lsm_db *db, const char *k)
{
    char *v;
    size_t n;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &v, &n);
    if (s) {
        assert_int_equal(lsm_status_code(s), LSM_NOT_FOUND);
        return false;
    }
    assert_int_equal(n, strlen(k));
    assert_memory_equal(v, k, n);
    free(v);
    return true;
}

static void test_replayed_data_survives_power_cut(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    fault_env_set_lost_writeback(fe, true);
    lsm_db *db = tu_open(fault_env_env(fe), 1 << 20);
    assert_null(put(db, "a-synced", true));
    /* The WAL's fdatasync fails: "b-failed" is not acknowledged, and its
     * page is lost from the disk though still readable. */
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, 1);
    lsm_status *s = put(db, "b-failed", true);
    assert_non_null(s);
    lsm_status_free(s);
    fault_env_clear_failures(fe);
    lsm_status_free(lsm_close(db)); /* the process ends */

    /* The next process replays and serves "b-failed"; a synced write after
     * it promises that everything it has shown is durable. */
    db = tu_open(fault_env_env(fe), 1 << 20);
    assert_true(has(db, "a-synced"));
    assert_true(has(db, "b-failed"));
    assert_null(put(db, "c-after", true));
    assert_null(lsm_sync(db));
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));

    db = tu_open(fault_env_env(fe), 1 << 20);
    assert_true(has(db, "a-synced"));
    assert_true(has(db, "c-after"));
    assert_true(has(db, "b-failed")); /* served before c-after's sync: durable */
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_replayed_data_survives_power_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
