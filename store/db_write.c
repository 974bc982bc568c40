/*
 * db_write.c — the write queue and group commit.
 *
 * No writer thread: each caller puts a `struct writer` on its own stack into
 * the queue. The writer at the head is the leader: it merges the batches of
 * the writers queued behind it into one group, appends the group to the WAL
 * as one record and inserts it into the memtable — with mu released — then
 * publishes it and makes the next writer the head. A group that asked for
 * sync then moves to the sync stage: its leader waits until a WAL sync
 * covers the group (running that sync itself if no running sync covers it,
 * up to db->sync_max at once), and only then hands every member its status. So
 * the next groups append while a sync runs, and the next sync covers all of
 * them: the disk flush, not the queue, is what writers share (MySQL's
 * binlog group commit has the same split into a write stage and a sync
 * stage).
 *
 * Rules that make this correct and durable:
 *  - A writer that asked for sync never joins a group whose leader did not:
 *    that leader will not wait for a sync. (A non-sync writer may ride in a
 *    sync group.)
 *  - A group is one WAL record and one range of sequence numbers, published
 *    to readers (last_seq) only after every member is in the memtable, so a
 *    batch is visible all at once or not at all. Groups are appended and
 *    published in sequence order, so everything up to last_seq is in the
 *    WAL (wal_written bytes of the current one) and a sync started after
 *    reading both covers it all: durable_seq never runs ahead of the disk.
 *    A synced write may be visible a moment before it is durable (as data
 *    written to any filesystem is before its fsync); it is acknowledged
 *    only once durable.
 *  - A sync starts only when no memtable switch is leaving the WAL, and a
 *    switch waits for running syncs (they use the old log).
 *  - Before a WAL is left behind it is synced if it holds unsynced writes,
 *    and a new WAL's directory entry is synced before it is used, so a sync
 *    covers every write acknowledged before it, whatever log it went to.
 *  - Any WAL write or sync failure is sticky (db->bg_error): the page cache
 *    may have dropped what we wrote, so nothing later can be promised —
 *    except an append that found the disk full (LSM_NO_SPACE): it fails
 *    only its group, the log is cut back to its last whole group and the
 *    next write moves to a new log (cut_broken_wal).
 *
 * The sync stage, with its own rules, is db_sync.c.
 */
#include "db_impl.h"
#include "port.h"
#include "status.h"

#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUP_BYTES (1u << 20)
#define SMALL_BATCH (128u << 10)

static size_t writer_bytes(const struct writer *w)
{
    return w->batch ? w->batch->rep.len - BATCH_HEADER : 0;
}

/* REQUIRES: mu held. */
static void enqueue(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu));
    w->next = NULL;
    if (db->tail)
        db->tail->next = w;
    else
        db->head = w;
    db->tail = w;
    db->queue_len++;
    db_gather_signal(db);
}

/* Picks the writers that join the leader's group: returns the last one, and
 * whether the group must be synced. REQUIRES: mu held; leader at the head. */
static struct writer *pick_group(lsm_db *db, bool *need_sync, int *count)
{
    assert(mutex_held(&db->mu));
    struct writer *first = db->head, *last = first;
    size_t size = writer_bytes(first);
    size_t max = MAX_GROUP_BYTES;
    if (size <= SMALL_BATCH)
        max = size + SMALL_BATCH;
    *need_sync = first->sync;
    *count = 1;
    if (first->defer)
        return first; /* its record stays out of the log: a group of its own */
    for (struct writer *w = first->next; w != NULL; w = w->next) {
        if (w->sync && !first->sync)
            break; /* this leader will not sync: w must lead its own group */
        if (first->batch == NULL && w->batch != NULL)
            break; /* a barrier's group made no room in the memtable (lead) */
        if (w->solo || w->defer)
            break;
        if (w->frees != first->frees && !db->reserve_held)
            break; /* an ordinary write may not ride on a freeing one */
        if (size + writer_bytes(w) > max)
            break;
        size += writer_bytes(w);
        last = w;
        (*count)++;
    }
    return last;
}

