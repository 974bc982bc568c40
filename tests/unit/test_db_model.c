/*
 * test_db_model.c — the store against an in-memory model: random puts,
 * deletes, overwrites, snapshots and iterators in both directions, through
 * many flushes, compactions and reopens; power cuts and I/O failures during
 * background work; obsolete files disappearing.
 */
#include "fixture.h"

#include "fault_env.h"
#include "lsm.h"

#include <dirent.h>
#include <unistd.h>

#define NKEYS 1500

/* A model state: the value of each key (NULL = absent). */
typedef struct model {
    char *val[NKEYS];
} model;

static void model_copy(model *dst, const model *src)
{
    for (int i = 0; i < NKEYS; i++)
        dst->val[i] = src->val[i] ? strdup(src->val[i]) : NULL;
}

static void model_free(model *m)
{
    for (int i = 0; i < NKEYS; i++) {
        free(m->val[i]);
        m->val[i] = NULL;
    }
}

static void key_of(int i, char *k)
{
    sprintf(k, "key%06d", i * 7919 % 1000003); /* spread over the key space */
}

static int cur_op; /* for failure messages */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    return tu_xorshift64(&rng);
}

static lsm_db *open_db(lsm_env *env)
{
    lsm_options o;
    tu_db_options(&o, env, 64 << 10);
    o.target_file_size = 32 << 10;
    o.block_size = 1024;
    o.block_cache_size = 256 << 10;
    return tu_open_with(&o);
}

static void random_value(char *v, int op)
{
    int len = (int)(next_rand() % 300);
    int n = sprintf(v, "v%d:", op);
    for (int i = n; i < len; i++)
        v[i] = (char)('a' + (i * 31 + op) % 26);
    v[len > n ? len : n] = '\0';
}

static void apply_random_op(lsm_db *db, model *m, int op)
{
    char k[32], v[400];
    int i = (int)(next_rand() % NKEYS);
    key_of(i, k);
    if (next_rand() % 4 == 0) {
        lsm_status *s = lsm_delete(db, NULL, k, strlen(k));
        if (s)
            fail_msg("op %d delete: %s", op, lsm_status_message(s));
        free(m->val[i]);
        m->val[i] = NULL;
        return;
    }
    random_value(v, op);
    lsm_status *s = lsm_put(db, NULL, k, strlen(k), v, strlen(v));
    if (s)
        fail_msg("op %d put: %s", op, lsm_status_message(s));
    free(m->val[i]);
    m->val[i] = strdup(v);
}

static void check_gets(lsm_db *db, const model *m, const lsm_snapshot *snap)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.snapshot = snap;
    for (int i = 0; i < NKEYS; i++) {
        char k[32], *v;
        size_t n;
        key_of(i, k);
        lsm_status *s = lsm_get(db, &ro, k, strlen(k), &v, &n);
        if (m->val[i] == NULL) {
            if (lsm_status_code(s) != LSM_NOT_FOUND)
                fail_msg("%s: expected absent, got %s", k, s ? lsm_status_message(s) : "a value");
            lsm_status_free(s);
            continue;
        }
        if (s)
            fail_msg("op %d, %s: %s", cur_op, k, lsm_status_message(s));
        if (n != strlen(m->val[i]) || memcmp(v, m->val[i], n) != 0)
            fail_msg("%s: wrong value", k);
        free(v);
    }
}

static int cmp_idx(const void *a, const void *b)
{
    char ka[32], kb[32];
    key_of(*(const int *)a, ka);
    key_of(*(const int *)b, kb);
    return strcmp(ka, kb);
}

/* The iterator stands on key number i. */
static void expect_key(lsm_iter *it, int i)
{
    char k[32];
    key_of(i, k);
    assert_true(lsm_iter_valid(it));
    size_t kn;
    const char *ik = lsm_iter_key(it, &kn);
    assert_int_equal(kn, strlen(k));
    assert_memory_equal(ik, k, kn);
}

