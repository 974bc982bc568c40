/* test_pacing.c — the pacer: what compaction costs per level, how samples
 * age, the compaction debt of a tree, and the write rate as a function of
 * that debt (smooth: no step where pacing switches on). */
#include "testutil.h"

#include "pacing.h"

#define MB (1024.0 * 1024.0)
#define MIB (1024 * 1024ull)
#define SEC 1000000ull

static void assert_near(double got, double want)
{
    if (got < want * 0.999 || got > want * 1.001)
        fail_msg("got %.6g, want %.6g", got, want);
}

/* A tree with `l0` bytes in level 0, levels 1 and 2 holding l1 and l2
 * bytes against targets of 10 and 100 MiB, 1000 MiB below. */
static pacer_tree tree(uint64_t l0, uint64_t l1, uint64_t l2)
{
    pacer_tree t = {.bytes = {l0, l1, l2}};
    uint64_t target = 10 * MIB;
    for (int l = 1; l < NUM_LEVELS; l++, target *= 10)
        t.target[l] = target;
    return t;
}

/* The tree held long enough for the averaged debt to be its debt. */
static void settle(pacer *p, const pacer_tree *t, double table_per_write)
{
    pacer_update(p, t, table_per_write, 1000 * SEC);
    pacer_update(p, t, table_per_write, 1000000 * SEC);
}

/* The factor on the sustainable rate pacing.h promises at `debt` seconds
 * owed (0: unpaced). */
static double promised_factor(double debt)
{
    double f = 1 + (PACER_DEBT_SET_SECS - debt) / PACER_DEBT_SPAN_SECS;
    if (f >= PACER_FREE_FACTOR)
        return 0;
    return f < PACER_MIN_FACTOR ? PACER_MIN_FACTOR : f;
}

static void test_unmeasured_is_unpaced(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p);
    pacer_tree t = tree(100 * MIB, 50 * MIB, 0);
    settle(&p, &t, 1);
    assert_true(p.rate == 0);
    assert_true(p.debt == 0); /* no cost known: nothing owed */
}

static void test_debt_counts_what_must_move(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p);
    /* Level 0: 1 s per MiB moved out; level 1: 2 s per MiB. */
    pacer_note_compaction(&p, 0, 1 * MIB, 1 * SEC, SEC);
    pacer_note_compaction(&p, 1, 1 * MIB, 2 * SEC, SEC);
    /* Every level-0 byte moves (3 MiB); level 1 then holds 15 MiB against
     * 10 and moves 5; level 2 then holds 100 against 100 and moves none. */
    pacer_tree t = tree(3 * MIB, 12 * MIB, 95 * MIB);
    assert_near(pacer_debt_secs(&p, &t), 3 * 1 + 5 * 2);
    /* Level 2, never compacted, owes its 3 MiB at level 1's cost. */
    t = tree(3 * MIB, 12 * MIB, 98 * MIB);
    assert_near(pacer_debt_secs(&p, &t), 3 * 1 + 5 * 2 + 3 * 2);
    /* Levels within their targets owe nothing but level 0's bytes. */
    t = tree(0, 5 * MIB, 50 * MIB);
    assert_true(pacer_debt_secs(&p, &t) == 0);
    t = tree(2 * MIB, 5 * MIB, 50 * MIB);
    assert_near(pacer_debt_secs(&p, &t), 2);
}

/* Costs making the sustainable rate 1 MiB/s over levels 0-2 (level 2
 * taken at level 1's cost): 0.5 + 0.25 + 0.25 s per MiB. */
static void measure_one_mib_per_sec(pacer *p)
{
    pacer_note_compaction(p, 0, 2 * MIB, 1 * SEC, SEC);
    pacer_note_compaction(p, 1, 4 * MIB, 1 * SEC, SEC);
}

/* A tree owing `debt` seconds at those costs: level 0 only (each of its
 * MiB owes 0.5 s; level 1's target taken out of the way), level 2 holding
 * bytes within its target (a written byte moves through levels 0-2). */
static pacer_tree tree_owing(double debt)
{
    pacer_tree t = tree((uint64_t)(debt * 2 * MB), 0, 50 * MIB);
    t.target[1] = UINT64_MAX / 2;
    return t;
}

/* A pacer measured at 1 MiB/s, settled on a tree owing `debt` seconds. */
static pacer settled_owing(double debt)
{
    pacer p;
    pacer_init(&p);
    measure_one_mib_per_sec(&p);
    pacer_tree t = tree_owing(debt);
    settle(&p, &t, 1);
    return p;
}

