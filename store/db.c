/*
 * db.c — opening (with recovery), closing, reads, snapshots and properties of
 * an lsm_db. Writes are in db_write.c, user iterators in db_iter.c.
 */
#include "db_impl.h"
#include "lsm_malloc.h"
#include "filename.h"
#include "version.h"
#include "status.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lsm_options_init(lsm_options *o)
{
    memset(o, 0, sizeof(*o));
    o->write_buffer_size = 8u << 20;
    o->max_memtable_bytes = 64u << 20;
    o->block_size = 4096;
    o->block_cache_size = 32u << 20;
    o->bloom_bits_per_key = 10;
    o->compression = true;
    o->target_file_size = 4u << 20;
    o->max_open_files = 1000;
    o->group_commit_delay_us = 40;
    o->deferred_max_age_ms = 5000;
    o->full_disk_retry_us = 100000;
    o->table_partition = NULL;
    o->env = NULL;
}

void lsm_read_options_init(lsm_read_options *o)
{
    o->snapshot = NULL;
    o->verify_checksums = false;
    o->fill_cache = true;
}

/* ------------------------------------------------------------- read views */

static void view_free(lsm_db *db, struct readview *rv)
{
    memtable_unref(rv->mem);
    for (int i = 0; i < rv->nimm; i++)
        memtable_unref(rv->imm[i]);
    if (rv->version) {
        bool held = mutex_held(&db->mu);
        if (!held)
            mutex_lock(&db->mu);
        version_unref(rv->version);
        if (!held)
            mutex_unlock(&db->mu);
    }
    free(rv);
}

struct readview *db_view_alloc(int cap_imm)
{
    struct readview *rv = lsm_calloc(1, sizeof(*rv) + (size_t)cap_imm * sizeof(memtable *));
    if (rv == NULL)
        return NULL;
    rv->imm = (memtable **)(rv + 1);
    rv->cap_imm = cap_imm;
    return rv;
}

bool db_install_view(lsm_db *db)
{
    struct readview *rv = db_view_alloc(db->nimm);
    if (rv == NULL)
        return false;
    db_view_install(db, rv);
    return true;
}

void db_view_install(lsm_db *db, struct readview *rv)
{
    assert(mutex_held(&db->mu) && db->nimm <= rv->cap_imm);
    atomic_init(&rv->refs, 1);
    rv->mem = db->mem;
    memtable_ref(rv->mem);
    for (int i = 0; i < db->nimm; i++) { /* db->imm is oldest first */
        rv->imm[i] = db->imm[db->nimm - 1 - i];
        memtable_ref(rv->imm[i]);
    }
    rv->nimm = db->nimm;
    rv->version = db->vs.current;
    version_ref(rv->version);
    struct readview *old = db->view;
    db->view = rv;
    if (old)
        db_unref_view(db, old);
}

struct readview *db_ref_view(lsm_db *db, uint64_t *seq, const lsm_read_options *ro)
{
    mutex_lock(&db->mu);
    struct readview *rv = db->view;
    atomic_fetch_add_explicit(&rv->refs, 1, memory_order_relaxed);
    *seq = (ro && ro->snapshot) ? ro->snapshot->seq : db->last_seq;
    mutex_unlock(&db->mu);
    return rv;
}

void db_unref_view(lsm_db *db, struct readview *rv)
{
    if (atomic_fetch_sub_explicit(&rv->refs, 1, memory_order_acq_rel) == 1)
        view_free(db, rv);
}

void db_set_bg_error(lsm_db *db, lsm_status *s)
{
    assert(mutex_held(&db->mu));
    status_keep_first(&db->bg_error, s);
}

/* --------------------------------------------------------------- recovery */

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
        return status_new(LSM_IO_ERROR, "out of memory");
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

size_t db_memtable_bytes(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    size_t n = memtable_memory_usage(db->mem);
    for (int i = 0; i < db->nimm; i++)
        n += memtable_memory_usage(db->imm[i]);
    return n;
}

