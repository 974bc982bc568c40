/*
 * test_db.c — the store as a whole: reads and writes, iterators, snapshots,
 * recovery, the write queue's group commit and sync rule, sticky errors,
 * power cuts (fault env) and process crashes (fork + _exit).
 */
#include "fixture.h"

#include "fault_env.h"
#include "lsm.h"

#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static void put(lsm_db *db, const char *k, const char *v, bool sync)
{
    lsm_write_options wo = {.sync = sync};
    lsm_status *s = lsm_put(db, &wo, k, strlen(k), v, strlen(v));
    if (s)
        fail_msg("put %s: %s", k, lsm_status_message(s));
}

/* The value of k as a malloc'd string, or NULL if absent. */
static char *get(lsm_db *db, const char *k)
{
    char *v;
    size_t n;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &v, &n);
    if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        return NULL;
    }
    if (s)
        fail_msg("get %s: %s", k, lsm_status_message(s));
    char *z = malloc(n + 1);
    memcpy(z, v, n);
    z[n] = '\0';
    free(v);
    return z;
}

static void assert_value(lsm_db *db, const char *k, const char *want)
{
    char *v = get(db, k);
    if (want == NULL)
        assert_null(v);
    else {
        assert_non_null(v);
        assert_string_equal(v, want);
    }
    free(v);
}

/* Key i of a data set whose values are the keys: <prefix><i, 5 digits>. */
static void key_of(char k[32], const char *prefix, int i)
{
    snprintf(k, 32, "%s%05d", prefix, i);
}

/* Keys 0..n-1 of such a data set are all there. */
static void assert_keys(lsm_db *db, const char *prefix, int n)
{
    char k[32];
    for (int i = 0; i < n; i++) {
        key_of(k, prefix, i);
        assert_value(db, k, k);
    }
}

/* ------------------------------------------------------------------ basics */

static void test_put_get_delete(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    put(db, "a", "1", false);
    put(db, "b", "2", false);
    put(db, "a", "3", false);
    assert_value(db, "a", "3");
    assert_value(db, "b", "2");
    assert_value(db, "c", NULL);
    lsm_status *s = lsm_delete(db, NULL, "a", 1);
    assert_null(s);
    assert_value(db, "a", NULL);
    put(db, "", "empty key", false);
    assert_value(db, "", "empty key");
    assert_null(lsm_close(db));
}

static void test_batch_atomic_and_snapshot(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    put(db, "x", "old", false);
    const lsm_snapshot *snap = lsm_snapshot_new(db);
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "x", 1, "new", 3));
    assert_true(lsm_batch_put(b, "y", 1, "yy", 2));
    assert_true(lsm_batch_delete(b, "x", 1));
    assert_true(lsm_batch_put(b, "x", 1, "newest", 6));
    assert_null(lsm_write(db, NULL, b));
    lsm_batch_free(b);
    assert_value(db, "x", "newest");
    assert_value(db, "y", "yy");

    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.snapshot = snap;
    char *v;
    size_t n;
    assert_null(lsm_get(db, &ro, "x", 1, &v, &n));
    assert_memory_equal(v, "old", 3);
    free(v);
    ASSERT_FAILS(lsm_get(db, &ro, "y", 1, &v, &n), LSM_NOT_FOUND, NULL);
    lsm_snapshot_release(db, snap);
    assert_int_equal(tu_prop(db, "lsm.sequence"), 5);
    assert_null(lsm_close(db));
}

/* Collects the iterator's keys forward or backward into one string. */
static void collect(lsm_iter *it, bool backward, char *out, size_t cap)
{
    out[0] = '\0';
    for (backward ? lsm_iter_seek_last(it) : lsm_iter_seek_first(it); lsm_iter_valid(it);
         backward ? lsm_iter_prev(it) : lsm_iter_next(it)) {
        size_t kn, vn;
        const char *k = lsm_iter_key(it, &kn);
        const char *v = lsm_iter_value(it, &vn);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%.*s=%.*s ", (int)kn, k, (int)vn, v);
    }
}

static void test_iterator_both_directions(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    put(db, "b", "1", false);
    put(db, "d", "2", false);
    put(db, "a", "0", false);
    put(db, "c", "x", false);
    assert_null(lsm_delete(db, NULL, "c", 1));
    put(db, "d", "3", false);
    lsm_iter *it = lsm_iter_new(db, NULL);
    put(db, "e", "later", false); /* not seen: the iterator is a snapshot */
    char got[256];
    collect(it, false, got, sizeof(got));
    assert_string_equal(got, "a=0 b=1 d=3 ");
    collect(it, true, got, sizeof(got));
    assert_string_equal(got, "d=3 b=1 a=0 ");

    lsm_iter_seek(it, "bb", 2);
    assert_true(lsm_iter_valid(it));
    size_t n;
    assert_memory_equal(lsm_iter_key(it, &n), "d", 1);
    lsm_iter_prev(it); /* switch direction */
    assert_memory_equal(lsm_iter_key(it, &n), "b", 1);
    lsm_iter_next(it); /* and back */
    assert_memory_equal(lsm_iter_key(it, &n), "d", 1);
    lsm_iter_next(it);
    assert_false(lsm_iter_valid(it));
    assert_null(lsm_iter_status(it));
    lsm_iter_free(it);
    assert_null(lsm_close(db));
}

