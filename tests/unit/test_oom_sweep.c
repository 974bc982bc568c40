/*
 * test_oom_sweep.c — the allocation-failure sweep (as SQLite's malloc
 * tests): a fixed workload that goes through every store path is run once
 * counting its allocations (tests/support/alloc_fail.h), then once per allocation N
 * with allocation N failing. Every call must succeed or return an error;
 * a write acknowledged is readable at once, and after the run the store,
 * reopened without injection, holds every write acknowledged with a sync
 * (every acknowledged one after a clean close), nothing never written,
 * and passes lsm_verify.
 *
 * Allocations are counted in two streams (alloc_fail.h): the workload's thread
 * and the store's background threads; the workload waits for the
 * background to go idle after each step, so each stream is deterministic.
 * N <= main-stream count is that stream's allocation N; above, the
 * background stream's allocation N - main count.
 *
 * A second sweep fails allocation N and every later one of its stream
 * (memory that never comes back): every waiter must still get an answer;
 * a run that hangs ends the program after HANG_SECONDS, naming N.
 *
 * Environment: OOM_SWEEP=full runs every N (make torture); by default a
 * sample runs (every OOM_SWEEP_STRIDE-th N, default 5, plus the first 20
 * of each stream). OOM_SWEEP_N=n runs one; OOM_SWEEP_ALL=1 goes on after a
 * failure; OOM_SWEEP_VERBOSE=1 says what each call answered; OOM_TEST=name
 * runs that test only (a cmocka filter: * matches any run of characters).
 *
 * Tests pin the bugs one at a time: a memtable switch out of memory, a
 * write group whose merge runs out of memory, background threads that spun
 * when memory never came back, a compaction out of memory that let a key's
 * older version through with its newest one (out of key order).
 */
#include "sweep_writes.h"

#include "alloc_fail.h"
#include "db_impl.h" /* L0_COMPACTION_TRIGGER */
#include "fault_env.h"

#include <inttypes.h>
#include <signal.h>

#define SEED 0x00a110cULL
#define MAX_WRITES 512
#define WBS (64u << 10)

/* ------------------------------------------------------------- oracle */

struct wrec {
    bool acked;   /* the write returned OK (and no failed close since) */
    bool durable; /* a later sync, or a clean close, succeeded */
    uint32_t vlen;
    uint64_t seq;
};

typedef struct run {
    char dir[256];
    lsm_db *db;
    struct wrec w[MAX_WRITES];
    int nw;
    char fail[512];   /* the first thing that broke ("" if none) */
    char *scratch;    /* a value buffer */
    bool every_later; /* allocation N and every later one of its stream fail */
} run;

static bool verbose;

/* A run that takes longer than this has hung: some waiter was never told
 * that the work it waits for failed. */
#define HANG_SECONDS 60
static volatile sig_atomic_t hang_n;

static void on_hang(int sig)
{
    (void)sig;
    char msg[128];
    int len = snprintf(msg, sizeof(msg), "oom sweep: the run with allocation %d failing hung\n",
                       (int)hang_n);
    if (len > 0 && write(2, msg, (size_t)len) < 0)
        _exit(3);
    _exit(2);
}