bool db_push_imm(lsm_db *db, memtable *fresh, uint64_t fresh_log)
{
    assert(mutex_held(&db->mu));
    if (db->nimm == db->cap_imm) {
        int cap = db->cap_imm ? db->cap_imm * 2 : 4;
        memtable **imm = lsm_realloc(db->imm, (size_t)cap * sizeof(*imm));
        if (imm == NULL)
            return false;
        db->imm = imm;
        uint64_t *logs = lsm_realloc(db->imm_log, (size_t)cap * sizeof(*logs));
        if (logs == NULL)
            return false;
        db->imm_log = logs;
        uint64_t *ids = lsm_realloc(db->imm_id, (size_t)cap * sizeof(*ids));
        if (ids == NULL)
            return false;
        db->imm_id = ids;
        db->cap_imm = cap;
    }
    db->imm[db->nimm] = db->mem;
    db->imm_log[db->nimm] = db->mem_log;
    db->imm_id[db->nimm++] = db->mem_id;
    db->mem = fresh;
    db->mem_log = fresh_log;
    db->mem_id = db->next_mem_id++;
    return true;
}

/* Moves a full recovered memtable to the immutable list. REQUIRES: mu held. */
static lsm_status *retire_recovered_mem(lsm_db *db, uint64_t next_log)
{
    memtable *fresh = memtable_new();
    if (fresh == NULL || !db_push_imm(db, fresh, next_log)) {
        if (fresh)
            memtable_unref(fresh);
        return status_new(LSM_IO_ERROR, "out of memory during recovery");
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
        return status_new(LSM_IO_ERROR, "out of memory");
    }
    if (stop->stopped)
        stop->later_logs++;
    bool stopped_here = false;
    lsm_status *s = db->env->new_sfile(db->env, name, &f);
    if (s == NULL && (r = wal_reader_new(f, name, false)) == NULL)
        s = status_new(LSM_IO_ERROR, "out of memory");
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

/* Opens or creates the MANIFEST. REQUIRES: mu held. */
static lsm_status *open_manifest(lsm_db *db)
{
    char *cur = current_file_name(db->dir);
    if (cur == NULL)
        return status_new(LSM_IO_ERROR, "out of memory");
    bool exists = db->env->file_exists(db->env, cur);
    free(cur);
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

/* Closes and removes the log recovery just made, which no MANIFEST names
 * yet. REQUIRES: mu held. */
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

static lsm_status *recover(lsm_db *db)
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
        s = name ? db->env->sync_file(db->env, name) : status_new(LSM_IO_ERROR, "out of memory");
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
    else if ((s = retire_recovered_mem(db, number)) != NULL)
        return s;
    if ((s = db_flush_recovered(db)) != NULL)
        return s;
    version_edit e;
    version_edit_init(&e);
    version_edit_set_log_number(&e, db->nimm ? db->imm_log[0] : db->mem_log);
    version_edit_set_last_seq(&e, db->last_seq);
    s = vset_log_and_apply(&db->vs, &e, db->last_seq);
    version_edit_destroy(&e);
    if (s == NULL)
        db_delete_obsolete_files(db);
    return s;
}

/* ------------------------------------------------------------- open/close */

static lsm_status *check_is_store(lsm_db *db)
{
    char *cur = current_file_name(db->dir);
    if (cur == NULL)
        return status_new(LSM_IO_ERROR, "out of memory");
    bool exists = db->env->file_exists(db->env, cur);
    free(cur);
    if (!exists)
        return status_new(LSM_INVALID_ARGUMENT, "%s: not an lsmfs store (no CURRENT file)",
                          db->dir);
    return NULL;
}

/* Exclusive LOCK, or for read_only a shared one that creates nothing. */
static lsm_status *lock_store(lsm_db *db)
{
    char *name = lock_file_name(db->dir);
    if (name == NULL)
        return status_new(LSM_IO_ERROR, "out of memory");
    lsm_status *s = NULL;
    if (!db->opt.read_only)
        s = db->env->lock_file(db->env, name, &db->lock);
    else if (db->env->lock_file_shared != NULL)
        s = db->env->lock_file_shared(db->env, name, &db->lock);
    free(name);
    if (s && lsm_status_code(s) == LSM_BUSY) /* the env's reason names the holder */
        s = status_wrap(s, "%s: the store is in use by another process (or is mounted)",
                        db->dir);
    return s;
}

static void free_memtables(lsm_db *db)
{
    if (db->view)
        db_unref_view(db, db->view);
    db->view = NULL;
    if (db->mem)
        memtable_unref(db->mem);
    for (int i = 0; i < db->nimm; i++)
        memtable_unref(db->imm[i]);
    free(db->imm);
    free(db->imm_log);
    free(db->imm_id);
}

static void db_free(lsm_db *db)
{
    mutex_lock(&db->mu);
    db_free_deferred(db);
    free_memtables(db);
    if (db->wal)
        lsm_status_free(wal_writer_close(db->wal));
    vset_destroy(&db->vs);
    mutex_unlock(&db->mu);
    if (db->lock)
        lsm_status_free(db->env->unlock_file(db->env, db->lock));
    batch_destroy(&db->group);
    lsm_status_free(db->bg_error);
    lsm_status_free(db->nospace);
    table_cache_free(db->tables);
    cache_free(db->block_cache);
    free(db->pending);
    pthread_cond_destroy(&db->gather_cv);
    pthread_cond_destroy(&db->sync_cv);
    pthread_cond_destroy(&db->work_cv);
    pthread_cond_destroy(&db->room_cv);
    mutex_destroy(&db->mu);
    free(db->dir);
    free(db);
}

static lsm_status *check_options(const lsm_options *o)
{
    if (o->write_buffer_size < (64u << 10))
        return status_new(LSM_INVALID_ARGUMENT, "write_buffer_size must be at least 64 KiB");
    if (o->block_size < 256 || o->block_size > (4u << 20))
        return status_new(LSM_INVALID_ARGUMENT, "block_size must be in [256, 4 MiB]");
    return NULL;
}

static lsm_db *db_alloc(const lsm_options *o, const char *dir)
{
    lsm_db *db = lsm_calloc(1, sizeof(*db));
    if (db == NULL)
        return NULL;
    db->opt = *o;
    db->env = o->env ? o->env : lsm_env_default();
    db->opt.env = db->env;
    db->dir = lsm_strdup(dir);
    db->expected_group = 1;
    db->sync_max = SYNC_MAX;
    db->next_mem_id = 1; /* db->mem is memtable 0 */
    pacer_init(&db->pacer, 4 * (uint64_t)o->write_buffer_size);
    db->snapshots.next = db->snapshots.prev = &db->snapshots;
    mutex_init(&db->mu);
    cond_init_monotonic(&db->gather_cv);
    pthread_cond_init(&db->sync_cv, NULL);
    cond_init_monotonic(&db->work_cv); /* the flush thread's timed waits */
    pthread_cond_init(&db->room_cv, NULL);
    db->block_cache = cache_new(o->block_cache_size);
    db->tables = db->dir ? table_cache_new(db->env, db->dir, db->block_cache,
                                           o->max_open_files > 10 ? o->max_open_files - 10 : 10)
                         : NULL;
    bool ok = db->dir && db->block_cache && db->tables && batch_init(&db->group) &&
              (db->mem = memtable_new()) != NULL;
    lsm_status *s = ok ? vset_init(&db->vs, db->env, db->dir, &db->mu) : NULL;
    if (!ok || s) {
        lsm_status_free(s);
        free(db->dir);
        if (db->mem)
            memtable_unref(db->mem);
        if (db->tables)
            table_cache_free(db->tables);
        if (db->block_cache)
            cache_free(db->block_cache);
        batch_destroy(&db->group);
        free(db);
        return NULL;
    }
    db->vs.l0_compaction_trigger = L0_COMPACTION_TRIGGER;
    db->vs.l0_unit_bytes = o->write_buffer_size;
    return db;
}

/* After salvage_log the damaged log must go, or the next open meets the
 * damage again: the kept prefix is written to tables, which makes every
 * replayed log obsolete. */
static lsm_status *write_salvaged_prefix(lsm_db *db)
{
    lsm_status *s = db_flush_memtables(db, 0);
    if (s != NULL)
        return status_wrap(s, "writing the salvaged prefix to tables");
    return NULL;
}

lsm_status *lsm_open(const lsm_options *o, const char *dir, lsm_db **out)
{
    *out = NULL;
    lsm_status *s = check_options(o);
    if (s)
        return s;
    lsm_db *db = db_alloc(o, dir);
    if (db == NULL)
        return status_new(LSM_IO_ERROR, "out of memory opening %s", dir);
    if (o->create_if_missing && !o->read_only)
        s = env_create_dir_durable(db->env, dir);
    else
        s = check_is_store(db); /* before LOCK: leave foreign dirs untouched */
    if (s == NULL)
        s = lock_store(db);
    if (s == NULL && !o->read_only) /* a store made with looser modes */
        s = lsm_private_modes(db->env, dir, true, NULL, NULL, NULL);
    if (s == NULL) {
        mutex_lock(&db->mu);
        /* Recovery may need the reserve's space; it is made again after.
         * A read-only open touches no file. */
        bool reserve = !o->read_only;
        db->reserve_bytes = reserve ? db_reserve_size(db->env, dir, o->reserve_bytes) : 0;
        if (reserve)
            db_reserve_release(db);
        db->reserve_releases = db->reserve_tried_us = 0;
        s = recover(db);
        if (s == NULL && !db_install_view(db))
            s = status_new(LSM_IO_ERROR, "out of memory");
        if (s == NULL && reserve)
            (void)db_reserve_make(db); /* never needed to open */
        mutex_unlock(&db->mu);
    }
    if (s == NULL && !o->read_only)
        s = db_start_background(db);
    if (s == NULL && db->stats.recovered_salvaged && !o->read_only)
        s = write_salvaged_prefix(db);
    if (s) {
        db_stop_background(db); /* a no-op unless started */
        db_free(db);
        return s;
    }
    *out = db;
    return NULL;
}

/* After a clean flush the current log holds nothing: remove it so a closed
 * store is only its tables and MANIFEST (the next open starts a new log).
 * REQUIRES: mu held, background stopped. */
static void drop_empty_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->wal == NULL || memtable_entries(db->mem) != 0 || db->nimm != 0)
        return;
    lsm_status_free(wal_writer_close(db->wal));
    db->wal = NULL;
    char *name = log_file_name(db->dir, db->wal_number);
    if (name)
        lsm_status_free(db->env->remove_file(db->env, name));
    free(name);
}