/* Builds the group's WAL record: the leader's own batch when it is alone,
 * else the scratch batch with every member's records appended. Sequence
 * numbers start at seq. [leader] */
static lsm_status *build_group(lsm_db *db, struct writer *first, struct writer *last, uint64_t seq,
                               lsm_batch **out)
{
    lsm_batch *only = NULL;
    int with_data = 0;
    for (struct writer *w = first;; w = w->next) {
        if (w->batch) {
            only = w->batch;
            with_data++;
        }
        if (w == last)
            break;
    }
    if (with_data <= 1) {
        *out = only; /* NULL: a group of barriers writes nothing */
    } else {
        lsm_batch_clear(&db->group);
        for (struct writer *w = first;; w = w->next) {
            if (w->batch && !lsm_batch_append(&db->group, w->batch))
                return status_new(LSM_IO_ERROR, "out of memory merging a write group");
            if (w == last)
                break;
        }
        *out = &db->group;
    }
    if (*out)
        batch_set_sequence(*out, seq);
    return NULL;
}

/* Appends the group to the WAL and inserts it into mem; *written gets the
 * WAL's size after it. For a deferred group (*keep != NULL, its copy) the
 * log gets only a marker. The deferred batches in `late` are logged first.
 * Runs with mu released. [leader] */
static lsm_status *commit_group(lsm_db *db, lsm_batch *group, wal_writer *wal, memtable *mem,
                                const struct deferred *late, const struct deferred *keep,
                                uint64_t *bytes, uint64_t *late_bytes, uint64_t *written)
{
    lsm_status *s = NULL;
    *bytes = 0;
    *late_bytes = 0;
    if (late)
        s = deferred_log_late(wal, late, late_bytes);
    if (group && s == NULL) {
        size_t n;
        const char *data = batch_contents(group, &n);
        char marker[WAL_MARKER_LEN];
        if (keep) {
            wal_marker_encode(marker, WAL_DEFERRED, batch_sequence(group),
                              lsm_batch_count(group));
            s = wal_add_record(wal, marker, sizeof(marker));
        } else {
            s = wal_add_record(wal, data, n);
        }
        *bytes = n;
    }
    if ((group || late) && s == NULL)
        s = wal_flush(wal);
    *written = wal_offset(wal);
    if (s != NULL)
        return status_wrap(s, "write-ahead log %06llu", (unsigned long long)db->wal_number);
    if (group)
        s = batch_insert_into(group, mem);
    return s;
}

/* Takes the group [head, last] off the queue and wakes the next head. The
 * members stay linked [head, last] and keep waiting until db_finish_group.
 * REQUIRES: mu held. */
static void pop_group(lsm_db *db, struct writer *last, struct wakeups *wk)
{
    assert(mutex_held(&db->mu));
    for (struct writer *w = db->head;; w = w->next) {
        db->queue_len--;
        if (w == last)
            break;
    }
    db->head = last->next;
    if (db->head == NULL)
        db->tail = NULL;
    else
        db_writer_wake(db->head, WRITER_LEADER, wk);
}

#define WAL_ROOM_STEP (1u << 20)
#define WAL_TIGHT_ROOM_STEP (64u << 10)

