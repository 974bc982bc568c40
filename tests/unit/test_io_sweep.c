/*
 * test_io_sweep.c — the I/O-error sweep (as SQLite's I/O-error tests): a
 * fixed workload that goes through every store path is run once to count
 * its env calls, then once per call N with call N failing in each mode:
 * EIO, ENOSPC, a power cut right there, a sync that reports EIO although
 * its data reached the disk, a sync that fails and loses its pages (lost
 * writeback, fsyncgate), and a disk that is full from call N on (every
 * later allocation fails, in every stream: close on a full disk). After
 * each run the store is reopened with the plain env and checked against
 * what the workload was told (see check_db for the rules).
 *
 * Numbering: fault_env counts the workload thread's calls and the store's
 * background threads' calls as two streams, each deterministic: after each
 * step the workload waits until every background job has finished or waits
 * in a held directory sync (quiesce), so the background is in the same
 * state whenever the workload acts. N < main-stream calls is that stream's
 * call N; above, the background stream's call N - main calls. Each run
 * checks that the call it failed is the one the counting run saw at N
 * (kind and path), so a run that is not the same run fails as such.
 *
 * Environment: IO_SWEEP=full runs every N and mode (make torture); by
 * default a sample runs (every IO_SWEEP_STRIDE-th N, default 31, plus
 * IO_SWEEP_RANDOM more, default 30, drawn with a fixed seed). Over RADOS
 * (LSM_TEST_ENV=rados: env_rados wrapped by the fault env, a run costs a
 * second or more) the default sample is every 700th N plus 2, in the modes
 * EIO and power-cut only (IO_SWEEP_ALL_MODES=1: every mode). IO_SWEEP_N=n
 * and IO_SWEEP_KIND=k (an index into modes[]) run one. IO_SWEEP_ALL=1 goes
 * on after a failure and prints every one; IO_SWEEP_DUMP=1 prints the
 * counting run's calls; IO_SWEEP_VERBOSE=1 what each run was told.
 */
#include "sweep_writes.h"

#include "fault_env.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <time.h>
#include <unistd.h>

#define SEED 0x5eed10f0ULL
#define MAX_WRITES 1024
#define WBS (64u << 10)
#define MAX_CALLS 100000

/* ------------------------------------------------------------- oracle */

enum wstate {
    WR_OK,      /* acknowledged */
    WR_FAILED,  /* returned an error: may be present or absent */
    WR_IGNORED, /* in flight at a power cut: its answer never reached anyone */
};

struct wrec {
    enum wstate state;
    int epoch;     /* power cuts before it */
    bool durable;  /* a later successful sync, close or recovery covered it */
    bool lost;     /* found absent after a crash: must stay absent */
    bool deferred; /* written with defer_log */
    bool visible;  /* it failed, but a read right after served it */
    uint32_t vlen;
    uint64_t seq; /* from lsm_write_seq (0 if it failed) */
};

/* One run of the workload: what it was told, and the first thing that broke. */
typedef struct run {
    char dir[256];
    fault_env *fe;
    lsm_db *db;
    struct wrec w[MAX_WRITES];
    int nw;
    int epoch;
    bool cut;        /* the fault was a power cut and it happened */
    bool stopped;    /* the workload stops (power cut) */
    bool cut_on_claim; /* after the fault, cut the power at the next durable claim */
    enum fault_kind kind; /* of the armed fault (FAULT_KINDS: none) */
    char fail[1024]; /* the first thing that broke ("" if none) */
    char *scratch;   /* a value buffer */
} run;

static bool verbose;