/* Close's verdict: LSM_NO_SPACE says only that tables could not be
 * written; any failure that may put an acknowledged write at risk replaces
 * it (lsm.h). */
static void keep_at_risk(lsm_status **s, lsm_status *other)
{
    if (other != NULL && *s != NULL && lsm_status_code(*s) == LSM_NO_SPACE) {
        lsm_status_free(*s);
        *s = other;
        return;
    }
    status_keep_first(s, other);
}

/* A failed log step of close: any failure of it, a full disk too, may
 * leave acknowledged writes in no durable log. */
static lsm_status *at_risk(lsm_status *s)
{
    if (lsm_status_code(s) != LSM_NO_SPACE)
        return s;
    lsm_status *io = status_new(LSM_IO_ERROR, "logging the last writes at close: %s",
                                lsm_status_message(s));
    lsm_status_free(s);
    return io;
}

lsm_status *lsm_close(lsm_db *db)
{
    if (db == NULL)
        return NULL;
    if (db->opt.read_only) { /* nothing to write, no thread started */
        db_free(db);
        return NULL;
    }
    /* Write the memtables out, so the next open replays nothing and the
     * logs (with their preallocated space) can go. If that fails the logs
     * stay what recovery needs: every write goes into them (deferred
     * batches logged late) and is synced. Any failed step is reported,
     * the first one seen, even when the logs saved everything. */
    lsm_status *s = db_flush_memtables(db, 0);
    bool flushed = s == NULL;
    if (!flushed)
        keep_at_risk(&s, at_risk(lsm_sync(db)));
    db_stop_background(db);
    mutex_lock(&db->mu);
    /* no write or sync may be in flight at close */
    assert(db->head == NULL && db->sync_head == NULL && db->syncs_running == 0);
    bool sticky = db->bg_error != NULL;
    keep_at_risk(&s, status_copy(db->bg_error));
    if (!sticky && db->wal && !db->wal_broken && db->wal_synced < wal_offset(db->wal))
        keep_at_risk(&s, at_risk(wal_sync(db->wal)));
    if (s == NULL)
        drop_empty_wal(db);
    mutex_unlock(&db->mu);
    db_free(db);
    return s;
}

