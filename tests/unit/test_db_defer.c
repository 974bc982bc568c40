/* test_db_defer.c — deferred logging (lsm_write_options.defer_log): a
 * deferred batch reaches the disk once when its memtable is flushed, is
 * logged late before any later logged write or sync, is retired to a table
 * when the store idles, and when lost in a crash takes only what followed
 * it; recovery's filter and epoch keep that so across repeated crashes. */
#include "fixture.h"

#include <inttypes.h>

#include "alloc_fail.h"
#include "db_impl.h"
#include "db_recover.h"
#include "fault_env.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { VLEN = 16 << 10 };

/* Value i: VLEN bytes that name i. */
static void value_of(char *v, int i)
{
    for (int j = 0; j < VLEN; j++)
        v[j] = (char)('a' + (i * 7 + j) % 26);
    snprintf(v, 16, "v%06d", i);
}

static void key_of(char k[32], const char *prefix, int i)
{
    snprintf(k, 32, "%s%06d", prefix, i);
}

/* Writes key i with value i, deferred or synced as asked; *seq (if not
 * NULL) gets its sequence. No cmocka inside: the forked children use it. */
static lsm_status *write_i(lsm_db *db, const char *prefix, int i, bool defer, bool sync,
                           uint64_t *seq)
{
    char k[32], *v = malloc(VLEN);
    lsm_batch *b = lsm_batch_new();
    key_of(k, prefix, i);
    value_of(v, i);
    lsm_write_options wo = {.sync = sync, .defer_log = defer};
    lsm_status *s = v != NULL && b != NULL && lsm_batch_put(b, k, strlen(k), v, VLEN)
                        ? lsm_write_seq(db, &wo, b, seq != NULL ? seq : &(uint64_t){0})
                        : status_new(LSM_NO_MEMORY, "out of memory");
    lsm_batch_free(b);
    free(v);
    return s;
}

static lsm_status *put_i(lsm_db *db, const char *prefix, int i, bool defer, bool sync)
{
    return write_i(db, prefix, i, defer, sync, NULL);
}

/* A power cut under the open store, then the store opened again on a disk
 * without the injected failures. */
static lsm_db *cut_and_reopen(fault_env *fe, lsm_db *db, size_t wbs)
{
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db)); /* the power is off: it writes nothing */
    fault_env_clear_failures(fe);
    return tu_open_db(tu_dir, fault_env_env(fe), wbs);
}

/* Whether key i holds value i (false if absent; a wrong value fails). */
static bool has_i(lsm_db *db, const char *prefix, int i)
{
    char k[32], want[VLEN];
    key_of(k, prefix, i);
    value_of(want, i);
    char *v = NULL;
    size_t n = 0;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &v, &n);
    if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        return false;
    }
    ASSERT_OK(s);
    assert_int_equal(n, VLEN);
    assert_memory_equal(v, want, VLEN);
    free(v);
    return true;
}

static void assert_all(lsm_db *db, const char *prefix, int n)
{
    for (int i = 0; i < n; i++)
        if (!has_i(db, prefix, i))
            fail_msg("%s%06d is missing", prefix, i);
}

/* ------------------------------------------------------- replay filter */

/* A batch record's header alone: enough for the filter. */
static void batch_rec(char rec[BATCH_HEADER + 2], uint64_t seq, uint32_t count)
{
    encode_fixed64(rec, seq);
    encode_fixed32(rec + 8, count);
    rec[BATCH_HEADER] = 1; /* TYPE_VALUE */
    rec[BATCH_HEADER + 1] = 0;
}

static bool feed(replay_filter *f, char kind, uint64_t seq, uint32_t count)
{
    char rec[WAL_MARKER_LEN + 1];
    size_t n = WAL_MARKER_LEN;
    if (kind == 'B') {
        batch_rec(rec, seq, count);
        n = BATCH_HEADER + 2;
    } else {
        wal_marker_encode(rec, kind == 'D' ? WAL_DEFERRED : WAL_EPOCH, seq, count);
    }
    bool apply = true;
    ASSERT_OK(replay_filter_check(f, rec, n, &apply));
    return apply;
}