/* ---------------------------------------------------------------- recovery */

/* Key and (long) value i of the reopen test. */
static void long_kv(int i, char k[32], char v[128])
{
    snprintf(k, 32, "key%06d", i);
    snprintf(v, 128, "value-%d-%0100d", i, i);
}

static void test_reopen_after_close(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 64 << 10); /* small memtables: several logs */
    char k[32], v[128];
    for (int i = 0; i < 5000; i++) {
        long_kv(i, k, v);
        put(db, k, v, false);
    }
    assert_true(tu_prop(db, "lsm.memtable-switches") > 2);
    assert_null(lsm_delete(db, NULL, "key000007", 9));
    assert_null(lsm_close(db));

    db = tu_open(NULL, 64 << 10);
    for (int i = 0; i < 5000; i++) {
        long_kv(i, k, v);
        assert_value(db, k, i == 7 ? NULL : v);
    }
    assert_int_equal(tu_prop(db, "lsm.sequence"), 5001);
    put(db, "after", "reopen", false);
    assert_null(lsm_close(db));
    db = tu_open(NULL, 64 << 10);
    assert_value(db, "after", "reopen");
    assert_int_equal(tu_prop(db, "lsm.sequence"), 5002);
    assert_null(lsm_close(db));
}

/* A memtable switches when its content fills the write buffer, whatever
 * blocks its memory comes in (pooled blocks only for large buffers). */
static void test_memtable_switches_by_content(void **state)
{
    (void)state;
    size_t sizes[] = {64 << 10, 8 << 20};
    for (int s = 0; s < 2; s++) {
        lsm_db *db = tu_open(NULL, sizes[s]);
        char k[32], v[128];
        for (int i = 0; i < 100; i++) { /* 20 KiB */
            long_kv(i, k, v);
            put(db, k, v, false);
        }
        assert_int_equal(tu_prop(db, "lsm.memtable-switches"), 0);
        assert_null(lsm_close(db));
        tu_dir_empty();
    }
}

/* Sequence numbers stay above everything in the tables across reopens, even
 * when every log was flushed: a newer write is never shadowed by an older. */
static void test_overwrite_after_flush_and_reopen(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    put(db, "k", "one", false);
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0)); /* now in a table */
    assert_null(lsm_close(db));
    db = tu_open(NULL, 0);
    put(db, "k", "two", false);
    assert_value(db, "k", "two");
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_value(db, "k", "two");
    assert_null(lsm_close(db));
    db = tu_open(NULL, 0);
    assert_value(db, "k", "two");
    assert_null(lsm_close(db));
}

/* Versions of key i: v<version>-<i>, padded to 100 bytes (random enough
 * that lz4 does not hide a version written twice). */
static void version_value(char v[101], int version, int i)
{
    uint64_t x = (uint64_t)i * 2654435761u + (uint64_t)version * 40503u + 1;
    int n = snprintf(v, 101, "v%d-%d-", version, i);
    for (; n < 100; n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[n] = (char)('a' + x % 26);
    }
    v[100] = '\0';
}

static void put_versions(lsm_db *db, int version, int n)
{
    char k[32], v[101];
    for (int i = 0; i < n; i++) {
        key_of(k, "k", i);
        version_value(v, version, i);
        put(db, k, v, false);
    }
}

static void assert_version(lsm_db *db, const lsm_snapshot *snap, int version, int n)
{
    char k[32], want[101];
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.snapshot = snap;
    for (int i = 0; i < n; i++) {
        key_of(k, "k", i);
        version_value(want, version, i);
        char *v = NULL;
        size_t vn = 0;
        lsm_status *s = lsm_get(db, &ro, k, strlen(k), &v, &vn);
        if (s != NULL)
            fail_msg("%s: %s", k, lsm_status_message(s));
        assert_int_equal(vn, 100);
        assert_memory_equal(v, want, 100);
        free(v);
    }
}

/* A flush writes only the newest version of a key its memtable holds
 * several of, when no snapshot sees an older one (before: every version, 3
 * times the bytes here: a small file's record is rewritten by each write to
 * it); one a snapshot sees stays. */