lsm_status *db_new_wal(lsm_db *db, uint64_t number, bool tight, wal_writer **out)
{
    char name[4096];
    snprintf(name, sizeof(name), "%s/%06llu.log", db->dir, (unsigned long long)number);
    lsm_wfile *f;
    lsm_status *s = db->env->new_wfile(db->env, name, &f);
    if (s)
        return s;
    /* Make log space ahead of the writes, a step at a time: syncs of
     * appends into it need no inode update, and a live log holds at most
     * a step it does not use. ENOSPC here is no error: the log then simply
     * grows as it is written. */
    enum wfile_space mode = db->opt.wal_mode == LSM_WAL_MAPPED      ? WFILE_MAPPED
                            : db->opt.wal_mode == LSM_WAL_ZERO_FILL ? WFILE_ZERO_FILL
                                                                    : WFILE_AUTO;
    lsm_status *pre = f->ops->preallocate(f, tight ? WAL_TIGHT_ROOM_STEP : WAL_ROOM_STEP, mode);
    lsm_status_free(pre);
    *out = wal_writer_new(f, 0);
    if (*out == NULL)
        return status_new(LSM_IO_ERROR, "out of memory");
    s = db->env->sync_dir(db->env, db->dir);
    if (s) {
        lsm_status_free(wal_writer_close(*out));
        lsm_status_free(db->env->remove_file(db->env, name));
        *out = NULL;
    }
    return s;
}

/* The body of switch_memtable. REQUIRES: mu held; no sync running or
 * starting (wal_switching). */
static lsm_status *leave_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->wal_switching && db->syncs_running == 0);
    uint64_t number = vset_new_file_number(&db->vs);
    wal_writer *old = db->wal;
    memtable *fresh = memtable_new();
    /* The view is allocated now: once fresh takes writes, readers must
     * see it (db_install_view). */
    struct readview *rv = db_view_alloc(db->nimm + 1);
    if (fresh == NULL || rv == NULL) {
        if (fresh != NULL)
            memtable_unref(fresh);
        free(rv);
        return status_new(LSM_IO_ERROR, "out of memory switching memtables");
    }
    bool unsynced = db->wal_synced < db->wal_written;
    bool tight = db->frees_holding;
    mutex_unlock(&db->mu);
    lsm_status *sync_err = NULL;
    if (unsynced)
        sync_err = wal_sync(old);
    wal_writer *neu = NULL;
    lsm_status *s = sync_err ? status_copy(sync_err) : db_new_wal(db, number, tight, &neu);
    mutex_lock(&db->mu);
    if (sync_err) /* the old log's writes may be lost: sticky */
        db_set_bg_error(db, status_wrap(sync_err, "syncing the write-ahead log"));
    if (s) {
        /* A failed create is not sticky: the old log is intact and the next
         * write tries again. */
        memtable_unref(fresh);
        free(rv);
        return s;
    }
    if (!db_push_imm(db, fresh, number)) {
        /* Keep writing the old log; the empty new one is swept later. */
        lsm_status_free(wal_writer_close(neu));
        memtable_unref(fresh);
        free(rv);
        return status_new(LSM_IO_ERROR, "out of memory switching memtables");
    }
    lsm_status_free(wal_writer_close(old));
    /* The old log was synced just now, but it holds only the markers of
     * deferred batches: those become durable when logged late or flushed. */
    uint64_t synced = db_sync_ceiling(db);
    if (synced > db->durable_seq)
        db->durable_seq = synced;
    db->wal = neu;
    db->wal_number = number;
    db->wal_written = db->wal_synced = 0;
    db->wal_broken = db->wal_cut = false;
    db->stats.rotations++;
    db_view_install(db, rv);
    return NULL;
}

/* After an append found the disk full: cuts the current WAL back to its
 * last whole group (the torn record past it must not stay in the middle of
 * a log) and makes it durable, which finishes the groups waiting for a
 * sync. Failing that, the store stops (sticky). Cutting needs no space.
 * REQUIRES: mu held (released meanwhile); the caller leads the queue. */