static void broke(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broke(run *r, const char *fmt, ...)
{
    char msg[sizeof(r->fail)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (verbose)
        fprintf(stderr, "  broke: %s\n", msg);
    if (r->fail[0] == '\0')
        snprintf(r->fail, sizeof(r->fail), "%s", msg);
}

/* Write i's key: unique, but scattered (7919 is prime to 10^6), so tables
 * overlap and compactions merge instead of moving tables down whole. */
#define KEY_SPACE 1000000
static void key_of(int i, char *k)
{
    snprintf(k, 16, "key%06d", (int)(((int64_t)i * 7919) % KEY_SPACE));
}

static const sweep_writes swrites = {SEED, key_of, MAX_WRITES};

/* Whether a sync that succeeded up to sequence upto (0: everything) made
 * w durable: w was acknowledged, or it failed but the store served it (a
 * sync that succeeds claims durable what the store serves, so nothing
 * whose sync failed may be lost after a later sync reported success). */
static bool covered(const struct wrec *w, uint64_t upto)
{
    if (w->lost)
        return false;
    if (w->state == WR_OK)
        return upto == 0 || w->seq <= upto;
    return w->state == WR_FAILED && w->visible && upto == 0;
}

/* A sync up to upto (0: everything) succeeded. With cut_on_claim, the
 * first such claim after the fault is followed by a power cut, before a
 * flush could save what a lost writeback took: so a sync that reports
 * durable what an earlier failed sync lost is caught. */
static void durable_upto(run *r, uint64_t upto)
{
    for (int i = 0; i < r->nw; i++)
        if (covered(&r->w[i], upto))
            r->w[i].durable = true;
    if (r->cut_on_claim && !r->stopped && fault_env_fired(r->fe, NULL, NULL, 0)) {
        lsm_status *s = fault_env_power_cut(r->fe);
        if (s)
            fail_msg("power cut: %s", lsm_status_message(s));
        r->cut = r->stopped = true;
    }
}

/* Whether the fault was a power cut that has now happened: the machine is
 * off, so the workload stops and no answer since then counts. */
static bool cut_now(run *r, enum fault_kind kind)
{
    if (!r->cut && kind == FAULT_POWER_CUT && fault_env_fired(r->fe, NULL, NULL, 0))
        r->cut = r->stopped = true;
    return r->cut;
}

/* ------------------------------------------------------------ workload */

typedef struct workload {
    run *r;
    enum fault_kind kind;
} workload;

static lsm_options options(lsm_env *env)
{
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    o.env = env;
    o.write_buffer_size = WBS;
    o.target_file_size = 32u << 10; /* compactions write several tables */
    o.block_cache_size = 1u << 20;
    o.deferred_max_age_ms = UINT32_MAX; /* no timed retirement: deterministic */
    o.full_disk_retry_us = 2000;         /* the retries after a full disk */
    return o;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Whether the fault was a full disk that has now happened: the background
 * then retries for ever and nothing after it has to be deterministic. */
static bool disk_full_now(run *r)
{
    return r->kind == FAULT_DISK_FULL && fault_env_fired(r->fe, NULL, NULL, 0);
}

/* Waits until each background job (flush, compaction) has finished, or is
 * waiting in a held directory sync (fault_env_hold_dir_syncs), with nothing
 * else due: so what the background did before the workload's next step,
 * and the calls it made, are the same in every run up to the fault. */
static void quiesce(run *r)
{
    if (r->db == NULL || cut_now(r, r->kind) || disk_full_now(r))
        return; /* after a power cut nothing is deterministic, nor needed */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (seconds_since(&t0) < 60) {
        uint64_t jobs = 1;
        if (!lsm_property_u64(r->db, "lsm.background-jobs", &jobs))
            fail_msg("no property lsm.background-jobs");
        if (jobs == (uint64_t)fault_env_held(r->fe) || cut_now(r, r->kind) || disk_full_now(r))
            return;
        usleep(200);
    }
    broke(r, "the background never settled");
}

/* lsm_get of write i's key: *v (malloc'd, or NULL) and *vn its value. */
static lsm_status *read_back(run *r, int i, char **v, size_t *vn)
{
    char k[16];
    key_of(i, k);
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    *v = NULL;
    *vn = 0;
    return lsm_get(r->db, &ro, k, strlen(k), v, vn);
}

/* Whether v is write i's value. */
static bool is_value_of(run *r, int i, const char *v, size_t vn)
{
    sweep_value_of(&swrites, i, r->w[i].vlen, r->scratch);
    return vn == r->w[i].vlen && memcmp(v, r->scratch, vn) == 0;
}

/* Whether the store serves write i's value. */
static bool served(run *r, int i)
{
    char *v;
    size_t vn;
    lsm_status *s = read_back(r, i, &v, &vn);
    bool same = s == NULL && is_value_of(r, i, v, vn);
    free(v);
    lsm_status_free(s);
    return same && !cut_now(r, r->kind);
}

/* Writes write number r->nw (deferred or not, sync or not). */
static void put(workload *wl, uint32_t vlen, bool sync, bool defer)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL || r->nw >= MAX_WRITES)
        return;
    int i = r->nw++;
    struct wrec *w = &r->w[i];
    memset(w, 0, sizeof(*w));
    w->epoch = r->epoch;
    w->deferred = defer && !sync;
    w->vlen = vlen;
    char k[16];
    key_of(i, k);
    sweep_value_of(&swrites, i, vlen, r->scratch);
    lsm_batch *b = lsm_batch_new();
    assert_non_null(b);
    assert_true(lsm_batch_put(b, k, strlen(k), r->scratch, vlen));
    lsm_write_options wo = {.sync = sync, .defer_log = defer};
    lsm_status *s = lsm_write_seq(r->db, &wo, b, &w->seq);
    lsm_batch_free(b);
    if (cut_now(r, wl->kind))
        w->state = WR_IGNORED;
    else if (s == NULL)
        w->state = WR_OK;
    else
        w->state = WR_FAILED;
    if (verbose && s)
        fprintf(stderr, "  write %d: %s\n", i, lsm_status_message(s));
    lsm_status_free(s);
    if (w->state == WR_FAILED)
        w->visible = served(r, i);
    if (verbose && w->visible)
        fprintf(stderr, "  write %d failed but is served\n", i);
    if (w->state == WR_OK && sync)
        durable_upto(r, 0);
}

/* The answer of a sync-like call: success makes everything before durable. */
static void synced(workload *wl, lsm_status *s, uint64_t upto)
{
    run *r = wl->r;
    if (!cut_now(r, wl->kind) && s == NULL)
        durable_upto(r, upto);
    lsm_status_free(s);
}

static void barrier(workload *wl, int how)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL)
        return;
    if (how == 0) {
        synced(wl, lsm_sync(r->db), 0);
    } else {
        lsm_write_options wo = {.sync = true};
        synced(wl, lsm_write(r->db, &wo, NULL), 0);
    }
}