static void test_rate_at_set_point_is_sustainable(void **state)
{
    (void)state;
    pacer p = settled_owing(PACER_DEBT_SET_SECS);
    pacer_tree t = tree_owing(PACER_DEBT_SET_SECS);
    assert_near(p.debt, PACER_DEBT_SET_SECS);
    assert_near(p.rate, MB);
    /* A written byte that becomes half a table byte may come twice as
     * fast. */
    settle(&p, &t, 0.5);
    assert_near(p.rate, 2 * MB);
    /* With nothing in level 2 a byte moves out of levels 0-1 only. */
    t.bytes[2] = 0;
    t.bytes[1] = 1 * MIB;
    settle(&p, &t, 1);
    assert_near(p.rate, MB / 0.75 * promised_factor(p.debt_avg));
}

static void test_older_samples_weigh_less(void **state)
{
    (void)state;
    pacer p;
    pacer_init(&p);
    /* Level 0 at 1 s per MiB, then, 10 s later (its weight halved), 3 s
     * per MiB. */
    pacer_note_compaction(&p, 0, 1 * MIB, SEC, 10 * SEC);
    pacer_note_compaction(&p, 0, 1 * MIB, 3 * SEC, 20 * SEC);
    double secs_per_mb = (0.5 * 1 + 3) / (0.5 * 1 + 1);
    pacer_tree t = tree((uint64_t)(PACER_DEBT_SET_SECS / secs_per_mb * MB), 0, 0);
    settle(&p, &t, 1);
    assert_near(p.rate, MB / secs_per_mb);
    /* Each level ages on its own clock: a sample of level 1 leaves level
     * 0's history as it was. */
    pacer_note_compaction(&p, 1, 1 * MIB, SEC, 100 * SEC);
    t.bytes[2] = 50 * MIB;
    settle(&p, &t, 1);
    assert_near(pacer_debt_secs(&p, &t), PACER_DEBT_SET_SECS);
    assert_near(p.rate, MB / (secs_per_mb + 1 + 1));
}

/* The write rate as a function of the debt, swept in 10 ms steps from
 * nothing owed to far past the set point: unpaced only while little is
 * owed, the sustainable rate at the set point, never rising as the debt
 * grows, never by a step (at most the slope 1 / DEBT_SPAN between
 * neighbours; where pacing begins, at PACER_FREE_FACTOR times the
 * sustainable rate, not at it: the step the old pacer took on at four
 * write buffers), and a floor, never a stop. */
static void test_rate_falls_smoothly_with_debt(void **state)
{
    (void)state;
    double step = 0.01, last = 0;
    bool paced = false;
    double end = PACER_DEBT_SET_SECS + 2 * PACER_DEBT_SPAN_SECS;
    for (double debt = 0; debt <= end; debt += step) {
        pacer p = settled_owing(debt);
        double rate = p.rate / MB;
        assert_near(p.rate + 1, promised_factor(p.debt_avg) * MB + 1);
        if (rate == 0) {
            if (paced)
                fail_msg("unpaced again at %.2f s owed", debt);
            continue;
        }
        double slope_step = step / PACER_DEBT_SPAN_SECS * 1.01;
        if (!paced) {
            if (rate > PACER_FREE_FACTOR + 1e-9 || rate < PACER_FREE_FACTOR - 2 * slope_step)
                fail_msg("pacing began at %.2f s owed at %.4f MiB/s, not gently", debt, rate);
        } else if (rate > last + 1e-9 || last - rate > slope_step) {
            fail_msg("at %.2f s owed the rate went from %.4f to %.4f MiB/s", debt, last, rate);
        }
        assert_true(rate >= PACER_MIN_FACTOR - 1e-9);
        paced = true;
        last = rate;
    }
    assert_true(paced);
    assert_near(last, PACER_MIN_FACTOR);
    pacer p = settled_owing(0);
    assert_true(p.rate == 0); /* nothing owed: unpaced */
}

static void test_debt_average_ignores_a_brief_step(void **state)
{
    (void)state;
    pacer p = settled_owing(PACER_DEBT_SET_SECS);
    pacer_tree t = tree_owing(PACER_DEBT_SET_SECS);
    /* A step of 3 s owed (a flush's is about 1 s), gone 0.1 s later. */
    pacer_tree big = tree_owing(PACER_DEBT_SET_SECS + 3);
    pacer_update(&p, &big, 1, 1000000 * SEC + SEC);
    assert_near(p.rate, MB);
    pacer_update(&p, &t, 1, 1000000 * SEC + SEC + SEC / 10);
    assert_true(p.rate > 0.95 * MB && p.rate <= MB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unmeasured_is_unpaced),
        cmocka_unit_test(test_debt_counts_what_must_move),
        cmocka_unit_test(test_rate_at_set_point_is_sustainable),
        cmocka_unit_test(test_older_samples_weigh_less),
        cmocka_unit_test(test_rate_falls_smoothly_with_debt),
        cmocka_unit_test(test_debt_average_ignores_a_brief_step),
    };
    return cmocka_run_group_tests_name("pacing", tests, NULL, NULL);
}