static void cut_broken_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (!db->wal_broken || db->wal_cut || db->bg_error)
        return;
    db->wal_switching = true; /* no sync starts on the log now */
    while (db->syncs_running > 0)
        cond_wait(&db->sync_cv, &db->mu);
    uint64_t good = db->wal_written;
    char name[4096];
    snprintf(name, sizeof(name), "%s/%06llu.log", db->dir, (unsigned long long)db->wal_number);
    mutex_unlock(&db->mu);
    lsm_status *s = db->env->truncate_file(db->env, name, good);
    if (s == NULL)
        s = db->env->sync_file(db->env, name);
    mutex_lock(&db->mu);
    db->wal_switching = false;
    if (s != NULL) {
        db_set_bg_error(db, status_wrap(s, "cutting back the write-ahead log after a full disk"));
    } else {
        db->wal_cut = true;
        db->wal_synced = good;
        uint64_t synced = db_sync_ceiling(db);
        if (synced > db->durable_seq)
            db->durable_seq = synced;
    }
    pthread_cond_broadcast(&db->sync_cv);
    db_finish_synced(db, db->bg_error, NULL, NULL);
    db_hand_off_sync(db, NULL);
}

/* Switches to a new memtable and a new WAL; the old memtable becomes
 * immutable and, on success, the flush thread is woken for it (every
 * switch, or a memtable waits unflushed). REQUIRES: mu held; caller is the
 * leader (mu is released while the old log is synced and the new one
 * created). */
static lsm_status *switch_memtable(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    db->wal_switching = true; /* no sync starts on the old log now */
    while (db->syncs_running > 0) /* and those running hold it */
        cond_wait(&db->sync_cv, &db->mu);
    lsm_status *s = leave_wal(db);
    db->wal_switching = false;
    /* Groups that waited meanwhile are durable now (the old log was synced
     * to its end) or failed with it; the rest get a sync of their own. */
    db_finish_synced(db, db->bg_error, NULL, NULL);
    db_hand_off_sync(db, NULL);
    if (s == NULL)
        pthread_cond_broadcast(&db->work_cv);
    return s;
}

/* Bytes per second writers may go now (pacing.h). REQUIRES: mu held. */
static double paced_rate(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    double mem_fill = (double)db_memtable_bytes(db) / (double)db->opt.max_memtable_bytes;
    return pacer_write_rate(&db->pacer, db->vs.current->l0_load, mem_fill);
}

/* After a group of `bytes` was written: charge them to the pacing clock.
 * REQUIRES: mu held; the caller leads the write queue. */
static void account_write(lsm_db *db, uint64_t bytes)
{
    assert(mutex_held(&db->mu));
    pace_clock_charge(&db->pace, db->env, bytes, paced_rate(db));
}

/* Waits for background work to make room. REQUIRES: mu held. */
static void wait_for_room(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t t0 = db->env->now_micros(db->env);
    db->stats.stops++;
    pthread_cond_broadcast(&db->work_cv);
    cond_wait(&db->room_cv, &db->mu);
    db->stats.stop_us += db->env->now_micros(db->env) - t0;
}

/* Whether a full memtable could not be switched now: no memory for another
 * (the immutable ones still flushing), or level 0 at its stop. Room then
 * comes only from background work. REQUIRES: mu held. */
/* Whether the disk is too low for the memtables: with a reserve, what they
 * hold unflushed (and one more) must fit beside it, or a delete after a full
 * disk finds more to flush than the reserve can take. REQUIRES: mu held. */
static bool disk_low_for_memtables(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t total = 0, avail = 0;
    if (db->reserve_bytes == 0)
        return false;
    lsm_status *s = db->env->disk_free(db->env, db->dir, &total, &avail);
    if (s != NULL) { /* no figure: as before */
        lsm_status_free(s);
        return false;
    }
    uint64_t need = db->reserve_bytes + db_memtable_bytes(db) + db->opt.write_buffer_size;
    return avail < need;
}

static bool switch_must_wait(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    bool no_memory =
        db_memtable_bytes(db) + db->opt.write_buffer_size > db->opt.max_memtable_bytes &&
        db->nimm > 0;
    /* Near a full disk, memtables do not pile up behind slow flushes. */
    bool low = db->nimm > 0 && !no_memory && disk_low_for_memtables(db);
    return no_memory || low || db->vs.current->l0_load >= L0_STOP;
}