static void broke(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broke(run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (r->fail[0] == '\0')
        vsnprintf(r->fail, sizeof(r->fail), fmt, ap);
    va_end(ap);
    if (verbose)
        fprintf(stderr, "  broke: %s\n", r->fail);
}

static void said(const char *what, int i, lsm_status *s)
{
    if (verbose && s != NULL)
        fprintf(stderr, "  %s %d: %s\n", what, i, lsm_status_message(s));
}

static void key_of(int i, char *k)
{
    snprintf(k, 16, "k%05d", (int)(((int64_t)i * 7919) % 100000));
}

static const sweep_writes swrites = {SEED, key_of, MAX_WRITES};

/* A sync that succeeded covers every write acknowledged up to seq (0: all). */
static void synced(run *r, uint64_t upto)
{
    for (int i = 0; i < r->nw; i++)
        if (r->w[i].acked && (upto == 0 || r->w[i].seq <= upto))
            r->w[i].durable = true;
}

/* ------------------------------------------------------------ workload */

static lsm_options options(lsm_env *env)
{
    lsm_options o;
    tu_db_options(&o, env, WBS);
    o.target_file_size = 32u << 10; /* compactions write several tables */
    o.block_cache_size = 256u << 10;
    o.deferred_max_age_ms = UINT32_MAX; /* no timed switches: deterministic */
    return o;
}

/* Waits until the background threads are idle (nothing due either). */
static void quiesce(run *r)
{
    for (int i = 0; r->db != NULL && i < 20000; i++) {
        uint64_t busy = 1;
        if (!lsm_property_u64(r->db, "lsm.background-busy", &busy))
            fail_msg("no property lsm.background-busy");
        if (busy == 0)
            return;
        usleep(200);
    }
    if (r->db != NULL)
        broke(r, "the background never went idle");
}

/* Reads write i back: an acknowledged write is there with its value, or
 * the read fails; a read never returns a wrong value. */
static void get(run *r, int i)
{
    if (r->db == NULL || i < 0 || i >= r->nw)
        return;
    char k[16];
    key_of(i, k);
    char *v = NULL;
    size_t vn = 0;
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    lsm_status *s = lsm_get(r->db, &ro, k, strlen(k), &v, &vn);
    said("get", i, s);
    if (s == NULL) {
        sweep_value_of(&swrites, i, r->w[i].vlen, r->scratch);
        if (vn != r->w[i].vlen || memcmp(v, r->scratch, vn) != 0)
            broke(r, "get of write %d returned a wrong value", i);
    } else if (lsm_status_code(s) == LSM_NOT_FOUND && r->w[i].acked) {
        broke(r, "get of acknowledged write %d: not found", i);
    }
    free(v);
    lsm_status_free(s);
}

/* Writes write number r->nw and reads it back if it was acknowledged. */
static void put(run *r, uint32_t vlen, bool sync, bool defer)
{
    if (r->db == NULL || r->nw >= MAX_WRITES)
        return;
    int i = r->nw++;
    struct wrec *w = &r->w[i];
    *w = (struct wrec){.vlen = vlen};
    char k[16];
    key_of(i, k);
    sweep_value_of(&swrites, i, vlen, r->scratch);
    lsm_batch *b = lsm_batch_new();
    lsm_status *s = NULL;
    if (b == NULL || !lsm_batch_put(b, k, strlen(k), r->scratch, vlen)) {
        lsm_batch_free(b);
        return; /* out of memory before the store saw it: never written */
    }
    lsm_write_options wo = {.sync = sync, .defer_log = defer};
    s = lsm_write_seq(r->db, &wo, b, &w->seq);
    lsm_batch_free(b);
    said("write", i, s);
    w->acked = s == NULL;
    lsm_status_free(s);
    if (w->acked && sync)
        synced(r, 0);
    if (w->acked)
        get(r, i);
}

static void sync_all(run *r, int how)
{
    if (r->db == NULL)
        return;
    lsm_write_options wo = {.sync = true};
    lsm_status *s = how == 0 ? lsm_sync(r->db) : lsm_write(r->db, &wo, NULL);
    said("sync", how, s);
    if (s == NULL)
        synced(r, 0);
    lsm_status_free(s);
}

static void sync_upto(run *r, int i)
{
    if (r->db == NULL || i >= r->nw || !r->w[i].acked)
        return;
    lsm_status *s = lsm_sync_upto(r->db, r->w[i].seq);
    said("sync_upto", i, s);
    if (s == NULL)
        synced(r, r->w[i].seq);
    lsm_status_free(s);
}

/* Scans db against the writes made (sweep_scan_db). */
static lsm_status *scan_db(run *r, lsm_db *db, bool verify, const char *when, bool *present)
{
    sweep_scan sc = SWEEP_SCAN_OF(&swrites, r);
    return sweep_scan_db(&sc, db, verify, when, present);
}

/* Iterates over everything in the open store: unless the iterator fails,
 * it shows every acknowledged write. */
static void scan(run *r)
{
    if (r->db == NULL)
        return;
    bool shown[MAX_WRITES] = {false};
    lsm_status *s = scan_db(r, r->db, false, "scan", shown);
    said("scan", 0, s);
    for (int i = 0; s == NULL && i < r->nw; i++) {
        if (r->w[i].acked && !shown[i]) {
            broke(r, "scan: acknowledged write %d (of %d) is missing", i, r->nw);
            break;
        }
    }
    lsm_status_free(s);
}

static void db_open(run *r)
{
    lsm_options o = options(NULL);
    lsm_status *s = lsm_open(&o, r->dir, &r->db);
    said("open", 0, s);
    if (s != NULL)
        r->db = NULL; /* the workload stops here */
    lsm_status_free(s);
}

static void db_close(run *r)
{
    if (r->db == NULL)
        return;
    lsm_status *s = lsm_close(r->db);
    said("close", 0, s);
    r->db = NULL;
    if (s == NULL)
        synced(r, 0);
    /* A failed close is a crash: what was not durable may be gone. */
    for (int i = 0; s != NULL && i < r->nw; i++)
        r->w[i].acked = r->w[i].durable;
    lsm_status_free(s);
}

static void compact(run *r)
{
    if (r->db == NULL)
        return;
    lsm_status *s = lsm_compact_range(r->db, NULL, 0, NULL, 0);
    said("compact", 0, s);
    lsm_status_free(s);
}

/* n writes: a deferred one every defer_every, a sync one every
 * sync_every, a read of an earlier one now and then. */
static void writes(run *r, int n, int sync_every, int defer_every, uint64_t *rng)
{
    for (int j = 0; j < n; j++) {
        bool defer = defer_every && j % defer_every == defer_every - 1;
        bool sync = !defer && sync_every && j % sync_every == sync_every - 1;
        uint32_t len = defer ? 12000 + (uint32_t)(tu_xorshift64(rng) % 8000)
                             : 100 + (uint32_t)(tu_xorshift64(rng) % 900);
        put(r, len, sync, defer);
        quiesce(r);
        if (j % 7 == 6 && r->nw > 0) {
            get(r, (int)(tu_xorshift64(rng) % (uint64_t)r->nw));
            quiesce(r);
        }
    }
}

/* The workload: open, small, large (deferred) and sync writes, memtable
 * switches, flushes, syncs of deferred bytes, a scan, a compaction, close,
 * reopen; each step followed by an idle background. */
static void workload(run *r)
{
    uint64_t rng = SEED;
    db_open(r);
    quiesce(r);
    writes(r, 70, 10, 6, &rng);
    sync_all(r, 0);
    quiesce(r);
    int first_deferred = r->nw;
    writes(r, 6, 0, 1, &rng);
    sync_upto(r, first_deferred + 2); /* a sync of deferred bytes */
    quiesce(r);
    sync_all(r, 1);
    quiesce(r);
    scan(r);
    compact(r);
    quiesce(r);
    writes(r, 20, 0, 4, &rng);
    db_close(r);
    db_open(r);
    quiesce(r);
    scan(r);
    writes(r, 15, 5, 3, &rng);
    db_close(r);
}

/* -------------------------------------------------------------- checks */

static void verify_report(void *ctx, const char *msg)
{
    char *first = ctx;
    if (first[0] == '\0')
        snprintf(first, 256, "%s", msg);
}

/* Reopened without injection (created if the first open failed): the
 * store opens, holds every durable write with its value and nothing never
 * written, and lsm_verify is clean. */
static void check_store(run *r)
{
    lsm_options o = options(NULL);
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, r->dir, &db);
    if (s != NULL) {
        broke(r, "reopen: %s", lsm_status_message(s));
        lsm_status_free(s);
        return;
    }
    bool present[MAX_WRITES] = {false};
    s = scan_db(r, db, true, "reopened", present);
    if (s != NULL)
        broke(r, "reopened: scan: %s", lsm_status_message(s));
    lsm_status_free(s);
    for (int i = 0; i < r->nw; i++)
        if (r->w[i].durable && !present[i])
            broke(r, "reopened: durable write %d (of %d) is missing", i, r->nw);
    char first[256] = "";
    s = lsm_verify(db, verify_report, first);
    if (s != NULL)
        broke(r, "lsm_verify: %s (%s)", lsm_status_message(s), first);
    lsm_status_free(s);
    s = lsm_close(db);
    if (s != NULL)
        broke(r, "close after the check: %s", lsm_status_message(s));
    lsm_status_free(s);
}

