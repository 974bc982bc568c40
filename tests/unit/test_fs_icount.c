/* test_fs_icount.c — the inode count kept across a clean unmount (fs/icount.c):
 * trusted only while nothing was written after it, through close and open,
 * a power cut, a read-only open; a failed save or read is never a wrong
 * count. */
#include "fixture.h"

#include "fault_env.h"
#include "icount.h"
#include "schema.h"

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct fixture {
    fault_env *fe;
    lsm_db *db;
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    tu_setup(state);
    fx->fe = fault_env_new(lsm_env_default());
    assert_non_null(fx->fe);
    fx->db = tu_open(fault_env_env(fx->fe), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    if (fx->db != NULL)
        lsm_status_free(lsm_close(fx->db));
    fault_env_free(fx->fe);
    free(fx);
    return tu_teardown(state);
}

static void open_again(fixture *fx, bool read_only)
{
    lsm_options o;
    tu_db_options(&o, fault_env_env(fx->fe), 0);
    o.read_only = read_only;
    ASSERT_OK(lsm_open(&o, tu_dir, &fx->db));
}

/* Closes and opens the store again (a close after a power cut may fail). */
static void reopen(fixture *fx, bool read_only)
{
    lsm_status *s = lsm_close(fx->db);
    fx->db = NULL;
    ASSERT_OK(s);
    open_again(fx, read_only);
}

/* A power cut, and the store opened again as after a restart. */
static void power_cut(fixture *fx)
{
    assert_null(fault_env_power_cut(fx->fe));
    lsm_status_free(lsm_close(fx->db));
    fx->db = NULL;
    open_again(fx, false);
}

/* Inode records first..last (unsynced), and a key of another kind. */
static void put_inodes(fixture *fx, uint64_t first, uint64_t last)
{
    lsm_write_options wo = {.sync = false};
    for (uint64_t ino = first; ino <= last; ino++) {
        schema_key k;
        key_inode(&k, ino);
        ASSERT_OK(lsm_put(fx->db, &wo, k.b, k.len, "rec", 3));
    }
    schema_key a;
    key_alloc(&a);
    ASSERT_OK(lsm_put(fx->db, &wo, a.b, a.len, "12345678", 8));
}

/* Inode records first..last of 200 bytes that do not compress. */
static void put_big_inodes(fixture *fx, uint64_t first, uint64_t last)
{
    lsm_write_options wo = {.sync = false};
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    char v[200];
    for (uint64_t ino = first; ino <= last; ino++) {
        for (size_t i = 0; i < sizeof v; i++)
            v[i] = (char)tu_xorshift64(&x);
        schema_key k;
        key_inode(&k, ino);
        ASSERT_OK(lsm_put(fx->db, &wo, k.b, k.len, v, sizeof v));
    }
}

static void del_inode(fixture *fx, uint64_t ino)
{
    lsm_write_options wo = {.sync = false};
    schema_key k;
    key_inode(&k, ino);
    ASSERT_OK(lsm_delete(fx->db, &wo, k.b, k.len));
}

static void expect_current(fixture *fx, bool want, uint64_t want_count)
{
    bool current;
    uint64_t count = 0;
    assert_int_equal(icount_current(fx->db, &current, &count), 0);
    assert_int_equal(current, want);
    if (want)
        assert_int_equal(count, want_count);
}

/* What a mount would count: the current record, else a background scan
 * (waited for). */
static int64_t loaded(fixture *fx)
{
    bool current;
    uint64_t count;
    assert_int_equal(icount_current(fx->db, &current, &count), 0);
    if (current)
        return (int64_t)count;
    _Atomic int64_t total = 0;
    _Atomic bool known = false;
    icount_job *j = NULL;
    assert_int_equal(icount_start(fx->db, &total, &known, &j), 0);
    for (int i = 0; i < 1000 && !atomic_load(&known); i++)
        usleep(10000);
    icount_stop(j);
    assert_true(atomic_load(&known));
    return atomic_load(&total);
}

/* A saved count holds through close and open, read-only too; the first
 * write after it makes it stale. */
static void test_saved_count_holds_until_a_write(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 10);
    expect_current(fx, false, 0);
    assert_int_equal(icount_save(fx->db, 10), 0);
    expect_current(fx, true, 10);
    reopen(fx, false);
    expect_current(fx, true, 10);
    reopen(fx, true);
    expect_current(fx, true, 10);
    reopen(fx, false);
    del_inode(fx, 4);
    expect_current(fx, false, 0);
    assert_int_equal(loaded(fx), 9); /* stale: counted */
    reopen(fx, false);
    expect_current(fx, false, 0);
}

/* The load uses the record when current: a (deliberately wrong) current
 * record is believed, which is what spares a mount the scan. */
static void test_current_record_spares_the_scan(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 10);
    assert_int_equal(icount_save(fx->db, 7), 0);
    assert_int_equal(loaded(fx), 7);
    int64_t scanned = 0;
    assert_int_equal(icount_scan(fx->db, &scanned), 0);
    assert_int_equal(scanned, 10);
}

/* Power cuts: after a cut that keeps writes made after the save, the
 * record is stale; after one that loses them all, it is current and true
 * again (the store is as it was at the save). */