/* lsm_sync_upto of write i. */
static void sync_upto(workload *wl, int i)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL || i >= r->nw || r->w[i].state != WR_OK)
        return;
    synced(wl, lsm_sync_upto(r->db, r->w[i].seq), r->w[i].seq);
}

/* Reads write i back: an acknowledged write is there with its value (or
 * the read fails); a read never returns a wrong value. */
static void get(workload *wl, int i)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL || i < 0 || i >= r->nw)
        return;
    char *v;
    size_t vn;
    lsm_status *s = read_back(r, i, &v, &vn);
    if (cut_now(r, wl->kind)) {
        /* nothing to conclude */
    } else if (s == NULL) {
        if (!is_value_of(r, i, v, vn))
            broke(r, "get of write %d returned a wrong value (%zu bytes)", i, vn);
    } else if (lsm_status_code(s) == LSM_NOT_FOUND && r->w[i].state == WR_OK && !r->w[i].lost) {
        broke(r, "get of acknowledged write %d: not found", i);
    }
    free(v);
    lsm_status_free(s);
}

/* Closes the workload's store; held directory syncs go on first (close
 * waits for the background threads). Returns lsm_close's status. */
static lsm_status *close_db(run *r)
{
    fault_env_hold_dir_syncs(r->fe, false);
    lsm_status *s = lsm_close(r->db);
    r->db = NULL;
    return s;
}

static void db_open(workload *wl)
{
    run *r = wl->r;
    if (r->stopped)
        return;
    lsm_options o = options(fault_env_env(r->fe));
    lsm_status *s = lsm_open(&o, r->dir, &r->db);
    if (cut_now(r, wl->kind) || s != NULL) {
        if (verbose && s)
            fprintf(stderr, "  open: %s\n", lsm_status_message(s));
        lsm_status_free(close_db(r)); /* NULL unless the cut came after a successful open */
        r->stopped = true; /* nothing more can be done */
    }
    lsm_status_free(s);
}

static void db_close(workload *wl)
{
    run *r = wl->r;
    if (r->db == NULL)
        return;
    lsm_status *s = close_db(r);
    if (verbose && s)
        fprintf(stderr, "  close: %s\n", lsm_status_message(s));
    /* A close that succeeds syncs everything; one that fails leaves the
     * store as a crash would: what was not durable may go, as a prefix
     * (epochs are checked apart), and the reopen finds out. */
    if (s != NULL && !cut_now(r, wl->kind))
        r->epoch++;
    synced(wl, s, 0);
}

static void compact(workload *wl)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL)
        return;
    lsm_status_free(lsm_compact_range(r->db, NULL, 0, NULL, 0));
    cut_now(r, wl->kind);
}