static void test_flush_drops_shadowed_versions(void **state)
{
    (void)state;
    enum { N = 2000 };
    lsm_db *db = tu_open(NULL, 4 << 20);
    for (int version = 0; version < 3; version++)
        put_versions(db, version, N);
    assert_null(lsm_close(db)); /* its memtable flushed */
    db = tu_open(NULL, 4 << 20);
    uint64_t bytes = tu_prop(db, "lsm.total-table-bytes");
    if (bytes > (uint64_t)N * 100 * 3 / 2)
        fail_msg("the flush wrote %llu bytes for %d keys of 100-byte values",
                 (unsigned long long)bytes, N);
    assert_version(db, NULL, 2, N);
    /* A snapshot of version 3: its values stay through the flush. */
    put_versions(db, 3, N);
    const lsm_snapshot *snap = lsm_snapshot_new(db);
    put_versions(db, 4, N);
    put_versions(db, 5, N);
    assert_null(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_version(db, snap, 3, N);
    assert_version(db, NULL, 5, N);
    lsm_snapshot_release(db, snap);
    assert_null(lsm_close(db));
}

static void test_second_open_is_busy(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    lsm_options o;
    lsm_options_init(&o);
    lsm_db *db2 = NULL;
    ASSERT_FAILS(lsm_open(&o, tu_dir, &db2), LSM_BUSY, "in use");
    assert_null(db2);
    assert_null(lsm_close(db));
}

static void test_not_a_store(void **state)
{
    (void)state;
    lsm_options o;
    lsm_options_init(&o);
    lsm_db *db = NULL;
    /* An empty dir, no create_if_missing. */
    ASSERT_FAILS(lsm_open(&o, tu_dir, &db), LSM_INVALID_ARGUMENT, "not an lsmfs store");
    char lockpath[300];
    snprintf(lockpath, sizeof(lockpath), "%s/LOCK", tu_dir);
    assert_int_equal(access(lockpath, F_OK), -1); /* a foreign dir is left untouched */

    char path[300];
    snprintf(path, sizeof(path), "%s/CURRENT", tu_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs("garbage", f) >= 0);
    assert_int_equal(fclose(f), 0);
    ASSERT_FAILS(lsm_open(&o, tu_dir, &db), LSM_CORRUPTION, NULL);
    assert_null(db);
}

/* The forked child of test_process_crash: writes, some writes synced, and
 * returns with the store open. It must not use cmocka (a failure would
 * unwind into the child's copy of the test runner): false on any error. */
static bool child_writes(void)
{
    lsm_options o;
    tu_db_options(&o, NULL, 64 << 10);
    lsm_db *db = NULL;
    if (lsm_open(&o, tu_dir, &db) != NULL)
        return false;
    char k[32];
    for (int i = 0; i < 3000; i++) {
        key_of(k, "k", i);
        lsm_write_options wo = {.sync = i % 100 == 0};
        if (lsm_put(db, &wo, k, strlen(k), k, strlen(k)) != NULL)
            return false;
    }
    return true;
}

/* A child process writes and dies without closing; everything it wrote
 * (synced or not) was in the OS and must be there. */
static void test_process_crash(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_writes() ? 0 : 1); /* no lsm_close */
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    lsm_db *db = tu_open(NULL, 64 << 10);
    assert_keys(db, "k", 3000);
    assert_null(lsm_close(db));
}

/* ------------------------------------------------------------ group commit */

struct writer_arg {
    lsm_db *db;
    int id;
    int n;
    bool sync;
};

/* Key and value i of writer `id`. */
static void writer_kv(int id, int i, char k[32], char v[32])
{
    snprintf(k, 32, "t%d-%05d", id, i);
    snprintf(v, 32, "v%d", i);
}

/* On a worker thread: no cmocka; a failed write aborts the program. */
static void *sync_writer(void *p)
{
    struct writer_arg *a = p;
    char k[32], v[32];
    for (int i = 0; i < a->n; i++) {
        writer_kv(a->id, i, k, v);
        lsm_write_options wo = {.sync = a->sync};
        lsm_status *s = lsm_put(a->db, &wo, k, strlen(k), v, strlen(v));
        if (s) {
            fprintf(stderr, "put: %s\n", lsm_status_message(s));
            abort();
        }
    }
    return NULL;
}

enum { MAX_WRITERS = 8 };

/* Runs `threads` writers of `per` keys at once; writer i syncs every write
 * when i % sync_stride == 0 (1: all of them, 2: the even ones). */
static void run_writers(lsm_db *db, int threads, int per, int sync_stride)
{
    struct writer_arg a[MAX_WRITERS];
    assert_true(threads <= MAX_WRITERS);
    for (int i = 0; i < threads; i++)
        a[i] = (struct writer_arg){db, i, per, i % sync_stride == 0};
    tu_run_threads(threads, sync_writer, a, sizeof(a[0]));
}