lsm_status *lsm_destroy(const lsm_options *o, const char *dir)
{
    lsm_env *env = o->env ? o->env : lsm_env_default();
    char **names;
    int n;
    lsm_status *s = env->get_children(env, dir, &names, &n);
    if (s) {
        lsm_status_free(s);
        return NULL; /* nothing there */
    }
    char path[4096];
    lsm_filelock *lock = NULL;
    snprintf(path, sizeof(path), "%s/LOCK", dir);
    s = env->lock_file(env, path, &lock);
    for (int i = 0; s == NULL && i < n; i++) {
        uint64_t number;
        enum file_type type;
        if (!parse_file_name(names[i], &number, &type) || type == FILE_LOCK)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        s = env->remove_file(env, path);
    }
    env_free_children(names, n);
    if (lock) {
        lsm_status_free(env->unlock_file(env, lock));
        snprintf(path, sizeof(path), "%s/LOCK", dir);
        lsm_status_free(env->remove_file(env, path));
    }
    return s;
}

/* ------------------------------------------------------------------ writes */

lsm_status *db_refuse_read_only(const lsm_db *db)
{
    if (!db->opt.read_only)
        return NULL;
    return status_new(LSM_READ_ONLY, "%s: the store is open read-only", db->dir);
}

lsm_status *lsm_write(lsm_db *db, const lsm_write_options *wo, lsm_batch *batch)
{
    lsm_status *s = db_refuse_read_only(db);
    return s ? s : db_write(db, batch, wo, NULL);
}

