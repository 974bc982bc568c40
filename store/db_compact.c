/*
 * db_compact.c — background work: flushing immutable memtables to level-0
 * tables, leveled compaction, deleting obsolete files, manual compaction.
 *
 * Three threads: the flush thread turns the oldest immutable memtable into a
 * table as soon as there is one; a compaction thread per lane (compaction.h:
 * level 0 on one, deeper levels on the other) runs whatever compaction of
 * its lane the current version most needs among those whose levels no
 * running compaction touches. Keeping them apart means a long level-0 ->
 * level-1 compaction never delays a flush, nor a deep compaction the
 * level-0 one, so writers wait for memory only when the disk truly cannot
 * keep up (and the pacing in db_rotate.c slows them gradually well before
 * that).
 *
 * Both threads do their I/O with mu released and take it to install the
 * result (vset_log_and_apply serialises MANIFEST writes). A flush writes to
 * level 0, or deeper only where its key range overlaps nothing at or above
 * its level in the current version (version_level_for_flush) — where a
 * running compaction's inputs still are — so a flush never places newer
 * data below older data, even data a compaction is moving.
 *
 * Files are deleted by one sweep at a time (db_delete_obsolete_files), and only while
 * vset_state_known: after a failed MANIFEST write a failed flush or
 * compaction leaves its outputs and inputs alone, since the disk may name
 * either. A full disk is retried (retry_later_if_full), and the retry's new
 * MANIFEST makes the state known again; any other error is sticky until the
 * store is reopened, whose recovery writes that new MANIFEST.
 */
#include "compaction.h"
#include "lsm_malloc.h"
#include "db_impl.h"
#include "filename.h"
#include "port.h"
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ------------------------------------------------------- pending outputs */