/* Walks the iterator forward and backward and compares with the model. */
static void check_iter(lsm_db *db, const model *m, const lsm_snapshot *snap)
{
    static int order[NKEYS];
    int n = 0;
    for (int i = 0; i < NKEYS; i++)
        if (m->val[i])
            order[n++] = i;
    qsort(order, (size_t)n, sizeof(int), cmp_idx);
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.snapshot = snap;
    lsm_iter *it = lsm_iter_new(db, &ro);
    assert_non_null(it);
    int j = 0;
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it), j++) {
        assert_true(j < n);
        expect_key(it, order[j]);
        size_t vn;
        const char *iv = lsm_iter_value(it, &vn);
        assert_int_equal(vn, strlen(m->val[order[j]]));
        assert_memory_equal(iv, m->val[order[j]], vn);
    }
    assert_int_equal(j, n);
    j = n - 1;
    for (lsm_iter_seek_last(it); lsm_iter_valid(it); lsm_iter_prev(it), j--) {
        assert_true(j >= 0);
        expect_key(it, order[j]);
    }
    assert_int_equal(j, -1);
    /* Seeks to random keys, then a step each way. */
    for (int t = 0; t < 50 && n > 2; t++) {
        int x = 1 + (int)(next_rand() % (unsigned)(n - 2));
        char k[32];
        key_of(order[x], k);
        lsm_iter_seek(it, k, strlen(k));
        expect_key(it, order[x]);
        lsm_iter_prev(it);
        expect_key(it, order[x - 1]);
        lsm_iter_next(it);
        lsm_iter_next(it);
        expect_key(it, order[x + 1]);
    }
    assert_null(lsm_iter_status(it));
    lsm_iter_free(it);
}