static bool check_store(run *r, const char *dir, const char *when, bool final);

/* A power cut the workload makes (the machine restarts): what was not
 * durable may go, as a prefix; the store is reopened and checked, and what
 * recovery kept is durable from then on (it syncs the logs it replays). */
static void planned_cut(workload *wl)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL)
        return;
    lsm_status *s = fault_env_power_cut(r->fe);
    if (s)
        fail_msg("power cut: %s", lsm_status_message(s));
    lsm_status_free(close_db(r)); /* writes nothing: the power is off */
    r->epoch++;
}

/* After a reopen: checks what the store kept, which is what the workload
 * goes on from (a sync in this session covers nothing lost in the last). */
static void after_reopen(workload *wl)
{
    run *r = wl->r;
    if (r->stopped || r->db == NULL)
        return;
    check_store(wl->r, NULL, "after a reopen", false);
}

/* Small writes, a deferred one every `defer_every`, a sync one every
 * `sync_every`, a read now and then. */
static void writes(workload *wl, int n, int sync_every, int defer_every, uint64_t *rng)
{
    for (int j = 0; j < n; j++) {
        bool defer = defer_every && j % defer_every == defer_every - 1;
        bool sync = sync_every && j % sync_every == sync_every - 1;
        uint32_t len = defer ? 12000 + (uint32_t)(tu_xorshift64(rng) % 8000)
                             : 100 + (uint32_t)(tu_xorshift64(rng) % 900);
        put(wl, len, sync && !defer, defer);
        quiesce(wl->r);
        if (j % 7 == 6 && wl->r->nw > 0) {
            get(wl, (int)(tu_xorshift64(rng) % (uint64_t)wl->r->nw));
            quiesce(wl->r);
        }
    }
}

/* Small and large (deferred) writes, sync writes, memtable switches,
 * flushes; enough level-0 tables for compactions; a sync of deferred bytes
 * (it flushes them). */
static void phase_fill(workload *wl, uint64_t *rng)
{
    run *r = wl->r;
    writes(wl, 120, 10, 6, rng);
    barrier(wl, 0);
    quiesce(r);
    int first_deferred = r->nw;
    writes(wl, 8, 0, 1, rng);
    sync_upto(wl, first_deferred + 3);
    quiesce(r);
    barrier(wl, 1);
    quiesce(r);
}

/* Deferred batches in more than one memtable, logged late by one logged
 * write while the first memtable's flush is held: the live log then holds
 * more than a memtable's worth, so replay after the power cut that ends
 * this phase spills over several memtables (all from one log). */
static void phase_spill(workload *wl)
{
    run *r = wl->r;
    fault_env_hold_dir_syncs(r->fe, true);
    for (int j = 0; j < 5; j++) {
        put(wl, 18000, false, true);
        quiesce(r);
    }
    put(wl, 200, false, false);
    quiesce(r);
    /* Had that write failed (full disk: its late batches go back), the
     * barrier would flush them and wait for the held sync forever. */
    if (r->nw > 0 && r->w[r->nw - 1].state == WR_OK)
        barrier(wl, 0);
    quiesce(r);
    fault_env_hold_dir_syncs(r->fe, false);
    quiesce(r);
    planned_cut(wl);
}

/* Reopen (a fresh MANIFEST: a MANIFEST roll) with the background's flushes
 * held; a deferred write lands in the active memtable before the oldest
 * memtable is flushed; then a sync write and a power cut, and a reopen. */
static void phase_reopen_spilled(workload *wl)
{
    run *r = wl->r;
    fault_env_hold_dir_syncs(r->fe, true);
    db_open(wl);
    quiesce(r);
    after_reopen(wl);
    put(wl, 16000, false, true);
    quiesce(r);
    fault_env_hold_dir_syncs(r->fe, false);
    quiesce(r);
    put(wl, 300, true, false);
    quiesce(r);
    planned_cut(wl);
    db_open(wl);
    quiesce(r);
    after_reopen(wl);
}

/* More of everything, a manual compaction, deferred writes up to a clean
 * close, a reopen, and writes up to the last close. */
static void phase_compact_close(workload *wl, uint64_t *rng)
{
    run *r = wl->r;
    writes(wl, 60, 8, 5, rng);
    compact(wl);
    quiesce(r);
    writes(wl, 30, 0, 4, rng);
    db_close(wl);
    db_open(wl);
    quiesce(r);
    after_reopen(wl);
    writes(wl, 20, 5, 3, rng);
    db_close(wl);
}