/* Every write of writers 0, step, 2 * step, ... below `threads` is there. */
static void check_writers(lsm_db *db, int threads, int step, int per)
{
    char k[32], v[32];
    for (int i = 0; i < threads; i += step)
        for (int j = 0; j < per; j++) {
            writer_kv(i, j, k, v);
            assert_value(db, k, v);
        }
}

static void test_group_commit_shares_syncs(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    fault_env_set_sync_delay_us(fe, 2000); /* a slow disk: 2 ms per fsync */
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    enum { THREADS = 8, PER = 100 };
    uint64_t syncs0 = tu_prop(db, "lsm.wal-syncs");
    run_writers(db, THREADS, PER, 1);
    uint64_t syncs = tu_prop(db, "lsm.wal-syncs") - syncs0;
    uint64_t groups = tu_prop(db, "lsm.write-groups");
    print_message("%d sync writes: %llu syncs, %llu groups\n", THREADS * PER,
                  (unsigned long long)syncs, (unsigned long long)groups);
    /* Eight writers sharing fsyncs: at least ~3 writes per sync even on a
     * loaded machine (it is ~8 when idle). */
    assert_true(syncs * 3 <= THREADS * PER);
    assert_true(syncs >= 1);
    /* Sequence numbers are contiguous: one per write. */
    assert_int_equal(tu_prop(db, "lsm.sequence"), THREADS * PER);
    check_writers(db, THREADS, 1, PER);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

struct slow_sync_arg {
    lsm_db *db;
    _Atomic bool done;
};

static void *slow_sync_writer(void *p)
{
    struct slow_sync_arg *a = p;
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_put(a->db, &wo, "a", 1, "1", 1);
    if (s) {
        fprintf(stderr, "put: %s\n", lsm_status_message(s));
        abort();
    }
    atomic_store(&a->done, true);
    return NULL;
}

/* The sync stage is off the queue: while one writer waits for a (slow) WAL
 * sync, others keep writing without waiting for it; a sync write that
 * arrives meanwhile gets a sync of its own after it, and both survive a
 * power cut. */
static void test_writes_proceed_during_sync(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    fault_env_set_sync_delay_us(fe, 1000000); /* a 1 s fsync */
    struct slow_sync_arg a = {.db = db};
    atomic_init(&a.done, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_sync_writer, &a), 0);
    while (tu_prop(db, "lsm.sequence") < 1) /* "a" is written, its sync runs */
        usleep(1000);
    char k[32];
    for (int i = 0; i < 50; i++) {
        key_of(k, "n", i);
        put(db, k, k, false);
    }
    assert_false(atomic_load(&a.done)); /* they did not wait for its sync */
    assert_value(db, "a", "1");         /* visible, not yet acknowledged */
    put(db, "b", "2", true);            /* waits for a sync after a's */
    pthread_join(t, NULL);
    assert_true(atomic_load(&a.done));
    assert_int_equal(fault_env_syncs(fe) >= 2, true);
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    fault_env_set_sync_delay_us(fe, 0);
    db = tu_open(fault_env_env(fe), 0);
    assert_value(db, "a", "1");
    assert_value(db, "b", "2");
    for (int i = 0; i < 50; i++) { /* before b: durable with it */
        key_of(k, "n", i);
        assert_value(db, k, k);
    }
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Opens a store on fe whose syncs take 300 ms and starts a thread that
 * sync-writes "a"; returns once that write's sync is in the env. */
static lsm_db *start_slow_sync(fault_env *fe, struct slow_sync_arg *a, pthread_t *t)
{
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    fault_env_set_sync_delay_us(fe, 300000);
    a->db = db;
    atomic_init(&a->done, false);
    assert_int_equal(pthread_create(t, NULL, slow_sync_writer, a), 0);
    while (tu_prop(db, "lsm.sequence") < 1)
        usleep(1000);
    usleep(20000); /* past its gather (40 us) */
    return db;
}

/* lsm_write_may_wait says so before a writer would block: not on an idle
 * store; yes while the memtable is full and another cannot be made (the
 * immutable one's flush is stuck in a 1 s table sync, and two memtables
 * are all the memory allowed); no again once the flush is done. */
static void test_write_may_wait_hint(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), 64 * 1024);
    o.max_memtable_bytes = 128 * 1024;
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(&o, tu_dir, &db));
    assert_false(lsm_write_may_wait(db));
    fault_env_set_sync_delay_us(fe, 1000000);
    char k[32], v[200];
    memset(v, 'v', sizeof v - 1);
    v[sizeof v - 1] = '\0';
    for (int i = 0; tu_prop(db, "lsm.immutable-memtables") == 0; i++) {
        assert_true(i < 10000);
        key_of(k, "k", i);
        put(db, k, v, false);
    }
    assert_true(lsm_write_may_wait(db)); /* the flush waits for its sync */
    fault_env_set_sync_delay_us(fe, 0);
    for (int t = 0; t < 5000 && tu_prop(db, "lsm.immutable-memtables") > 0; t++)
        usleep(1000);
    assert_int_equal(tu_prop(db, "lsm.immutable-memtables"), 0);
    assert_false(lsm_write_may_wait(db));
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Cuts the power under db and opens the store again. */
static lsm_db *power_cut_and_reopen(fault_env *fe, lsm_db *db)
{
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db)); /* the cut made its files dead */
    fault_env_set_sync_delay_us(fe, 0);
    return tu_open(fault_env_env(fe), 0);
}

