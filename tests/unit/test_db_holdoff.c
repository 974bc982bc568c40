/*
 * test_db_holdoff.c — a compaction that failed for space is not run again
 * until it could get further (db_holdoff.c): calls of lsm_compact_range in
 * a row (as the reclaimer makes, one per freed file) cost no I/O meanwhile;
 * once the disk's free space has grown, or the holdoff has run out, the
 * next one runs and succeeds.
 */
#include "fixture.h"

#include "fault_env.h"

#define NKEYS 3000
#define TABLE_BYTES (64u << 10)
#define RETRY_US 20000
#define LOW_AVAIL (256u << 10)
#define CALLS 20
#define HOLDOFF_FIRST_US (4 * RETRY_US) /* db_holdoff.c: 4 retry delays */

static void fill(lsm_db *db, int pass, int from, int to)
{
    char k[16], v[256];
    for (int i = from; i < to; i += pass ? 3 : 1) {
        uint64_t x = (uint64_t)i << 8 | (uint64_t)(pass + 1);
        int n = sprintf(v, "%d %d", i, pass);
        for (int w = 0; w < 11; w++)
            n += sprintf(v + n, " %016llx", (unsigned long long)tu_xorshift64(&x));
        sprintf(k, "k%06d", i);
        ASSERT_OK(lsm_put(db, NULL, k, strlen(k), v, strlen(v)));
    }
}

/* A store whose level 1 holds a few tables over a compacted level below, the
 * memtable empty, with table writes failing for space and the disk saying
 * it has LOW_AVAIL bytes free; a compaction of everything has just failed. */
static lsm_db *open_failed(fault_env *fe)
{
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), TABLE_BYTES);
    o.target_file_size = TABLE_BYTES;
    o.full_disk_retry_us = RETRY_US;
    lsm_db *db = tu_open_with(&o);
    fill(db, 0, 0, NKEYS / 2); /* below: the lower half, and the last key only */
    fill(db, 0, NKEYS - 1, NKEYS);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    fill(db, 1, 0, NKEYS);
    ASSERT_OK(lsm_compact_range(db, "a", 1, "a", 1)); /* flushes, compacts nothing */
    fault_env_set_disk_avail(fe, true, LOW_AVAIL);
    /* The disk fills after the compaction wrote a little (20 appends). */
    fault_env_fail(fe, FAULT_WRITE, ".ldb", ENOSPC, 20, -1);
    fault_env_count_start(fe, NULL, NULL);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    return db;
}

/* The same compaction asked for CALLS more times with nothing freed: it is
 * not run again (before: each call read every input again and failed). */
static void test_failed_compaction_not_rerun(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_failed(fe);
    uint64_t first = fault_env_calls(fe, FAULT_STREAM_MAIN);
    for (int i = 0; i < CALLS; i++) {
        lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
        assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
        lsm_status_free(s);
    }
    uint64_t more = fault_env_calls(fe, FAULT_STREAM_MAIN) - first;
    /* At most one env call each: the disk's free space. */
    if (more > CALLS)
        fail_msg("%d compactions in a row on an unchanged full disk made %llu env calls (the "
                 "first, failing, %llu)",
                 CALLS, (unsigned long long)more, (unsigned long long)first);
    /* Space freed (the disk's figure grows): the next one runs at once. */
    fault_env_clear_failures(fe);
    fault_env_set_disk_avail(fe, false, 0);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_int_equal(tu_prop(db, "lsm.num-files-at-level0"), 0);
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

/* Nothing freed that the disk's figure shows (it may be wrong): the
 * holdoff still runs out, and the compaction is tried again. */
static void test_holdoff_runs_out(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_failed(fe);
    fault_env_clear_failures(fe);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE); /* held off */
    lsm_status_free(s);
    bool ran = false;
    for (int i = 0; i < 1000 && !ran; i++) {
        usleep(RETRY_US);
        s = lsm_compact_range(db, NULL, 0, NULL, 0);
        ran = s == NULL;
        if (!ran)
            assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
        lsm_status_free(s);
    }
    assert_true(ran);
    assert_int_equal(tu_prop(db, "lsm.num-files-at-level0"), 0);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

/* While the compaction that failed is held off, a smaller one (a table of
 * the upper half, with one key below it) may still run. */
static void test_smaller_compaction_runs(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_failed(fe);
    fault_env_clear_failures(fe);
    uint64_t l1 = tu_prop(db, "lsm.num-files-at-level1");
    assert_true(l1 > 1);
    ASSERT_OK(lsm_compact_range(db, "k002900", 7, "k002901", 7)); /* one key below it */
    assert_true(tu_prop(db, "lsm.num-files-at-level1") < l1);
    /* Its success ended the holdoff: the big one runs again (and fits now). */
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

/* The disk's figure cannot be read when the holdoff looks at it (EIO):
 * the space is taken as not grown, the compaction stays held off until its
 * time runs out, then runs. */
static void test_unreadable_disk_figure_waits_out_holdoff(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_failed(fe);
    fault_env_clear_failures(fe);
    fault_env_set_disk_avail(fe, false, 0); /* it did grow */
    fault_env_arm(fe, FAULT_STREAM_MAIN, fault_env_calls(fe, FAULT_STREAM_MAIN), FAULT_EIO);
    lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
    enum fault_call c;
    char path[256];
    assert_true(fault_env_fired(fe, &c, path, sizeof path));
    assert_int_equal(c, FC_DISK_FREE);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    fault_env_count_stop(fe);
    usleep(HOLDOFF_FIRST_US);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_int_equal(tu_prop(db, "lsm.num-files-at-level0"), 0);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_failed_compaction_not_rerun),
        TU_TEST(test_holdoff_runs_out),
        TU_TEST(test_smaller_compaction_runs),
        TU_TEST(test_unreadable_disk_figure_waits_out_holdoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