/* How soon an idle store looks again at an old deferred batch it could not
 * retire (the queue was busy, or level 0 full). */
#define DEFERRED_RETRY_US 20000

/* Switches the active memtable out from the flush thread, as a solo writer
 * at the head of an empty queue (the flush then writes it to a table);
 * false if the queue is busy or no switch may happen now. Never waits for
 * room. REQUIRES: mu held (released meanwhile). */
static bool idle_switch(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->head != NULL || db->bg_error || switch_must_wait(db))
        return false;
    struct writer w = {.batch = NULL, .solo = true};
    atomic_init(&w.state, WRITER_WAITING);
    enqueue(db, &w); /* the head at once: the queue was empty */
    lsm_status *s = switch_memtable(db);
    struct wakeups wk = {.n = 0};
    pop_group(db, &w, &wk);
    lsm_status_free(s); /* not sticky (see leave_wal): retried later */
    mutex_unlock(&db->mu);
    db_wakeups_flush(&wk);
    mutex_lock(&db->mu);
    return true;
}

uint64_t db_retire_old_deferred(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    const struct deferred *d = db->deferred_head;
    if (d == NULL)
        return 0;
    uint64_t max = (uint64_t)db->opt.deferred_max_age_ms * 1000;
    uint64_t now = db->env->now_micros(db->env);
    if (now < d->at_us + max)
        return d->at_us + max - now;
    bool in_mem = false;
    for (; d != NULL && !in_mem; d = d->next)
        in_mem = d->mem == db->mem_id; /* see struct deferred */
    if (!in_mem) /* its memtable is already waiting for the flush */
        return DEFERRED_RETRY_US;
    idle_switch(db);
    return DEFERRED_RETRY_US;
}

/* How long the store must see no write before an active memtable holding
 * deletions is flushed, so the space they free comes back on an idle store
 * (the compaction of tombstone-heavy tables follows). */
#define IDLE_DELETIONS_US 1000000

/* Switches out an idle active memtable that holds deletions: returns the µs
 * after which to look again, 0 if it holds none (a write that adds some
 * wakes the flush thread: idle_watch). REQUIRES: mu held. */
static uint64_t flush_idle_deletions(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    db->idle_watch = memtable_deletions(db->mem) > 0;
    if (!db->idle_watch)
        return 0;
    uint64_t now = db->env->now_micros(db->env);
    if (db->idle_seq != db->last_seq) { /* written since the last look */
        db->idle_seq = db->last_seq;
        db->idle_since_us = now;
    }
    if (now < db->idle_since_us + IDLE_DELETIONS_US)
        return db->idle_since_us + IDLE_DELETIONS_US - now;
    if (!idle_switch(db))
        return DEFERRED_RETRY_US;
    db->idle_watch = false;
    return 0;
}

uint64_t db_idle_look(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t a = db_retire_old_deferred(db), b = flush_idle_deletions(db);
    return a == 0 || (b != 0 && b < a) ? b : a;
}

bool lsm_write_may_wait(lsm_db *db)
{
    mutex_lock(&db->mu);
    bool paced = pace_clock_ahead(&db->pace, db->env);
    /* "Nearly full": one more large write (max_write is 1 MiB) may fill it. */
    bool filling = memtable_memory_usage(db->mem) + (1u << 20) >= db->opt.write_buffer_size;
    bool may = db->bg_error == NULL && (paced || (filling && switch_must_wait(db)));
    mutex_unlock(&db->mu);
    return may;
}

/* db_make_room_for_write; a writer that frees space (frees) does not give up
 * on a full disk before the background work has tried once more (with the
 * reserve); its leader then tries again by db_reserve.c's rule. */
