/* test_pacing.c — the pacer: what compaction costs per level, how samples
 * age, the compaction debt of a tree, and the write rate as a function of
 * that debt (a byte held in proportion to it: no step where pacing
 * begins). */
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

/* The factor on the sustainable rate pacing.h promises at `debt` bytes
 * owed against the set point (0: unpaced). */
static double promised_factor(double debt)
{
    if (debt <= 0)
        return 0;
    double f = PACER_DEBT_SET_BYTES / debt;
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
    assert_near(p.debt, pacer_debt_bytes(&t));
}

static void test_debt_counts_what_must_move(void **state)
{
    (void)state;
    /* Every level-0 byte moves (3 MiB); level 1 then holds 15 MiB against
     * 10 and moves 5; level 2 then holds 100 against 100 and moves none. */
    pacer_tree t = tree(3 * MIB, 12 * MIB, 95 * MIB);
    assert_near(pacer_debt_bytes(&t), (3 + 5) * MB);
    t = tree(3 * MIB, 12 * MIB, 98 * MIB);
    assert_near(pacer_debt_bytes(&t), (3 + 5 + 3) * MB);
    /* Levels within their targets owe nothing but level 0's bytes. */
    t = tree(0, 5 * MIB, 50 * MIB);
    assert_true(pacer_debt_bytes(&t) == 0);
    t = tree(2 * MIB, 5 * MIB, 50 * MIB);
    assert_near(pacer_debt_bytes(&t), 2 * MB);
    /* The set point: a floor, or an eighth of a large tree. */
    assert_near(pacer_debt_set_bytes(&t), PACER_DEBT_SET_BYTES);
    t = tree(0, 24 * MIB, 1000 * MIB);
    assert_near(pacer_debt_set_bytes(&t), 1024 * MB / PACER_DEBT_SET_SHARE);
}

/* Costs making the sustainable rate 1 MiB/s over levels 0-2 (level 2
 * taken at level 1's cost): 0.5 + 0.25 + 0.25 s per MiB. */
static void measure_one_mib_per_sec(pacer *p)
{
    pacer_note_compaction(p, 0, 2 * MIB, 1 * SEC, SEC);
    pacer_note_compaction(p, 1, 4 * MIB, 1 * SEC, SEC);
}

/* A tree owing `debt` bytes, all in level 0 (level 1's target taken out of
 * the way), level 2 holding 50 MiB within its target (a written byte moves
 * through levels 0-2): under 512 MiB in all, the set point is its floor. */
static pacer_tree tree_owing(double debt)
{
    pacer_tree t = tree((uint64_t)debt, 0, 50 * MIB);
    t.target[1] = UINT64_MAX / 2;
    return t;
}

/* A pacer measured at 1 MiB/s, settled on a tree owing `debt` bytes. */
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
    pacer p = settled_owing(PACER_DEBT_SET_BYTES);
    pacer_tree t = tree_owing(PACER_DEBT_SET_BYTES);
    assert_near(p.debt, PACER_DEBT_SET_BYTES);
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
    pacer_tree t = tree_owing(PACER_DEBT_SET_BYTES);
    t.bytes[2] = 0; /* level 0 alone: its cost alone */
    settle(&p, &t, 1);
    assert_near(p.rate, MB / secs_per_mb);
    /* Each level ages on its own clock: a sample of level 1 leaves level
     * 0's history as it was (level 2 then costs what level 1 does). */
    pacer_note_compaction(&p, 1, 1 * MIB, SEC, 100 * SEC);
    t.bytes[2] = 50 * MIB;
    settle(&p, &t, 1);
    assert_near(p.rate, MB / (secs_per_mb + 1 + 1));
}

/* The write rate as a function of the debt, swept in 1/2 MiB steps from
 * nothing owed to far past the set point: unpaced only while nothing is
 * owed; the time a written byte is held (1 / rate) proportional to the
 * debt, so pacing begins with no step — from as fast as a writer goes, not
 * at the sustainable rate as the old pacer did once levels 0-1 held four
 * write buffers; the sustainable rate at the set point; never rising as the
 * debt grows; and a floor, never a stop. */
static void test_rate_falls_smoothly_with_debt(void **state)
{
    (void)state;
    double step = MB / 2, last = 0;
    double end = 6 * PACER_DEBT_SET_BYTES;
    for (double debt = step; debt <= end; debt += step) {
        pacer p = settled_owing(debt);
        double rate = p.rate / MB;
        if (rate == 0)
            fail_msg("unpaced at %.1f MiB owed", debt / MB);
        assert_near(p.rate, promised_factor(p.debt_avg) * MB);
        if (last > 0 && rate > last * (1 + 1e-9))
            fail_msg("at %.1f MiB owed the rate rose from %.4f to %.4f MiB/s", debt / MB, last,
                     rate);
        double held = 1 / rate, want = p.debt_avg / PACER_DEBT_SET_BYTES;
        if (rate > PACER_MIN_FACTOR * (1 + 1e-9) && (held < want * 0.999 || held > want * 1.001))
            fail_msg("at %.1f MiB owed a MiB is held %.4f s, not %.4f", debt / MB, held, want);
        assert_true(rate >= PACER_MIN_FACTOR * (1 - 1e-9));
        last = rate;
    }
    assert_near(last, PACER_MIN_FACTOR);
    /* Where pacing begins a writer is held a hundredth of what the set
     * point holds it: no step. */
    pacer p = settled_owing(PACER_DEBT_SET_BYTES / 100);
    assert_near(p.rate, 100 * MB);
    p = settled_owing(0);
    assert_true(p.rate == 0); /* nothing owed: unpaced */
}

static void test_debt_average_ignores_a_brief_step(void **state)
{
    (void)state;
    pacer p = settled_owing(PACER_DEBT_SET_BYTES);
    pacer_tree t = tree_owing(PACER_DEBT_SET_BYTES);
    /* A step of 48 MiB owed (a flush's is a few), gone 0.1 s later. */
    pacer_tree big = tree_owing(PACER_DEBT_SET_BYTES + 48 * MB);
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