/* REQUIRES: mu held. */
static bool add_pending(lsm_db *db, uint64_t number)
{
    assert(mutex_held(&db->mu));
    if (db->npending == db->cap_pending) {
        int cap = db->cap_pending ? db->cap_pending * 2 : 16;
        uint64_t *p = lsm_realloc(db->pending, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return false;
        db->pending = p;
        db->cap_pending = cap;
    }
    db->pending[db->npending++] = number;
    return true;
}

/* REQUIRES: mu held. */
static void remove_pending(lsm_db *db, uint64_t number)
{
    assert(mutex_held(&db->mu));
    for (int i = 0; i < db->npending; i++) {
        if (db->pending[i] == number) {
            db->pending[i] = db->pending[--db->npending];
            return;
        }
    }
}

/* ----------------------------------------------------------- table output */

/* One table being written. */
typedef struct output {
    uint64_t number;
    char *path;
    lsm_wfile *file;
    table_builder *builder;
} output;

/* direct: written around the page cache (flush_direct).
 * REQUIRES: mu held (to allocate the number). */
static lsm_status *output_open(lsm_db *db, output *o, bool direct)
{
    memset(o, 0, sizeof(*o));
    o->number = vset_new_file_number(&db->vs);
    if (!add_pending(db, o->number) || (o->path = table_file_name(db->dir, o->number)) == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = db->env->new_wfile(db->env, o->path, &o->file);
    if (s)
        return s;
    if (direct && o->file->ops->write_through != NULL)
        o->file->ops->write_through(o->file);
    table_options to;
    table_options_from(&to, &db->opt);
    if ((o->builder = table_builder_new(&to, o->file)) == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    return NULL;
}

/* Finishes, syncs and closes the table; on success *meta describes it (NULL
 * if it holds no entry: then the file is removed). No lock needed. */
static lsm_status *output_finish(lsm_db *db, output *o, file_meta **meta)
{
    *meta = NULL;
    uint64_t entries = table_builder_entries(o->builder);
    lsm_status *s = entries ? table_builder_finish(o->builder) : NULL;
    if (s == NULL && entries)
        s = o->file->ops->sync(o->file);
    lsm_status *c = o->file->ops->close(o->file);
    o->file = NULL;
    if (s == NULL)
        s = c;
    else
        lsm_status_free(c);
    if (s == NULL && entries) {
        size_t sn, ln;
        const char *sm = table_builder_smallest(o->builder, &sn);
        const char *lg = table_builder_largest(o->builder, &ln);
        *meta = file_meta_new(o->number, table_builder_file_size(o->builder), sm, sn, lg, ln);
        if (*meta == NULL) {
            s = status_new(LSM_NO_MEMORY, "out of memory");
        } else {
            (*meta)->keys = table_builder_keys(o->builder);
            (*meta)->deletions = table_builder_deletions(o->builder);
        }
    }
    if (s || entries == 0)
        lsm_status_free(db->env->remove_file(db->env, o->path));
    return s;
}

/* Releases what output_open took; the file is removed unless kept. */
static void output_cleanup(lsm_db *db, output *o, bool keep)
{
    if (o->builder)
        table_builder_free(o->builder);
    if (o->file) {
        lsm_status_free(o->file->ops->close(o->file));
        keep = false;
    }
    if (!keep && o->path)
        lsm_status_free(db->env->remove_file(db->env, o->path));
    free(o->path);
    o->builder = NULL;
    o->path = NULL;
}

/* Tells the pacer how the tree looks now. REQUIRES: mu held. */
static void update_pacing(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    const version *v = db->vs.current;
    uint64_t backlog = version_level_bytes(v, 0) + version_level_bytes(v, 1);
    /* How many table bytes a byte written becomes (compression, the
     * tables' own overhead); 1 until something was flushed. Counted against
     * the bytes written, not the log's: deferred batches skip the log. */
    double table_per_write = 1;
    if (db->stats.flush_bytes > 0 && db->stats.user_bytes > 0)
        table_per_write = (double)db->stats.flush_bytes / (double)db->stats.user_bytes;
    pacer_update(&db->pacer, backlog, v->compaction_score >= 1, table_per_write,
                 db->env->now_micros(db->env));
}

/* ---------------------------------------------------------- table outputs */

/* The state of one flush or compaction while it writes tables (c is NULL
 * for a flush). */
typedef struct compaction_run {
    compaction *c;
    uint64_t smallest_snapshot;
    output out;
    bool out_open;
    file_meta **done; /* finished outputs */
    int ndone, cap_done;
    buf user_key; /* the user key of the previous entry */
    bool has_user_key;
    uint64_t last_seq_for_key;
    buf last_added; /* the user key of the last entry written */
    buf zero_key;   /* scratch: an internal key with its sequence zeroed */
    bool has_last_added;
    bool close_wanted; /* the output is full: cut it at the next user key */
    uint64_t written;
    iter *ahead;  /* a flush's memtable, read ahead at segment starts (NULL: not read ahead) */
    bool direct;  /* outputs written around the page cache (flush_direct) */
    buf seek_key; /* scratch: where `ahead` seeks */
} compaction_run;

/* Finishes the current output. REQUIRES: mu not held. */
static lsm_status *close_output(lsm_db *db, compaction_run *r)
{
    file_meta *meta = NULL;
    lsm_status *s = output_finish(db, &r->out, &meta);
    output_cleanup(db, &r->out, s == NULL);
    r->out_open = false;
    if (s || meta == NULL)
        return s;
    if (r->ndone == r->cap_done) {
        int cap = r->cap_done ? r->cap_done * 2 : 8;
        file_meta **p = lsm_realloc(r->done, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            meta->refs++, file_meta_unref(meta);
            return status_new(LSM_NO_MEMORY, "out of memory");
        }
        r->done = p;
        r->cap_done = cap;
    }
    meta->refs++; /* the run's reference */
    r->done[r->ndone++] = meta;
    r->written += meta->size;
    return NULL;
}

/* Whether k starts a new user key in the current output. Outputs are only
 * ever cut between user keys: if two files of a level shared a user key, a
 * later compaction could move the newer version of it below the older one. */
static bool new_user_key(compaction_run *r, const char *k, size_t kn)
{
    return !r->has_last_added ||
           bytes_compare(k, ikey_user_len(kn), r->last_added.data, r->last_added.len) != 0;
}

/* Whether k (an internal key) starts a new table partition: the user
 * key's partition (lsm_options.table_partition) differs from the last one
 * written. REQUIRES: has_last_added. */
static bool new_partition(const lsm_db *db, const compaction_run *r, const char *k, size_t kn)
{
    uint32_t (*part)(const void *, size_t) = db->opt.table_partition;
    return part && part(k, ikey_user_len(kn)) != part(r->last_added.data, r->last_added.len);
}

/* Whether the segment (lsm_options.table_segment) starting at user key u
 * holds at least table_segment_bytes of the flush's memtable from u on (key
 * and value bytes, every version): read ahead on r->ahead, which stays where
 * it stopped, so a run of short segments is read ahead once. REQUIRES: mu
 * not held. */
static bool segment_is_long(const lsm_db *db, compaction_run *r, const char *u, size_t un)
{
    size_t an;
    const char *a = iter_valid(r->ahead) ? iter_key(r->ahead, &an) : NULL;
    if (a == NULL || bytes_compare(a, ikey_user_len(an), u, un) != 0) {
        r->seek_key.len = 0;
        if (!buf_put_ikey(&r->seek_key, u, un, MAX_SEQUENCE, TYPE_SEEK))
            return false;
        iter_seek(r->ahead, r->seek_key.data, r->seek_key.len);
    }
    uint64_t seg = db->opt.table_segment(u, un), bytes = 0;
    for (; iter_valid(r->ahead) && bytes < db->opt.table_segment_bytes; iter_next(r->ahead)) {
        size_t vn;
        a = iter_key(r->ahead, &an);
        if (db->opt.table_segment(a, ikey_user_len(an)) != seg)
            break;
        (void)iter_value(r->ahead, &vn);
        bytes += an + vn;
    }
    return bytes >= db->opt.table_segment_bytes;
}

/* Whether k (an internal key) starts a new segment where the output is cut:
 * the output holds table_segment_bytes, or (a flush, read ahead) the new
 * segment is that long itself (lsm.h). A compaction does not read ahead:
 * its output goes below level 0, where tables of a level never overlap, so
 * a file's run that begins inside a shared table keeps from being dropped
 * only what lies over that table's own keys (in level 0, every later table
 * of the file); reading the input twice would cost every compaction.
 * REQUIRES: has_last_added, mu not held. */
static bool segment_cut(const lsm_db *db, compaction_run *r, const char *k, size_t kn)
{
    uint64_t (*seg)(const void *, size_t) = db->opt.table_segment;
    size_t un = ikey_user_len(kn);
    if (seg == NULL || seg(k, un) == seg(r->last_added.data, r->last_added.len))
        return false;
    return table_builder_file_size(r->out.builder) >= db->opt.table_segment_bytes ||
           (r->ahead != NULL && segment_is_long(db, r, k, un));
}

/* The one rule for where an output table ends: only between user keys (a
 * user key's versions never span two tables of a level), and there when a
 * compaction's output is full or reaches a key that would overlap too much
 * of the next level, at a partition boundary, or at a segment cut.
 * REQUIRES: out_open, mu not held. */
static bool cut_before(lsm_db *db, compaction_run *r, const char *k, size_t kn)
{
    if (!new_user_key(r, k, kn))
        return false;
    if (r->c && (compaction_should_stop_before(r->c, k, kn) || r->close_wanted))
        return true;
    return new_partition(db, r, k, kn) || segment_cut(db, r, k, kn);
}

static lsm_status *add_entry(lsm_db *db, compaction_run *r, const char *k, size_t kn, const char *v,
                             size_t vn)
{
    lsm_status *s = NULL;
    if (r->out_open && cut_before(db, r, k, kn))
        s = close_output(db, r);
    if (s == NULL && !r->out_open) {
        mutex_lock(&db->mu);
        s = output_open(db, &r->out, r->direct);
        mutex_unlock(&db->mu);
        r->out_open = true;
        r->close_wanted = false;
    }
    if (s == NULL)
        s = table_builder_add(r->out.builder, k, kn, v, vn);
    if (s == NULL && r->c && table_builder_file_size(r->out.builder) >= r->c->max_output_file_size)
        r->close_wanted = true; /* at the next user key */
    r->last_added.len = 0;
    r->has_last_added = buf_append(&r->last_added, k, ikey_user_len(kn));
    return s;
}

/* Ends the run's read-ahead (segment_is_long). REQUIRES: mu not held. */
static void ahead_close(compaction_run *r)
{
    if (r->ahead)
        iter_free(r->ahead);
    r->ahead = NULL;
}

/* Lets go of what a run holds once its outputs are named by the MANIFEST
 * (or abandoned): only then may the obsolete-file sweep see them.
 * REQUIRES: mu held. */
static void run_release(lsm_db *db, compaction_run *r)
{
    assert(mutex_held(&db->mu));
    for (int i = 0; i < r->ndone; i++)
        remove_pending(db, r->done[i]->number);
    if (r->out.number)
        remove_pending(db, r->out.number);
    for (int i = 0; i < r->ndone; i++)
        file_meta_unref(r->done[i]);
    free(r->done);
    buf_free(&r->user_key);
    buf_free(&r->last_added);
    buf_free(&r->zero_key);
    buf_free(&r->seek_key);
}

/* Whether the entry can be dropped: shadowed by a newer entry every
 * snapshot sees (in a flush too: no reader of the table can see an older
 * version of a key the same memtable holds newer), or, in a compaction, a
 * deletion with nothing below it to delete (a flush's deletion may delete
 * what older tables hold). Entries come in key order, each key's newest
 * first. */
static bool should_drop(compaction_run *r, const parsed_ikey *pk)
{
    if (!r->has_user_key ||
        bytes_compare(pk->user_key, pk->user_len, r->user_key.data, r->user_key.len) != 0) {
        r->user_key.len = 0;
        r->has_user_key = buf_append(&r->user_key, pk->user_key, pk->user_len);
        r->last_seq_for_key = UINT64_MAX;
    }
    bool drop = false;
    if (r->last_seq_for_key <= r->smallest_snapshot)
        drop = true;
    else if (r->c != NULL && pk->type == TYPE_DELETION && pk->seq <= r->smallest_snapshot &&
             compaction_is_base_level_for_key(r->c, pk->user_key, pk->user_len))
        drop = true;
    r->last_seq_for_key = pk->seq;
    return drop;
}

/* ------------------------------------------------------------------ flush */

/* Writes memtable m to new tables (one, or one per key partition) and adds
 * them to edit, each at level 0 or, overlapping nothing, deeper
 * (version_level_for_flush); r->done holds them. REQUIRES: mu held (released
 * inside). */
static lsm_status *write_level0(lsm_db *db, memtable *m, version_edit *edit, compaction_run *r)
{
    uint64_t t0 = db->env->now_micros(db->env);
    mutex_unlock(&db->mu);
    iter *it = memtable_iter_new(m);
    /* (without memory for it: empty, no cut before a long segment) */
    r->ahead = db->opt.table_segment ? memtable_iter_new(m) : NULL;
    lsm_status *s = NULL;
    for (iter_seek_first(it); s == NULL && iter_valid(it); iter_next(it)) {
        size_t kn, vn;
        const char *k = iter_key(it, &kn);
        const char *v = iter_value(it, &vn);
        parsed_ikey pk;
        if (!parse_ikey(k, kn, &pk))
            s = status_new(LSM_CORRUPTION, "malformed key in a memtable being flushed");
        else if (!should_drop(r, &pk))
            s = add_entry(db, r, k, kn, v, vn);
    }
    if (s == NULL) /* an iterator without memory is empty: not a flushed memtable */
        s = iter_status(it);
    iter_free(it);
    ahead_close(r);
    if (s == NULL && r->out_open)
        s = close_output(db, r);
    if (r->out_open)
        output_cleanup(db, &r->out, false);
    /* The MANIFEST will name the tables: their directory entries must be
     * durable first. */
    if (s == NULL && r->ndone)
        s = db->env->sync_dir(db->env, db->dir);
    mutex_lock(&db->mu);
    for (int i = 0; s == NULL && i < r->ndone; i++) {
        const file_meta *f = r->done[i];
        int level = version_level_for_flush(
            db->vs.current, f->smallest.data, ikey_user_len(f->smallest.len), f->largest.data,
            ikey_user_len(f->largest.len), max_grandparent_overlap(db->opt.target_file_size));
        if (!version_edit_add_file(edit, level, r->done[i]))
            s = status_new(LSM_NO_MEMORY, "out of memory");
    }
    if (s == NULL) {
        db->stats.flush_bytes += r->written;
        db->stats.levels[0].written_bytes += r->written;
    }
    db->stats.levels[0].micros += db->env->now_micros(db->env) - t0;
    return s;
}

/* Whether the flush of m writes its tables around the page cache: the
 * direct_table_writes rule (lsm.h), in a bulk stream (db_impl.h) for a
 * memtable that is mostly big defer_log writes. REQUIRES: mu held. */
static bool flush_direct(const lsm_db *db, const memtable *m)
{
    return db->opt.direct_table_writes && db_bulk_stream(db) && memtable_mostly_kept(m);
}

/* Counts m, just flushed, into the bulk stream, or ends it. REQUIRES: mu. */
static void bulk_run_add(lsm_db *db, const memtable *m)
{
    db->bulk_run = memtable_mostly_kept(m) ? db->bulk_run + memtable_memory_usage(m) : 0;
}

/* Flushes the oldest immutable memtable. REQUIRES: mu held. */
static lsm_status *flush_one(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->nimm > 0);
    memtable *m = db->imm[0];
    memtable_ref(m);
    version_edit edit;
    version_edit_init(&edit);
    compaction_run r = {.c = NULL,
                        .smallest_snapshot = db_smallest_snapshot(db),
                        .direct = flush_direct(db, m)};
    lsm_status *s = write_level0(db, m, &edit, &r);
    if (s == NULL) {
        /* Logs before the next memtable's first log are no longer needed. */
        uint64_t next_log = db->nimm > 1 ? db->imm_log[1] : db->mem_log;
        version_edit_set_log_number(&edit, next_log);
        s = vset_log_and_apply(&db->vs, &edit, db->last_seq);
    }
    run_release(db, &r);
    version_edit_destroy(&edit);
    memtable_unref(m);
    if (s) {
        /* Tables it finished before the failure hold space the retry (and
         * the deletes on a full disk) need: swept now, unless the MANIFEST
         * may name them (vset_state_known). */
        db_delete_obsolete_files(db);
        return s;
    }
    db_checkpoint_flushed(db, db->imm_id[0]);
    db_drop_deferred(db, db->imm_id[0]); /* in a table now */
    bulk_run_add(db, db->imm[0]);
    memtable_unref(db->imm[0]);
    memmove(db->imm, db->imm + 1, (size_t)(db->nimm - 1) * sizeof(*db->imm));
    memmove(db->imm_log, db->imm_log + 1, (size_t)(db->nimm - 1) * sizeof(*db->imm_log));
    memmove(db->imm_id, db->imm_id + 1, (size_t)(db->nimm - 1) * sizeof(*db->imm_id));
    db->nimm--;
    db->stats.flushes++;
    db_install_view(db);
    update_pacing(db);
    db_delete_obsolete_files(db);
    return NULL;
}

lsm_status *db_flush_recovered(lsm_db *db)
{
    assert(mutex_held(&db->mu) && !db->threads_started);
    lsm_status *s = NULL;
    while (s == NULL && db->nimm > 0)
        s = flush_one(db);
    if (lsm_status_code(s) == LSM_NO_SPACE) { /* the flush thread retries */
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

/* Waits out the full-disk retry delay on work_cv, which close signals:
 * ends at the delay, at close, or (flusher) when a caller begins waiting
 * for a flush (flush_asked). Other signals of work_cv do not end it (the
 * two threads' retries would wake each other). REQUIRES: mu held. */
static void wait_to_retry(lsm_db *db, bool flusher)
{
    struct timespec t = monotonic_deadline(db->opt.full_disk_retry_us);
    uint64_t asked = db->flush_asked;
    while (!db->shutting_down && !(flusher && db->flush_asked != asked) &&
           cond_timedwait(&db->work_cv, &db->mu, &t) != ETIMEDOUT)
        ;
}

/* A full disk or out of memory stops background work but does not break the
 * store: nothing was lost (the WAL and the old tables are intact) and a
 * retry succeeds once space or memory is back. Records it in db->nospace
 * (what writers waiting for room get: ENOSPC or ENOMEM; counted in
 * nospace_events, which those waiters watch) and waits (wait_to_retry)
 * before the retry; only a full disk gives up the RESERVE. Returns true if
 * s was such an error (it is consumed). REQUIRES: mu held. */
static bool retry_later_if_full(lsm_db *db, lsm_status *s, bool flusher)
{
    assert(mutex_held(&db->mu));
    int code = lsm_status_code(s);
    if (code != LSM_NO_SPACE && code != LSM_NO_MEMORY)
        return false;
    lsm_status_free(db->nospace);
    db->nospace = s;
    db->nospace_events++;
    db->oom_retries += code == LSM_NO_MEMORY;
    if (code == LSM_NO_SPACE)
        db_reserve_serve_background(db);      /* the retry may use it (db_reserve.c) */
    pthread_cond_broadcast(&db->room_cv); /* waiting writers get the error now */
    wait_to_retry(db, flusher);
    return true;
}

/* REQUIRES: mu held. */
static void background_succeeded(lsm_db *db)
{
    lsm_status_free(db->nospace);
    db->nospace = NULL;
}

/* Waits on work_cv for at most us microseconds. REQUIRES: mu held. */
static void wait_micros(lsm_db *db, uint64_t us)
{
    struct timespec t = monotonic_deadline(us);
    (void)cond_timedwait(&db->work_cv, &db->mu, &t);
}

static void *flush_main(void *arg)
{
    lsm_db *db = arg;
    port_thread_name("lsm-flush");
    mutex_lock(&db->mu);
    for (;;) {
        db_hold_watch(db, true);
        while (!db->shutting_down && (db->nimm == 0 || db->bg_error)) {
            uint64_t look_us = db->bg_error ? 0 : db_idle_look(db);
            if (db->shutting_down || (db->nimm > 0 && db->bg_error == NULL))
                break; /* after a sticky error, no flush is retried */
            if (look_us == 0)
                cond_wait(&db->work_cv, &db->mu);
            else
                wait_micros(db, look_us);
        }
        db_hold_watch(db, false); /* busy now: no look ends a hold */
        if (db->shutting_down)
            break;
        db->flushing = true;
        lsm_status *s = flush_one(db);
        db->flushing = false;
        if (s == NULL) {
            db->bg_progress++;
            background_succeeded(db);
        } else if (!retry_later_if_full(db, s, true)) {
            db_set_bg_error(db, status_wrap(s, "flushing a memtable"));
        }
        pthread_cond_broadcast(&db->room_cv);
        pthread_cond_broadcast(&db->work_cv); /* the compactor may have work */
    }
    mutex_unlock(&db->mu);
    return NULL;
}

/* ------------------------------------------------------------- compaction */

uint64_t db_smallest_snapshot(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->snapshots.next != &db->snapshots)
        return db->snapshots.next->seq; /* the list is oldest first */
    return db->last_seq;
}

/* A value older than every snapshot with nothing of its key below the
 * output level: after should_drop, it is its key's only version left. */
static bool can_zero_seq(compaction_run *r, const parsed_ikey *pk)
{
    return pk->type == TYPE_VALUE && pk->seq != 0 && pk->seq <= r->smallest_snapshot &&
           compaction_is_base_level_for_key(r->c, pk->user_key, pk->user_len);
}

/* Merges the inputs into new tables. REQUIRES: mu not held. */
static lsm_status *merge_inputs(lsm_db *db, compaction_run *r)
{
    iter *in = compaction_input_iter(r->c, db->tables);
    if (in == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = NULL;
    for (iter_seek_first(in); s == NULL && iter_valid(in); iter_next(in)) {
        if (atomic_load_explicit(&db->shutting_down, memory_order_relaxed))
            break;
        size_t kn, vn;
        const char *k = iter_key(in, &kn);
        const char *v = iter_value(in, &vn);
        parsed_ikey pk;
        if (!parse_ikey(k, kn, &pk)) {
            s = status_new(LSM_CORRUPTION, "malformed key in a table during compaction");
            break;
        }
        if (should_drop(r, &pk))
            continue;
        if (!r->has_user_key) { /* the key not remembered: its older versions would pass */
            s = status_new(LSM_NO_MEMORY, "out of memory");
            break;
        }
        if (can_zero_seq(r, &pk)) {
            /* The only version any reader will ever see: its sequence carries
             * no information, and zeros compress (RocksDB does the same). */
            r->zero_key.len = 0;
            if (!buf_put_ikey(&r->zero_key, pk.user_key, pk.user_len, 0, TYPE_VALUE)) {
                s = status_new(LSM_NO_MEMORY, "out of memory");
                break;
            }
            k = r->zero_key.data;
            kn = r->zero_key.len;
        }
        s = add_entry(db, r, k, kn, v, vn);
    }
    if (s == NULL)
        s = iter_status(in);
    iter_free(in);
    if (s == NULL && db->shutting_down)
        s = status_new(LSM_IO_ERROR, "compaction interrupted by close");
    if (s == NULL && r->out_open)
        s = close_output(db, r);
    if (r->out_open)
        output_cleanup(db, &r->out, false);
    if (s == NULL && r->ndone) /* outputs must be durable before the MANIFEST names them */
        s = db->env->sync_dir(db->env, db->dir);
    return s;
}

/* Installs the outputs in place of the inputs. REQUIRES: mu held. */
static lsm_status *install_compaction(lsm_db *db, compaction_run *r)
{
    compaction *c = r->c;
    if (!compaction_add_input_deletions(c))
        return status_new(LSM_NO_MEMORY, "out of memory");
    for (int i = 0; i < r->ndone; i++)
        if (!version_edit_add_file(&c->edit, c->level + 1, r->done[i]))
            return status_new(LSM_NO_MEMORY, "out of memory");
    return vset_log_and_apply(&db->vs, &c->edit, db->last_seq);
}

static lsm_status *trivial_move(lsm_db *db, compaction *c)
{
    file_meta *f = c->inputs[0][0];
    if (!version_edit_delete_file(&c->edit, c->level, f->number) ||
        !version_edit_add_file(&c->edit, c->level + 1, f))
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = vset_log_and_apply(&db->vs, &c->edit, db->last_seq);
    if (s == NULL)
        db_install_view(db);
    update_pacing(db);
    return s;
}

/* Merges c's inputs and installs the outputs. REQUIRES: mu held (released
 * while merging). */
static lsm_status *merge_compaction(lsm_db *db, compaction *c)
{
    uint64_t t0 = db->env->now_micros(db->env);
    compaction_run r = {.c = c, .smallest_snapshot = db_smallest_snapshot(db)};
    mutex_unlock(&db->mu);
    lsm_status *s = merge_inputs(db, &r);
    mutex_lock(&db->mu);
    if (s == NULL)
        s = install_compaction(db, &r);
    if (s == NULL)
        db_install_view(db);
    update_pacing(db);
    /* Only now, with the outputs named by the MANIFEST (or abandoned), may
     * the obsolete-file sweep see them. */
    run_release(db, &r);
    struct level_stats *ls = &db->stats.levels[c->level + 1];
    ls->compactions++;
    ls->read_bytes += compaction_input_bytes(c);
    ls->written_bytes += r.written;
    ls->micros += db->env->now_micros(db->env) - t0;
    /* The inputs stay alive while the compaction pins its version: let go
     * first, so the sweep can delete them (no longer in use: db->running). */
    db->running[compaction_lane(c->level)] = NULL;
    version_unref(c->input_version);
    c->input_version = NULL;
    db_delete_obsolete_files(db);
    if (s == NULL) /* the disk had room: a manual compaction clears it too */
        background_succeeded(db);
    return s;
}

/* The levels the running compactions touch (compaction_levels). REQUIRES:
 * mu held. */
static unsigned busy_levels(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    unsigned busy = 0;
    for (int lane = 0; lane < COMPACTION_LANES; lane++)
        if (db->running[lane])
            busy |= compaction_levels(db->running[lane]->level);
    return busy;
}

/* Runs compaction c, its inputs marked in use meanwhile (db->running).
 * REQUIRES: mu held (released while merging); no table drop being written;
 * no running compaction touches c's levels (compaction.h). */
static lsm_status *run_compaction(lsm_db *db, compaction *c)
{
    int lane = compaction_lane(c->level);
    assert(mutex_held(&db->mu) && !db->dropping && db->running[lane] == NULL);
    assert((busy_levels(db) & compaction_levels(c->level)) == 0);
    uint64_t input_bytes = compaction_input_bytes(c); /* (gone after it ran) */
    db->stats.side_by_side += busy_levels(db) != 0;
    db->running[lane] = c;
    lsm_status *s = compaction_is_trivial_move(c) ? trivial_move(db, c) : merge_compaction(db, c);
    db->running[lane] = NULL;
    if (s == NULL)
        db_holdoff_clear(db);
    else if (lsm_status_code(s) == LSM_NO_SPACE)
        db_holdoff_failed(db, input_bytes);
    return s;
}

void db_charge_seek(lsm_db *db, version *v, const seek_charge *charge)
{
    /* (the last level is never searched before another) */
    if (charge->file == NULL || db->opt.read_only || charge->level >= NUM_LEVELS - 1)
        return;
    /* A file with none left stays due in every version it is in (the one
     * its allowance ran out in may not be current any more). */
    atomic_int *left = &charge->file->allowed_seeks;
    if (atomic_load_explicit(left, memory_order_relaxed) > 0 &&
        atomic_fetch_sub_explicit(left, 1, memory_order_relaxed) > 1)
        return;
    if (atomic_load(&v->seek_file) != NULL)
        return;
    mutex_lock(&db->mu);
    if (v->seek_file == NULL) {
        v->seek_file = charge->file;
        v->seek_level = charge->level;
        if (v == db->vs.current)
            pthread_cond_broadcast(&db->work_cv);
    }
    mutex_unlock(&db->mu);
}

/* Compaction yields the CPU to foreground threads (writers, readers, FUSE
 * workers): with two cores, a compaction at equal priority takes the
 * writer's time whenever a flush runs too, and that is what makes latency
 * uneven. If compaction falls behind, the write pacing in
 * db_rotate.c slows writers gradually. Linux applies nice per thread. */
static void lower_priority(int nice)
{
    (void)setpriority(PRIO_PROCESS, (id_t)port_thread_id(), nice);
}

/* The level lane's thread may compact now and *why (compaction_choose),
 * or -1. REQUIRES: mu. */
static int may_pick(lsm_db *db, int lane, enum compaction_why *why)
{
    assert(mutex_held(&db->mu));
    /* A freeing write waiting for room comes first (db_reserve.c). */
    if (db->bg_error || db->compact_manual || db->frees_holding || db->dropping)
        return -1;
    return compaction_choose(db->vs.current, lane, busy_levels(db), why);
}

static void *compact_main(void *arg)
{
    struct compact_lane *me = arg;
    lsm_db *db = me->db;
    port_thread_name(me->lane == 0 ? "lsm-compact0" : "lsm-compact1");
    lower_priority(4);
    mutex_lock(&db->mu);
    for (;;) {
        int level = -1;
        enum compaction_why why;
        while (!db->shutting_down && (level = may_pick(db, me->lane, &why)) < 0)
            cond_wait(&db->work_cv, &db->mu);
        if (db->shutting_down)
            break;
        db->compacting++;
        /* mu held since may_pick: its choice stands */
        compaction *c = compaction_pick(&db->vs, db->opt.target_file_size, level, why);
        if (c == NULL) { /* due (may_pick) but not built: out of memory */
            db->compacting--;
            lsm_status *e = status_new(LSM_NO_MEMORY, "compaction: out of memory");
            if (!retry_later_if_full(db, e, false))
                db_set_bg_error(db, e);
            pthread_cond_broadcast(&db->room_cv);
            continue;
        }
        uint64_t held_us = db_holdoff_left_us(db, compaction_input_bytes(c));
        if (held_us > 0) { /* as big as one that failed for space: later */
            compaction_free(c);
            db->compacting--;
            wait_micros(db, held_us);
            continue;
        }
        /* What the compaction costs per byte it moves down feeds the pacer
         * (read before running it: the inputs may be gone after). */
        uint64_t t0 = db->env->now_micros(db->env);
        uint64_t moved = 0;
        for (int i = 0; i < c->ninputs[0]; i++)
            moved += c->inputs[0][i]->size;
        lsm_status *s = run_compaction(db, c);
        if (s == NULL) {
            uint64_t now = db->env->now_micros(db->env);
            pacer_note_compaction(&db->pacer, level, moved, now - t0, now);
        }
        compaction_free(c);
        db->compacting--;
        if (s == NULL)
            db->bg_progress++;
        if (s && db->shutting_down) /* (a success cleared nospace: run_compaction) */
            lsm_status_free(s);
        else if (s && !retry_later_if_full(db, s, false))
            db_set_bg_error(db, status_wrap(s, "compaction"));
        pthread_cond_broadcast(&db->room_cv);
        pthread_cond_broadcast(&db->work_cv);
    }
    mutex_unlock(&db->mu);
    return NULL;
}

/* ---------------------------------------------------------- file deletion */

static bool contains(const uint64_t *a, int n, uint64_t x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x)
            return true;
    return false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether a file of the store is still needed. REQUIRES: mu held. */
static bool keep_file(lsm_db *db, enum file_type type, uint64_t number, const uint64_t *live,
                      int nlive)
{
    uint64_t oldest_log = db->nimm ? db->imm_log[0] : db->mem_log;
    switch (type) {
    case FILE_LOG:
        return number >= oldest_log || number >= db->vs.log_number;
    case FILE_MANIFEST:
        return number >= db->vs.manifest_number;
    case FILE_TABLE:
        return bsearch(&number, live, (size_t)nlive, sizeof(*live), cmp_u64) != NULL ||
               contains(db->pending, db->npending, number);
    case FILE_TEMP: /* a CURRENT being written has its new MANIFEST's number */
        return number > db->vs.manifest_number || contains(db->pending, db->npending, number);
    default:
        return true;
    }
}

/* One pass of the sweep. REQUIRES: mu held (released while removing). */
static void sweep_once(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (!vset_state_known(&db->vs))
        return;
    uint64_t *live = NULL;
    int nlive = 0;
    char **names = NULL;
    int n = 0;
    lsm_status *s = db->env->get_children(db->env, db->dir, &names, &n);
    if (s || !vset_live_files(&db->vs, &live, &nlive)) {
        lsm_status_free(s);
        env_free_children(names, n);
        return;
    }
    qsort(live, (size_t)nlive, sizeof(*live), cmp_u64);
    const char **del = lsm_malloc((size_t)(n + 1) * sizeof(*del));
    int ndel = 0;
    for (int i = 0; del && i < n; i++) {
        uint64_t number;
        enum file_type type;
        if (!parse_file_name(names[i], &number, &type) || keep_file(db, type, number, live, nlive))
            continue;
        if (type == FILE_TABLE)
            table_cache_evict(db->tables, number);
        del[ndel++] = names[i];
    }
    free(live);
    mutex_unlock(&db->mu); /* unlink outside the lock */
    char path[4096];
    for (int i = 0; i < ndel; i++) {
        snprintf(path, sizeof(path), "%s/%s", db->dir, del[i]);
        lsm_status_free(db->env->remove_file(db->env, path));
    }
    mutex_lock(&db->mu);
    free(del);
    env_free_children(names, n);
}

void db_delete_obsolete_files(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t mine = ++db->sweeps_asked;
    if (db->sweeping) { /* the running sweep goes again for this call */
        while (db->sweeps_done < mine)
            cond_wait(&db->room_cv, &db->mu);
        return;
    }
    db->sweeping = true;
    while (db->sweeps_done < db->sweeps_asked) {
        uint64_t serves = db->sweeps_asked; /* it lists after every call so far */
        sweep_once(db);
        db->sweeps_done = serves;
        pthread_cond_broadcast(&db->room_cv);
    }
    db->sweeping = false;
}

/* ------------------------------------------------------------- lifecycle */

/* Stops the flush thread and the first n compaction threads. */
static void stop_threads(lsm_db *db, int n)
{
    mutex_lock(&db->mu);
    db->shutting_down = true;
    pthread_cond_broadcast(&db->work_cv);
    pthread_cond_broadcast(&db->room_cv);
    mutex_unlock(&db->mu);
    pthread_join(db->flush_thread, NULL);
    for (int lane = 0; lane < n; lane++)
        pthread_join(db->lanes[lane].thread, NULL);
}

lsm_status *db_start_background(lsm_db *db)
{
    if (pthread_create(&db->flush_thread, NULL, flush_main, db) != 0)
        return status_new(LSM_IO_ERROR, "cannot start the flush thread");
    for (int lane = 0; lane < COMPACTION_LANES; lane++) {
        struct compact_lane *l = &db->lanes[lane];
        l->db = db;
        l->lane = lane;
        if (pthread_create(&l->thread, NULL, compact_main, l) != 0) {
            stop_threads(db, lane);
            return status_new(LSM_IO_ERROR, "cannot start a compaction thread");
        }
    }
    db->threads_started = true;
    mutex_lock(&db->mu);
    pthread_cond_broadcast(&db->work_cv); /* recovered memtables to flush? */
    mutex_unlock(&db->mu);
    return NULL;
}

void db_stop_background(lsm_db *db)
{
    if (!db->threads_started)
        return;
    stop_threads(db, COMPACTION_LANES);
    db->threads_started = false;
}

/* ------------------------------------------------------ manual compaction */

/* Whether db_flush_memtables still has flushes to wait for. REQUIRES: mu. */
static bool flush_pending(lsm_db *db, uint64_t deferred_upto)
{
    if (deferred_upto != 0)
        return db_deferred_upto(db, deferred_upto);
    return db->nimm > 0 || db->flushing;
}

lsm_status *db_flush_memtables(lsm_db *db, uint64_t deferred_upto)
{
    lsm_status *s = NULL;
    mutex_lock(&db->mu);
    /* Take the write-queue head so the switch does not race a leader. A
     * solo writer is never "done" by someone else: it leads. */
    struct writer w = {.batch = NULL, .sync = false, .solo = true};
    bool leads = db_queue_wait(db, &w);
    assert(leads);
    (void)leads;
    s = db_make_room_for_write(db, true, false, 0);
    db_queue_pop_head(db, &w, NULL);
    /* Wait for the flushes, unless one fails for a full disk meanwhile
     * (one waiting to retry does so now). */
    uint64_t full_before = db->nospace_events;
    db->flush_asked++;
    while (s == NULL && flush_pending(db, deferred_upto) && db->bg_error == NULL &&
           db->nospace_events == full_before) {
        pthread_cond_broadcast(&db->work_cv);
        cond_wait(&db->room_cv, &db->mu);
    }
    if (s == NULL && db->bg_error)
        s = status_copy(db->bg_error);
    else if (s == NULL && db->nospace_events != full_before && db->nospace)
        s = status_copy(db->nospace);
    mutex_unlock(&db->mu);
    return s;
}

/* Compacts [begin, end] at `level` until nothing there is left to move.
 * REQUIRES: mu held; db->compact_manual owned by the caller, no other
 * compaction running. */
static lsm_status *compact_level_range(lsm_db *db, int level, const char *begin, size_t blen,
                                       const char *end, size_t elen)
{
    lsm_status *s = NULL;
    for (int rounds = 0; s == NULL && rounds < 100000; rounds++) {
        while (db->dropping) /* it may name tables the pick would take */
            cond_wait(&db->room_cv, &db->mu);
        compaction *c =
            compaction_pick_range(&db->vs, level, begin, blen, end, elen, db->opt.target_file_size);
        if (c == NULL)
            break;
        if (db_holdoff_left_us(db, compaction_input_bytes(c)) > 0) {
            compaction_free(c);
            return status_new(LSM_NO_SPACE, "a compaction as big failed for space and not "
                                            "enough was freed since: not tried again yet");
        }
        s = run_compaction(db, c);
        compaction_free(c);
    }
    return s;
}

lsm_status *lsm_compact_range(lsm_db *db, const void *begin, size_t blen, const void *end,
                              size_t elen)
{
    lsm_status *s = db_refuse_read_only(db);
    if (s == NULL)
        s = db_flush_memtables(db, 0);
    if (s)
        return s;
    mutex_lock(&db->mu);
    while (db->compact_manual) /* one manual compaction at a time */
        cond_wait(&db->room_cv, &db->mu);
    db->compact_manual = true; /* no lane picks one now */
    while (db->compacting)
        cond_wait(&db->room_cv, &db->mu);
    db->compacting++;
    int max_level = 1;
    for (int l = 1; l < NUM_LEVELS; l++)
        if (version_overlaps_level(db->vs.current, l, begin, blen, end, elen))
            max_level = l;
    for (int l = 0; s == NULL && l < max_level; l++)
        s = compact_level_range(db, l, begin, blen, end, elen);
    db->compacting--;
    db->compact_manual = false;
    if (s == NULL)
        db->bg_progress++;
    pthread_cond_broadcast(&db->work_cv);
    pthread_cond_broadcast(&db->room_cv);
    mutex_unlock(&db->mu);
    return s;
}
