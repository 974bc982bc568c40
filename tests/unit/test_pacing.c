/* test_pacing.c — the pacer's rate: what compaction costs per level and
 * lane, how
 * samples age, when pacing is off, and the cut past the backlog's soft
 * limit. */
#include "testutil.h"

#include "pacing.h"

#define MB (1024.0 * 1024.0)
#define SEC 1000000ull

/* A backlog well above the minimum and below the soft limit. */
#define BACKLOG (40 * 1024 * 1024ull)
#define MIN_BACKLOG (32 * 1024 * 1024ull)
#define MIN_SAMPLE (1024 * 1024ull)

static void assert_near(double got, double want)
{
    if (got < want * 0.999 || got > want * 1.001)
        fail_msg("got %.6g, want %.6g", got, want);
}

static void test_unmeasured_is_unpaced(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    pacer_update(&p, BACKLOG, true, 1, 10 * SEC);
    assert_true(p.rate == 0);
}

static void test_rate_is_inverse_of_the_busier_lanes_costs(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    /* Lane 0 (level 0): 0.5 s for 10 MiB moved; lane 1 (levels 1 and 2,
     * summed: a byte passes both): 1 s for 5 MiB and 1 s for 20 MiB. */
    pacer_note_compaction(&p, 0, 10 * 1024 * 1024, SEC / 2, 1 * SEC);
    pacer_note_compaction(&p, 1, 5 * 1024 * 1024, SEC, 2 * SEC);
    pacer_note_compaction(&p, 2, 20 * 1024 * 1024, SEC, 2 * SEC);
    pacer_update(&p, BACKLOG, true, 1, 2 * SEC);
    double secs_per_byte = 1.0 / (5 * MB) + 1.0 / (20 * MB);
    assert_near(p.rate, 1 / secs_per_byte);
    /* A written byte that becomes half a table byte may come twice as
     * fast. */
    pacer_update(&p, BACKLOG, true, 0.5, 2 * SEC);
    assert_near(p.rate, 2 / secs_per_byte);
    /* Level 0 costing more than levels 1-2 together: lane 0 sets it. */
    pacer_note_compaction(&p, 0, 1024 * 1024, 10 * SEC, 2 * SEC);
    pacer_update(&p, BACKLOG, true, 1, 2 * SEC);
    double keep = 1 / (1 + 0.1); /* the first sample, 1 s old */
    assert_near(p.rate, (keep * 10 * MB + MB) / (keep * 0.5 + 10));
}

/* A compaction of a few bytes measures its fixed costs (a table made and
 * synced, the MANIFEST), not a byte's: seen as the only sample of level 1
 * (222 bytes in 16.7 ms), it paced a 1 GiB write to 13 KB/s for a second.
 * A level counts once a compaction there moved MIN_SAMPLE bytes; then
 * every sample does. */
static void test_level_counts_after_a_sized_sample(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    pacer_note_compaction(&p, 1, 222, 16700, SEC);
    pacer_update(&p, BACKLOG, true, 1, SEC);
    assert_true(p.rate == 0);
    pacer_note_compaction(&p, 1, MIN_SAMPLE - 1, SEC, SEC);
    pacer_update(&p, BACKLOG, true, 1, SEC);
    assert_true(p.rate == 0);
    /* A sized one (same moment: no ageing): the level's whole history. */
    pacer_note_compaction(&p, 1, 8 * 1024 * 1024, 56000, SEC);
    pacer_update(&p, BACKLOG, true, 1, SEC);
    assert_near(p.rate, (222 + MB - 1 + 8 * MB) / (0.0167 + 1 + 0.056));
    /* Another level still unsized adds nothing to its lane. */
    pacer_note_compaction(&p, 2, 100, SEC, SEC);
    pacer_update(&p, BACKLOG, true, 1, SEC);
    assert_near(p.rate, (222 + MB - 1 + 8 * MB) / (0.0167 + 1 + 0.056));
}

static void test_older_samples_weigh_less(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    /* 1 s per MiB, then, 10 s later (its weight halved), 3 s per MiB. */
    pacer_note_compaction(&p, 1, 1024 * 1024, SEC, 10 * SEC);
    pacer_note_compaction(&p, 1, 1024 * 1024, 3 * SEC, 20 * SEC);
    pacer_update(&p, BACKLOG, true, 1, 20 * SEC);
    double secs_per_mb = (0.5 * 1 + 3) / (0.5 * 1 + 1);
    assert_near(p.rate, MB / secs_per_mb);
    /* Each level ages on its own clock: a sample of level 2 leaves
     * level 1's history as it was. */
    pacer_note_compaction(&p, 2, 1024 * 1024, SEC, 100 * SEC);
    pacer_update(&p, BACKLOG, true, 1, 100 * SEC);
    assert_near(p.rate, MB / (secs_per_mb + 1));
}

static void test_unpaced_when_not_behind_or_small(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    pacer_note_compaction(&p, 0, 1024 * 1024, SEC, SEC);
    pacer_update(&p, BACKLOG, false, 1, SEC);
    assert_true(p.rate == 0); /* compaction has nothing to do */
    pacer_update(&p, MIN_BACKLOG, true, 1, SEC);
    assert_true(p.rate == 0); /* too little backlog to matter */
    pacer_update(&p, MIN_BACKLOG + 1, true, 1, SEC);
    assert_near(p.rate, MB);
}

static void test_backlog_past_soft_limit_cuts_rate(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    pacer_note_compaction(&p, 0, 1024 * 1024, SEC, SEC);
    /* The average follows a backlog held long enough: 128 MiB, 32 MiB past
     * the soft limit of 96 MiB, halfway down the 64 MiB range. */
    uint64_t big = 128 * 1024 * 1024ull;
    pacer_update(&p, big, true, 1, SEC);
    pacer_update(&p, big, true, 1, 100000 * SEC);
    assert_true(p.backlog_avg > 127.9 * MB);
    assert_true(p.rate > 0.499 * MB && p.rate < 0.501 * MB);
    /* Far past the range: a floor, never a stop (the level-0 count and
     * the memtables decide stops). */
    uint64_t huge = 1024 * 1024 * 1024ull;
    pacer_update(&p, huge, true, 1, 100000 * SEC);
    pacer_update(&p, huge, true, 1, 200000 * SEC);
    assert_near(p.rate, 0.1 * MB);
    /* A brief spike moves the average little. */
    pacer_init(&p, MIN_BACKLOG, MIN_SAMPLE);
    pacer_note_compaction(&p, 0, 1024 * 1024, SEC, SEC);
    pacer_update(&p, BACKLOG, true, 1, SEC);
    pacer_update(&p, BACKLOG, true, 1, 100 * SEC);
    pacer_update(&p, huge, true, 1, 100 * SEC);
    pacer_update(&p, BACKLOG, true, 1, 100 * SEC + SEC / 10);
    assert_near(p.rate, MB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unmeasured_is_unpaced),
        cmocka_unit_test(test_rate_is_inverse_of_the_busier_lanes_costs),
        cmocka_unit_test(test_level_counts_after_a_sized_sample),
        cmocka_unit_test(test_older_samples_weigh_less),
        cmocka_unit_test(test_unpaced_when_not_behind_or_small),
        cmocka_unit_test(test_backlog_past_soft_limit_cuts_rate),
    };
    return cmocka_run_group_tests_name("pacing", tests, NULL, NULL);
}
