/* test_db_pool_idle.c — the process's pooled buffers (mempool.h) are freed
 * once a store has seen no write for a while (db_idle.c), and not while it
 * is written. The clock is the fault env's, moved on by the test. */
#include "fixture.h"

#include <inttypes.h>

#include "db_impl.h"
#include "fault_env.h"

#include <unistd.h>

enum { VLEN = 16 << 10, PER_BATCH = 16, ROUNDS = 1000 };

/* Writes deferred batches of PER_BATCH values of VLEN bytes (256 KiB, a
 * pooled buffer each) until flushes have filled the pools; fails if they
 * stay empty. */
static void fill_pools(lsm_db *db)
{
    lsm_batch *b = lsm_batch_new();
    char k[32], *v = malloc(VLEN);
    assert_true(b != NULL && v != NULL);
    memset(v, 'v', VLEN);
    lsm_write_options wo = {.defer_log = true};
    for (int i = 0; i < 12; i++) {
        for (int j = 0; j < PER_BATCH; j++) {
            snprintf(k, sizeof k, "k%04d-%02d", i, j);
            assert_true(lsm_batch_put(b, k, strlen(k), v, VLEN));
        }
        ASSERT_OK(lsm_write(db, &wo, b));
        lsm_batch_clear(b);
    }
    lsm_batch_free(b);
    free(v);
    for (int t = 0; t < 3000 && tu_prop(db, "lsm.pooled-bytes") == 0; t++)
        usleep(1000);
    assert_true(tu_prop(db, "lsm.pooled-bytes") > 0);
}

/* Wakes the flush thread, which then looks at the (moved) clock. */
static void nudge(lsm_db *db)
{
    mutex_lock(&db->mu);
    pthread_cond_broadcast(&db->work_cv);
    mutex_unlock(&db->mu);
}

/* Moves the clock on by a second and lets the flush thread look. */
static void tick(lsm_db *db, fault_env *fe)
{
    fault_env_advance_clock(fe, 1000000);
    nudge(db);
    usleep(10000);
}

/* Ticks until the pools are empty (true) or ROUNDS seconds went by
 * (false). */
static bool idle_until_drained(lsm_db *db, fault_env *fe)
{
    for (int t = 0; t < ROUNDS; t++) {
        if (tu_prop(db, "lsm.pooled-bytes") == 0)
            return true;
        tick(db, fe);
    }
    return tu_prop(db, "lsm.pooled-bytes") == 0;
}

/* An idle store gives the pooled buffers back: a daemon that once took a
 * big file does not keep them for life. */
static void test_idle_store_frees_pools(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 1 << 20);
    fill_pools(db);
    if (!idle_until_drained(db, fe))
        fail_msg("after %d s idle the pools keep %" PRIu64 " bytes", ROUNDS,
                 tu_prop(db, "lsm.pooled-bytes"));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A store written every second keeps them through 20 s (its writes would
 * reuse them); once the writes stop, they go. */
static void test_written_store_keeps_pools(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 1 << 20);
    fill_pools(db);
    for (int s = 0; s < 20; s++) {
        char k[32];
        snprintf(k, sizeof k, "small%02d", s);
        ASSERT_OK(lsm_put(db, NULL, k, strlen(k), "v", 1));
        tick(db, fe);
        if (tu_prop(db, "lsm.pooled-bytes") == 0)
            fail_msg("the pools were freed %d s into a stream of writes, one a second", s + 1);
    }
    assert_true(idle_until_drained(db, fe)); /* the looks did run */
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_idle_store_frees_pools),
        TU_TEST(test_written_store_keeps_pools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