/* The workload: every store path, each step followed by a settled
 * background (so both call streams are deterministic). */
static void workload_run(workload *wl)
{
    uint64_t rng = SEED;
    db_open(wl);
    quiesce(wl->r);
    phase_fill(wl, &rng);
    phase_spill(wl);
    phase_reopen_spilled(wl);
    phase_compact_close(wl, &rng);
}

/* -------------------------------------------------------------- checks */

struct verify_ctx {
    char first[512];
};

static void verify_report(void *ctx, const char *msg)
{
    struct verify_ctx *v = ctx;
    if (v->first[0] == '\0')
        snprintf(v->first, sizeof(v->first), "%s", msg);
}

/* The rules, on the store as opened (db) after a crash or at the end:
 *  - it opens (a single transient fault must never leave it unopenable);
 *  - every key in it is one the workload wrote, with its value (nothing
 *    never written is served);
 *  - every write made durable (a sync write or barrier that succeeded
 *    after it was acknowledged, a successful close, or recovery after an
 *    earlier crash) is present: so nothing whose sync reported failure
 *    counts as durable unless a later sync succeeded, and if that sync
 *    lied, the data is missing here;
 *  - the writes of one epoch (between power cuts) that are not durable
 *    form a prefix: once an acknowledged one is absent, no write after it
 *    in the epoch (acknowledged or failed) is present;
 *  - a write found absent after an earlier crash stays absent;
 *  - lsm_verify is clean.
 * With `mark`, what is present becomes durable and what is absent lost
 * (the workload goes on from here). Returns false if something broke. */
static bool check_db(run *r, lsm_db *db, const char *when, bool mark)
{
    if (verbose) {
        uint64_t skipped = 0, lost = 0;
        lsm_property_u64(db, "lsm.recovered-skipped", &skipped);
        lsm_property_u64(db, "lsm.recovered-lost-deferred", &lost);
        fprintf(stderr, "  check %s: %d writes; recovered-skipped=%" PRIu64
                " recovered-lost-deferred=%" PRIu64 "\n", when, r->nw, skipped, lost);
    }
    bool *present = calloc((size_t)r->nw + 1, sizeof(bool));
    assert_non_null(present);
    sweep_scan sc = SWEEP_SCAN_OF(&swrites, r);
    lsm_status *s = sweep_scan_db(&sc, db, true, when, present);
    if (s && mark) {
        /* In the workload's env a read may be the call that fails: then
         * nothing can be concluded here, and the workload stops (the final
         * check, with the plain env, still judges every write). */
        lsm_status_free(s);
        free(present);
        r->stopped = true;
        return true;
    }
    if (s)
        broke(r, "%s: scan failed: %s", when, lsm_status_message(s));
    lsm_status_free(s);
    int absent_ok = -1; /* an acknowledged, not durable write found absent */
    int epoch = -1;
    for (int i = 0; i < r->nw; i++) {
        const struct wrec *w = &r->w[i];
        if (w->epoch != epoch) {
            epoch = w->epoch;
            absent_ok = -1;
        }
        if (w->durable && !present[i])
            broke(r, "%s: write %d (%s%s) was made durable but is missing", when, i,
                  w->deferred ? "deferred" : "logged", w->vlen > 1000 ? ", large" : "");
        if (w->lost && present[i])
            broke(r, "%s: write %d was lost in an earlier crash but is back", when, i);
        if (present[i] && absent_ok >= 0 && !w->lost)
            broke(r, "%s: write %d is present but acknowledged write %d before it is not "
                     "(not a prefix)", when, i, absent_ok);
        if (!present[i] && w->state == WR_OK && !w->lost && absent_ok < 0)
            absent_ok = i;
    }
    struct verify_ctx vc = {{0}};
    s = lsm_verify(db, verify_report, &vc);
    if (s && mark)
        r->stopped = true; /* as for the scan: maybe the fault; the final check judges */
    else if (s)
        broke(r, "%s: lsm_verify: %s", when, vc.first[0] ? vc.first : lsm_status_message(s));
    lsm_status_free(s);
    if (mark) {
        for (int i = 0; i < r->nw; i++) {
            if (present[i])
                r->w[i].durable = true;
            else
                r->w[i].lost = true;
        }
    }
    free(present);
    return r->fail[0] == '\0';
}