static int count_files(const char *suffix)
{
    DIR *d = opendir(tu_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len > sl && strcmp(e->d_name + len - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static void test_model_through_flushes_compactions_reopens(void **state)
{
    (void)state;
    model m = {{0}}, snapm = {{0}};
    lsm_db *db = open_db(NULL);
    const lsm_snapshot *snap = NULL;
    for (int op = 1; op <= 40000; op++) {
        cur_op = op;
        apply_random_op(db, &m, op);
        if (op % 5000 == 0) {
            check_gets(db, &m, NULL);
            check_iter(db, &m, NULL);
            if (snap) {
                check_gets(db, &snapm, snap);
                check_iter(db, &snapm, snap);
                lsm_snapshot_release(db, snap);
                model_free(&snapm);
                snap = NULL;
            }
        }
        if (op % 7000 == 0) {
            snap = lsm_snapshot_new(db);
            model_copy(&snapm, &m);
        }
        if (op % 11000 == 0)
            assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
        if (op % 13000 == 0 && snap == NULL) {
            assert_null(lsm_close(db));
            db = open_db(NULL);
            check_gets(db, &m, NULL);
        }
    }
    if (snap) {
        lsm_snapshot_release(db, snap);
        model_free(&snapm);
    }
    assert_true(tu_prop(db, "lsm.flushes") > 10);
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    check_gets(db, &m, NULL);
    check_iter(db, &m, NULL);
    assert_null(lsm_verify(db, NULL, NULL));
    /* Obsolete files are gone: only the tables of the current version stay,
     * and only the live log(s). */
    char *tables = lsm_property(db, "lsm.tables");
    int listed = 0;
    for (char *p = tables; (p = strstr(p, ".ldb")) != NULL; p++)
        listed++;
    free(tables);
    assert_int_equal(count_files(".ldb"), listed);
    if (count_files(".log") > 2) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "ls -l %s >&2", tu_dir);
        assert_int_equal(system(cmd), 0);
        char *st = lsm_property(db, "lsm.stats");
        fprintf(stderr, "%s\n", st);
        free(st);
        fail_msg("obsolete logs left behind");
    }
    assert_null(lsm_close(db));
    db = open_db(NULL);
    check_gets(db, &m, NULL);
    assert_null(lsm_close(db));
    model_free(&m);
}

/* Key and value i of power-cut round r. */
static void round_kv(int r, int i, char k[32], char v[64])
{
    snprintf(k, 32, "r%d-%06d", r, i);
    snprintf(v, 64, "value %d %0*d", i, 40, i);
}

/* Writes with periodic sync writes, cuts the power while flushes and
 * compactions run, reopens: every synced write and everything before it is
 * there. Repeated with cuts at different moments. */
static void test_power_cut_during_background_work(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        fault_env *fe = fault_env_new(lsm_env_default());
        lsm_db *db = open_db(fault_env_env(fe));
        char k[32], v[64];
        int synced_upto = -1;
        int n = 6000 + round * 3000;
        for (int i = 0; i < n; i++) {
            round_kv(round, i, k, v);
            bool sync = (i % 1000 == 999);
            lsm_write_options wo = {.sync = sync};
            assert_null(lsm_put(db, &wo, k, strlen(k), v, strlen(v)));
            if (sync)
                synced_upto = i;
        }
        usleep((useconds_t)(round * 3000)); /* let background work get going */
        assert_null(fault_env_power_cut(fe));
        lsm_status_free(lsm_close(db));
        db = open_db(fault_env_env(fe));
        bool gap = false;
        for (int i = 0; i < n; i++) {
            round_kv(round, i, k, v);
            char *got;
            size_t gn;
            lsm_status *s = lsm_get(db, NULL, k, strlen(k), &got, &gn);
            if (i <= synced_upto && s)
                fail_msg("round %d: synced %s lost: %s", round, k, lsm_status_message(s));
            if (s == NULL && gap)
                fail_msg("round %d: %s present after a gap", round, k);
            if (s == NULL) {
                assert_int_equal(gn, strlen(v));
                assert_memory_equal(got, v, gn);
                free(got);
            } else {
                gap = true;
            }
            lsm_status_free(s);
        }
        assert_null(lsm_verify(db, NULL, NULL));
        assert_null(lsm_close(db));
        fault_env_free(fe);
        tu_teardown(NULL);
        tu_setup(NULL);
    }
}

/* A MANIFEST write that fails puts the store into the error state; it
 * reopens consistent with every acknowledged write. */
static void test_manifest_failure(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db(fault_env_env(fe));
    fault_env_fail(fe, FAULT_SYNC, "MANIFEST", EIO, 0, -1);
    char k[32];
    int acked = 0;
    for (int i = 0; i < 20000; i++) {
        snprintf(k, sizeof(k), "m%06d", i);
        lsm_status *s = lsm_put(db, NULL, k, strlen(k), k, strlen(k));
        if (s) {
            assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
            lsm_status_free(s);
            break;
        }
        acked = i + 1;
    }
    assert_true(acked < 20000); /* the flush's MANIFEST sync failed, writes stopped */
    char *err = lsm_property(db, "lsm.background-error");
    assert_non_null(strstr(err, "MANIFEST"));
    free(err);
    lsm_status_free(lsm_close(db));
    fault_env_clear_failures(fe);
    db = open_db(fault_env_env(fe));
    for (int i = 0; i < acked; i++) {
        snprintf(k, sizeof(k), "m%06d", i);
        char *got;
        size_t gn;
        lsm_status *s = lsm_get(db, NULL, k, strlen(k), &got, &gn);
        if (s)
            fail_msg("%s lost: %s", k, lsm_status_message(s));
        assert_int_equal(gn, strlen(k)); /* each value is its key */
        assert_memory_equal(got, k, gn);
        free(got);
    }
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_model_through_flushes_compactions_reopens),
        TU_TEST(test_power_cut_during_background_work),
        TU_TEST(test_manifest_failure),
    };
    return cmocka_run_group_tests_name("db_model", tests, NULL, NULL);
}
