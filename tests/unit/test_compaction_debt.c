/*
 * test_compaction_debt.c — the compaction debt of a version
 * (version_compaction_debt): every level-0 byte is owed a move, and what a
 * level holds past its target once the bytes from above arrived moves on to
 * the next, down to the last level, which owes nothing.
 */
#include "testutil.h"

#include "version.h"
#include "version_set.h"

#define MIB (1024 * 1024ull)

/* A version whose level l holds one table of mib[l] MiB (none if 0). */
typedef struct tree {
    version v;
    file_meta *f[NUM_LEVELS];
} tree;

static void tree_init(tree *t, const uint64_t mib[NUM_LEVELS])
{
    memset(t, 0, sizeof(*t));
    t->v.level1_bytes = VERSION_LEVEL1_BYTES;
    for (int l = 0; l < NUM_LEVELS; l++) {
        if (mib[l] == 0)
            continue;
        t->f[l] = file_meta_new((uint64_t)l + 1, mib[l] * MIB, "a", 1, "z", 1);
        assert_non_null(t->f[l]);
        t->f[l]->refs++;
        t->v.files[l] = &t->f[l];
        t->v.nfiles[l] = 1;
    }
}

static void tree_free(tree *t)
{
    for (int l = 0; l < NUM_LEVELS; l++)
        if (t->f[l])
            file_meta_unref(t->f[l]);
}

static uint64_t debt_of(uint64_t l0, uint64_t l1, uint64_t l2, uint64_t l3)
{
    uint64_t mib[NUM_LEVELS] = {l0, l1, l2, l3};
    tree t;
    tree_init(&t, mib);
    uint64_t debt = version_compaction_debt(&t.v);
    tree_free(&t);
    return debt;
}

static void test_level0_bytes_are_owed(void **state)
{
    (void)state;
    assert_int_equal(debt_of(0, 0, 0, 0), 0);
    /* Level 1 (10 MiB) takes 3 MiB from level 0 within its target. */
    assert_int_equal(debt_of(3, 0, 0, 0), 3 * MIB);
    assert_int_equal(debt_of(3, 7, 0, 0), 3 * MIB);
}

static void test_excess_moves_on_down(void **state)
{
    (void)state;
    /* Level 1 then holds 15 MiB against 10: 5 more; level 2 then 100
     * against 100: none. */
    assert_int_equal(debt_of(3, 12, 95, 0), (3 + 5) * MIB);
    /* Level 2 then holds 103: 3 more, which level 3 (1000 MiB) takes. */
    assert_int_equal(debt_of(3, 12, 98, 500), (3 + 5 + 3) * MIB);
    /* Levels within their targets owe nothing. */
    assert_int_equal(debt_of(0, 5, 50, 500), 0);
    /* A deep level past its target owes its excess though nothing above
     * does. */
    assert_int_equal(debt_of(0, 0, 120, 0), 20 * MIB);
}

static void test_last_level_owes_nothing(void **state)
{
    (void)state;
    uint64_t mib[NUM_LEVELS] = {0};
    mib[NUM_LEVELS - 1] = 1u << 20; /* 1 TiB at the last level */
    tree t;
    tree_init(&t, mib);
    assert_int_equal(version_compaction_debt(&t.v), 0);
    tree_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level0_bytes_are_owed),
        cmocka_unit_test(test_excess_moves_on_down),
        cmocka_unit_test(test_last_level_owes_nothing),
    };
    return cmocka_run_group_tests_name("compaction_debt", tests, NULL, NULL);
}
