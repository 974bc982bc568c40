/*
 * test_compaction_lanes.c — two compactions at once, one per lane
 * (compaction.h): level 0 on lane 0, deeper levels on lane 1, and never two
 * that touch one level (compaction_choose); in a store, compactions that
 * ran side by side leave every key as last written.
 */
#include "fixture.h"

#include "compaction.h"
#include "version.h"
#include "version_set.h"


#define MIB (1024 * 1024ull)
#define L0_TRIGGER 4
#define UNIT (4 * MIB) /* a flushed memtable's size */
#define MAX_FILES 16

/* A version whose level 0 holds l0 overlapping 4 MiB tables and each
 * deeper level l one table of mib[l] MiB (none if 0), all over keys a..z,
 * with its scores computed. */
typedef struct tree {
    version v;
    file_meta *f[NUM_LEVELS][MAX_FILES];
} tree;

static file_meta *table(uint64_t number, uint64_t size)
{
    buf lo = {0}, hi = {0};
    assert_true(buf_put_ikey(&lo, "a", 1, 1, TYPE_VALUE));
    assert_true(buf_put_ikey(&hi, "z", 1, 1, TYPE_VALUE));
    file_meta *f = file_meta_new(number, size, lo.data, lo.len, hi.data, hi.len);
    assert_non_null(f);
    f->refs++;
    f->keys = 1000;
    buf_free(&lo);
    buf_free(&hi);
    return f;
}

static void tree_init(tree *t, int l0, const uint64_t mib[NUM_LEVELS])
{
    memset(t, 0, sizeof(*t));
    assert_true(l0 <= MAX_FILES);
    for (int i = 0; i < l0; i++)
        t->f[0][i] = table((uint64_t)i + 1, UNIT);
    t->v.nfiles[0] = l0;
    for (int l = 1; l < NUM_LEVELS; l++) {
        if (mib[l] == 0)
            continue;
        t->f[l][0] = table(100 + (uint64_t)l, mib[l] * MIB);
        t->v.nfiles[l] = 1;
    }
    for (int l = 0; l < NUM_LEVELS; l++)
        t->v.files[l] = t->f[l];
    version_compute_score(&t->v, L0_TRIGGER, UNIT, VERSION_LEVEL1_BYTES);
}

/* tree_init with levels 1-3 of l1, l2, l3 MiB. */
static void tree_of(tree *t, int l0, uint64_t l1, uint64_t l2, uint64_t l3)
{
    uint64_t mib[NUM_LEVELS] = {0, l1, l2, l3};
    tree_init(t, l0, mib);
}

static void tree_free(tree *t)
{
    for (int l = 0; l < NUM_LEVELS; l++)
        for (int i = 0; i < MAX_FILES; i++)
            if (t->f[l][i])
                file_meta_unref(t->f[l][i]);
}

static int choose(const tree *t, int lane, unsigned busy)
{
    enum compaction_why why;
    int level = compaction_choose(&t->v, lane, busy, &why);
    assert_true((level < 0) == (why == PICK_NONE));
    return level;
}

static void test_each_level_has_one_lane(void **state)
{
    (void)state;
    assert_int_equal(compaction_lane(0), 0);
    for (int l = 1; l < NUM_LEVELS - 1; l++)
        assert_int_equal(compaction_lane(l), 1);
    for (int l = 0; l < NUM_LEVELS - 1; l++)
        assert_int_equal(compaction_levels(l), (1u << l) | (1u << (l + 1)));
}

/* Level 0 due (12 tables: score 3), levels 1 (20 MiB: 2) and 2 (150 MiB:
 * 1.5) too. */
static void test_deep_level_drains_while_level0_compacts(void **state)
{
    (void)state;
    tree t;
    tree_of(&t, 12, 20, 150, 500);
    assert_int_equal(choose(&t, 0, 0), 0);
    /* Nothing running: level 1 shares level 1 with the more needed level
     * 0, which goes first (as with one thread); lane 1 drains level 2. */
    assert_int_equal(choose(&t, 1, 0), 2);
    /* Level 0 -> 1 running: level 1 is taken, lane 1 drains level 2. */
    assert_int_equal(choose(&t, 1, compaction_levels(0)), 2);
    /* Level 1 -> 2 running: level 0 waits (its output level is taken). */
    assert_int_equal(choose(&t, 0, compaction_levels(1)), -1);
    /* Level 2 -> 3 running: level 0 goes on. */
    assert_int_equal(choose(&t, 0, compaction_levels(2)), 0);
    tree_free(&t);
}