static void test_replay_filter(void **state)
{
    (void)state;
    replay_filter f;
    replay_filter_init(&f);
    assert_true(feed(&f, 'B', 1, 2));  /* plain batches apply */
    assert_false(feed(&f, 'D', 3, 1)); /* a marker is no batch */
    assert_false(feed(&f, 'D', 4, 2));
    assert_true(feed(&f, 'B', 3, 1)); /* logged late, in order */
    assert_true(feed(&f, 'B', 4, 2));
    assert_true(feed(&f, 'B', 6, 1)); /* nothing awaited */
    assert_false(replay_filter_dropped(&f));
    assert_false(feed(&f, 'D', 7, 1));
    assert_true(replay_filter_dropped(&f)); /* 7 awaited at the end: lost */
    assert_int_equal(replay_filter_lost(&f), 1);
    assert_false(feed(&f, 'B', 8, 1)); /* follows a lost batch: skipped */
    assert_false(feed(&f, 'B', 7, 1)); /* too late: skipping stays */
    assert_true(replay_filter_dropped(&f));
    assert_int_equal(f.skipped, 2);
    assert_false(feed(&f, 'E', 0, 0)); /* the epoch ends it */
    assert_false(replay_filter_dropped(&f));
    assert_true(feed(&f, 'B', 9, 1));
    assert_true(feed(&f, 'B', 2, 1)); /* a late copy of a flushed batch: harmless */
    replay_filter_free(&f);
}

/* Late copies of batches older than an awaited marker: their own markers
 * were in an earlier log, gone since their memtable was flushed. They come
 * before the awaited batch's copy in the same late-logging run, and must
 * neither be skipped nor make what follows skipped. */
static void test_replay_filter_older_late_copies(void **state)
{
    (void)state;
    replay_filter f;
    replay_filter_init(&f);
    assert_false(feed(&f, 'D', 100, 5)); /* this log's only marker */
    assert_true(feed(&f, 'B', 50, 25));  /* late copies, markers in a gone log */
    assert_true(feed(&f, 'B', 75, 25));
    assert_true(feed(&f, 'B', 100, 5)); /* the awaited one */
    assert_true(feed(&f, 'B', 105, 1)); /* a synced write after them */
    assert_false(replay_filter_dropped(&f));
    assert_int_equal(f.skipped, 0);
    assert_false(feed(&f, 'D', 106, 1)); /* and a batch still after a lost one */
    assert_false(feed(&f, 'B', 107, 1));
    assert_true(replay_filter_dropped(&f));
    replay_filter_free(&f);
}

/* ---------------------------------------------------------- the store */

/* Waits (up to 30 s: valgrind is slow) until no immutable memtable waits
 * for the flush thread. */
static void wait_flushed(lsm_db *db)
{
    for (int t = 0; t < 3000 && tu_prop(db, "lsm.immutable-memtables") > 0; t++)
        usleep(10000);
    assert_int_equal(tu_prop(db, "lsm.immutable-memtables"), 0);
}

/* Deferred batches whose memtables are flushed never enter the log. */
static void test_deferred_reach_tables_once(void **state)
{
    (void)state;
    enum { N = 64 };
    lsm_db *db = tu_open_db(tu_dir, NULL, 256 << 10);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    assert_int_equal(tu_prop(db, "lsm.deferred-writes"), N);
    assert_true(tu_prop(db, "lsm.wal-bytes") < N * 2 * WAL_MARKER_LEN);
    wait_flushed(db);
    assert_true(tu_prop(db, "lsm.flushes") >= 2);
    assert_all(db, "d", N);
    /* A sync now logs only what no flush took yet. */
    assert_null(lsm_sync(db));
    assert_true(tu_prop(db, "lsm.late-logged-bytes") < N * VLEN / 2);
    assert_null(lsm_close(db));
    db = tu_open_db(tu_dir, NULL, 256 << 10);
    assert_all(db, "d", N);
    assert_int_equal(tu_prop(db, "lsm.recovered-lost-deferred"), 0);
    assert_null(lsm_close(db));
}

/* A sync logs the deferred batches first: they survive a power cut. */
static void test_deferred_logged_by_sync(void **state)
{
    (void)state;
    enum { N = 8 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    assert_int_equal(tu_prop(db, "lsm.late-logged-bytes"), 0);
    assert_null(lsm_sync(db));
    assert_true(tu_prop(db, "lsm.late-logged-bytes") >= N * VLEN);
    ASSERT_OK(put_i(db, "x", 0, true, false)); /* not synced: may go */
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A deferred batch's bytes are its memtable's (memtable_keep), whose
 * entries point into them: an iterator opened over them reads them after
 * the batches were logged late (the sync frees them), their memtables
 * flushed (the flush drops them) and later deferred batches took the
 * buffers freed meanwhile (bufpool.h). */
static void test_deferred_bytes_outlive_their_batch(void **state)
{
    (void)state;
    enum { N = 24, LATER = 96 };
    lsm_db *db = tu_open_db(tu_dir, NULL, 256 << 10);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    lsm_iter *it = lsm_iter_new(db, NULL);
    assert_non_null(it);
    assert_null(lsm_sync(db));
    for (int i = 0; i < LATER; i++)
        ASSERT_OK(put_i(db, "e", 1000 + i, true, false));
    wait_flushed(db);
    assert_true(tu_prop(db, "lsm.flushes") >= 2);
    char want[VLEN];
    int i = 0;
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it), i++) {
        size_t n;
        const char *v = lsm_iter_value(it, &n);
        value_of(want, i);
        assert_int_equal(n, VLEN);
        assert_memory_equal(v, want, VLEN);
    }
    assert_int_equal(i, N); /* its view: no "e" */
    lsm_iter_free(it);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
}