lsm_status *lsm_write_seq(lsm_db *db, const lsm_write_options *wo, lsm_batch *batch, uint64_t *seq)
{
    lsm_status *s = db_refuse_read_only(db);
    return s ? s : db_write(db, batch, wo, seq);
}

lsm_status *lsm_sync_upto(lsm_db *db, uint64_t seq)
{
    if (db->opt.read_only) /* no write of this handle to make durable */
        return NULL;
    return db_sync_upto(db, seq);
}

lsm_status *lsm_put(lsm_db *db, const lsm_write_options *wo, const void *key, size_t klen,
                    const void *val, size_t vlen)
{
    lsm_batch b;
    if (!batch_init(&b))
        return status_new(LSM_IO_ERROR, "out of memory");
    lsm_status *s = lsm_batch_put(&b, key, klen, val, vlen)
                        ? lsm_write(db, wo, &b)
                        : status_new(LSM_IO_ERROR, "out of memory");
    batch_destroy(&b);
    return s;
}

lsm_status *lsm_delete(lsm_db *db, const lsm_write_options *wo, const void *key, size_t klen)
{
    lsm_batch b;
    if (!batch_init(&b))
        return status_new(LSM_IO_ERROR, "out of memory");
    lsm_status *s = lsm_batch_delete(&b, key, klen) ? lsm_write(db, wo, &b)
                                                    : status_new(LSM_IO_ERROR, "out of memory");
    batch_destroy(&b);
    return s;
}

lsm_status *lsm_sync(lsm_db *db)
{
    return lsm_sync_upto(db, UINT64_MAX);
}

/* ------------------------------------------------------------------- reads */

/* Looks key up in the memtables of rv, newest first. */
static enum memtable_get_result get_from_memtables(struct readview *rv, const void *key,
                                                   size_t klen, uint64_t seq, char **val,
                                                   size_t *vlen)
{
    enum memtable_get_result r = memtable_get(rv->mem, key, klen, seq, val, vlen);
    for (int i = 0; r == MEMTABLE_ABSENT && i < rv->nimm; i++)
        r = memtable_get(rv->imm[i], key, klen, seq, val, vlen);
    return r;
}

lsm_status *lsm_get(lsm_db *db, const lsm_read_options *ro, const void *key, size_t klen,
                    char **val, size_t *vlen)
{
    uint64_t seq;
    struct readview *rv = db_ref_view(db, &seq, ro);
    enum memtable_get_result r = get_from_memtables(rv, key, klen, seq, val, vlen);
    lsm_status *err = NULL;
    if (r == MEMTABLE_ABSENT) {
        /* The seek key on the stack: every lookup that misses the memtables
         * (most of a filesystem's) would otherwise pay a malloc. */
        char small[256];
        char *ik = klen + IKEY_TRAILER <= sizeof(small) ? small : lsm_malloc(klen + IKEY_TRAILER);
        if (ik != NULL) {
            memcpy(ik, key, klen);
            encode_fixed64(ik + klen, pack_seq_type(seq, TYPE_SEEK));
            r = version_get(rv->version, db->tables, ro, ik, klen + IKEY_TRAILER, val, vlen,
                            &err);
        } else {
            err = status_new(LSM_IO_ERROR, "out of memory");
        }
        if (ik != small)
            free(ik);
    }
    db_unref_view(db, rv);
    if (err)
        return err;
    switch (r) {
    case MEMTABLE_FOUND:
        return NULL;
    case MEMTABLE_NOMEM:
        return status_new(LSM_IO_ERROR, "out of memory reading a value");
    default:
        return status_not_found();
    }
}