/* Checks the store: the workload's own open one (dir NULL: it goes on),
 * or, at the end, the one in dir opened with the plain env. */
static bool check_store(run *r, const char *dir, const char *when, bool final)
{
    if (dir == NULL)
        return check_db(r, r->db, when, true);
    lsm_options o = options(tu_env());
    o.create_if_missing = false;
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, dir, &db);
    bool any_acked = false;
    for (int i = 0; i < r->nw; i++)
        any_acked = any_acked || r->w[i].state == WR_OK;
    if (s && !any_acked && lsm_status_code(s) == LSM_INVALID_ARGUMENT && r->nw == 0) {
        lsm_status_free(s); /* the fault came before the store was made: nothing to lose */
        return true;
    }
    if (s) {
        broke(r, "%s: the store does not open: %s", when, lsm_status_message(s));
        lsm_status_free(s);
        return false;
    }
    bool ok = check_db(r, db, when, false);
    s = lsm_close(db);
    lsm_status_free(s);
    (void)final;
    return ok;
}

/* ------------------------------------------------------------ the sweep */

typedef struct call_rec {
    uint8_t call;
    char name[40]; /* the file name (no directory) */
} call_rec;

typedef struct trace {
    call_rec *c[FAULT_STREAMS];
    uint64_t n[FAULT_STREAMS];
} trace;

static void trace_call(void *ctx, int stream, uint64_t index, enum fault_call c, const char *path)
{
    trace *t = ctx;
    if (index >= MAX_CALLS)
        return;
    const char *slash = strrchr(path, '/');
    call_rec *rec = &t->c[stream][index];
    rec->call = (uint8_t)c;
    snprintf(rec->name, sizeof(rec->name), "%s", slash ? slash + 1 : path);
    if (index + 1 > t->n[stream])
        t->n[stream] = index + 1;
}

static char base_dir[200];

/* A fault mode of the sweep: a fault_env kind, with or without lost
 * writeback (a failed sync's pages are lost: fsyncgate). */
typedef struct mode {
    const char *name;
    enum fault_kind kind;
    bool lost_writeback; /* a failed sync's pages are lost */
    bool cut_on_claim;   /* the power goes at the next durable claim */
} mode;

static const mode modes[] = {
    {"EIO", FAULT_EIO, false, false},
    {"ENOSPC", FAULT_ENOSPC, false, false},
    {"power-cut", FAULT_POWER_CUT, false, false},
    {"sync-lie", FAULT_SYNC_LIE, false, false},
    {"sync-lost", FAULT_EIO, true, true},       /* fsyncgate */
    {"disk-full", FAULT_DISK_FULL, false, false}, /* ENOSPC from this call on */
};
#define NMODES ((int)(sizeof(modes) / sizeof(modes[0])))

static bool mode_applies(const mode *m, enum fault_call c)
{
    if (m->lost_writeback)
        return c == FC_SYNC || c == FC_SYNC_FILE;
    return fault_kind_applies(m->kind, c);
}

/* Empties the run and makes its directory and env: call `index` of
 * `stream` armed to fail as m (stream < 0: nothing armed; this is the
 * counting run, which records every call in t). */
static void run_start(run *r, int stream, uint64_t index, const mode *m, trace *t)
{
    memset(r, 0, offsetof(run, scratch));
    snprintf(r->dir, sizeof(r->dir), "%s/db", base_dir);
    tu_rmtree(base_dir);
    ASSERT_OK(tu_env()->create_dir(tu_env(), base_dir));
    r->fe = fault_env_new(tu_env());
    assert_non_null(r->fe);
    fault_env_set_max_sleep_us(r->fe, 2000); /* pacing sleeps */
    /* The others compare their calls with the record (recording them would
     * overwrite it past N). */
    fault_env_count_start(r->fe, stream < 0 ? trace_call : NULL, t);
    r->kind = FAULT_KINDS;
    if (stream >= 0) {
        fault_env_set_lost_writeback(r->fe, m->lost_writeback);
        r->cut_on_claim = m->cut_on_claim;
        fault_env_arm(r->fe, stream, index, m->kind);
        r->kind = m->kind;
    }
}

/* Whether the call that failed is the one the counting run made at
 * (stream, index): if not, the run is not the same run. */
