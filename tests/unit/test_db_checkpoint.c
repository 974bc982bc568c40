/*
 * test_db_checkpoint.c — lsm_checkpoint: the copy holds every write
 * acknowledged before the call and is a consistent cut (each writer's keys
 * a prefix), deferred batches included; it opens as an ordinary store and
 * verifies clean, with tables linked or copied; it is refused on a store
 * with a sticky error; and an I/O error, a full disk or a power cut at
 * any env call of a checkpoint leaves the live store as it was and nothing
 * at the destination unless it is complete.
 */
#include "fixture.h"

#include "fault_sweep.h"

#include <stdatomic.h>
#include <sys/stat.h>

enum { NKEYS = 300 };

static char live[300], dest[300];

/* Every store a test has open, and the writers of
 * test_checkpoint_while_writers_run: a check that fails leaves the test at
 * once, and the teardown then stops the writers and closes the stores
 * before it removes their files (threads running on removed files would
 * crash the program and hide the failure). */
static lsm_db *open_dbs[4];
static struct {
    atomic_bool stop;
    bool running;
    pthread_t thread;
} writers;

/* db, now closed by the teardown unless the test closes it (close_held). */
static lsm_db *held(lsm_db *db)
{
    for (size_t i = 0; i < sizeof open_dbs / sizeof open_dbs[0]; i++)
        if (open_dbs[i] == NULL) {
            open_dbs[i] = db;
            return db;
        }
    fail_msg("more stores open than open_dbs holds");
    return db;
}

static lsm_status *close_held(lsm_db *db)
{
    for (size_t i = 0; i < sizeof open_dbs / sizeof open_dbs[0]; i++)
        if (open_dbs[i] == db)
            open_dbs[i] = NULL;
    return lsm_close(db);
}

static void stop_writers(void)
{
    atomic_store(&writers.stop, true);
    if (writers.running)
        pthread_join(writers.thread, NULL);
    writers.running = false;
}

static int teardown(void **state)
{
    stop_writers();
    for (size_t i = sizeof open_dbs / sizeof open_dbs[0]; i-- > 0;)
        if (open_dbs[i] != NULL)
            lsm_status_free(close_held(open_dbs[i]));
    return tu_teardown(state);
}

static int setup(void **state)
{
    tu_setup(state);
    tu_path(live, sizeof live, "live");
    tu_path(dest, sizeof dest, "copy");
    return 0;
}

static void key_of(int i, char *k)
{
    sprintf(k, "key%05d", i);
}

static void value_of(int i, char *v)
{
    sprintf(v, "value of key %d %0100d", i, i);
}

static void put_range(lsm_db *db, int from, int to, bool defer)
{
    lsm_write_options wo = {.defer_log = defer};
    char k[32], v[160];
    for (int i = from; i < to; i++) {
        key_of(i, k);
        value_of(i, v);
        ASSERT_OK(lsm_put(db, &wo, k, strlen(k), v, strlen(v)));
    }
}

static void check_range(lsm_db *db, int from, int to)
{
    char k[32], v[160];
    for (int i = from; i < to; i++) {
        key_of(i, k);
        value_of(i, v);
        tu_assert_value(db, k, v);
    }
}

static void assert_absent(lsm_db *db, int i)
{
    char k[32];
    key_of(i, k);
    char *val;
    size_t n;
    ASSERT_FAILS(lsm_get(db, NULL, k, strlen(k), &val, &n), LSM_NOT_FOUND, NULL);
}

/* Keys [0, NKEYS/3) in a table, [NKEYS/3, 2*NKEYS/3) synced in the log
 * and the memtable. */
static lsm_db *open_filled(lsm_env *env)
{
    lsm_db *db = held(tu_open_db(live, env, 1 << 20));
    put_range(db, 0, NKEYS / 3, false);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    put_range(db, NKEYS / 3, 2 * NKEYS / 3, false);
    ASSERT_OK(lsm_sync(db));
    return db;
}

/* The rest of the keys, unsynced, the last 50 deferred (only their
 * markers in the log). */
static void fill_rest(lsm_db *db)
{
    put_range(db, 2 * NKEYS / 3, NKEYS - 50, false);
    put_range(db, NKEYS - 50, NKEYS, true);
}

static void check_copy(const char *d, int nkeys)
{
    lsm_db *db = held(tu_open_existing(d, true));
    check_range(db, 0, nkeys);
    assert_absent(db, nkeys);
    tu_verify_clean(db);
    ASSERT_OK(close_held(db));
}