static lsm_status *make_room(lsm_db *db, bool force, bool frees)
{
    assert(mutex_held(&db->mu));
    uint64_t events = db->nospace_events;
    for (;;) {
        if (db->bg_error)
            return status_copy(db->bg_error);
        uint64_t us = pace_clock_delay(&db->pace, db->env);
        if (us > 0) {
            /* Sleep until the pacing clock, with mu released (others keep
             * queueing behind us and join the next group). */
            mutex_unlock(&db->mu);
            db->env->sleep_micros(db->env, us);
            mutex_lock(&db->mu);
            db->stats.slowdown_us += us;
            continue;
        }
        cut_broken_wal(db);
        if (db->bg_error)
            return status_copy(db->bg_error);
        bool full = memtable_memory_usage(db->mem) >= db->opt.write_buffer_size;
        if (!force && !full && !db->wal_broken)
            return NULL;
        if (force && memtable_entries(db->mem) == 0 && !db->wal_broken)
            return NULL;
        if (switch_must_wait(db)) {
            /* Room comes from flushes and compactions; while the disk is
             * too full for them, say so rather than wait forever. */
            if (db->nospace && !(frees && db->nospace_events == events))
                return status_copy(db->nospace);
            if (frees)
                db_reserve_serve_background(db);
            wait_for_room(db);
            continue;
        }
        return switch_memtable(db);
    }
}

lsm_status *db_make_room_for_write(lsm_db *db, bool force)
{
    return make_room(db, force, false);
}

void db_queue_pop_head(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu) && db->head == w);
    pop_group(db, w, NULL);
}

bool db_queue_wait(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu));
    atomic_init(&w->state, WRITER_WAITING);
    enqueue(db, w);
    if (db->head == w)
        return true;
    mutex_unlock(&db->mu);
    uint64_t t0 = db->env->now_micros(db->env); /* only writers that queue pay for it */
    enum writer_state st = db_writer_wait(w);
    atomic_fetch_add_explicit(&db->stats.queue_wait_us, db->env->now_micros(db->env) - t0,
                              memory_order_relaxed);
    if (st == WRITER_DONE)
        return false;
    mutex_lock(&db->mu);
    assert(db->head == w);
    return true;
}

/* wal_bytes: what the group put in the log; bytes: its batch. */
static void count_group(lsm_db *db, int count, uint64_t wal_bytes, uint64_t bytes)
{
    struct db_stats *st = &db->stats;
    int followers = count - 1;
    st->followers[followers < FOLLOWER_BUCKETS - 1 ? followers : FOLLOWER_BUCKETS - 1]++;
    if (bytes) {
        st->groups++;
        st->wal_bytes += wal_bytes;
        st->user_bytes += bytes - BATCH_HEADER;
    }
}

/* Writes the group led by w (picked from the queue) to the WAL and the
 * memtable and publishes it: *last is its last member, *count its size.
 * REQUIRES: mu held; w is the head (mu is released while writing). */
