/*
 * test_db_seek_compaction.c — seek compaction (file_allowed_seeks): point
 * reads that search a table in vain before finding their key deeper get
 * that table compacted down, with no write and no level due by size; reads
 * found in the first table they search charge nothing; a read-only store's
 * reads change nothing.
 */
#include "fixture.h"

#include <inttypes.h>
#include <unistd.h>

#define NKEYS 2000
#define READS 500 /* more than a small table's allowance (100) */
#define WAIT_TENTHS 200

static void key_of(int i, char *k)
{
    sprintf(k, "key%05d", i);
}

/* Tables in levels 0 and 1: above the bottom of this test's store (a flush
 * goes to level 1 where level 0 is empty, version_level_for_flush). */
static uint64_t upper_tables(lsm_db *db)
{
    return tu_prop(db, "lsm.num-files-at-level0") + tu_prop(db, "lsm.num-files-at-level1");
}

/* The whole key range at the bottom, then one small table above over all
 * of it (its first and last keys rewritten): nothing is due by size. */
static void fill_with_table_above(lsm_db *db)
{
    char k[16];
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, k);
        ASSERT_OK(lsm_put(db, NULL, k, strlen(k), "old", 3));
    }
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_int_equal(upper_tables(db), 0);
    key_of(0, k);
    ASSERT_OK(lsm_put(db, NULL, k, strlen(k), "new", 3));
    key_of(NKEYS - 1, k);
    ASSERT_OK(lsm_put(db, NULL, k, strlen(k), "new", 3));
    /* Flushes the memtable; the range compacts nothing (no table holds it). */
    ASSERT_OK(lsm_compact_range(db, "zz", 2, "zz", 2));
    assert_int_equal(upper_tables(db), 1);
    assert_int_equal(tu_prop(db, "lsm.background-jobs"), 0);
}

/* READS gets: of keys first.. in turn (step 1), or of key first each time
 * (step 0); each must read `want`. */
static void read_keys(lsm_db *db, int first, int step, const char *want)
{
    char k[16];
    for (int i = 0; i < READS; i++) {
        key_of(first + i * step, k);
        tu_assert_value(db, k, want);
    }
}

/* Waits until no table is above the bottom and the background is idle;
 * false on timeout. */
static bool wait_upper_empty(lsm_db *db)
{
    for (int t = 0; t < WAIT_TENTHS; t++) {
        if (upper_tables(db) == 0 &&
            tu_prop(db, "lsm.background-busy") == 0)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

static void test_missed_seeks_compact_the_table_down(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    fill_with_table_above(db);
    /* Found in the level-0 table, the first searched: nothing charged. */
    read_keys(db, 0, 0, "new");
    assert_int_equal(tu_prop(db, "lsm.background-jobs"), 0);
    assert_int_equal(upper_tables(db), 1);
    /* Searched there in vain, found below: the table is due, and compacted
     * down until no read searches two tables. */
    read_keys(db, 100, 1, "old");
    if (!wait_upper_empty(db))
        fail_msg("after %d reads missing it, the table above is still there (%" PRIu64
                 " tables above the bottom, background jobs %" PRIu64 ")",
                 READS, upper_tables(db), tu_prop(db, "lsm.background-jobs"));
    tu_assert_value(db, "key00000", "new");
    tu_assert_value(db, "key00100", "old");
    tu_assert_value(db, "key01999", "new");
    ASSERT_OK(lsm_close(db));
}

static void test_read_only_store_reads_change_nothing(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    fill_with_table_above(db);
    ASSERT_OK(lsm_close(db));
    lsm_options o;
    lsm_options_init(&o);
    o.read_only = true;
    db = tu_open_with(&o);
    read_keys(db, 100, 1, "old");
    assert_int_equal(tu_prop(db, "lsm.background-jobs"), 0);
    assert_int_equal(upper_tables(db), 1);
    ASSERT_OK(lsm_close(db));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_missed_seeks_compact_the_table_down),
        TU_TEST(test_read_only_store_reads_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