static void check_same_run(run *r, int stream, uint64_t index, const trace *t)
{
    enum fault_call fc = FC_COUNT;
    char fpath[300] = "";
    bool fired = fault_env_fired(r->fe, &fc, fpath, sizeof(fpath));
    if (stream < 0)
        return;
    if (!fired) {
        broke(r, "not the same run: call %" PRIu64 " of stream %d never came", index, stream);
        return;
    }
    const call_rec *want = &t->c[stream][index];
    const char *slash = strrchr(fpath, '/');
    const char *got = slash ? slash + 1 : fpath;
    if (want->call != fc || strcmp(want->name, got) != 0)
        broke(r, "not the same run: the call failed was %s %s, the counting run had %s %s",
              fault_call_name(fc), got, fault_call_name(want->call), want->name);
}

/* After the workload: a process crash (the OS keeps what it was handed),
 * then a power cut (only what was synced stays), each checked with the
 * plain env. Frees the env. */
static void check_crashes(run *r)
{
    if (!r->cut) {
        char crash[300];
        snprintf(crash, sizeof(crash), "%s/crash", base_dir);
        tu_copy_dir(r->dir, crash); /* a process crash keeps all of it */
        check_store(r, crash, "after a process crash", true);
    }
    lsm_status *s = fault_env_power_cut(r->fe);
    if (s)
        fail_msg("power cut: %s", lsm_status_message(s));
    fault_env_free(r->fe);
    r->fe = NULL;
    check_store(r, r->dir, "after a power cut", true);
}

/* One run: the workload with (stream, index) failing as m (stream < 0:
 * none), then the checks. Returns false (r->fail says why) if one broke. */
