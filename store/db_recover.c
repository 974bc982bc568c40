/*
 * db_recover.c — recovery at open (see db_recover.h): the live logs are
 * replayed in order through the replay filter, which applies a prefix of
 * the writes whatever deferred batches were lost; damage stops the replay
 * (judge_stop decides whether open may go on); what was replayed is synced
 * and written to tables, then a fresh WAL takes the writes.
 */
#include "db_recover.h"
#include "db_impl.h"
#include "filename.h"
#include "grow.h"
#include "lsm_malloc.h"
#include "status.h"
#include "version.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct log_list {
    uint64_t *numbers;
    int n;
} log_list;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Finds the live logs (number >= the MANIFEST's log number), oldest first,
 * and marks every file number seen as used. REQUIRES: mu held. */
static lsm_status *find_logs(lsm_db *db, log_list *logs)
{
    char **names;
    int n;
    lsm_status *s = db->env->get_children(db->env, db->dir, &names, &n);
    if (s)
        return s;
    logs->numbers = lsm_malloc((size_t)(n + 1) * sizeof(uint64_t));
    logs->n = 0;
    if (logs->numbers == NULL) {
        env_free_children(names, n);
        return status_new(LSM_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        uint64_t number;
        enum file_type type;
        if (!parse_file_name(names[i], &number, &type))
            continue;
        vset_mark_file_number_used(&db->vs, number);
        if (type == FILE_LOG && number >= db->vs.log_number)
            logs->numbers[logs->n++] = number;
    }
    env_free_children(names, n);
    qsort(logs->numbers, (size_t)logs->n, sizeof(uint64_t), cmp_u64);
    return NULL;
}

/* Moves a full recovered memtable to the immutable list. REQUIRES: mu held. */
static lsm_status *retire_recovered_mem(lsm_db *db, uint64_t next_log)
{
    memtable *fresh = db_memtable_new(db);
    if (fresh == NULL || !db_push_imm(db, fresh, next_log)) {
        if (fresh)
            memtable_unref(fresh);
        return status_new(LSM_NO_MEMORY, "out of memory during recovery");
    }
    return NULL;
}

static lsm_status *replay_record(lsm_db *db, uint64_t log, const char *rec, size_t n, lsm_batch *b)
{
    lsm_status *s = batch_set_contents(b, rec, n);
    if (s)
        return s;
    if (memtable_entries(db->mem) == 0)
        db->mem_log = log;
    uint64_t seq = batch_sequence(b);
    uint32_t count = lsm_batch_count(b);
    if (seq == 0 || seq > MAX_SEQUENCE - count)
        return status_new(LSM_CORRUPTION, "bad sequence number %" PRIu64, seq);
    if ((s = batch_insert_into(b, db->mem)) != NULL)
        return s;
    if (count && seq + count - 1 > db->last_seq)
        db->last_seq = seq + count - 1;
    db->stats.recovered_records++;
    if (memtable_memory_usage(db->mem) >= db->opt.write_buffer_size)
        return retire_recovered_mem(db, log);
    return NULL;
}

/* Where replay stopped: after it, no record applies until a WAL_EPOCH (which
 * a recovery that stopped writes first into its fresh log). */
typedef struct replay_stop {
    bool stopped;
    bool damaged;       /* a stop was at damage, not only at zero holes */
    bool hole;          /* the first stop was at a zero hole (a torn tail) */
    char *log;          /* the log of the first stop (NULL: none) */
    uint64_t offset;    /* byte where the hole or damage began */
    uint64_t log_size;  /* that log's size */
    const char *why;    /* what the damage was */
    uint64_t dropped;   /* good records not applied since */
    int later_logs;     /* logs after it whose records were not applied */
} replay_stop;

static void report(lsm_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(lsm_db *db, const char *fmt, ...)
{
    if (db->opt.report == NULL)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    db->opt.report(db->opt.report_ctx, msg);
}

/* Stops replay at the damage or hole the reader just met in log `name`. */
static void stop_replay(lsm_db *db, replay_stop *stop, const char *name,
                        const wal_reader_stats *st, bool hole)
{
    stop->stopped = true;
    stop->damaged = stop->damaged || !hole;
    if (stop->log != NULL)
        return; /* the first stop is the one reported */
    stop->hole = hole;
    stop->log = lsm_strdup(name);
    stop->offset = hole ? st->hole_offset : st->damage_offset;
    stop->why = hole ? "zero-filled hole" : st->damage_why;
    stop->log_size = 0;
    lsm_status_free(db->env->file_size(db->env, name, &stop->log_size));
}

static void dropped_put(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val;
    (void)vlen;
    const lsm_db *db = ctx;
    db->opt.report_dropped_key(db->opt.report_ctx, key, klen);
}

static void dropped_del(void *ctx, const void *key, size_t klen)
{
    dropped_put(ctx, key, klen, NULL, 0);
}

/* Passes each key of a batch record replay dropped to report_dropped_key. */
static void report_dropped_keys(lsm_db *db, const char *rec, size_t n, lsm_batch *b)
{
    if (db->opt.report_dropped_key == NULL)
        return;
    lsm_status *s = batch_set_contents(b, rec, n);
    lsm_batch_handler h = {db, dropped_put, dropped_del};
    if (s == NULL)
        s = lsm_batch_iterate(b, &h);
    lsm_status_free(s); /* a record that does not decode names no key */
}

/* Applies one record unless replay stopped before it (then only a WAL_EPOCH,
 * which starts a later recovery's log, resumes it). */
static lsm_status *replay_one(lsm_db *db, uint64_t number, const char *rec, size_t n,
                              replay_filter *filter, replay_stop *stop, lsm_batch *b)
{
    if (stop->stopped) {
        uint64_t seq;
        uint32_t count;
        enum wal_record_kind kind = wal_record_kind_of(rec, n, &seq, &count);
        if (kind == WAL_BATCH) {
            stop->dropped++;
            report_dropped_keys(db, rec, n, b);
        }
        if (kind != WAL_EPOCH)
            return NULL;
        stop->stopped = false;
    }
    bool apply;
    lsm_status *s = replay_filter_check(filter, rec, n, &apply);
    if (s == NULL && apply)
        s = replay_record(db, number, rec, n, b);
    return s;
}

/* Replays one log into the memtables; filter carries the deferred markers
 * seen from one log to the next, stop where replay stopped. REQUIRES: mu. */
static lsm_status *replay_log(lsm_db *db, uint64_t number, replay_filter *filter,
                              replay_stop *stop)
{
    char *name = log_file_name(db->dir, number);
    lsm_sfile *f = NULL;
    wal_reader *r = NULL;
    lsm_batch b;
    if (name == NULL || !batch_init(&b)) {
        free(name);
        return status_new(LSM_NO_MEMORY, "out of memory");
    }
    if (stop->stopped)
        stop->later_logs++;
    bool stopped_here = false;
    lsm_status *s = db->env->new_sfile(db->env, name, &f);
    if (s == NULL && (r = wal_reader_new(f, name, false)) == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    if (r != NULL)
        wal_reader_end_at_hole(r);
    while (s == NULL) {
        const char *rec;
        size_t n;
        bool eof;
        s = wal_read_record(r, &rec, &n, &eof);
        if (s || eof)
            break;
        const wal_reader_stats *st = wal_reader_stats_get(r);
        if (!stopped_here && st->corruptions > 0) {
            stop_replay(db, stop, name, st, false);
            stopped_here = true;
        }
        s = replay_one(db, number, rec, n, filter, stop, &b);
        if (s)
            s = status_wrap(s, "%s", name);
    }
    if (r) {
        const wal_reader_stats *st = wal_reader_stats_get(r);
        if (s == NULL && st->hole && !stopped_here)
            stop_replay(db, stop, name, st, true);
        db->stats.recovered_dropped_bytes += st->dropped_bytes;
        db->stats.recovered_torn_bytes += st->torn_tail_bytes;
        wal_reader_free(r);
    }
    batch_destroy(&b);
    free(name);
    return s;
}

/* What replay left out, for the report or the refusal. */
static void describe_stop(const replay_stop *stop, char *out, size_t len)
{
    snprintf(out, len,
             "log %s: %s at byte %" PRIu64 "; bytes %" PRIu64 "-%" PRIu64
             " of it and %d later log(s), %" PRIu64 " record(s), not applied",
             stop->log, stop->why ? stop->why : "damage", stop->offset, stop->offset,
             stop->log_size, stop->later_logs, stop->dropped);
}

/* Decides what a stop means: a hole is a torn tail (reported, not an error);
 * damage fails the open unless salvage_log. */
static lsm_status *judge_stop(lsm_db *db, const replay_stop *stop)
{
    if (stop->log == NULL)
        return NULL;
    char what[1024];
    describe_stop(stop, what, sizeof what);
    if (!stop->damaged || db->opt.salvage_log) {
        const char *kept = stop->damaged ? "the records before it are kept"
                                         : "torn tail after a power cut";
        report(db, "%s (%s)", what, kept);
        db->stats.recovered_salvaged = stop->damaged;
        return NULL;
    }
    return status_new(LSM_CORRUPTION, "%s (salvage_log keeps the records before it)", what);
}

lsm_status *db_current_exists(lsm_db *db, bool *exists)
{
    char *cur = current_file_name(db->dir);
    if (cur == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    *exists = db->env->file_exists(db->env, cur);
    free(cur);
    return NULL;
}

/* Opens or creates the MANIFEST. REQUIRES: mu held. */
static lsm_status *open_manifest(lsm_db *db)
{
    bool exists;
    lsm_status *s = db_current_exists(db, &exists);
    if (s)
        return s;
    if (exists && db->opt.error_if_exists)
        return status_new(LSM_INVALID_ARGUMENT, "%s: store exists (error_if_exists)", db->dir);
    if (exists)
        return vset_recover(&db->vs);
    if (!db->opt.create_if_missing)
        return status_new(LSM_INVALID_ARGUMENT, "%s: not an lsmfs store (no CURRENT file)",
                          db->dir);
    return vset_create(&db->vs);
}

/* Starts the fresh log with a WAL_EPOCH, durable before any write: the
 * records this recovery skipped (after a lost deferred batch) stay skipped
 * when the old logs are replayed again, while this log's apply.
 * REQUIRES: mu held; db->wal fresh. */
static lsm_status *write_epoch(lsm_db *db)
{
    char epoch[WAL_MARKER_LEN];
    wal_marker_encode(epoch, WAL_EPOCH, 0, 0);
    lsm_status *s = wal_add_record(db->wal, epoch, sizeof(epoch));
    if (s == NULL)
        s = wal_flush(db->wal);
    if (s == NULL)
        s = wal_sync(db->wal);
    if (s == NULL)
        db->wal_written = db->wal_synced = wal_offset(db->wal);
    return s;
}

/* Closes and removes the log recovery just made, when the open fails: a
 * refused open leaves no file (each left log was replayed and synced by every
 * later open). Safe until the open succeeds: the new log holds at most the
 * epoch, every recovered record is still in the old logs or in tables the
 * MANIFEST names, and a MANIFEST that names the new log as its first makes
 * the old logs obsolete only after their records are in those tables.
 * REQUIRES: mu held. */
static void drop_new_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    lsm_status_free(wal_writer_close(db->wal));
    db->wal = NULL;
    char *name = log_file_name(db->dir, db->wal_number);
    if (name != NULL)
        lsm_status_free(db->env->remove_file(db->env, name));
    free(name);
}

lsm_status *db_recover(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    lsm_status *s = open_manifest(db);
    log_list logs = {NULL, 0};
    if (s == NULL)
        s = find_logs(db, &logs);
    db->last_seq = db->vs.last_seq;
    replay_filter f;
    replay_filter_init(&f);
    replay_stop stop = {0};
    for (int i = 0; s == NULL && i < logs.n; i++)
        s = replay_log(db, logs.numbers[i], &f, &stop);
    if (s == NULL)
        s = judge_stop(db, &stop);
    bool dropped = replay_filter_dropped(&f) || stop.log != NULL;
    db->stats.recovered_skipped = f.skipped + stop.dropped;
    db->stats.recovered_lost = replay_filter_lost(&f);
    replay_filter_free(&f);
    free(stop.log);
    if (db->opt.read_only) {
        free(logs.numbers);
        db->durable_seq = db->last_seq;
        return s;
    }
    /* What was replayed may never have been synced (a crash of the process,
     * not of the machine): make it durable before any new sync can promise
     * "and everything before it". */
    for (int i = 0; s == NULL && i < logs.n; i++) {
        char *name = log_file_name(db->dir, logs.numbers[i]);
        s = name ? db->env->sync_file(db->env, name) : status_new(LSM_NO_MEMORY, "out of memory");
        free(name);
    }
    db->durable_seq = db->last_seq;
    free(logs.numbers);
    if (s)
        return s;
    /* Every write goes to a fresh log; the replayed ones stay live until
     * their memtables are written out. */
    uint64_t number = vset_new_file_number(&db->vs);
    if ((s = db_new_wal(db, number, false, &db->wal)) != NULL)
        return s;
    db->wal_number = number;
    if (dropped && (s = write_epoch(db)) != NULL) {
        drop_new_wal(db); /* nothing names it yet: a refused open leaves no file */
        return s;
    }
    if (memtable_entries(db->mem) == 0)
        db->mem_log = number;
    else
        s = retire_recovered_mem(db, number);
    if (s == NULL)
        s = db_flush_recovered(db);
    if (s != NULL) {
        drop_new_wal(db);
        return s;
    }
    version_edit e;
    version_edit_init(&e);
    version_edit_set_log_number(&e, db->nimm ? db->imm_log[0] : db->mem_log);
    version_edit_set_last_seq(&e, db->last_seq);
    s = vset_log_and_apply(&db->vs, &e, db->last_seq);
    version_edit_destroy(&e);
    if (s == NULL)
        db_delete_obsolete_files(db);
    else
        drop_new_wal(db);
    return s;
}

/* ---------------------------------------- the replay filter (db_defer.c's
 * markers: which records apply) */

void replay_filter_init(replay_filter *f)
{
    memset(f, 0, sizeof(*f));
}

void replay_filter_free(replay_filter *f)
{
    free(f->waiting);
    memset(f, 0, sizeof(*f));
}

/* Notes a marker whose batch must follow. false if out of memory. */
static bool await(replay_filter *f, uint64_t seq, uint32_t count)
{
    struct replay_wait *w = lsm_grow(f->waiting, &f->cap, f->n + 1, sizeof(*w), 16);
    if (w == NULL)
        return false;
    f->waiting = w;
    f->waiting[f->n++] = (struct replay_wait){seq, count};
    return true;
}

lsm_status *replay_filter_check(replay_filter *f, const char *rec, size_t n, bool *apply)
{
    uint64_t seq = 0;
    uint32_t count = 0;
    enum wal_record_kind kind = wal_record_kind_of(rec, n, &seq, &count);
    *apply = false;
    if (kind == WAL_EPOCH) { /* what was skipped before stays skipped */
        f->lost += (uint64_t)f->n;
        f->n = f->head = 0;
        f->skipping = false;
        return NULL;
    }
    if (f->skipping) {
        f->skipped++;
        return NULL;
    }
    if (kind == WAL_DEFERRED) {
        if (f->n == f->head)
            f->n = f->head = 0;
        return await(f, seq, count) ? NULL : status_new(LSM_NO_MEMORY, "out of memory");
    }
    /* A batch applies unless a deferred batch before it is missing.
     * Logged records come in sequence order, so one older than the awaited
     * batch is a late copy of an earlier deferred batch, logged in the same
     * run before the awaited one's copy: its marker went with an earlier
     * log, gone since its memtable became a table (re-applying a batch a
     * table holds is harmless). So is any batch when nothing is awaited. */
    if (f->head < f->n) {
        const struct replay_wait *w = &f->waiting[f->head];
        bool header = n >= BATCH_HEADER;
        uint64_t rec_seq = header ? decode_fixed64(rec) : 0;
        if (header && rec_seq == w->seq && decode_fixed32(rec + 8) == w->count) {
            f->head++; /* the awaited batch, logged late */
        } else if (!header || rec_seq >= w->seq) {
            /* After a deferred batch that is in no log nor table: the
             * batch is lost, so is everything after it. */
            f->skipping = true;
            f->skipped++;
            return NULL;
        }
    }
    *apply = true;
    return NULL;
}

bool replay_filter_dropped(const replay_filter *f)
{
    return f->skipping || f->head < f->n;
}

uint64_t replay_filter_lost(const replay_filter *f)
{
    return f->lost + (uint64_t)(f->n - f->head);
}
