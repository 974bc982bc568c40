/* test_db_wal_hold.c — the WAL held for a coming sync (db_sync.c's
 * db_hold_wal): once syncs are slow (a RADOS round trip; here the fault
 * env's delay), the store tells the WAL's file to keep flushed bytes for the
 * next sync, and ends the hold once no sync follows, so a write without sync
 * is never kept back for long. */
#include "fixture.h"

#include "fault_env.h"

#include <unistd.h>

static void put(lsm_db *db, int i, bool sync)
{
    char k[32];
    snprintf(k, sizeof k, "k%06d", i);
    lsm_write_options wo = {.sync = sync};
    ASSERT_OK(lsm_put(db, &wo, k, strlen(k), k, strlen(k)));
}

/* Waits (at most 3 s) until the last hold given to the WAL is `want`. */
static bool hold_becomes(fault_env *fe, int want)
{
    for (int i = 0; i < 300; i++) {
        if (fault_env_last_hold(fe, NULL) == want)
            return true;
        usleep(10000);
    }
    return false;
}

/* Slow syncs hold the WAL (before: never); once no sync follows, the flush
 * thread ends the hold within about two syncs' time (without: it stayed on,
 * and a write without sync waited for a sync that might never come). */
static void test_slow_syncs_hold_until_no_sync_follows(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    fault_env_set_sync_delay_us(fe, 3000);
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    for (int i = 0; i < 20; i++)
        put(db, i, true);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-overlap-max"), 1);
    uint64_t holds = 0;
    fault_env_last_hold(fe, &holds);
    assert_true(holds >= 1);
    assert_true(hold_becomes(fe, 0));
    put(db, 100, false); /* no sync near: goes out at once */
    assert_int_equal(fault_env_last_hold(fe, NULL), 0);
    uint64_t before = holds;
    put(db, 101, true); /* a sync again: held while it waits and a while after */
    fault_env_last_hold(fe, &holds);
    assert_true(holds > before);
    assert_true(hold_becomes(fe, 0));
    assert_null(lsm_close(db));
    db = tu_open(fault_env_env(fe), 0);
    char k[32];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        tu_assert_value(db, k, k);
    }
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_slow_syncs_hold_until_no_sync_follows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