static bool one_run(run *r, int stream, uint64_t index, const mode *m, trace *t)
{
    run_start(r, stream, index, m, t);
    workload wl = {.r = r, .kind = r->kind};
    workload_run(&wl);
    if (r->db) { /* stopped by a power cut: closing writes nothing */
        lsm_status_free(close_db(r));
    }
    check_same_run(r, stream, index, t);
    fault_env_count_stop(r->fe);
    check_crashes(r);
    return r->fail[0] == '\0';
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* The sweep's state: the counting run's record and what ran since. */
typedef struct sweep {
    run *r;
    trace *t;
    uint64_t mains, total; /* calls: the workload's own, and all */
    bool full;             /* every N (IO_SWEEP=full), else a sample */
    bool keep_going;       /* IO_SWEEP_ALL: go on after a failure */
    long only_mode;        /* IO_SWEEP_KIND, -1: every mode */
    bool some_modes;       /* EIO and power-cut only (the sample over RADOS) */
    int runs, failures;
    struct timespec t0;
} sweep;

static sweep *sweep_new(void)
{
    sweep *sw = calloc(1, sizeof(*sw));
    assert_non_null(sw);
    assert_non_null(sw->r = calloc(1, sizeof(*sw->r)));
    assert_non_null(sw->t = calloc(1, sizeof(*sw->t)));
    for (int i = 0; i < FAULT_STREAMS; i++)
        assert_non_null(sw->t->c[i] = calloc(MAX_CALLS, sizeof(call_rec)));
    assert_non_null(sw->r->scratch = malloc(1u << 20));
    sw->full = getenv("IO_SWEEP") && strcmp(getenv("IO_SWEEP"), "full") == 0;
    sw->keep_going = env_long("IO_SWEEP_ALL", 0) != 0;
    sw->only_mode = env_long("IO_SWEEP_KIND", -1);
    sw->some_modes = tu_on_rados() && !sw->full && env_long("IO_SWEEP_ALL_MODES", 0) == 0;
    if (tu_on_rados()) {
        tu_mkdtemp(base_dir, sizeof(base_dir), "io-sweep"); /* run_start empties it */
    } else {
        snprintf(base_dir, sizeof(base_dir), "%s/lsm-io-sweep-%d",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
        (void)mkdir(base_dir, 0755);
    }
    clock_gettime(CLOCK_MONOTONIC, &sw->t0);
    return sw;
}

static void sweep_free(sweep *sw)
{
    tu_rmtree(base_dir);
    for (int i = 0; i < FAULT_STREAMS; i++)
        free(sw->t->c[i]);
    free(sw->r->scratch);
    free(sw->t);
    free(sw->r);
    free(sw);
}

/* The counting run: the workload without a fault, every call recorded.
 * Returns whether it broke nothing. */
static bool count_calls(sweep *sw)
{
    bool clean = one_run(sw->r, -1, 0, NULL, sw->t);
    sw->mains = sw->t->n[FAULT_STREAM_MAIN];
    sw->total = sw->mains + sw->t->n[FAULT_STREAM_OTHER];
    printf("io sweep: the workload makes %" PRIu64 " env calls (%" PRIu64 " its own, %" PRIu64
           " the background's), %d writes\n",
           sw->total, sw->mains, sw->total - sw->mains, sw->r->nw);
    if (getenv("IO_SWEEP_DUMP") != NULL) /* for comparing runs */
        for (int st = 0; st < FAULT_STREAMS; st++)
            for (uint64_t i = 0; i < sw->t->n[st]; i++)
                printf("%d %" PRIu64 " %s %s\n", st, i, fault_call_name(sw->t->c[st][i].call),
                       sw->t->c[st][i].name);
    if (!clean)
        printf("io sweep: FAILED without any fault: %s\n", sw->r->fail);
    assert_true(sw->mains < MAX_CALLS && sw->total - sw->mains < MAX_CALLS);
    return clean;
}

/* Which N run: all (full), one (IO_SWEEP_N), or every IO_SWEEP_STRIDE-th
 * plus IO_SWEEP_RANDOM drawn with the fixed seed. Returns a calloc'd array. */
static bool *pick_calls(const sweep *sw)
{
    long stride = env_long("IO_SWEEP_STRIDE", tu_on_rados() ? 700 : 31);
    long nrandom = env_long("IO_SWEEP_RANDOM", tu_on_rados() ? 2 : 30);
    long only_n = env_long("IO_SWEEP_N", -1);
    bool *pick = calloc(sw->total + 1, sizeof(bool));
    assert_non_null(pick);
    uint64_t rng = SEED;
    for (uint64_t n = 0; n < sw->total; n++)
        pick[n] = sw->full || (only_n < 0 && stride > 0 && n % (uint64_t)stride == 0) ||
                  (long)n == only_n;
    for (long j = 0; !sw->full && only_n < 0 && j < nrandom && sw->total > 0; j++)
        pick[tu_xorshift64(&rng) % sw->total] = true;
    return pick;
}

/* Runs call N (counted over both streams) failing in every mode that
 * applies to it. Returns false once the sweep should stop. */
static bool sweep_call_n(sweep *sw, uint64_t n)
{
    int stream = n < sw->mains ? FAULT_STREAM_MAIN : FAULT_STREAM_OTHER;
    uint64_t idx = n < sw->mains ? n : n - sw->mains;
    const call_rec *c = &sw->t->c[stream][idx];
    for (int k = 0; k < NMODES; k++) {
        if ((sw->only_mode >= 0 && k != sw->only_mode) || !mode_applies(&modes[k], c->call) ||
            (sw->some_modes && sw->only_mode < 0 && modes[k].kind != FAULT_EIO &&
             modes[k].kind != FAULT_POWER_CUT) ||
            (sw->some_modes && sw->only_mode < 0 && modes[k].lost_writeback))
            continue;
        sw->runs++;
        if (one_run(sw->r, stream, idx, &modes[k], sw->t))
            continue;
        sw->failures++;
        printf("io sweep: FAILED at N=%" PRIu64 " (%s call %" PRIu64 ": %s %s), %s: %s\n", n,
               stream ? "background" : "workload", idx, fault_call_name(c->call), c->name,
               modes[k].name, sw->r->fail);
        fflush(stdout);
        if (!sw->keep_going)
            return false;
    }
    return true;
}

static void test_io_sweep(void **state)
{
    (void)state;
    verbose = env_long("IO_SWEEP_VERBOSE", 0) != 0;
    sweep *sw = sweep_new();
    bool clean = count_calls(sw);
    if (!clean && !sw->keep_going) {
        char why[sizeof(sw->r->fail)];
        snprintf(why, sizeof(why), "%s", sw->r->fail);
        sweep_free(sw);
        fail_msg("the workload breaks the store without any fault: %s", why);
    }
    bool *pick = pick_calls(sw);
    for (uint64_t n = 0; n < sw->total; n++)
        if (pick[n] && !sweep_call_n(sw, n))
            break;
    free(pick);
    printf("io sweep: %d runs (%s), %d failed, %.1f s\n", sw->runs,
           sw->full ? "full" : "sampled", sw->failures, seconds_since(&sw->t0));
    int failures = sw->failures + !clean;
    sweep_free(sw);
    if (failures > 0)
        fail_msg("the I/O-error sweep found %d failing runs (first above)", failures);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