static void test_power_cut_leaves_no_wrong_count(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 10);
    assert_int_equal(icount_save(fx->db, 10), 0); /* synced */
    put_inodes(fx, 11, 15);                       /* unsynced: lost */
    del_inode(fx, 2);
    power_cut(fx);
    expect_current(fx, true, 10);
    assert_int_equal(loaded(fx), 10);
    put_inodes(fx, 11, 15);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(fx->db, &wo, "Zsync", 5, "", 0)); /* makes them durable */
    put_inodes(fx, 16, 20);
    power_cut(fx);
    expect_current(fx, false, 0);
    assert_int_equal(loaded(fx), 15);
}

/* A save whose sync fails leaves no current record (the next mount
 * counts); a count below one (no root) is refused. */
static void test_failed_save_leaves_it_stale(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 10);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(fx->db, &wo, "Zsync", 5, "", 0)); /* makes them durable */
    assert_int_equal(icount_save(fx->db, 0), EINVAL);
    fault_env_fail(fx->fe, FAULT_SYNC, NULL, EIO, 0, -1);
    assert_int_not_equal(icount_save(fx->db, 10), 0);
    fault_env_clear_failures(fx->fe);
    power_cut(fx);
    expect_current(fx, false, 0);
    assert_int_equal(loaded(fx), 10);
}

/* A read of the record that fails is an error, not a guess. */
static void test_failed_read_is_an_error(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 10);
    assert_int_equal(icount_save(fx->db, 10), 0);
    reopen(fx, false); /* the record is in a table now */
    fault_env_fail(fx->fe, FAULT_READ, NULL, EIO, 0, -1);
    bool current = true;
    uint64_t count;
    assert_int_equal(icount_current(fx->db, &current, &count), EIO);
    assert_false(current);
    fault_env_clear_failures(fx->fe);
    assert_int_equal(loaded(fx), 10);
}

/* The background count is exact with the mount's own changes made while
 * it runs (they go to the same total from 0); stopped early, it is never
 * known; a read that fails leaves it unknown. */
static void test_background_count(void **state)
{
    fixture *fx = *state;
    put_big_inodes(fx, 1, 20000); /* 4 MB: the thread reads too */
    _Atomic int64_t total = 0;
    _Atomic bool known = false;
    icount_job *j = NULL;
    assert_int_equal(icount_start(fx->db, &total, &known, &j), 0);
    put_inodes(fx, 20001, 20010); /* after the start: the mount's deltas */
    atomic_fetch_add(&total, 10);
    del_inode(fx, 7);
    atomic_fetch_sub(&total, 1);
    for (int i = 0; i < 1000 && !atomic_load(&known); i++)
        usleep(10000);
    icount_stop(j);
    assert_true(atomic_load(&known));
    assert_int_equal(atomic_load(&total), 20009);

    atomic_store(&total, 0);
    atomic_store(&known, false);
    assert_int_equal(icount_start(fx->db, &total, &known, &j), 0);
    icount_stop(j); /* at once: early, or done */
    assert_true(atomic_load(&known) ? atomic_load(&total) == 20009 : atomic_load(&total) == 0);

    reopen(fx, false); /* in tables: a read can fail */
    /* In the part counted before icount_start returns: its error. */
    atomic_store(&total, 0);
    atomic_store(&known, false);
    fault_env_fail(fx->fe, FAULT_READ, NULL, EIO, 0, -1);
    assert_int_equal(icount_start(fx->db, &total, &known, &j), EIO);
    assert_null(j);
    fault_env_clear_failures(fx->fe);
    assert_false(atomic_load(&known));
    /* In the thread's part (its first read): never known. */
    fault_env_count_start(fx->fe, NULL, NULL);
    fault_env_arm(fx->fe, FAULT_STREAM_OTHER, 0, FAULT_EIO);
    assert_int_equal(icount_start(fx->db, &total, &known, &j), 0);
    assert_non_null(j);
    for (int i = 0; i < 100 && fault_env_calls(fx->fe, FAULT_STREAM_OTHER) == 0; i++)
        usleep(10000);
    icount_stop(j);
    assert_true(fault_env_calls(fx->fe, FAULT_STREAM_OTHER) > 0);
    fault_env_count_stop(fx->fe);
    assert_false(atomic_load(&known));
}

/* A store of few inodes is counted before icount_start returns. */
static void test_small_store_counted_at_once(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 100);
    _Atomic int64_t total = 0;
    _Atomic bool known = false;
    icount_job *j = (icount_job *)1;
    assert_int_equal(icount_start(fx->db, &total, &known, &j), 0);
    assert_null(j);
    assert_true(atomic_load(&known));
    assert_int_equal(atomic_load(&total), 100);
}

/* A damaged record is not current. */
static void test_damaged_record_is_stale(void **state)
{
    fixture *fx = *state;
    put_inodes(fx, 1, 3);
    schema_key k;
    key_icount(&k);
    lsm_write_options wo = {.sync = false};
    ASSERT_OK(lsm_put(fx->db, &wo, k.b, k.len, "short", 5));
    expect_current(fx, false, 0);
    assert_int_equal(loaded(fx), 3);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_saved_count_holds_until_a_write),
        T(test_current_record_spares_the_scan),
        T(test_power_cut_leaves_no_wrong_count),
        T(test_failed_save_leaves_it_stale),
        T(test_failed_read_is_an_error),
        T(test_damaged_record_is_stale),
        T(test_background_count),
        T(test_small_store_counted_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
