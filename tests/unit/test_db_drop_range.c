/*
 * test_db_drop_range.c — lsm_delete_files_in_range: whole tables inside a
 * deleted range leave in one MANIFEST edit, the keys around it stay, the
 * inputs of a running compaction are left alone, iterators keep what they
 * read, and a full disk or a failed MANIFEST write loses nothing.
 */
#include "fixture.h"

#include "fault_env.h"

#include <pthread.h>

#define NSIDE 500   /* keys before and after the range */
#define NRANGE 3000 /* keys inside it: many tables */
#define TABLE_BYTES (64u << 10)

static const char RBEGIN[] = "m", REND[] = "n"; /* the range: [m, n) */

static void key_of(char prefix, int i, char *k)
{
    sprintf(k, "%c%06d", prefix, i);
}

/* ~200 bytes that compress little, so tables are many. */
static void value_of(char prefix, int i, int pass, char *v)
{
    uint64_t x = (uint64_t)(unsigned char)prefix << 40 ^ (uint64_t)i << 8 ^ (uint64_t)pass;
    int n = sprintf(v, "%c %d pass %d", prefix, i, pass);
    for (int w = 0; w < 11; w++)
        n += sprintf(v + n, " %016llx", (unsigned long long)tu_xorshift64(&x));
}

static void fill(lsm_db *db, char prefix, int n, int pass)
{
    char k[16], v[256];
    for (int i = 0; i < n; i++) {
        key_of(prefix, i, k);
        value_of(prefix, i, pass, v);
        ASSERT_OK(lsm_put(db, NULL, k, strlen(k), v, strlen(v)));
    }
}

static lsm_db *open_small(lsm_env *env, size_t reserve)
{
    lsm_options o;
    tu_db_options(&o, env, TABLE_BYTES);
    o.target_file_size = TABLE_BYTES;
    o.reserve_bytes = reserve;
    return tu_open_with(&o);
}

/* a, m and z keys, all in tables below level 0. */
static lsm_db *open_filled(lsm_env *env, size_t reserve)
{
    lsm_db *db = open_small(env, reserve);
    fill(db, 'a', NSIDE, 0);
    fill(db, 'm', NRANGE, 0);
    fill(db, 'z', NSIDE, 0);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    return db;
}

/* How many keys of [RBEGIN, REND) a reader sees; their keys into *keys
 * (malloc'd, NRANGE each 16 bytes) if keys is not NULL. */
static int count_range(lsm_db *db, char (**keys)[16])
{
    if (keys)
        *keys = calloc(2 * NRANGE, 16);
    lsm_iter *it = lsm_iter_new(db, NULL);
    assert_non_null(it);
    int n = 0;
    for (lsm_iter_seek(it, RBEGIN, 1); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn;
        const char *k = lsm_iter_key(it, &kn);
        if (memcmp(k, REND, 1) >= 0)
            break;
        if (keys && kn < 16 && n < 2 * NRANGE)
            memcpy((*keys)[n], k, kn);
        n++;
    }
    ASSERT_OK(lsm_iter_status(it));
    lsm_iter_free(it);
    return n;
}

/* The caller's side of the contract: whatever is still in the range goes. */
static void delete_rest(lsm_db *db)
{
    char(*keys)[16];
    int n = count_range(db, &keys);
    for (int i = 0; i < n; i++)
        ASSERT_OK(lsm_delete(db, NULL, keys[i], strlen(keys[i])));
    free(keys);
    assert_int_equal(count_range(db, NULL), 0);
}

static void check_outside(lsm_db *db, int pass)
{
    char k[16], v[256];
    for (int i = 0; i < NSIDE; i++) {
        for (int side = 0; side < 2; side++) {
            char prefix = side ? 'z' : 'a';
            key_of(prefix, i, k);
            value_of(prefix, i, pass, v);
            tu_assert_value(db, k, v);
        }
    }
}

static int count_tables_live(lsm_db *db)
{
    int n = 0;
    char name[64];
    for (int l = 0; l < LSM_LEVELS; l++) {
        snprintf(name, sizeof name, "lsm.num-files-at-level%d", l);
        n += (int)tu_prop(db, name);
    }
    return n;
}

static lsm_status *drop(lsm_db *db)
{
    return lsm_delete_files_in_range(db, RBEGIN, 1, REND, 1);
}

/* Most of the range's bytes leave with its tables, at once and for good
 * (a reopen reads the edit back); the keys around it stay. */