/* Level 1 more needed (30 MiB: 3) than level 0 (8 tables: 2): level 0
 * yields it level 1, as one thread would. */
static void test_the_more_needed_of_two_sharing_a_level_goes_first(void **state)
{
    (void)state;
    tree t;
    tree_of(&t, 8, 30, 50, 0);
    assert_int_equal(choose(&t, 1, 0), 1);
    assert_int_equal(choose(&t, 0, 0), -1);
    assert_int_equal(choose(&t, 0, compaction_levels(1)), -1);
    tree_free(&t);
}

/* Seek and deletion compactions keep to their lane and free levels too. */
static void test_seek_and_deletion_picks_keep_the_rule(void **state)
{
    (void)state;
    tree t;
    tree_of(&t, 1, 5, 50, 500); /* nothing due by size */
    atomic_store(&t.v.seek_file, t.f[1][0]);
    t.v.seek_level = 1;
    assert_int_equal(choose(&t, 0, 0), -1);
    assert_int_equal(choose(&t, 1, 0), 1);
    assert_int_equal(choose(&t, 1, compaction_levels(0)), -1);
    atomic_store(&t.v.seek_file, NULL);
    t.f[0][0]->deletions = t.f[0][0]->keys;
    version_compute_score(&t.v, L0_TRIGGER, UNIT, VERSION_LEVEL1_BYTES);
    assert_int_equal(t.v.deletion_level, 0);
    assert_int_equal(choose(&t, 1, 0), -1);
    assert_int_equal(choose(&t, 0, compaction_levels(1)), -1);
    assert_int_equal(choose(&t, 0, 0), 0);
    tree_free(&t);
}

/* Whether level l is due, holds tables and touches no busy level. */
static bool may(const tree *t, int l, unsigned busy)
{
    return t->v.level_score[l] >= 1 && t->v.nfiles[l] > 0 && (compaction_levels(l) & busy) == 0;
}

/* Whether a level of the other lane that could start, more needed than l,
 * shares a level with it. */
static bool more_needed_shares(const tree *t, int l, unsigned busy)
{
    for (int m = 0; m < NUM_LEVELS - 1; m++)
        if (compaction_lane(m) != compaction_lane(l) && may(t, m, busy) &&
            t->v.level_score[m] > t->v.level_score[l] &&
            (compaction_levels(m) & compaction_levels(l)) != 0)
            return true;
    return false;
}

/* Over many trees and every compaction that may be running on the other
 * lane, a lane's choice is of its own lane, due, and touches no level the
 * running one touches; and a lane finds work whenever a due level of its
 * own is free and no more needed one of the other lane that shares a level
 * with it could start. */
static void test_no_two_compactions_share_a_level(void **state)
{
    (void)state;
    static const uint64_t l1[] = {0, 5, 12, 40}, l2[] = {0, 50, 130, 400},
                          l3[] = {0, 800, 1200}, l4[] = {0, 12000};
    int checked = 0;
    for (int l0 = 0; l0 <= 12; l0 += 3)
        for (size_t a = 0; a < 4; a++)
            for (size_t b = 0; b < 4; b++)
                for (size_t c = 0; c < 3; c++)
                    for (size_t d = 0; d < 2; d++) {
                        uint64_t mib[NUM_LEVELS] = {0, l1[a], l2[b], l3[c], l4[d]};
                        tree t;
                        tree_init(&t, l0, mib);
                        for (int running = -1; running < NUM_LEVELS - 1; running++) {
                            unsigned busy = running < 0 ? 0 : compaction_levels(running);
                            for (int lane = 0; lane < COMPACTION_LANES; lane++) {
                                if (running >= 0 && compaction_lane(running) == lane)
                                    continue; /* a lane runs one at a time */
                                int got = choose(&t, lane, busy);
                                bool free_due = false;
                                for (int l = 0; l < NUM_LEVELS - 1; l++)
                                    free_due |= compaction_lane(l) == lane && may(&t, l, busy) &&
                                                !more_needed_shares(&t, l, busy);
                                assert_int_equal(got >= 0, free_due);
                                if (got < 0)
                                    continue;
                                assert_int_equal(compaction_lane(got), lane);
                                assert_true(t.v.level_score[got] >= 1);
                                assert_int_equal(compaction_levels(got) & busy, 0);
                                checked++;
                            }
                        }
                        tree_free(&t);
                    }
    assert_true(checked > 100);
}