/* Syncs overlap: a sync write published after a (slow) sync started does
 * not wait for it to end but starts its own at once; both survive a power
 * cut. */
static void test_syncs_overlap(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    struct slow_sync_arg a;
    pthread_t t;
    lsm_db *db = start_slow_sync(fe, &a, &t);
    put(db, "b", "2", true);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-overlapped"), 1);
    pthread_join(t, NULL);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs"), 2);
    db = power_cut_and_reopen(fe, db);
    assert_value(db, "a", "1");
    assert_value(db, "b", "2");
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

struct keyed_sync_arg {
    lsm_db *db;
    const char *key;
};

static void *keyed_sync_writer(void *p)
{
    struct keyed_sync_arg *a = p;
    put(a->db, a->key, a->key, true);
    return NULL;
}

/* Slow syncs (a network store's round trip) do not overlap: after a slow
 * sync the store runs one at a time, so three sync writes that arrive while
 * a's sync runs wait and share the next one (with two at once, b would
 * start its own beside a's and c and d a third): two syncs for the four,
 * never two running at once; every write survives a power cut. */
static void test_slow_syncs_shared(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-overlap-max"), 2);
    fault_env_set_sync_delay_us(fe, 20000);
    put(db, "w", "0", true);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-overlap-max"), 1);
    fault_env_set_sync_delay_us(fe, 300000);
    uint64_t syncs = tu_prop(db, "lsm.wal-syncs");
    struct keyed_sync_arg a[3] = {{db, "a"}, {db, "b"}, {db, "c"}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, keyed_sync_writer, &a[i]), 0);
        while (tu_prop(db, "lsm.sequence") < (uint64_t)i + 2 && i == 0)
            usleep(1000);
        usleep(20000); /* a's sync is running */
    }
    put(db, "d", "d", true);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs") - syncs, 2);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-most-running"), 1);
    db = power_cut_and_reopen(fe, db);
    const char *keys[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        assert_value(db, keys[i], keys[i]);
    assert_value(db, "w", "0");
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* An overlapping sync that fails fails its own writers and, sticky, every
 * later write — but not a write the other sync made durable. */
static void test_overlapping_sync_fails(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    struct slow_sync_arg a;
    pthread_t t;
    lsm_db *db = start_slow_sync(fe, &a, &t);
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, 1); /* b's sync, not a's */
    lsm_write_options wo = {.sync = true};
    ASSERT_FAILS(lsm_put(db, &wo, "b", 1, "2", 1), LSM_IO_ERROR, NULL);
    pthread_join(t, NULL); /* a's own sync succeeded: slow_sync_writer checks */
    assert_true(atomic_load(&a.done));
    ASSERT_FAILS(lsm_put(db, &wo, "c", 1, "3", 1), LSM_IO_ERROR, NULL);
    db = power_cut_and_reopen(fe, db);
    assert_value(db, "a", "1");
    assert_value(db, "c", NULL);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* The earlier of two overlapping syncs fails while the later one, which
 * covers its group too, still runs: that group waits for the later sync's
 * verdict (ARCHITECTURE.md invariant 8) — the store once asserted here (run_sync). Both
 * writes succeed, the failure is sticky, both survive a power cut. */
static void test_earlier_overlapping_sync_fails(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    struct slow_sync_arg a;
    pthread_t t;
    fault_env_set_sync_fails_late(fe, true);
    lsm_db *db = start_slow_sync(fe, &a, &t);
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, 1); /* a's sync, at its end */
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(db, &wo, "b", 1, "2", 1)); /* b's sync started during a's */
    pthread_join(t, NULL); /* a succeeded too (slow_sync_writer aborts if not) */
    assert_true(atomic_load(&a.done));
    ASSERT_FAILS(lsm_put(db, &wo, "c", 1, "3", 1), LSM_IO_ERROR, NULL);
    db = power_cut_and_reopen(fe, db);
    assert_value(db, "a", "1");
    assert_value(db, "b", "2");
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Appends n 1000-byte chunks under "F" + big-endian index, each batch also
 * rewriting one small "I" record (as the filesystem's data writes do). */
static void append_chunks(lsm_db *db, int n)
{
    char v[1000];
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        unsigned char k[9] = {'F'};
        for (int b = 0; b < 8; b++)
            k[1 + b] = (unsigned char)((uint64_t)i >> (56 - 8 * b));
        for (size_t j = 0; j < sizeof(v); j++) /* incompressible */
            v[j] = (char)((x = x * 1103515245u + 12345u) >> 24);
        lsm_batch *bt = lsm_batch_new();
        assert_true(lsm_batch_put(bt, k, sizeof(k), v, sizeof(v)));
        assert_true(lsm_batch_put(bt, "Irec", 4, &i, sizeof(i)));
        ASSERT_OK(lsm_write(db, NULL, bt));
        lsm_batch_free(bt);
    }
}