static void test_tables_inside_range_dropped(void **state)
{
    (void)state;
    lsm_db *db = open_filled(NULL, 0);
    uint64_t full = tu_prop(db, "lsm.total-table-bytes");
    uint64_t in_range = lsm_approximate_size(db, RBEGIN, 1, REND, 1);
    assert_true(in_range > 8 * TABLE_BYTES);
    ASSERT_OK(drop(db));
    assert_true(tu_prop(db, "lsm.tables-dropped") >= 8);
    uint64_t left = tu_prop(db, "lsm.total-table-bytes");
    if (left > full - in_range + 2 * TABLE_BYTES) /* at most two boundary tables stay */
        fail_msg("%llu table bytes left of %llu (%llu in the range)", (unsigned long long)left,
                 (unsigned long long)full, (unsigned long long)in_range);
    int rest = count_range(db, NULL);
    assert_true(rest < NRANGE / 4);
    assert_int_equal(tu_tables_on_disk(), count_tables_live(db)); /* swept */
    ASSERT_OK(lsm_close(db));
    db = open_small(NULL, 0);
    assert_int_equal(tu_prop(db, "lsm.total-table-bytes"), left);
    assert_int_equal(count_range(db, NULL), rest);
    delete_rest(db);
    check_outside(db, 0);
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
}

/* Nothing inside the range, or only tables that straddle it: nothing goes. */
static void test_straddling_tables_stay(void **state)
{
    (void)state;
    lsm_db *db = open_filled(NULL, 0);
    uint64_t full = tu_prop(db, "lsm.total-table-bytes");
    ASSERT_OK(lsm_delete_files_in_range(db, "b", 1, "c", 1));             /* empty */
    ASSERT_OK(lsm_delete_files_in_range(db, "m000100", 7, "m000101", 7)); /* in one table */
    assert_int_equal(tu_prop(db, "lsm.tables-dropped"), 0);
    assert_int_equal(tu_prop(db, "lsm.total-table-bytes"), full);
    assert_int_equal(count_range(db, NULL), NRANGE);
    ASSERT_OK(lsm_close(db));
}

static void assert_absent(lsm_db *db, const char *k)
{
    char *got = NULL;
    size_t gn;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &got, &gn);
    if (s == NULL)
        fail_msg("%s shows again: %.*s", k, (int)gn, got);
    assert_int_equal(lsm_status_code(s), LSM_NOT_FOUND);
    lsm_status_free(s);
}

/* A table inside the range holds the deletion of a key that an older
 * table straddling the range's start still holds: it stays, so the key
 * does not show again; dropped with it once that older table is gone. */
static void test_table_shadowing_a_kept_one_stays(void **state)
{
    (void)state;
    lsm_db *db = open_small(NULL, 0);
    ASSERT_OK(lsm_put(db, NULL, "l000000", 7, "old", 3));
    ASSERT_OK(lsm_put(db, NULL, "m000005", 7, "old", 3));
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0)); /* one table [l.., m000005] */
    ASSERT_OK(lsm_delete(db, NULL, "m000005", 7));
    ASSERT_OK(lsm_put(db, NULL, "m000007", 7, "new", 3));
    ASSERT_OK(lsm_compact_range(db, "a", 1, "a", 1)); /* flushed: [m000005, m000007] */
    ASSERT_OK(drop(db));
    assert_absent(db, "m000005");
    assert_int_equal(tu_prop(db, "lsm.tables-dropped"), 0);
    ASSERT_OK(lsm_delete(db, NULL, "m000007", 7));
    ASSERT_OK(lsm_delete(db, NULL, "l000000", 7));
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_int_equal(count_range(db, NULL), 0);
    assert_absent(db, "m000005");
    ASSERT_OK(lsm_close(db));
}

/* An iterator made before the drop reads every key of the dropped tables;
 * their files go only after it is freed (at the next sweep). */
static void test_iterator_keeps_dropped_tables(void **state)
{
    (void)state;
    lsm_db *db = open_filled(NULL, 0);
    int before = tu_tables_on_disk();
    lsm_iter *it = lsm_iter_new(db, NULL);
    assert_non_null(it);
    ASSERT_OK(drop(db));
    assert_int_equal(tu_tables_on_disk(), before);
    int n = 0;
    char v[256];
    for (lsm_iter_seek(it, RBEGIN, 1); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn, vn;
        const char *k = lsm_iter_key(it, &kn);
        if (k[0] != 'm')
            break;
        const char *got = lsm_iter_value(it, &vn);
        value_of('m', n, 0, v);
        assert_int_equal(vn, strlen(v));
        assert_memory_equal(got, v, vn);
        n++;
    }
    ASSERT_OK(lsm_iter_status(it));
    assert_int_equal(n, NRANGE);
    lsm_iter_free(it);
    ASSERT_OK(lsm_put(db, NULL, "b", 1, "x", 1)); /* a flush sweeps */
    ASSERT_OK(lsm_compact_range(db, "b", 1, "b", 1));
    assert_int_equal(tu_tables_on_disk(), count_tables_live(db));
    assert_true(tu_tables_on_disk() < before);
    ASSERT_OK(lsm_close(db));
}