lsm_iter *lsm_iter_new(lsm_db *db, const lsm_read_options *ro)
{
    uint64_t seq;
    struct readview *rv = db_ref_view(db, &seq, ro);
    int cap = 1 + rv->nimm + rv->version->nfiles[0] + NUM_LEVELS;
    iter **children = lsm_malloc((size_t)cap * sizeof(*children));
    if (children == NULL) {
        db_unref_view(db, rv);
        return NULL;
    }
    int k = 0;
    children[k++] = memtable_iter_new(rv->mem);
    for (int i = 0; i < rv->nimm; i++)
        children[k++] = memtable_iter_new(rv->imm[i]);
    bool ok = true;
    for (int i = 0; i < k; i++)
        ok = ok && children[i] != NULL;
    ok = ok && version_add_iters(rv->version, db->tables, ro, &children, &k, &cap);
    iter *merged = ok ? iter_new_merging(children, k, ikey_compare) : NULL;
    if (merged == NULL) {
        for (int i = 0; i < k; i++)
            iter_free(children[i]);
    }
    free(children);
    if (merged == NULL) {
        db_unref_view(db, rv);
        return NULL;
    }
    return db_iter_new(db, rv, merged, seq);
}

/* ---------------------------------------------------------------- snapshots */

const lsm_snapshot *lsm_snapshot_new(lsm_db *db)
{
    struct lsm_snapshot *s = lsm_malloc(sizeof(*s));
    if (s == NULL)
        return NULL;
    mutex_lock(&db->mu);
    s->seq = db->last_seq;
    s->next = &db->snapshots;
    s->prev = db->snapshots.prev;
    s->prev->next = s;
    db->snapshots.prev = s;
    mutex_unlock(&db->mu);
    return s;
}

void lsm_snapshot_release(lsm_db *db, const lsm_snapshot *snap)
{
    if (snap == NULL)
        return;
    struct lsm_snapshot *s = (struct lsm_snapshot *)snap;
    mutex_lock(&db->mu);
    s->prev->next = s->next;
    s->next->prev = s->prev;
    mutex_unlock(&db->mu);
    free(s);
}

/* -------------------------------------------------------------- properties */

/* Bytes of the tables of v before user key k (NULL: the end of each). */
static uint64_t offset_in_version(lsm_db *db, version *v, const void *k, size_t kn)
{
    buf ik;
    buf_init(&ik);
    if (k && !buf_put_ikey(&ik, k, kn, MAX_SEQUENCE, TYPE_SEEK))
        return 0;
    uint64_t sum = 0;
    for (int l = 0; l < NUM_LEVELS; l++) {
        for (int i = 0; i < v->nfiles[l]; i++) {
            file_meta *f = v->files[l][i];
            if (k == NULL || ikey_compare(f->largest.data, f->largest.len, ik.data, ik.len) < 0) {
                sum += f->size; /* entirely before k */
            } else if (ikey_compare(f->smallest.data, f->smallest.len, ik.data, ik.len) < 0) {
                uint64_t off = 0;
                lsm_status *s = table_cache_approximate_offset(db->tables, f->number, f->size,
                                                               ik.data, ik.len, &off);
                lsm_status_free(s);
                sum += off;
            }
        }
    }
    buf_free(&ik);
    return sum;
}

uint64_t lsm_approximate_size(lsm_db *db, const void *begin, size_t blen, const void *end,
                              size_t elen)
{
    uint64_t seq;
    struct readview *rv = db_ref_view(db, &seq, NULL);
    uint64_t lo = begin ? offset_in_version(db, rv->version, begin, blen) : 0;
    uint64_t hi = offset_in_version(db, rv->version, end, elen);
    db_unref_view(db, rv);
    return hi > lo ? hi - lo : 0;
}