/* A store with small tables under random writes: compactions run side by
 * side, and every key reads as last written, before and after a reopen. */
#define KEYS 30000
#define ROUNDS 40
#define VALUE_LEN 100

/* Key i's value as written in round `round`: incompressible, so the
 * tables hold the bytes that fill the levels. */
static void value_of(int round, int i, char *v)
{
    uint64_t x = (uint64_t)round * KEYS + (uint64_t)i + 1;
    for (int n = 0; n < VALUE_LEN; n++)
        v[n] = (char)('a' + tu_xorshift64(&x) % 26);
    v[VALUE_LEN] = '\0';
}

/* Key k is absent from db, or the test fails. */
static void assert_missing(lsm_db *db, const char *k)
{
    char *got = NULL;
    size_t gn;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &got, &gn);
    assert_int_equal(lsm_status_code(s), LSM_NOT_FOUND);
    lsm_status_free(s);
}

static void test_side_by_side_compactions_keep_every_key(void **state)
{
    (void)state;
    lsm_options o;
    tu_db_options(&o, NULL, 128 * 1024);
    o.target_file_size = 64 * 1024;
    o.level1_bytes = 128 * 1024; /* level 2 at 1.28 MiB: compactions of levels 2-3 */
    lsm_db *db = tu_open_with(&o);
    static int last[KEYS];
    char k[16], v[160];
    unsigned seed = 1;
    int round = 0;
    for (; round < ROUNDS && (round < 4 || tu_prop(db, "lsm.compactions-side-by-side") == 0);
         round++) {
        for (int n = 0; n < KEYS; n++) {
            int i = (int)(rand_r(&seed) % KEYS);
            sprintf(k, "k%06d", i);
            value_of(round + 1, i, v);
            ASSERT_OK(lsm_put(db, NULL, k, strlen(k), v, strlen(v)));
            last[i] = round + 1;
        }
    }
    print_message("rounds %d, compactions side by side %llu, tables in levels 0-3: %llu %llu "
                  "%llu %llu\n",
                  round, (unsigned long long)tu_prop(db, "lsm.compactions-side-by-side"),
                  (unsigned long long)tu_prop(db, "lsm.num-files-at-level0"),
                  (unsigned long long)tu_prop(db, "lsm.num-files-at-level1"),
                  (unsigned long long)tu_prop(db, "lsm.num-files-at-level2"),
                  (unsigned long long)tu_prop(db, "lsm.num-files-at-level3"));
    assert_true(tu_prop(db, "lsm.compactions-side-by-side") > 0);
    for (int pass = 0; pass < 2; pass++) {
        tu_verify_clean(db);
        for (int i = 0; i < KEYS; i++) {
            sprintf(k, "k%06d", i);
            if (last[i] == 0) {
                assert_missing(db, k);
                continue;
            }
            value_of(last[i], i, v);
            tu_assert_value(db, k, v);
        }
        ASSERT_OK(lsm_close(db));
        db = pass == 0 ? tu_open_with(&o) : NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_level_has_one_lane),
        cmocka_unit_test(test_deep_level_drains_while_level0_compacts),
        cmocka_unit_test(test_the_more_needed_of_two_sharing_a_level_goes_first),
        cmocka_unit_test(test_seek_and_deletion_picks_keep_the_rule),
        cmocka_unit_test(test_no_two_compactions_share_a_level),
        TU_TEST(test_side_by_side_compactions_keep_every_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