struct compact_arg {
    lsm_db *db;
    lsm_status *s;
};

static void *compact_range_thread(void *p)
{
    struct compact_arg *a = p;
    a->s = lsm_compact_range(a->db, RBEGIN, 1, REND, 1);
    return NULL;
}

/* A compaction of the range runs (held before its MANIFEST edit) while the
 * range is dropped and its remaining keys deleted: its inputs are not
 * dropped, else its outputs would bring their keys back after the deletes
 * looked (the caller found nothing to delete there). */
static void test_running_compaction_inputs_kept(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_filled(fault_env_env(fe), 0);
    fill(db, 'm', NRANGE / 10, 1); /* level-0 tables over the range's first tables */
    ASSERT_OK(lsm_compact_range(db, "b", 1, "b", 1)); /* flushes them */
    fault_env_count_start(fe, NULL, NULL);            /* this thread's syncs are not held */
    fault_env_hold_dir_syncs(fe, true);
    struct compact_arg a = {.db = db};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, compact_range_thread, &a), 0);
    for (int i = 0; i < 2000 && fault_env_held(fe) == 0; i++)
        usleep(5000);
    assert_true(fault_env_held(fe) > 0); /* the compaction wrote its tables */
    ASSERT_OK(drop(db));
    delete_rest(db);
    fault_env_hold_dir_syncs(fe, false);
    assert_int_equal(pthread_join(t, NULL), 0);
    ASSERT_OK(a.s);
    assert_int_equal(count_range(db, NULL), 0);
    check_outside(db, 0);
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

/* The MANIFEST append meets a full disk: the drop frees space, so it gives
 * up the reserve and succeeds; the reopened store agrees. */
static void test_full_disk_drop_uses_reserve(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_filled(fault_env_env(fe), 1u << 20);
    assert_int_equal(tu_prop(db, "lsm.reserve-held"), 1);
    fault_env_fail(fe, FAULT_WRITE, "MANIFEST", ENOSPC, 0, 1);
    ASSERT_OK(drop(db));
    assert_int_equal(tu_prop(db, "lsm.reserve-releases"), 1);
    assert_true(tu_prop(db, "lsm.tables-dropped") >= 8);
    int left = count_range(db, NULL);
    ASSERT_OK(lsm_close(db));
    db = open_small(fault_env_env(fe), 1u << 20);
    assert_int_equal(count_range(db, NULL), left);
    check_outside(db, 0);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

/* The MANIFEST append fails (EIO): the drop fails, nothing is dropped, no
 * key is lost; it succeeds once the disk works, and a power cut right after
 * keeps it (the edit was synced before the call returned). */
static void test_manifest_failure_drops_nothing(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_filled(fault_env_env(fe), 0);
    int tables = count_tables_live(db);
    fault_env_fail(fe, FAULT_WRITE | FAULT_SYNC, "MANIFEST", EIO, 0, 1);
    lsm_status *s = drop(db);
    assert_non_null(s);
    lsm_status_free(s);
    assert_int_equal(tu_prop(db, "lsm.tables-dropped"), 0);
    assert_int_equal(count_tables_live(db), tables);
    assert_int_equal(count_range(db, NULL), NRANGE);
    check_outside(db, 0);
    ASSERT_OK(drop(db));
    int left = count_range(db, NULL);
    assert_true(left < NRANGE / 4);
    ASSERT_OK(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    fault_env_restart(fe);
    db = open_small(fault_env_env(fe), 0);
    assert_int_equal(count_range(db, NULL), left);
    check_outside(db, 0);
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

/* After a sticky error (a failed WAL sync) the drop is refused like any
 * other write, and drops nothing. */
static void test_refused_after_sticky_error(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = open_filled(fault_env_env(fe), 0);
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, -1);
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_put(db, &wo, "b", 1, "x", 1);
    assert_non_null(s);
    lsm_status_free(s);
    s = drop(db);
    assert_non_null(s);
    lsm_status_free(s);
    assert_int_equal(tu_prop(db, "lsm.tables-dropped"), 0);
    assert_int_equal(count_range(db, NULL), NRANGE);
    lsm_status_free(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_tables_inside_range_dropped),      TU_TEST(test_straddling_tables_stay),
        TU_TEST(test_table_shadowing_a_kept_one_stays), TU_TEST(test_iterator_keeps_dropped_tables),
        TU_TEST(test_running_compaction_inputs_kept),   TU_TEST(test_full_disk_drop_uses_reserve),
        TU_TEST(test_manifest_failure_drops_nothing),   TU_TEST(test_refused_after_sticky_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