/* The first byte of a key as its table partition. */
static uint32_t first_byte(const void *key, size_t n)
{
    return n ? *(const unsigned char *)key : 0;
}

static void one_kind(void *ctx, const char *lo, const char *hi)
{
    (void)ctx;
    assert_int_equal(lo[0], hi[0]); /* one kind from smallest to largest */
}

/* With a partition per first byte no table mixes key kinds, so chunks
 * appended in key order make tables that overlap no other and compaction
 * moves them down instead of rewriting them. */
static void test_table_partitions(void **state)
{
    (void)state;
    lsm_options o;
    tu_db_options(&o, NULL, 64 << 10);
    o.table_partition = first_byte;
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(&o, tu_dir, &db));
    enum { N = 3000 };
    append_chunks(db, N);
    for (int i = 0; i < 1000 && (tu_prop(db, "lsm.immutable-memtables") > 0 ||
                                 tu_prop(db, "lsm.level0-load") >= 4);
         i++)
        usleep(10000); /* flushes and level-0 compactions settle */
    assert_true(tu_prop(db, "lsm.level0-load") < 4);
    int tables = tu_each_table(db, one_kind, NULL);
    assert_true(tables >= 2);
    /* The chunks' ~3 MB were moved, not rewritten. */
    assert_true(tu_prop(db, "lsm.compaction-bytes-written") < N * 1000 / 4);
    char k[9] = {'F', 0, 0, 0, 0, 0, 0, (char)(1234 >> 8), (char)(1234 & 0xff)};
    char *v = NULL;
    size_t vn = 0;
    ASSERT_OK(lsm_get(db, NULL, k, sizeof(k), &v, &vn));
    assert_int_equal(vn, 1000);
    free(v);
    assert_null(lsm_close(db));
}

/* Sync writers mixed with non-sync writers; after every sync write returns,
 * a power cut must keep it. Checked by cutting power at the end and
 * verifying every sync-acknowledged write (and every write before it in the
 * same thread) survived. */
static void test_sync_rule_and_power_cut(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    fault_env_set_sync_delay_us(fe, 500);
    lsm_db *db = tu_open(fault_env_env(fe), 64 << 10);
    enum { THREADS = 6, PER = 300 };
    run_writers(db, THREADS, PER, 2); /* even threads sync */
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db)); /* the cut made its files dead */
    db = tu_open(fault_env_env(fe), 64 << 10);
    check_writers(db, THREADS, 2, PER);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* One thread, writes in order, some synced: after a power cut what is left
 * is a prefix of the write order that includes every synced write. */
static void test_power_cut_leaves_prefix(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 64 << 10);
    enum { N = 4000 };
    char k[32];
    int last_synced = -1;
    for (int i = 0; i < N; i++) {
        key_of(k, "p", i);
        bool sync = (i % 997 == 0);
        put(db, k, k, sync);
        if (sync)
            last_synced = i;
    }
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    db = tu_open(fault_env_env(fe), 64 << 10);
    int present = 0;
    bool gap = false;
    for (int i = 0; i < N; i++) {
        key_of(k, "p", i);
        char *v = get(db, k);
        if (v && gap)
            fail_msg("%s survived but an earlier write did not", k);
        if (v)
            present++;
        else
            gap = true;
        free(v);
    }
    assert_true(present > last_synced);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

static void test_barrier_makes_earlier_writes_durable(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 64 << 10);
    char k[32];
    for (int i = 0; i < 2000; i++) { /* crosses several log rotations */
        key_of(k, "b", i);
        put(db, k, k, false);
    }
    uint64_t before = tu_prop(db, "lsm.wal-syncs");
    assert_null(lsm_sync(db));
    assert_true(tu_prop(db, "lsm.wal-syncs") >= before + 1);
    assert_null(lsm_sync(db)); /* nothing new: no second fsync needed */
    assert_int_equal(tu_prop(db, "lsm.barriers"), 2);
    put(db, "lost", "not synced", false);
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    db = tu_open(fault_env_env(fe), 64 << 10);
    assert_keys(db, "b", 2000);
    assert_value(db, "lost", NULL);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Writes replayed after a crash of the process (never synced) must be made
 * durable by recovery: a later sync promises "and everything before me". */