/* One run of the workload with allocation n of `stream` failing (0: none,
 * counting); counts get the allocations each stream made. Returns false
 * (r->fail says why) if something broke. */
static bool run_one(run *r, enum lsm_alloc_stream stream, uint64_t n, uint64_t counts[2])
{
    memset(r->w, 0, sizeof(r->w));
    r->nw = 0;
    r->fail[0] = '\0';
    /* On tmpfs if there is one: syncs there cost nothing. */
    snprintf(r->dir, sizeof(r->dir), "%s/lsm-oom-sweep-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (mkdtemp(r->dir) == NULL)
        fail_msg("mkdtemp %s: %s", r->dir, strerror(errno));
    hang_n = (sig_atomic_t)n;
    signal(SIGALRM, on_hang);
    alarm(HANG_SECONDS);
    lsm_alloc_hook_arm_from(stream, n, r->every_later);
    workload(r);
    lsm_alloc_hook_disarm();
    alarm(0);
    counts[0] = lsm_alloc_hook_count(LSM_ALLOC_MAIN);
    counts[1] = lsm_alloc_hook_count(LSM_ALLOC_OTHER);
    if (n != 0 && !lsm_alloc_hook_fired())
        broke(r, "allocation %" PRIu64 " of stream %d never came (the run diverged)", n,
              (int)stream);
    check_store(r);
    tu_rmtree(r->dir);
    return r->fail[0] == '\0';
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? strtoull(v, NULL, 0) : dflt;
}

/* Whether the sweep runs N (1-based over both streams). */
static bool sampled(uint64_t n, uint64_t main_calls, uint64_t stride)
{
    uint64_t in_stream = n <= main_calls ? n : n - main_calls;
    return stride <= 1 || in_stream <= 20 || n % stride == 0;
}

/* The sweep: allocation N fails, or (every_later) N and every later one of
 * its stream, memory that never comes back. */
static void sweep(bool every_later)
{
    run *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->scratch = malloc(1u << 16);
    assert_non_null(r->scratch);
    verbose = getenv("OOM_SWEEP_VERBOSE") != NULL;
    r->every_later = every_later;
    uint64_t counts[2];
    if (!run_one(r, LSM_ALLOC_MAIN, 0, counts))
        fail_msg("the counting run broke: %s", r->fail);
    uint64_t total = counts[0] + counts[1];
    const char *mode = getenv("OOM_SWEEP");
    bool full = mode != NULL && strcmp(mode, "full") == 0;
    uint64_t stride = full ? 1 : env_u64("OOM_SWEEP_STRIDE", 5);
    uint64_t only = env_u64("OOM_SWEEP_N", 0);
    bool all = getenv("OOM_SWEEP_ALL") != NULL;
    printf("oom sweep%s: %" PRIu64 " allocations (%" PRIu64 " workload, %" PRIu64
           " background), %s\n",
           every_later ? " (failing for good)" : "", total, counts[0], counts[1],
           only   ? "one N"
           : full ? "every N"
                  : "sampled");
    uint64_t first_bad = 0, ran = 0, bad = 0;
    for (uint64_t n = 1; n <= total; n++) {
        if (only ? n != only : !sampled(n, counts[0], stride))
            continue;
        enum lsm_alloc_stream st = n <= counts[0] ? LSM_ALLOC_MAIN : LSM_ALLOC_OTHER;
        uint64_t at = st == LSM_ALLOC_MAIN ? n : n - counts[0];
        uint64_t c[2];
        if (verbose)
            fprintf(stderr, "N=%" PRIu64 " (stream %d, allocation %" PRIu64 ")\n", n, (int)st, at);
        ran++;
        if (run_one(r, st, at, c))
            continue;
        bad++;
        printf("N=%" PRIu64 " (stream %d, allocation %" PRIu64 "): %s\n", n, (int)st, at, r->fail);
        if (first_bad == 0)
            first_bad = n;
        if (!all)
            break;
    }
    printf("oom sweep: %" PRIu64 " runs, %" PRIu64 " broke\n", ran, bad);
    free(r->scratch);
    free(r);
    if (first_bad != 0)
        fail_msg("first failing N=%" PRIu64 " (rerun with OOM_SWEEP_N=%" PRIu64
                 " OOM_SWEEP_VERBOSE=1)",
                 first_bad, first_bad);
}

static void test_oom_sweep(void **state)
{
    (void)state;
    sweep(false);
}

static void test_oom_sweep_for_good(void **state)
{
    (void)state;
    sweep(true);
}

/* ------------------------------------------------- the bugs one by one */

#define SMALL_VLEN 1000

/* Writes small write i (value_of, SMALL_VLEN bytes) to db. */
static lsm_status *put_small(lsm_db *db, int i, bool sync, bool defer)
{
    char k[16], v[SMALL_VLEN];
    key_of(i, k);
    sweep_value_of(&swrites, i, SMALL_VLEN, v);
    lsm_write_options wo = {.sync = sync, .defer_log = defer};
    return lsm_put(db, &wo, k, strlen(k), v, SMALL_VLEN);
}

/* Whether db holds small write i with its value (a failed read fails the
 * test: these tests inject nothing into reads). */
static bool has_small(lsm_db *db, int i)
{
    char k[16], want[SMALL_VLEN];
    key_of(i, k);
    sweep_value_of(&swrites, i, SMALL_VLEN, want);
    char *v = NULL;
    size_t vn = 0;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &v, &vn);
    if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        return false;
    }
    if (s != NULL)
        fail_msg("get of write %d: %s", i, lsm_status_message(s));
    bool same = vn == SMALL_VLEN && memcmp(v, want, vn) == 0;
    free(v);
    if (!same)
        fail_msg("write %d has a wrong value", i);
    return true;
}