static lsm_status *write_group(lsm_db *db, struct writer *w, struct writer **last, int *count,
                               bool *need_sync)
{
    *last = pick_group(db, need_sync, count);
    uint64_t seq = db->last_seq + 1;
    lsm_batch *group = NULL;
    lsm_status *s = build_group(db, w, *last, seq, &group);
    if (s != NULL) /* out of memory, nothing written or taken: not sticky */
        return s;
    bool defer = w->defer && group != NULL;
    /* Nothing logged may follow a deferred batch that is in no log yet. A
     * deferred group takes none (so an error copying it loses none). */
    struct deferred *late = defer ? NULL : db_take_deferred(db);
    wal_writer *wal = db->wal;
    memtable *mem = db->mem;
    uint64_t mem_id = db->mem_id; /* see struct deferred */
    uint64_t bytes = 0, late_bytes = 0, written = 0;
    mutex_unlock(&db->mu);
    struct deferred *keep = NULL;
    bool wrote = false; /* whether the log or mem may have changed */
    if (defer && (keep = deferred_copy(group, mem_id)) == NULL) {
        s = status_new(LSM_IO_ERROR, "out of memory deferring a write");
    } else {
        s = commit_group(db, group, wal, mem, late, keep, &bytes, &late_bytes, &written);
        wrote = true;
    }
    mutex_lock(&db->mu);
    uint64_t wal_bytes = keep ? WAL_MARKER_LEN : bytes;
    /* A full disk fails only this group (see cut_broken_wal): the late
     * batches it carried go back, to be logged in the next log. */
    bool full = s != NULL && lsm_status_code(s) == LSM_NO_SPACE;
    if (late && full) {
        db_restore_deferred(db, late);
    } else if (late) {
        db->stats.late_logged_bytes += late_bytes;
        db->stats.wal_bytes += late_bytes;
        db_end_late_log(db, late);
    }
    if (s != NULL) {
        free(keep);
        if (full)
            db->wal_broken = true;
        else if (wrote) /* the log may hold what the memtable does not */
            db_set_bg_error(db, status_copy(s));
    } else if (group || late) {
        db->wal_written = written;
    }
    if (s == NULL && group && !db->idle_watch && memtable_deletions(mem) > 0)
        pthread_cond_broadcast(&db->work_cv); /* flush_idle_deletions looks */
    if (s == NULL && group) {
        db->last_seq = seq + lsm_batch_count(group) - 1;
        account_write(db, bytes);
        if (keep)
            db_keep_deferred(db, keep);
    }
    count_group(db, *count, wal_bytes, bytes);
    return s;
}

/* What a barrier needs before it is written: no room in the memtable, but
 * a log a full disk broke is cut back and left (no sync may run on it, so
 * a barrier appended to it would wait forever). REQUIRES: mu held; the
 * caller leads the queue. */
static lsm_status *leave_broken_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    cut_broken_wal(db);
    if (db->bg_error || !db->wal_broken)
        return status_copy(db->bg_error);
    if (switch_must_wait(db))
        return db->nospace ? status_copy(db->nospace)
                           : status_new(LSM_NO_SPACE, "no room to leave a full write-ahead log");
    return switch_memtable(db);
}

/* A write that frees space found the disk full, with deferred batches in
 * no log: logging them late first could take as much room again as they
 * hold, so their memtables are flushed instead (in the reserve's space,
 * released by the caller), once. REQUIRES: mu held; the caller leads the
 * queue. */
static lsm_status *flush_deferred_first(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    lsm_status *s = make_room(db, true, true); /* their memtable becomes immutable */
    uint64_t before = db->nospace_events;
    db->flush_asked++; /* a flush waiting to retry does so now */
    /* One failure may be the retry that raced the release. */
    while (s == NULL && db->deferred_head != NULL && db->bg_error == NULL &&
           db->nospace_events < before + 2) {
        pthread_cond_broadcast(&db->work_cv);
        cond_wait(&db->room_cv, &db->mu);
    }
    if (s == NULL && db->bg_error)
        return status_copy(db->bg_error);
    if (s == NULL && db->deferred_head != NULL)
        return db->nospace ? status_copy(db->nospace)
                           : status_new(LSM_NO_SPACE, "no room to flush deferred writes");
    return s;
}

/* What the leader's group needs before it is written: the reserve's leave,
 * room in the memtable (a barrier: a log a full disk broke left behind).
 * A freeing write on a full disk flushes deferred batches first (no room to
 * log them late and flush them too); so does its retry. REQUIRES: mu held;
 * w is the head. */
static lsm_status *prepare_group(lsm_db *db, struct writer *w, bool retry)
{
    assert(mutex_held(&db->mu));
    if (w->batch == NULL)
        return leave_broken_wal(db);
    lsm_status *s = db_reserve_check(db, w->frees);
    if (s == NULL && w->frees && db->deferred_head != NULL && (retry || db->nospace)) {
        db_reserve_release(db);
        s = flush_deferred_first(db);
    }
    return s != NULL ? s : make_room(db, false, w->frees);
}