static void test_replayed_writes_become_durable(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    put(db, "unsynced", "before the crash", false);
    /* Stand-in for the process dying: its log is never synced. */
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, -1);
    lsm_status_free(lsm_close(db));
    fault_env_clear_failures(fe);
    db = tu_open(fault_env_env(fe), 0);
    put(db, "after", "reopen", true); /* a sync write in the new log */
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    db = tu_open(fault_env_env(fe), 0);
    assert_value(db, "after", "reopen");
    assert_value(db, "unsynced", "before the crash");
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* lsm_sync_upto syncs only when the write is not yet durable. */
static void test_sync_upto(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "a", 1, "1", 1));
    uint64_t seq = 0;
    assert_null(lsm_write_seq(db, NULL, b, &seq));
    assert_int_equal(seq, tu_prop(db, "lsm.sequence"));
    uint64_t syncs = tu_prop(db, "lsm.wal-syncs");
    assert_null(lsm_sync_upto(db, seq));
    assert_int_equal(tu_prop(db, "lsm.wal-syncs"), syncs + 1);
    assert_null(lsm_sync_upto(db, seq)); /* already durable: no disk access */
    assert_int_equal(tu_prop(db, "lsm.wal-syncs"), syncs + 1);
    lsm_batch_free(b);
    assert_null(lsm_close(db));
}

static void test_sync_failure_is_sticky(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    put(db, "before", "ok", true);
    fault_env_fail(fe, FAULT_SYNC, ".log", EIO, 0, 1);
    lsm_write_options wo = {.sync = true};
    ASSERT_FAILS(lsm_put(db, &wo, "k", 1, "v", 1), LSM_IO_ERROR, NULL);
    /* The failure was injected once, but the store must not trust the log
     * again: later writes fail too, synced or not. */
    wo.sync = false;
    ASSERT_FAILS(lsm_put(db, &wo, "k2", 2, "v", 1), LSM_IO_ERROR, NULL);
    ASSERT_FAILS(lsm_sync(db), LSM_IO_ERROR, NULL);
    assert_value(db, "before", "ok"); /* reads keep working */
    char *err = lsm_property(db, "lsm.background-error");
    assert_non_null(err);
    assert_true(strlen(err) > 0);
    free(err);
    ASSERT_FAILS(lsm_close(db), LSM_IO_ERROR, NULL);
    fault_env_free(fe);
}

static void test_write_failure_enospc(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, -1);
    lsm_status *s = lsm_put(db, NULL, "k", 1, "v", 1);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    assert_int_equal(lsm_status_errno(s), ENOSPC);
    lsm_status_free(s);
    assert_value(db, "k", NULL); /* never acknowledged, never visible */
    lsm_status_free(lsm_close(db));
    fault_env_free(fe);
}

/* --------------------------------------------------------------- stress */

struct stress_arg {
    lsm_db *db;
    int id;
    atomic_bool *stop;
};

/* Writer id's i-th write: 1000 keys, each overwritten 20 times. */
static void stress_kv(int id, int i, char k[32], char v[64])
{
    snprintf(k, 32, "s%d-%04d", id, i % 1000);
    snprintf(v, 64, "%d:%d", id, i);
}

/* Worker threads: no cmocka; anything wrong aborts the program. */
static void *stress_writer(void *p)
{
    struct stress_arg *a = p;
    char k[32], v[64];
    for (int i = 0; i < 20000; i++) {
        stress_kv(a->id, i, k, v);
        lsm_status *s = lsm_put(a->db, NULL, k, strlen(k), v, strlen(v));
        if (s)
            abort();
    }
    return NULL;
}

static void *stress_reader(void *p)
{
    struct stress_arg *a = p;
    while (!atomic_load(a->stop)) {
        lsm_iter *it = lsm_iter_new(a->db, NULL);
        char prev[64] = "";
        size_t prevn = 0;
        for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it)) {
            size_t n;
            const char *k = lsm_iter_key(it, &n);
            size_t m = n < prevn ? n : prevn;
            int c = memcmp(prev, k, m);
            if (prevn && (c > 0 || (c == 0 && prevn >= n)))
                abort(); /* keys must strictly increase */
            memcpy(prev, k, n < sizeof(prev) ? n : sizeof(prev));
            prevn = n;
        }
        if (lsm_iter_status(it))
            abort();
        lsm_iter_free(it);
        char *v;
        size_t vn;
        lsm_status *s = lsm_get(a->db, NULL, "s0-0001", 7, &v, &vn);
        if (s == NULL)
            free(v);
        lsm_status_free(s);
    }
    return NULL;
}