static nlink_t links_of_a_table(const char *d)
{
    char path[512];
    tu_newest_file(d, "ldb", path, sizeof path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_nlink;
}

/* What root holds, through the env under test (every name but live, copy
 * and, if allow_hidden, ".copy.tmp-..." fails the test); how many. */
static int root_entries(bool allow_hidden)
{
    lsm_env *env = tu_env();
    char **names;
    int n;
    ASSERT_OK(env->get_children(env, tu_dir, &names, &n));
    for (int i = 0; i < n; i++) {
        const char *e = names[i];
        if (strcmp(e, "live") != 0 && strcmp(e, "copy") != 0 &&
            !(allow_hidden && strncmp(e, ".copy.tmp-", 10) == 0))
            fail_msg("%s left in %s", e, tu_dir);
    }
    env_free_children(names, n);
    return n;
}

/* Nothing but the live store and (if `want_dest`) the copy in root: no
 * hidden half-built copy is left behind. */
static void assert_root_holds(bool want_dest)
{
    assert_int_equal(root_entries(false), want_dest ? 2 : 1);
    assert_int_equal(tu_env()->file_exists(tu_env(), dest), want_dest);
}

static void test_checkpoint_links_tables(void **state)
{
    (void)state;
    lsm_db *db = open_filled(NULL);
    fill_rest(db);
    lsm_checkpoint_info info;
    ASSERT_OK(lsm_checkpoint_ex(db, dest, NULL, &info));
    assert_true(info.linked_bytes > 0);
    assert_int_equal(info.copied_bytes, 0);
    assert_true(info.tables >= 2);
    assert_true(info.seq >= NKEYS);
    /* Later writes are not in the copy, and writes to the copy are not in
     * the store. */
    put_range(db, NKEYS, NKEYS + 10, false);
    if (!tu_on_rados()) /* RADOS counts names in an xattr (test_rados_env) */
        assert_true(links_of_a_table(dest) >= 2);
    check_copy(dest, NKEYS);
    lsm_db *c = held(tu_open_db(dest, NULL, 0));
    put_range(c, NKEYS + 20, NKEYS + 21, false);
    ASSERT_OK(close_held(c));
    assert_absent(db, NKEYS + 20);
    ASSERT_FAILS(lsm_checkpoint(db, dest), LSM_INVALID_ARGUMENT, "exists");
    ASSERT_OK(close_held(db));
    assert_root_holds(true);
}

static void test_checkpoint_copies_tables(void **state)
{
    (void)state;
    lsm_db *db = open_filled(NULL);
    fill_rest(db);
    lsm_checkpoint_options o;
    lsm_checkpoint_options_init(&o);
    o.copy_tables = true;
    lsm_checkpoint_info info;
    ASSERT_OK(lsm_checkpoint_ex(db, dest, &o, &info));
    assert_int_equal(info.linked_bytes, 0);
    assert_true(info.copied_bytes > 0);
    if (!tu_on_rados())
        assert_int_equal(links_of_a_table(dest), 1);
    ASSERT_OK(close_held(db));
    check_copy(dest, NKEYS);
}

/* An empty memtable: the cut is the current version (no switch). */
static void test_checkpoint_of_flushed_store(void **state)
{
    (void)state;
    lsm_db *db = open_filled(NULL);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    ASSERT_OK(lsm_checkpoint(db, dest));
    ASSERT_OK(close_held(db));
    check_copy(dest, 2 * NKEYS / 3);
}

/* The store's first memtable (id 0) is the one the cut waits for. */
static void test_checkpoint_of_first_memtable(void **state)
{
    (void)state;
    lsm_db *db = held(tu_open_db(live, NULL, 1 << 20));
    put_range(db, 0, 10, false);
    ASSERT_OK(lsm_checkpoint(db, dest));
    ASSERT_OK(close_held(db));
    check_copy(dest, 10);
}

static void test_checkpoint_refusals(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    lsm_db *db = open_filled(fault_env_env(fe));
    put_range(db, 2 * NKEYS / 3, NKEYS, false);
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, -1);
    lsm_status *failed = lsm_sync(db);
    assert_non_null(failed);
    lsm_status_free(failed);
    lsm_status *s = lsm_checkpoint(db, dest);
    assert_true(tu_mentions(s, "sticky"));
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    lsm_status_free(s);
    assert_root_holds(false);
    lsm_status_free(close_held(db));
    fault_env_free(fe);
    lsm_db *ro = held(tu_open_existing(live, true));
    ASSERT_FAILS(lsm_checkpoint(ro, dest), LSM_READ_ONLY, NULL);
    ASSERT_OK(close_held(ro));
    assert_root_holds(false);
}