static void wait_idle(lsm_db *db)
{
    run r = {.db = db};
    quiesce(&r);
    if (r.fail[0] != '\0')
        fail_msg("%s", r.fail);
}

/* The index of the small write that switches the first memtable (the
 * first flush follows it) in a fresh store written 0, 1, 2, ... */
static int first_switching_write(void)
{
    char dir[256];
    tu_mkdtemp(dir, sizeof(dir), "oom-switch");
    lsm_db *db = tu_open_db(dir, NULL, WBS);
    int i = 0;
    for (; tu_prop(db, "lsm.flushes") == 0; i++) {
        assert_true(i < 1000);
        ASSERT_OK(put_small(db, i, false, false));
        wait_idle(db);
    }
    ASSERT_OK(lsm_close(db));
    tu_rmtree(dir);
    return i - 1;
}

/* A write that switches memtables, with each of its allocations failing
 * in turn: acknowledged, it is readable at once, and so is the next
 * write (the view readers take holds the memtable taking writes). */
static void test_switch_out_of_memory_keeps_reads(void **state)
{
    (void)state;
    int k = first_switching_write();
    for (uint64_t n = 1;; n++) {
        char dir[256];
        tu_mkdtemp(dir, sizeof(dir), "oom-switch");
        lsm_db *db = tu_open_db(dir, NULL, WBS);
        for (int i = 0; i < k; i++)
            ASSERT_OK(put_small(db, i, false, false));
        wait_idle(db);
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        lsm_status *s = put_small(db, k, false, false);
        lsm_alloc_hook_disarm();
        bool fired = lsm_alloc_hook_fired();
        if (s == NULL && !has_small(db, k))
            fail_msg("allocation %" PRIu64 " failed: write %d acknowledged, not found", n, k);
        lsm_status_free(s);
        s = put_small(db, k + 1, false, false);
        if (s == NULL && !has_small(db, k + 1))
            fail_msg("allocation %" PRIu64 " failed: the next write acknowledged, not found", n);
        lsm_status_free(s);
        for (int i = 0; i < k; i++)
            if (!has_small(db, i))
                fail_msg("allocation %" PRIu64 " failed: write %d is gone", n, i);
        lsm_status_free(lsm_close(db));
        tu_rmtree(dir);
        if (!fired)
            break; /* every allocation of the write has failed once */
    }
}