static void test_concurrent_stress(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 256 << 10);
    atomic_bool stop = false;
    pthread_t w[3], r[2];
    struct stress_arg a[5];
    for (int i = 0; i < 5; i++)
        a[i] = (struct stress_arg){db, i, &stop};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&w[i], NULL, stress_writer, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&r[i], NULL, stress_reader, &a[3 + i]), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(w[i], NULL);
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    char k[32], v[64];
    for (int id = 0; id < 3; id++)
        for (int j = 0; j < 1000; j++) {
            stress_kv(id, 19000 + j, k, v); /* the last write of each key */
            assert_value(db, k, v);
        }
    assert_int_equal(tu_prop(db, "lsm.sequence"), 60000);
    assert_null(lsm_close(db));
}

/* The block cache's counters, asked for by name (lsm_property_u64 counts
 * them only for their own names) and in lsm.metrics, agree; other
 * properties asked meanwhile do not disturb them. */
static void test_block_cache_counters(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    ASSERT_OK(lsm_put(db, NULL, "k", 1, "v", 1));
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0)); /* into a table */
    for (int i = 0; i < 3; i++)
        tu_assert_value(db, "k", "v");
    uint64_t hits = tu_prop(db, "lsm.block-cache-hits");
    uint64_t misses = tu_prop(db, "lsm.block-cache-misses");
    assert_true(hits >= 2);
    assert_true(misses >= 1);
    assert_true(tu_prop(db, "lsm.total-table-bytes") > 0);
    char *m = lsm_property(db, "lsm.metrics");
    assert_non_null(m);
    char want[96];
    snprintf(want, sizeof want, "store_block_cache_hits %llu\n", (unsigned long long)hits);
    assert_non_null(strstr(m, want));
    snprintf(want, sizeof want, "store_block_cache_misses %llu\n", (unsigned long long)misses);
    assert_non_null(strstr(m, want));
    free(m);
    lsm_status_free(lsm_close(db));
}

/* Each level's bytes add up to the tables' bytes; a level past the last is
 * no property; the pacing and stop times add up to the stall time. */
static void test_level_bytes_and_stall_props(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 0);
    ASSERT_OK(lsm_put(db, NULL, "k", 1, "v", 1));
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    uint64_t sum = 0, x;
    char name[48];
    int levels = 0;
    for (;; levels++) {
        snprintf(name, sizeof name, "lsm.bytes-at-level%d", levels);
        if (!lsm_property_u64(db, name, &x))
            break;
        sum += x;
    }
    snprintf(name, sizeof name, "lsm.num-files-at-level%d", levels);
    assert_false(lsm_property_u64(db, name, &x)); /* as many levels as those */
    assert_true(levels > 1 && sum > 0);
    assert_int_equal(sum, tu_prop(db, "lsm.total-table-bytes"));
    assert_false(lsm_property_u64(db, "lsm.bytes-at-level-1", &x));
    assert_false(lsm_property_u64(db, "lsm.bytes-at-level1x", &x));
    assert_int_equal(tu_prop(db, "lsm.paced-us") + tu_prop(db, "lsm.stopped-us"),
                     tu_prop(db, "lsm.stall-us"));
    assert_int_equal(tu_prop(db, "lsm.compaction-debt-bytes"), 0); /* all compacted */
    lsm_status_free(lsm_close(db));
}

/* A test on a fresh, empty directory `tu_dir`. */

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_put_get_delete),
        TU_TEST(test_block_cache_counters),
        TU_TEST(test_level_bytes_and_stall_props),
        TU_TEST(test_batch_atomic_and_snapshot),
        TU_TEST(test_iterator_both_directions),
        TU_TEST(test_reopen_after_close),
        TU_TEST(test_memtable_switches_by_content),
        TU_TEST(test_flush_drops_shadowed_versions),
        TU_TEST(test_overwrite_after_flush_and_reopen),
        TU_TEST(test_second_open_is_busy),
        TU_TEST(test_not_a_store),
        TU_TEST(test_process_crash),
        TU_TEST(test_group_commit_shares_syncs),
        TU_TEST(test_writes_proceed_during_sync),
        TU_TEST(test_write_may_wait_hint),
        TU_TEST(test_syncs_overlap),
        TU_TEST(test_slow_syncs_shared),
        TU_TEST(test_overlapping_sync_fails),
        TU_TEST(test_earlier_overlapping_sync_fails),
        TU_TEST(test_table_partitions),
        TU_TEST(test_sync_rule_and_power_cut),
        TU_TEST(test_power_cut_leaves_prefix),
        TU_TEST(test_barrier_makes_earlier_writes_durable),
        TU_TEST(test_replayed_writes_become_durable),
        TU_TEST(test_sync_upto),
        TU_TEST(test_sync_failure_is_sticky),
        TU_TEST(test_write_failure_enospc),
        TU_TEST(test_concurrent_stress),
    };
    return cmocka_run_group_tests_name("db", tests, NULL, NULL);
}