/* Prepares and writes the group led by w; a log the write broke is cut
 * back at once (groups may wait for a sync on it). REQUIRES: mu held; w is
 * the head. */
static lsm_status *try_group(lsm_db *db, struct writer *w, bool retry, struct writer **last,
                             int *count, bool *need_sync)
{
    assert(mutex_held(&db->mu));
    lsm_status *s = prepare_group(db, w, retry);
    /* A sync group could not finish before a running sync ends anyway:
     * wait for it at the head, so the writers that queue meanwhile join
     * this group (one append, one wake-up round) instead of each leading
     * a group of its own; with no sync running, gather the usual crowd.
     * Non-sync heads and barriers (db_sync_wait) never wait here, and no
     * one waits for a sync that is still gathering its waiters. */
    if (s == NULL && w->sync) {
        while (db->syncs_running >= db->sync_max && !db->sync_gathering)
            cond_wait(&db->sync_cv, &db->mu);
        db_gather(db, true);
    }
    if (s == NULL)
        s = write_group(db, w, last, count, need_sync);
    cut_broken_wal(db);
    return s;
}

/* Leads one group: writes it, leaves the queue to the next head, waits for
 * a sync if the group needs one, then finishes the members; *seq gets the
 * group's last sequence and the wake-ups it owes go to wk. A write that
 * frees space and meets a full disk tries again by db_reserve.c's rule.
 * REQUIRES: mu held; w is the head. */
static lsm_status *lead(lsm_db *db, struct writer *w, struct wakeups *wk, uint64_t *seq)
{
    /* A barrier inserts nothing: it never waits for memtable room (it may
     * be what saves the deferred batches of a store whose disk is full),
     * and its group holds only barriers (pick_group). */
    bool frees = w->frees && w->batch != NULL;
    struct frees_wait fw = {.deadline_us = 0};
    if (frees)
        db->frees_waiting = true;
    struct writer *last = w;
    int count = 1;
    bool need_sync = false;
    lsm_status *s = try_group(db, w, false, &last, &count, &need_sync);
    while (frees && lsm_status_code(s) == LSM_NO_SPACE) {
        db_reserve_frees_hold(db, &fw);
        if (!db_reserve_frees_wait(db, &fw))
            break;
        lsm_status_free(s);
        s = try_group(db, w, true, &last, &count, &need_sync);
    }
    db_reserve_frees_done(db, &fw);
    if (s == NULL && w->frees)
        db_reserve_serve_background(db); /* now that it is in the log */
    *seq = db->last_seq;
    pop_group(db, last, wk);
    if (s != NULL || !need_sync) {
        db_finish_group(w, last, s, *seq, wk);
        return s;
    }
    return db_wait_durable(db, w, last, *seq, count, wk);
}

lsm_status *db_write(lsm_db *db, lsm_batch *batch, const lsm_write_options *wo, uint64_t *seqp)
{
    bool sync = wo && wo->sync;
    struct writer w = {.batch = batch, .sync = sync};
    if (batch && lsm_batch_count(batch) == 0)
        w.batch = NULL;
    w.defer = w.batch != NULL && !sync && wo && wo->defer_log;
    w.frees = wo && wo->frees_space;
    mutex_lock(&db->mu);
    db->stats.writes++;
    if (w.batch == NULL)
        db->stats.barriers++;
    if (!db_queue_wait(db, &w)) { /* a leader wrote it for us */
        if (seqp)
            *seqp = w.seq;
        return w.status;
    }
    struct wakeups wk = {.n = 0};
    uint64_t seq;
    lsm_status *s = lead(db, &w, &wk, &seq);
    if (seqp)
        *seqp = seq;
    mutex_unlock(&db->mu);
    db_wakeups_flush(&wk);
    return s;
}