/* The flush thread's first allocation fails (its memtable iterator):
 * the memtable stays, readable, and what was synced survives a reopen; the
 * retry counts as one out of memory, not as a full disk. */
static void test_flush_out_of_memory_keeps_memtable(void **state)
{
    (void)state;
    char dir[256];
    tu_mkdtemp(dir, sizeof(dir), "oom-flush");
    lsm_db *db = tu_open_db(dir, NULL, WBS);
    wait_idle(db);
    int k = 2 * first_switching_write(), synced_upto = -1;
    bool acked[2000] = {false};
    assert_true(k < 2000);
    lsm_alloc_hook_arm(LSM_ALLOC_OTHER, 1);
    for (int i = 0; i < k; i++) {
        lsm_status *s = put_small(db, i, i % 10 == 9, false);
        acked[i] = s == NULL;
        if (s == NULL && i % 10 == 9)
            synced_upto = i;
        lsm_status_free(s);
        wait_idle(db);
        for (int j = 0; j <= i; j++)
            if (acked[j] && !has_small(db, j))
                fail_msg("write %d acknowledged, not found after write %d", j, i);
    }
    lsm_alloc_hook_disarm();
    assert_true(lsm_alloc_hook_fired());
    /* retried for memory, counted apart from a full disk */
    assert_int_equal(tu_prop(db, "lsm.oom-retries"), 1);
    assert_int_equal(tu_prop(db, "lsm.full-disk-events"), 0);
    lsm_status_free(lsm_close(db));
    db = tu_open_db(dir, NULL, WBS);
    for (int i = 0; i <= synced_upto; i++)
        if (acked[i] && !has_small(db, i))
            fail_msg("synced write %d is gone after a reopen", i);
    ASSERT_OK(lsm_close(db));
    tu_rmtree(dir);
}

