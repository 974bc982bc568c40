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
 *  - Room for the group (pacing, a memtable and WAL switch) is made
 *    before it is written, by db_rotate.c, with its own rules.
 *  - Any WAL write or sync failure is sticky (db->bg_error): the page cache
 *    may have dropped what we wrote, so nothing later can be promised —
 *    except an append that found the disk full (LSM_NO_SPACE): it fails
 *    only its group, the log is cut back to its last whole group and the
 *    next write moves to a new log (db_rotate.c, db_cut_broken_wal).
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
    size_t room = db_memtable_room(db);
    if (room < max) /* near a full disk: followers only up to the cap */
        max = room;
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
                return status_new(LSM_NO_MEMORY, "out of memory merging a write group");
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
 * WAL's size after it. For a deferred group (keep != NULL, which took its
 * bytes: deferred_take) the log gets only a marker. The deferred batches
 * in `late` are logged first. Runs with mu released. [leader] */
static lsm_status *commit_group(lsm_db *db, lsm_batch *group, wal_writer *wal, memtable *mem,
                                const struct deferred *late, struct deferred *keep, uint64_t *bytes,
                                uint64_t *late_bytes, uint64_t *written)
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
            deferred_marker(keep, marker);
            s = wal_add_record(wal, marker, sizeof(marker));
            n = keep->len;
        } else {
            s = wal_add_record(wal, data, n);
        }
        *bytes = n;
    }
    if ((group || late) && s == NULL)
        s = wal_flush(wal);
    *written = wal_offset(wal);
    if (s != NULL) {
        if (keep)
            deferred_give_back(keep, group);
        return status_wrap(s, "write-ahead log %06llu", (unsigned long long)db->wal_number);
    }
    if (group)
        s = keep ? deferred_insert(keep, group) : batch_insert_into(group, mem);
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

void db_queue_pop_head(lsm_db *db, struct writer *w, struct wakeups *wk)
{
    assert(mutex_held(&db->mu) && db->head == w);
    pop_group(db, w, wk);
}

bool db_queue_empty(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    return db->head == NULL;
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
    uint32_t nrec = group ? lsm_batch_count(group) : 0; /* a deferred group's bytes go */
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
    if (defer && (keep = deferred_new(mem_id)) == NULL) {
        s = status_new(LSM_NO_MEMORY, "out of memory deferring a write");
    } else if (keep && (s = deferred_take(keep, group, mem)) != NULL) {
        /* nothing written nor taken: not sticky */
    } else {
        s = commit_group(db, group, wal, mem, late, keep, &bytes, &late_bytes, &written);
        wrote = true;
    }
    mutex_lock(&db->mu);
    uint64_t wal_bytes = keep ? WAL_MARKER_LEN : bytes;
    /* A full disk fails only this group (see db_cut_broken_wal): the late
     * batches it carried go back, to be logged in the next log. */
    db_end_late_log(db, late, s, late_bytes);
    if (s != NULL)
        deferred_free(keep);
    if (wrote && (s != NULL || group || late))
        db_wal_appended(db, s, written);
    if (s == NULL && group && !db->idle_watch && memtable_deletions(mem) > 0)
        pthread_cond_broadcast(&db->work_cv); /* flush_idle_deletions looks */
    if (s == NULL && group) {
        db->last_seq = seq + nrec - 1;
        account_write(db, bytes);
        if (keep) {
            assert(group == w->batch); /* a deferred group is its leader alone */
            db_keep_deferred(db, keep);
        }
    }
    count_group(db, *count, wal_bytes, bytes);
    return s;
}

/* A write that frees space found the disk full, with deferred batches in
 * no log: logging them late first could take as much room again as they
 * hold, so their memtables are flushed instead (in the reserve's space,
 * released by the caller), once. REQUIRES: mu held; the caller leads the
 * queue. */
static lsm_status *flush_deferred_first(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    lsm_status *s = db_make_room_for_write(db, true, true, 0); /* their memtable becomes immutable */
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
        return db_leave_broken_wal(db);
    lsm_status *s = db_reserve_check(db, w->frees);
    if (s == NULL && w->frees && db->deferred_head != NULL && (retry || db->nospace)) {
        db_reserve_release(db);
        s = flush_deferred_first(db);
    }
    return s != NULL ? s : db_make_room_for_write(db, false, w->frees, writer_bytes(w));
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
    db_cut_broken_wal(db);
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
    if (!need_sync && db->wal_held)
        (void)db_hold_wal(db); /* ends a hold no sync follows */
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