/* ------------------------------------------------------------ writers */

enum { WRITERS = 4, CHECKPOINTS = 3 };

struct writer_arg {
    lsm_db *db;
    int id;
    atomic_int acked; /* keys [0, acked) are acknowledged */
    atomic_bool *stop;
    lsm_status *err;
};

static void *writer_main(void *p)
{
    struct writer_arg *a = p;
    char k[32], v[600];
    for (int i = 0; !atomic_load(a->stop); i++) {
        snprintf(k, sizeof k, "w%d-%08d", a->id, i);
        memset(v, 'a' + a->id, sizeof v);
        /* Every fourth key of writer 0 is deferred, its large batch kept
         * out of the log. */
        lsm_write_options wo = {.defer_log = a->id == 0 && i % 4 == 0};
        lsm_status *s = lsm_put(a->db, &wo, k, strlen(k), v, sizeof v);
        if (s != NULL) {
            a->err = s;
            return NULL;
        }
        atomic_store(&a->acked, i + 1);
    }
    return NULL;
}

/* The keys of writer id in the copy: a prefix [0, n), none after; returns n. */
static int writer_prefix(lsm_db *db, int id)
{
    lsm_iter *it = lsm_iter_new(db, NULL);
    assert_non_null(it);
    char k[32];
    snprintf(k, sizeof k, "w%d-", id);
    int n = 0;
    for (lsm_iter_seek(it, k, strlen(k)); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn;
        const char *key = lsm_iter_key(it, &kn);
        if (kn < strlen(k) || memcmp(key, k, strlen(k)) != 0)
            break;
        char want[32];
        snprintf(want, sizeof want, "w%d-%08d", id, n);
        if (kn != strlen(want) || memcmp(key, want, kn) != 0)
            fail_msg("writer %d: key %.*s where %s was due (not a prefix)", id, (int)kn, key,
                     want);
        n++;
    }
    ASSERT_OK(lsm_iter_status(it));
    lsm_iter_free(it);
    return n;
}

static void *run_writers(void *p)
{
    struct writer_arg *w = p;
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    return NULL;
}

/* The writers' state: static, as they may outlive a failed test's frame
 * until the teardown stops them. */
static struct writer_arg writer_args[WRITERS];

static void test_checkpoint_while_writers_run(void **state)
{
    (void)state;
    lsm_db *db = held(tu_open_db(live, NULL, 256 << 10)); /* flushes and compactions run */
    atomic_store(&writers.stop, false);
    for (int i = 0; i < WRITERS; i++)
        writer_args[i] = (struct writer_arg){.db = db, .id = i, .stop = &writers.stop};
    assert_int_equal(pthread_create(&writers.thread, NULL, run_writers, writer_args), 0);
    writers.running = true;
    int before[CHECKPOINTS][WRITERS];
    char names[CHECKPOINTS][320];
    for (int c = 0; c < CHECKPOINTS; c++) {
        usleep(100000);
        for (int i = 0; i < WRITERS; i++)
            before[c][i] = atomic_load(&writer_args[i].acked);
        snprintf(names[c], sizeof names[c], "%s/copy%d", tu_dir, c);
        ASSERT_OK(lsm_checkpoint(db, names[c]));
    }
    usleep(50000);
    stop_writers();
    for (int i = 0; i < WRITERS; i++)
        ASSERT_OK(writer_args[i].err);
    int total = 0;
    for (int c = 0; c < CHECKPOINTS; c++) {
        lsm_db *cp = held(tu_open_existing(names[c], true));
        for (int i = 0; i < WRITERS; i++) {
            int n = writer_prefix(cp, i);
            if (n < before[c][i])
                fail_msg("copy %d: writer %d has %d keys, %d were acknowledged before", c, i, n,
                         before[c][i]);
            assert_true(n <= atomic_load(&writer_args[i].acked));
            total += n - before[c][i];
        }
        tu_verify_clean(cp);
        ASSERT_OK(close_held(cp));
    }
    assert_true(before[CHECKPOINTS - 1][0] > before[0][0]); /* the writers ran */
    ASSERT_OK(close_held(db));
    print_message("checkpoints during writes: %d keys written between reading the counts and "
                  "the cut\n",
                  total);
}