/* A batch of N keys i with value i (prefix p); NULL if out of memory. */
static lsm_batch *batch_of(const char *p, int n)
{
    lsm_batch *b = lsm_batch_new();
    char k[32], v[VLEN];
    for (int i = 0; i < n && b != NULL; i++) {
        key_of(k, p, i);
        value_of(v, i);
        if (!lsm_batch_put(b, k, strlen(k), v, VLEN)) {
            lsm_batch_free(b);
            b = NULL;
        }
    }
    return b;
}

/* A deferred write takes its batch's bytes rather than copy them (lsm.h):
 * the caller's batch comes back empty, and the bytes taken are what a sync
 * logs late and a power cut keeps. One that fails (its deferred batch out
 * of memory) leaves the batch as it was, to be written again. */
static void test_deferred_takes_the_batch(void **state)
{
    (void)state;
    enum { N = 8 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    lsm_write_options dw = {.defer_log = true};
    lsm_batch *b = batch_of("d", N);
    assert_non_null(b);
    size_t size = lsm_batch_size(b);
    lsm_alloc_hook_arm(LSM_ALLOC_MAIN, 1);
    lsm_status *s = lsm_write(db, &dw, b);
    bool fired = lsm_alloc_hook_fired();
    lsm_alloc_hook_disarm();
    assert_true(fired);
    ASSERT_FAILS(s, LSM_NO_MEMORY, NULL);
    assert_int_equal(lsm_batch_count(b), N);
    assert_int_equal(lsm_batch_size(b), size);
    /* Its memtable took the bytes, then the log's append failed: back. */
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    ASSERT_FAILS(lsm_write(db, &dw, b), LSM_NO_SPACE, NULL);
    assert_int_equal(lsm_batch_count(b), N);
    assert_int_equal(lsm_batch_size(b), size);
    ASSERT_OK(lsm_write(db, &dw, b));
    assert_int_equal(lsm_batch_count(b), 0);
    assert_int_equal(lsm_batch_size(b), BATCH_HEADER);
    lsm_batch_free(b);
    assert_all(db, "d", N);
    assert_null(lsm_sync(db));
    assert_true(tu_prop(db, "lsm.late-logged-bytes") >= N * VLEN);
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A deferred batch whose insert runs out of memory part-way, its memtable
 * holding its bytes and entries pointing at them (batch_take_back): the
 * caller's batch is as it was (a copy), none of it is visible, and the
 * write failed. Every allocation of the write is failed in turn until one
 * falls inside the insert. */
static void test_deferred_insert_out_of_memory_gives_the_batch_back(void **state)
{
    (void)state;
    enum { SMALL = 64, SLEN = 200 };
    lsm_write_options dw = {.defer_log = true};
    bool seen = false;
    for (uint64_t n = 1; n < 200 && !seen; n++) {
        tu_dir_empty();
        lsm_db *db = tu_open_db(tu_dir, NULL, 1 << 20); /* an arena of 4 KiB blocks */
        lsm_batch *b = lsm_batch_new();
        char v[2 * MEMTABLE_REF_MIN], k[16];
        memset(v, 'k', sizeof(v));
        assert_true(lsm_batch_put(b, "big", 3, v, sizeof(v))); /* pointed at */
        for (int i = 0; i < SMALL; i++) {                      /* copied */
            snprintf(k, sizeof(k), "s%03d", i);
            memset(v, 'a' + i % 26, SLEN);
            assert_true(lsm_batch_put(b, k, strlen(k), v, SLEN));
        }
        size_t size;
        const char *was = batch_contents(b, &size);
        char *copy = malloc(size);
        memcpy(copy, was, size);
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        lsm_status *s = lsm_write(db, &dw, b);
        lsm_alloc_hook_disarm();
        if (s != NULL && tu_mentions(s, "inserting")) {
            seen = true;
            size_t now;
            const char *is = batch_contents(b, &now);
            assert_int_equal(now, size); /* all but the sequence the store set */
            assert_memory_equal(is + 8, copy + 8, size - 8);
            char *got = NULL;
            size_t gn;
            ASSERT_FAILS(lsm_get(db, NULL, "big", 3, &got, &gn), LSM_NOT_FOUND, NULL);
        }
        lsm_status_free(s);
        free(copy);
        lsm_batch_free(b);
        lsm_status_free(lsm_close(db));
    }
    assert_true(seen);
}

/* A sync of many deferred bytes (a quarter of a memtable or more) flushes
 * the memtables instead of logging them: they reach the disk once, and
 * survive a power cut. */
static void test_sync_flushes_many_deferred(void **state)
{
    (void)state;
    enum { N = 80 }; /* 80 x 16 KiB = 1.25 MiB >= 4 MiB / 4 */
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    uint64_t seq = 0;
    for (int i = 0; i < N; i++)
        ASSERT_OK(write_i(db, "d", i, true, false, &seq));
    ASSERT_OK(put_i(db, "x", 0, true, false)); /* after seq: not waited for */
    assert_null(lsm_sync_upto(db, seq));
    assert_int_equal(tu_prop(db, "lsm.sync-flushes"), 1);
    assert_int_equal(tu_prop(db, "lsm.late-logged-bytes"), 0);
    assert_true(tu_prop(db, "lsm.flushes") >= 1);
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* But not when the memtable holds mostly other data: the sync would wait
 * for all of it to be flushed. It logs them late. */
static void test_sync_logs_deferred_among_much_else(void **state)
{
    (void)state;
    /* 1.25 MiB deferred after 1.9 MiB logged: more than the deferred bytes
     * (db_fsync.c), and room to spare in the 4 MiB memtable, whose pooled
     * arena counts whole 256 KiB blocks (a switch would flush them all). */
    enum { N = 80, OTHER = 120 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    for (int i = 0; i < OTHER; i++)
        ASSERT_OK(put_i(db, "o", i, false, false));
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    assert_null(lsm_sync(db));
    assert_int_equal(tu_prop(db, "lsm.sync-flushes"), 0);
    assert_true(tu_prop(db, "lsm.late-logged-bytes") >= N * VLEN);
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "o", OTHER);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* When that flush fails for a full disk, the sync logs them late instead. */
static void test_sync_logs_deferred_when_flush_fails(void **state)
{
    (void)state;
    enum { N = 80 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    assert_null(lsm_sync(db));
    assert_int_equal(tu_prop(db, "lsm.sync-flushes"), 0);
    assert_true(tu_prop(db, "lsm.late-logged-bytes") >= N * VLEN);
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A logged write after a deferred one carries it into the log: a synced
 * write, or lsm_sync_upto of the deferred batch's own sequence. */
static void test_deferred_logged_before_later_writes(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    ASSERT_OK(put_i(db, "d", 0, true, false));
    ASSERT_OK(put_i(db, "s", 0, false, true));
    uint64_t seq = 0;
    ASSERT_OK(write_i(db, "d", 1, true, false, &seq));
    ASSERT_OK(put_i(db, "d", 2, true, false)); /* after seq: not needed */
    assert_null(lsm_sync_upto(db, seq));
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", 2);
    assert_all(db, "s", 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A sync for writes before a deferred batch must not count the batch as
 * durable: a later sync of it then still writes it to the log's disk. */
static void test_sync_below_deferred_claims_nothing(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    uint64_t first = 0, deferred = 0;
    ASSERT_OK(write_i(db, "n", 0, false, false, &first));
    ASSERT_OK(write_i(db, "d", 0, true, false, &deferred));
    assert_true(deferred > first);
    assert_null(lsm_sync_upto(db, first));
    assert_null(lsm_sync_upto(db, deferred));
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A store (options in *o) that retires deferred batches after 50 ms idle. */
static lsm_db *open_retiring(fault_env *fe, lsm_options *o)
{
    tu_db_options(o, fault_env_env(fe), 4 << 20);
    o->deferred_max_age_ms = 50;
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(o, tu_dir, &db));
    return db;
}

/* Waits (up to 30 s) until the counter `prop` is no longer 0. */
static void wait_for_prop(lsm_db *db, const char *prop)
{
    for (int t = 0; t < 3000 && tu_prop(db, prop) == 0; t++)
        usleep(10000);
}

/* An idle store does not keep deferred batches out of both log and table
 * for long: the memtable holding them is flushed. */
static void test_old_deferred_retired(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    lsm_db *db = open_retiring(fe, &o);
    for (int i = 0; i < 4; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    wait_for_prop(db, "lsm.flushes");
    assert_int_equal(tu_prop(db, "lsm.flushes"), 1);
    assert_int_equal(tu_prop(db, "lsm.late-logged-bytes"), 0);
    assert_null(fault_env_power_cut(fe)); /* no sync was asked for */
    lsm_status_free(lsm_close(db));
    ASSERT_OK(lsm_open(&o, tu_dir, &db));
    assert_all(db, "d", 4);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A memtable switch syncs the log it leaves, which holds only the marker of
 * a deferred batch: the switch must not count the batch durable, or a sync
 * of it (which logs it late, into the new log) would skip syncing that.
 * Here the idle store retires the memtable and its flush fails for want of
 * space, so the batch is in neither a table nor a synced log. */
static void test_switch_claims_no_deferred(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    lsm_db *db = open_retiring(fe, &o);
    uint64_t seq = 0;
    ASSERT_OK(write_i(db, "d", 0, true, false, &seq));
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    wait_for_prop(db, "lsm.memtable-switches");
    assert_int_equal(tu_prop(db, "lsm.memtable-switches"), 1);
    assert_int_equal(tu_prop(db, "lsm.flushes"), 0);
    assert_null(lsm_sync_upto(db, seq));
    db = cut_and_reopen(fe, db, 4 << 20);
    assert_all(db, "d", 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Deferred batches on both sides of a memtable switch, logged late into
 * the new log by the next logged write, a synced one (their older memtable
 * could not be flushed yet); then that memtable is flushed and the old log,
 * with the older markers, deleted. Recovery meets the new log's markers
 * first, then late copies of older batches: all of it applies (it once
 * dropped everything from there on, the synced write too). */
static void test_late_copies_after_switch(void **state)
{
    (void)state;
    enum { N = 40 }; /* 640 KiB of deferred batches: a switch at 256 KiB */
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 256 << 10);
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    assert_true(tu_prop(db, "lsm.memtable-switches") >= 1);
    assert_int_equal(tu_prop(db, "lsm.flushes"), 0);
    ASSERT_OK(put_i(db, "s", 0, false, true)); /* logs them all late first */
    assert_true(tu_prop(db, "lsm.late-logged-bytes") >= N * VLEN);
    fault_env_clear_failures(fe);
    wait_for_prop(db, "lsm.flushes");
    wait_flushed(db);
    db = cut_and_reopen(fe, db, 256 << 10);
    assert_int_equal(tu_prop(db, "lsm.recovered-skipped"), 0);
    assert_all(db, "d", N);
    assert_all(db, "s", 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Recovery that spills one log into several memtables (here the late
 * copies of test_late_copies_after_switch's 640 KiB) gives them all that
 * log's number. A deferred batch written then lives in the active one; the
 * flush of an older one must not forget it, or a synced write after it is
 * logged behind its marker with the batch in no log nor table, and a power
 * cut takes both (each memtable has its own identity, see struct deferred). */
static void test_deferred_survive_flush_of_replayed_sibling(void **state)
{
    (void)state;
    enum { N = 40 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 256 << 10);
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    ASSERT_OK(put_i(db, "s", 0, false, true)); /* logs them all late */
    fault_env_clear_failures(fe);
    wait_for_prop(db, "lsm.flushes");
    wait_flushed(db);
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    fault_env_clear_failures(fe);
    /* Reopen with tables failing, so the replayed memtables stay. */
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    db = tu_open_db(tu_dir, fault_env_env(fe), 256 << 10);
    assert_true(tu_prop(db, "lsm.immutable-memtables") >= 1);
    ASSERT_OK(put_i(db, "x", 0, true, false));
    fault_env_clear_failures(fe);
    wait_for_prop(db, "lsm.flushes");
    wait_flushed(db);
    ASSERT_OK(put_i(db, "s", 1, false, true)); /* logs x0 late first */
    db = cut_and_reopen(fe, db, 256 << 10);
    assert_int_equal(tu_prop(db, "lsm.recovered-skipped"), 0);
    assert_all(db, "d", N);
    assert_all(db, "s", 2);
    assert_all(db, "x", 1);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A close whose flush fails (here: the disk is full for tables) leaves the
 * logs as what recovery needs, so it logs the deferred batches late and
 * syncs them first. */
static void test_close_logs_deferred_when_flush_fails(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    for (int i = 0; i < 4; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    lsm_status_free(lsm_close(db));
    assert_null(fault_env_power_cut(fe));
    fault_env_clear_failures(fe);
    db = tu_open_db(tu_dir, fault_env_env(fe), 4 << 20);
    assert_all(db, "d", 4);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* A close on a disk full for tables, with memtables at their memory limit:
 * the sync that logs the deferred batches late is a barrier, which needs
 * no memtable room, so all of them reach the log; close still reports the
 * failed flush (its first error) and nothing is lost to a power cut. */
static void test_close_on_full_disk_reports_and_keeps(void **state)
{
    (void)state;
    enum { N = 48 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), 256 << 10);
    o.max_memtable_bytes = 1 << 20;
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(&o, tu_dir, &db));
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    lsm_status *s = lsm_close(db);
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    assert_null(fault_env_power_cut(fe));
    fault_env_clear_failures(fe);
    db = tu_open_db(tu_dir, fault_env_env(fe), 256 << 10);
    assert_int_equal(tu_prop(db, "lsm.recovered-lost-deferred"), 0);
    assert_all(db, "d", N);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* The tables cannot be written and deferred batches cannot be logged
 * either (the log's disk is full too): they may be lost, so close reports
 * that, not a plain full disk (whose LSM_NO_SPACE says nothing
 * acknowledged is at risk). */
static void test_close_reports_risk_over_full_disk(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), 256 << 10);
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(&o, tu_dir, &db));
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    for (int i = 0; i < 8; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, -1);
    lsm_status *s = lsm_close(db);
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    lsm_status_free(s);
    fault_env_free(fe);
}

/* A forked child: opens the store, writes, dies without closing. Returns
 * false on any error (no cmocka in the child). */
static bool child_run(int stage)
{
    lsm_options o;
    /* Stage 2: the disk is full for tables, so the recovery cannot write
     * what it replayed into tables (db_flush_recovered) and the old log
     * stays live, to be replayed again. */
    fault_env *fe = stage == 2 ? fault_env_new(lsm_env_default()) : NULL;
    if (fe)
        fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    tu_db_options(&o, fe ? fault_env_env(fe) : NULL, 4 << 20);
    lsm_db *db = NULL;
    if (lsm_open(&o, tu_dir, &db) != NULL)
        return false;
    if (stage == 1) /* n0 synced, then two deferred batches nothing logs */
        return put_i(db, "n", 0, false, true) == NULL && put_i(db, "d", 0, true, false) == NULL &&
               put_i(db, "d", 1, true, false) == NULL;
    return put_i(db, "n", 1, false, true) == NULL; /* stage 2: after recovery */
}

static void crash_child(int stage)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_run(stage) ? 0 : 1); /* no lsm_close */
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A process crash loses deferred batches nothing logged (they were never
 * synced) and only them. Recovery then starts the new log with an epoch:
 * when the old log is replayed again after a second crash (its data could
 * not be written to tables for a full disk), the writes made after the
 * first recovery still apply. */
static void test_lost_deferred_and_epoch(void **state)
{
    (void)state;
    crash_child(1);
    crash_child(2);
    lsm_db *db = tu_open_db(tu_dir, NULL, 4 << 20);
    assert_true(has_i(db, "n", 0));
    assert_true(has_i(db, "n", 1));
    assert_false(has_i(db, "d", 0));
    assert_false(has_i(db, "d", 1));
    assert_int_equal(tu_prop(db, "lsm.recovered-lost-deferred"), 2);
    assert_null(lsm_close(db));
    db = tu_open_db(tu_dir, NULL, 4 << 20); /* closed cleanly: nothing replayed */
    assert_true(has_i(db, "n", 1));
    assert_int_equal(tu_prop(db, "lsm.recovered-lost-deferred"), 0);
    assert_null(lsm_close(db));
}

struct mixed_arg {
    lsm_db *db;
    char prefix[16];
    int n;
    bool defer;
    bool sync_each; /* a deferred writer syncs each write's sequence after it */
};

/* On a worker thread: no cmocka. */
static void *mixed_writer(void *p)
{
    struct mixed_arg *a = p;
    for (int i = 0; i < a->n; i++) {
        uint64_t seq = 0;
        lsm_status *s = write_i(a->db, a->prefix, i, a->defer, !a->defer, &seq);
        if (s == NULL && a->defer && a->sync_each)
            s = lsm_sync_upto(a->db, seq);
        if (s) {
            fprintf(stderr, "put: %s\n", lsm_status_message(s));
            abort();
        }
    }
    return NULL;
}

/* Runs `threads` writers of `per` writes each on db, the odd ones deferred
 * (syncing each if sync_each), the even ones synced; a[] gets their
 * arguments. */
static void run_mixed(lsm_db *db, struct mixed_arg *a, int threads, int per, bool sync_each)
{
    for (int i = 0; i < threads; i++) {
        a[i] = (struct mixed_arg){db, "", per, i % 2 == 1, sync_each};
        snprintf(a[i].prefix, sizeof(a[i].prefix), "t%d-", i);
    }
    tu_run_threads(threads, mixed_writer, a, sizeof(a[0]));
}

/* Deferred and synced writers at once, small memtables, then a power cut:
 * every synced write is there, and what is left of each deferred writer is
 * a prefix of its writes. */
static void test_deferred_among_sync_writers(void **state)
{
    (void)state;
    enum { THREADS = 4, PER = 150 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 256 << 10);
    struct mixed_arg a[THREADS];
    run_mixed(db, a, THREADS, PER, false);
    db = cut_and_reopen(fe, db, 256 << 10);
    for (int t = 0; t < THREADS; t++) {
        if (!a[t].defer) {
            assert_all(db, a[t].prefix, PER);
            continue;
        }
        bool gap = false;
        for (int i = 0; i < PER; i++) {
            bool has = has_i(db, a[t].prefix, i);
            if (has && gap)
                fail_msg("%s%06d survived but an earlier write did not", a[t].prefix, i);
            gap = gap || !has;
        }
    }
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Syncs that log deferred batches late while other writers' synced groups
 * are appended: the late copies go in at the head of the queue, between
 * whole groups, so after a power cut every write whose write or sync
 * returned is there — the deferred ones and the synced groups around them. */
static void test_sync_logs_deferred_between_groups(void **state)
{
    (void)state;
    enum { THREADS = 4, PER = 120 };
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(tu_dir, fault_env_env(fe), 256 << 10);
    struct mixed_arg a[THREADS];
    run_mixed(db, a, THREADS, PER, true); /* each deferred write then synced:
                                          * logged late at the queue's head */
    assert_true(tu_prop(db, "lsm.late-logged-bytes") > 0);
    db = cut_and_reopen(fe, db, 256 << 10);
    for (int i = 0; i < THREADS; i++)
        assert_all(db, a[i].prefix, PER);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* The hook of test_late_log_raced_by_flush: the late logging's append is
 * failing for space; first the memtables it carries batches of are
 * flushed (the failing leader holds no lock meanwhile). Only in the test's
 * own thread, the leader: the flush thread's retry failing its table
 * create may strike first, and would wait for its own flush. */
struct flush_first {
    fault_env *fe;
    lsm_db *db;
    pthread_t leader;
};

static void flush_before_failing(void *arg)
{
    struct flush_first *f = arg;
    if (!pthread_equal(pthread_self(), f->leader))
        return;
    fault_env_on_fail(f->fe, NULL, NULL);
    fault_env_clear_failures(f->fe); /* the tables fit now */
    wait_flushed(f->db);
}

struct freeing_delete {
    lsm_db *db;
    lsm_status *s;
};

static void *delete_d0(void *arg)
{
    struct freeing_delete *fd = arg;
    char k[32];
    key_of(k, "d", 0);
    lsm_write_options freeing = {.frees_space = true};
    fd->s = lsm_delete(fd->db, &freeing, k, strlen(k));
    return NULL;
}

/* Deferred batches taken out to be logged late whose memtables are
 * flushed while that append runs, and the append then fails for space: the
 * list goes back without them (before: they stayed for good, in no memtable
 * any flush would drop them from, and a freeing write that met a full disk
 * waited for their flush forever in flush_deferred_first: test_fullfs hung
 * in an unlink under load). The delete now succeeds and nothing is lost. */
static void test_late_log_raced_by_flush(void **state)
{
    (void)state;
    enum { N = 40 }; /* 640 KiB deferred: switches at 256 KiB */
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), 256 << 10);
    o.full_disk_retry_us = 10000;
    lsm_db *db = tu_open_with(&o);
    fault_env_fail(fe, FAULT_CREATE | FAULT_WRITE, ".ldb", ENOSPC, 0, -1);
    for (int i = 0; i < N; i++)
        ASSERT_OK(put_i(db, "d", i, true, false));
    assert_true(tu_prop(db, "lsm.immutable-memtables") >= 1);
    /* A logged write takes them all to log late; its append fails once
     * the flush of the immutable memtables is done. */
    struct flush_first f = {fe, db, pthread_self()};
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    fault_env_on_fail(fe, flush_before_failing, &f);
    lsm_status *s = put_i(db, "s", 0, false, false);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    /* A delete whose first append finds the disk full. */
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, 1);
    struct freeing_delete fd = {db, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, delete_d0, &fd), 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30; /* a hang, not a measurement */
    if (pthread_timedjoin_np(t, NULL, &deadline) != 0)
        fail_msg("the freeing delete still waits after 30 s");
    ASSERT_OK(fd.s);
    assert_false(has_i(db, "d", 0));
    assert_null(lsm_sync(db));
    db = cut_and_reopen(fe, db, 256 << 10);
    assert_false(has_i(db, "d", 0));
    for (int i = 1; i < N; i++)
        if (!has_i(db, "d", i))
            fail_msg("d%06d is missing", i);
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* Writes `bytes` of 64 KiB deferred batches of 4 KiB values (keys from
 * *next on), then waits for the background to be idle: the flushes made. */
static uint64_t bulk_write(lsm_db *db, size_t bytes, int *next)
{
    uint64_t before = tu_prop(db, "lsm.flushes");
    lsm_batch *b = lsm_batch_new();
    assert_non_null(b);
    char k[32], v[4096];
    memset(v, 'v', sizeof v);
    lsm_write_options wo = {.defer_log = true};
    for (size_t n = 0; n < bytes; n += sizeof v) {
        snprintf(k, sizeof k, "k%08d", (*next)++);
        assert_true(lsm_batch_put(b, k, strlen(k), v, sizeof v));
        if (lsm_batch_count(b) == 16) {
            ASSERT_OK(lsm_write(db, &wo, b));
            lsm_batch_clear(b);
        }
    }
    if (lsm_batch_count(b) > 0)
        ASSERT_OK(lsm_write(db, &wo, b));
    lsm_batch_free(b);
    for (int t = 0; t < 3000 && tu_prop(db, "lsm.background-busy") > 0; t++)
        usleep(1000);
    return tu_prop(db, "lsm.flushes") - before;
}

/* In a bulk stream (128 write buffers of big deferred writes flushed in a
 * row, db_impl.h) memtables of such writes are full at twice the write
 * buffer (db_rotate.c memtable_full_at): 2 MiB takes half the flushes it
 * took before the stream; plain puts end the stream. */
static void test_bulk_stream_memtables_twice_as_big(void **state)
{
    (void)state;
    lsm_db *db = tu_open(NULL, 64 << 10);
    int next = 0;
    uint64_t first = bulk_write(db, 2 << 20, &next);
    assert_true(tu_prop(db, "lsm.bulk-run-bytes") < 128u * (64 << 10));
    bulk_write(db, 7 << 20, &next); /* the stream begins */
    assert_true(tu_prop(db, "lsm.bulk-run-bytes") >= 128u * (64 << 10));
    uint64_t in_stream = bulk_write(db, 2 << 20, &next);
    if (in_stream * 3 > first * 2)
        fail_msg("2 MiB of big writes: %" PRIu64 " flushes before the stream, %" PRIu64
                 " in it (the memtables should be twice as big)",
                 first, in_stream);
    lsm_write_options wo = {.sync = false};
    char k[32], v[1024];
    memset(v, 'p', sizeof v);
    for (int i = 0; i < 300; i++) { /* memtables of plain puts */
        snprintf(k, sizeof k, "p%06d", i);
        ASSERT_OK(lsm_put(db, &wo, k, strlen(k), v, sizeof v));
    }
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0)); /* flushes the last of them */
    assert_int_equal(tu_prop(db, "lsm.bulk-run-bytes"), 0);
    lsm_status_free(lsm_close(db));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_filter),
        cmocka_unit_test(test_replay_filter_older_late_copies),
        TU_TEST(test_deferred_reach_tables_once),
        TU_TEST(test_deferred_logged_by_sync),
        TU_TEST(test_deferred_takes_the_batch),
        TU_TEST(test_deferred_bytes_outlive_their_batch),
        TU_TEST(test_deferred_insert_out_of_memory_gives_the_batch_back),
        TU_TEST(test_sync_flushes_many_deferred),
        TU_TEST(test_sync_logs_deferred_among_much_else),
        TU_TEST(test_sync_logs_deferred_when_flush_fails),
        TU_TEST(test_deferred_logged_before_later_writes),
        TU_TEST(test_sync_below_deferred_claims_nothing),
        TU_TEST(test_old_deferred_retired),
        TU_TEST(test_switch_claims_no_deferred),
        TU_TEST(test_late_copies_after_switch),
        TU_TEST(test_deferred_survive_flush_of_replayed_sibling),
        TU_TEST(test_close_logs_deferred_when_flush_fails),
        TU_TEST(test_close_on_full_disk_reports_and_keeps),
        TU_TEST(test_close_reports_risk_over_full_disk),
        TU_TEST(test_lost_deferred_and_epoch),
        TU_TEST(test_deferred_among_sync_writers),
        TU_TEST(test_sync_logs_deferred_between_groups),
        TU_TEST(test_late_log_raced_by_flush),
        TU_TEST(test_bulk_stream_memtables_twice_as_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