struct writer_arg {
    lsm_db *db;
    int i;
    bool defer;
    bool arm; /* fail this thread's first allocation (the group's merge) */
    lsm_status *s;
};

static void *write_thread(void *arg)
{
    struct writer_arg *a = arg;
    char k[16], v[SMALL_VLEN];
    key_of(a->i, k);
    sweep_value_of(&swrites, a->i, SMALL_VLEN, v);
    lsm_batch *b = lsm_batch_new();
    if (b == NULL || !lsm_batch_put(b, k, strlen(k), v, SMALL_VLEN)) {
        a->s = status_new(LSM_INVALID_ARGUMENT, "no batch");
        lsm_batch_free(b);
        return NULL;
    }
    lsm_write_options wo = {.defer_log = a->defer};
    if (a->arm)
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, 1);
    a->s = lsm_write(a->db, &wo, b);
    if (a->arm)
        lsm_alloc_hook_disarm();
    lsm_batch_free(b);
    return NULL;
}

/* A deferred write A switches memtables while the old log's sync takes
 * 400 ms; B and C queue behind it and B leads them as one group, whose
 * merge runs out of memory: B and C fail, nothing else does; A's batch,
 * in no log yet, stays deferred; a sync write after them succeeds and
 * makes A durable. */
static void test_group_merge_out_of_memory_fails_only_the_group(void **state)
{
    (void)state;
    int k = first_switching_write();
    char dir[256];
    tu_mkdtemp(dir, sizeof(dir), "oom-group");
    fault_env *fe = fault_env_new(lsm_env_default());
    assert_non_null(fe);
    lsm_db *db = tu_open_db(dir, fault_env_env(fe), WBS);
    for (int i = 0; i < k; i++)
        ASSERT_OK(put_small(db, i, false, false));
    wait_idle(db);
    fault_env_set_sync_delay_us(fe, 400000);
    struct writer_arg a[3] = {
        {.db = db, .i = k, .defer = true},
        {.db = db, .i = k + 1, .arm = true},
        {.db = db, .i = k + 2},
    };
    pthread_t t[3];
    for (int j = 0; j < 3; j++) {
        assert_int_equal(pthread_create(&t[j], NULL, write_thread, &a[j]), 0);
        usleep(100000); /* each queues behind the one before */
    }
    for (int j = 0; j < 3; j++)
        assert_int_equal(pthread_join(t[j], NULL), 0);
    fault_env_set_sync_delay_us(fe, 0);
    ASSERT_OK(a[0].s);
    ASSERT_FAILS(a[1].s, LSM_NO_MEMORY, "merging a write group");
    ASSERT_FAILS(a[2].s, LSM_NO_MEMORY, "merging a write group");
    assert_true(has_small(db, k));
    ASSERT_OK(put_small(db, k + 3, true, false));
    ASSERT_OK(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    db = tu_open_db(dir, fault_env_env(fe), WBS);
    assert_true(has_small(db, k));
    assert_true(has_small(db, k + 3));
    assert_false(has_small(db, k + 1));
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
    tu_rmtree(dir);
}

/* Writes 0..k (the last one synced): with write k, one memtable switch.
 * Returns the first failure (the writes after it are still tried). */
static lsm_status *write_round(lsm_db *db, int k)
{
    lsm_status *first = NULL;
    for (int i = 0; i <= k; i++) {
        lsm_status *s = put_small(db, i, i == k, false);
        if (first == NULL)
            first = s;
        else
            lsm_status_free(s);
    }
    return first;
}

/* A store in a fresh directory (in memory when it can: syncs cost nothing)
 * holding L0_COMPACTION_TRIGGER - 1 level-0 tables of writes 0..k: the
 * next round's flush makes a compaction due. */
static lsm_db *open_near_compaction(char *dir, size_t dirlen, int k)
{
    snprintf(dir, dirlen, "%s/lsm-oom-bg-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (mkdtemp(dir) == NULL)
        fail_msg("mkdtemp %s: %s", dir, strerror(errno));
    lsm_db *db = tu_open_db(dir, NULL, WBS);
    /* The same keys each round: once the deeper levels hold a table, each
     * new one overlaps them and stays at level 0. */
    for (int round = 0; tu_prop(db, "lsm.num-files-at-level0") < L0_COMPACTION_TRIGGER - 1;
         round++) {
        assert_true(round < 2 * NUM_LEVELS);
        ASSERT_OK(write_round(db, k));
        wait_idle(db);
    }
    return db;
}

/* Writes round 0..k (the fourth level-0 table, a compaction due) with the
 * background threads' allocation n failing (every_later: and every later
 * one), until they are idle. Returns whether allocation n came. */
static bool background_round(lsm_db *db, int k, uint64_t n, bool every_later)
{
    lsm_alloc_hook_arm_from(LSM_ALLOC_OTHER, n, every_later);
    lsm_status_free(write_round(db, k)); /* may fail once the background has */
    wait_idle(db);
    lsm_alloc_hook_disarm();
    return lsm_alloc_hook_fired();
}

/* Memory that never comes back to the background threads, from each of
 * their allocations in turn while the fourth level-0 table is flushed and
 * the compaction it makes due starts: the background stops with an error
 * and goes idle (it neither spins nor hangs), and the synced writes
 * survive a reopen. */
static void test_background_out_of_memory_for_good_goes_idle(void **state)
{
    (void)state;
    int k = first_switching_write();
    for (uint64_t n = 1;; n++) {
        char dir[256];
        lsm_db *db = open_near_compaction(dir, sizeof dir, k);
        bool fired = background_round(db, k, n, true);
        lsm_status_free(lsm_close(db));
        db = tu_open_db(dir, NULL, WBS);
        for (int i = 0; i <= k; i++)
            if (!has_small(db, i))
                fail_msg("background allocation %" PRIu64 " on failed: write %d is gone", n, i);
        ASSERT_OK(lsm_close(db));
        tu_rmtree(dir);
        if (!fired) {
            printf("background allocations failed for good: %" PRIu64 " starting points\n", n - 1);
            break; /* the flush and the compaction ran with every allocation */
        }
    }
}

/* One allocation of the background threads fails, memory back at once,
 * from each of their allocations in turn while the fourth level-0 table is
 * flushed and the compaction it makes due runs: the store is not broken for
 * good. The writes after it succeed (the failed work is retried, as after a
 * full disk), its background error stays empty, and nothing is lost. */
static void test_background_out_of_memory_once_is_not_for_good(void **state)
{
    (void)state;
    int k = first_switching_write();
    for (uint64_t n = 1;; n++) {
        char dir[256];
        lsm_db *db = open_near_compaction(dir, sizeof dir, k);
        bool fired = background_round(db, k, n, false);
        for (int round = 0; round < 3; round++) {
            lsm_status *s = write_round(db, k);
            if (s != NULL)
                fail_msg("background allocation %" PRIu64 " failed once: a write round after "
                         "it: %s",
                         n, lsm_status_message(s));
        }
        wait_idle(db);
        char *e = lsm_property(db, "lsm.background-error");
        if (e == NULL || e[0] != '\0')
            fail_msg("background allocation %" PRIu64 " failed once: background error \"%s\"", n,
                     e != NULL ? e : "?");
        free(e);
        for (int i = 0; i <= k; i++)
            if (!has_small(db, i))
                fail_msg("background allocation %" PRIu64 " failed once: write %d is gone", n, i);
        ASSERT_OK(lsm_close(db));
        tu_rmtree(dir);
        if (!fired) {
            printf("background allocations failed once: %" PRIu64 " points\n", n - 1);
            break;
        }
    }
}

/* Writes small writes 0..k-1 with their values for `round` (a round's
 * values differ from the last's: the same keys, newer versions). */
static void write_versions(lsm_db *db, int k, int round)
{
    char key[16], v[SMALL_VLEN];
    for (int i = 0; i < k; i++) {
        key_of(i, key);
        sweep_value_of(&swrites, i + round * MAX_WRITES, SMALL_VLEN, v);
        ASSERT_OK(lsm_put(db, NULL, key, strlen(key), v, SMALL_VLEN));
    }
}

/* Whether db holds write i of `round` (write_versions) as its value. */
static bool has_version(lsm_db *db, int i, int round)
{
    char key[16], want[SMALL_VLEN];
    key_of(i, key);
    sweep_value_of(&swrites, i + round * MAX_WRITES, SMALL_VLEN, want);
    char *v = NULL;
    size_t vn = 0;
    lsm_status *s = lsm_get(db, NULL, key, strlen(key), &v, &vn);
    bool same = s == NULL && vn == SMALL_VLEN && memcmp(v, want, vn) == 0;
    lsm_status_free(s);
    free(v);
    return same;
}

/* A compaction merging two versions of every key (the older in a table
 * below, the newer in the memtable it flushes first), with each of its
 * allocations failing in turn: it succeeds or answers out of memory; the
 * newest versions stay, the tables verify (key order), and the compaction
 * repeated succeeds. The merge keeps a key's newest version only, with its
 * sequence zeroed (db_compact.c can_zero_seq): out of memory in remembering
 * the key must not let an older version through. */
static void test_compaction_out_of_memory_keeps_key_order(void **state)
{
    (void)state;
    enum { K = 40 };
    for (uint64_t n = 1;; n++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/lsm-oom-versions-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"); /* syncs cost nothing */
        if (mkdtemp(dir) == NULL)
            fail_msg("mkdtemp %s: %s", dir, strerror(errno));
        lsm_db *db = tu_open_db(dir, NULL, WBS);
        write_versions(db, K, 0);
        ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
        write_versions(db, K, 1);
        wait_idle(db);
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        lsm_status *s = lsm_compact_range(db, NULL, 0, NULL, 0);
        lsm_alloc_hook_disarm();
        bool fired = lsm_alloc_hook_fired();
        if (s != NULL && lsm_status_code(s) != LSM_NO_MEMORY)
            fail_msg("allocation %" PRIu64 " failing: compaction: %s", n, lsm_status_message(s));
        lsm_status_free(s);
        for (int i = 0; i < K; i++)
            if (!has_version(db, i, 1))
                fail_msg("allocation %" PRIu64 " failing: key %d lost its newest version", n, i);
        char first[256] = "";
        s = lsm_verify(db, verify_report, first);
        if (s != NULL)
            fail_msg("allocation %" PRIu64 " failing: lsm_verify: %s (%s)", n,
                     lsm_status_message(s), first);
        s = lsm_compact_range(db, NULL, 0, NULL, 0);
        if (s != NULL)
            fail_msg("allocation %" PRIu64 " failed: the compaction repeated: %s", n,
                     lsm_status_message(s));
        ASSERT_OK(lsm_close(db));
        tu_rmtree(dir);
        if (!fired) {
            printf("compaction of two versions: %" PRIu64 " allocations failed in turn\n", n - 1);
            break;
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_switch_out_of_memory_keeps_reads),
        cmocka_unit_test(test_flush_out_of_memory_keeps_memtable),
        cmocka_unit_test(test_group_merge_out_of_memory_fails_only_the_group),
        cmocka_unit_test(test_background_out_of_memory_for_good_goes_idle),
        cmocka_unit_test(test_oom_sweep),
        cmocka_unit_test(test_oom_sweep_for_good),
        cmocka_unit_test(test_compaction_out_of_memory_keeps_key_order),
        cmocka_unit_test(test_background_out_of_memory_once_is_not_for_good),
    };
    if (getenv("OOM_TEST") != NULL)
        cmocka_set_test_filter(getenv("OOM_TEST"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