/* ------------------------------------------------------------- faults */

/* Whether root holds anything besides live, copy and hidden leftovers of a
 * checkpoint cut off by a power cut (".copy.tmp-..."). */
static void assert_no_stray(bool allow_hidden)
{
    root_entries(allow_hidden);
}

/* The copy, if it is there, is complete. */
static void check_dest_if_any(void)
{
    if (tu_env()->file_exists(tu_env(), dest))
        check_copy(dest, NKEYS);
}

struct checkpoint_op {
    lsm_db *db;
    const lsm_checkpoint_options *o;
};

static lsm_status *checkpoint_op(void *ctx)
{
    struct checkpoint_op *c = ctx;
    return lsm_checkpoint_ex(c->db, dest, c->o, NULL);
}

/* One run of the sweep: a checkpoint (copying tables if *copy) with fault
 * k at call `index` of `stream`. Returns false once the checkpoint makes
 * fewer calls. */
static bool sweep_one(int stream, uint64_t index, enum fault_kind k, void *copy)
{
    tu_dir_empty();
    fault_env *fe = fault_env_new(tu_env());
    lsm_db *db = open_filled(fault_env_env(fe));
    fill_rest(db);
    ASSERT_OK(lsm_sync(db));
    lsm_checkpoint_options o;
    lsm_checkpoint_options_init(&o);
    o.copy_tables = *(bool *)copy;
    tu_faulted f;
    tu_fault_run(fe, stream, index, k, checkpoint_op, &(struct checkpoint_op){db, &o}, &f);
    /* A failed call on the copy's files fails the checkpoint (the store's
     * own may be shrugged off: a WAL's preallocation is a hint). */
    if (k != FAULT_SYNC_LIE)
        tu_fault_not_claimed(&f, k, "copy", "the checkpoint");
    lsm_status_free(f.s);
    if (!f.cut) {
        /* The store goes on: a write after the checkpoint, unless the fault
         * hit its own log or flush and left it with a sticky error. */
        lsm_write_options wo = {.sync = true};
        lsm_status *w = lsm_put(db, &wo, "after", 5, "x", 1);
        if (w == NULL)
            tu_assert_value(db, "after", "x");
        lsm_status_free(w);
    }
    /* A copy reported done is durable, whole, before the call returned:
     * a power cut now keeps it. */
    if (f.done && !f.cut)
        ASSERT_OK(fault_env_power_cut(fe));
    lsm_status_free(close_held(db));
    fault_env_free(fe);
    if (f.done && !f.cut)
        assert_true(tu_env()->file_exists(tu_env(), dest));
    check_dest_if_any();
    assert_no_stray(f.cut);
    lsm_db *again = held(tu_open_existing(live, false));
    check_range(again, 0, NKEYS);
    tu_verify_clean(again);
    ASSERT_OK(close_held(again));
    return f.fired || stream == FAULT_STREAM_OTHER;
}

static void sweep(bool copy)
{
    enum fault_kind kinds[FAULT_KINDS];
    for (int k = 0; k < FAULT_KINDS; k++)
        kinds[k] = (enum fault_kind)k;
    /* The flush of the cut runs on the background thread: its first
     * calls (the table, its directory entry, the MANIFEST edit). */
    int runs = tu_fault_sweep(kinds, FAULT_KINDS, 1, 12, sweep_one, &copy);
    print_message("%d faulted checkpoints (%s)\n", runs, copy ? "copy" : "link");
}

static void test_checkpoint_fault_sweep_link(void **state)
{
    (void)state;
    sweep(false);
}

static void test_checkpoint_fault_sweep_copy(void **state)
{
    (void)state;
    sweep(true);
}

int main(void)
{
    /* Over RADOS (tests/ceph/run.sh) all but the two fault sweeps, whose
     * hundreds of stores would take minutes of round trips there. */
    size_t on_rados = 6;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_checkpoint_links_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_copies_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_of_flushed_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_of_first_memtable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_while_writers_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_fault_sweep_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_fault_sweep_copy, setup, teardown),
    };
    if (tu_on_rados()) {
        printf("over RADOS: the fault sweeps run over POSIX only\n");
        return _cmocka_run_group_tests("test_db_checkpoint (rados)", tests, on_rados, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
