/*
 * db_rotate.c — memtable and WAL rotation: room for the next write group.
 *
 * The queue's leader (db_write.c) asks here, before its group is written,
 * for room in the memtable (db_make_room_for_write: paced by the pacing
 * clock, waiting for background work while level 0 or memory is full) and
 * switches to a new memtable and a new WAL when the current one is full.
 * A switch waits for the running WAL syncs (they use the old log), syncs
 * the old log if it holds unsynced writes and makes the new log's
 * directory entry durable before it is used, so a sync covers every write
 * acknowledged before it, whatever log it went to.
 *
 * A full disk: an append that found no space broke the log (wal_broken);
 * it is cut back to its last whole group and synced (db_cut_broken_wal),
 * which finishes the groups that waited for a sync on it, and the next
 * write moves to a new log.
 *
 * Room, switches and cuts run under mu, by whichever writer leads the
 * queue (asserted as db->head != NULL: the leader is the head until it pops
 * its group); mu is released around the file I/O. lsm_write_may_wait and
 * db_switch_must_wait only look. It calls down into the sync stage
 * (db_sync.c) to finish or hand on the groups a switch kept waiting, and
 * never into the queue.
 */
#include "db_impl.h"
#include "status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
        return status_new(LSM_NO_MEMORY, "out of memory");
    s = db->env->sync_dir(db->env, db->dir);
    if (s) {
        lsm_status_free(wal_writer_close(*out));
        lsm_status_free(db->env->remove_file(db->env, name));
        *out = NULL;
    }
    return s;
}

/* The body of db_switch_memtable. REQUIRES: mu held; no sync running or
 * starting (wal_switching). */
static lsm_status *leave_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
    assert(db->wal_switching && db->syncs_running == 0);
    uint64_t number = vset_new_file_number(&db->vs);
    wal_writer *old = db->wal;
    memtable *fresh = db_memtable_new(db);
    /* The view is allocated now: once fresh takes writes, readers must
     * see it (db_install_view). */
    struct readview *rv = db_view_alloc(db->nimm + 1);
    if (fresh == NULL || rv == NULL) {
        if (fresh != NULL)
            memtable_unref(fresh);
        free(rv);
        return status_new(LSM_NO_MEMORY, "out of memory switching memtables");
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
        return status_new(LSM_NO_MEMORY, "out of memory switching memtables");
    }
    lsm_status_free(wal_writer_close(old));
    /* The old log was synced just now, but it holds only the markers of
     * deferred batches: those become durable when logged late or flushed. */
    uint64_t synced = db_sync_ceiling(db);
    if (synced > db->durable_seq)
        db->durable_seq = synced;
    db->wal = neu;
    db->wal_held = false; /* the old log's hold ended with its close */
    (void)db_hold_wal(db);
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
void db_cut_broken_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
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
    (void)db_hold_wal(db);
}

/* Switches to a new memtable and a new WAL; the old memtable becomes
 * immutable and, on success, the flush thread is woken for it (every
 * switch, or a memtable waits unflushed). REQUIRES: mu held; caller is the
 * leader (mu is released while the old log is synced and the new one
 * created). */
lsm_status *db_switch_memtable(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
    db->wal_switching = true; /* no sync starts on the old log now */
    while (db->syncs_running > 0) /* and those running hold it */
        cond_wait(&db->sync_cv, &db->mu);
    lsm_status *s = leave_wal(db);
    db->wal_switching = false;
    /* Groups that waited meanwhile are durable now (the old log was synced
     * to its end) or failed with it; the rest get a sync of their own. */
    db_finish_synced(db, db->bg_error, NULL, NULL);
    db_hand_off_sync(db, NULL);
    (void)db_hold_wal(db);
    if (s == NULL) {
        db_memtable_cap_update(db);
        pthread_cond_broadcast(&db->work_cv);
    }
    return s;
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

/* Whether the disk is too low for the memtables: with a reserve, what they
 * hold unflushed (and one more) must fit beside it, or a delete after a full
 * disk finds more to flush than the reserve can take. REQUIRES: mu held. */
static bool disk_low_for_memtables(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t total = 0, avail = 0;
    if (db->reserve_max == 0)
        return false;
    lsm_status *s = db->env->disk_free(db->env, db->dir, &total, &avail);
    if (s != NULL) { /* no figure: as before */
        lsm_status_free(s);
        return false;
    }
    uint64_t need = db->reserve_bytes + db_memtable_bytes(db) + db->opt.write_buffer_size;
    return avail < need;
}

void db_memtable_cap_update(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    db->mem_cap = disk_low_for_memtables(db) ? db_reserve_memtable_cap(db)
                                             : db->opt.write_buffer_size;
    db->mem_cap_checked = memtable_memory_usage(db->mem);
}

size_t db_memtable_room(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->mem_cap >= db->opt.write_buffer_size)
        return SIZE_MAX;
    size_t used = memtable_memory_usage(db->mem);
    return used < db->mem_cap ? db->mem_cap - used : 0;
}

bool db_bulk_stream(const lsm_db *db)
{
    assert(mutex_held(&((lsm_db *)db)->mu));
    return db->bulk_run >= (uint64_t)BULK_STREAM_BUFFERS * db->opt.write_buffer_size;
}

/* Where the active memtable is full: its cap, or twice the write buffer
 * in a bulk stream (db_impl.h) for a memtable that is mostly big defer_log
 * writes while the cap is the write buffer (the disk not low): a big file's
 * data then reaches the disk in half as many memtable switches (a new WAL
 * and the old one's fdatasync on the writer's thread), flushes and table
 * syncs. REQUIRES: mu held. */
static size_t memtable_full_at(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    bool big = db_bulk_stream(db) && memtable_mostly_kept(db->mem);
    return big && db->mem_cap >= db->opt.write_buffer_size ? 2 * db->opt.write_buffer_size
                                                            : db->mem_cap;
}

/* Looks at the disk again each time the active memtable grew by a low cap
 * since the last look (at most one disk_free per that many bytes): a disk
 * filled by others, or by compactions, lowers the cap of the memtable
 * already filling. REQUIRES: mu held. */
static void memtable_cap_recheck(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->reserve_max == 0 || db->mem_cap < db->opt.write_buffer_size)
        return;
    if (memtable_memory_usage(db->mem) >= db->mem_cap_checked + db_reserve_memtable_cap(db))
        db_memtable_cap_update(db);
}

/* Whether a full memtable could not be switched now for a write (frees: one
 * that frees space): no memory for another (the immutable ones still
 * flushing), or level 0 at its stop, or the disk too low for another —
 * the last two except for a write that frees space: the flush it would
 * wait for may fit only once what it frees is gone (a full disk did not
 * empty, issue 29), and no compaction starts while it waits (frees_holding,
 * db_reserve.c), so level 0 would stay at its stop. Room then comes only
 * from background work. REQUIRES: mu held. */
static bool switch_waits(lsm_db *db, bool frees)
{
    assert(mutex_held(&db->mu));
    bool no_memory =
        db_memtable_bytes(db) + db->opt.write_buffer_size > db->opt.max_memtable_bytes &&
        db->nimm > 0;
    if (frees)
        return no_memory;
    /* Near a full disk, memtables do not pile up behind slow flushes. */
    bool low = db->nimm > 0 && !no_memory && disk_low_for_memtables(db);
    return no_memory || low || db->vs.current->l0_load >= L0_STOP;
}

bool db_switch_must_wait(lsm_db *db)
{
    return switch_waits(db, false);
}

bool lsm_write_may_wait(lsm_db *db)
{
    mutex_lock(&db->mu);
    bool paced = pace_clock_ahead(&db->pace, db->env);
    /* "Nearly full": one more large write (max_write is 1 MiB) may fill it. */
    bool filling = memtable_memory_usage(db->mem) + (1u << 20) >= memtable_full_at(db);
    bool may = db->bg_error == NULL && (paced || (filling && db_switch_must_wait(db)));
    mutex_unlock(&db->mu);
    return may;
}

void db_wal_appended(lsm_db *db, lsm_status *s, uint64_t written)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
    if (s == NULL)
        db->wal_written = written;
    else if (lsm_status_code(s) == LSM_NO_SPACE)
        db->wal_broken = true; /* cut back before the next append or sync */
    else /* the log may hold what the memtable does not */
        db_set_bg_error(db, status_copy(s));
}

/* A writer that frees space (frees) does not give up on a full disk before
 * the background work has tried once more (with the reserve); its leader
 * then tries again by db_reserve.c's rule. */
lsm_status *db_make_room_for_write(lsm_db *db, bool force, bool frees, size_t adding)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
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
        db_cut_broken_wal(db);
        if (db->bg_error)
            return status_copy(db->bg_error);
        /* Near a full disk a batch that would take the memtable past its
         * cap goes to the next one, unless it is empty (db_memtable_room). */
        memtable_cap_recheck(db);
        bool full = memtable_memory_usage(db->mem) >= memtable_full_at(db) ||
                    (memtable_entries(db->mem) > 0 && adding > db_memtable_room(db));
        if (!force && !full && !db->wal_broken)
            return NULL;
        if (force && memtable_entries(db->mem) == 0 && !db->wal_broken)
            return NULL;
        if (switch_waits(db, frees)) {
            /* Room comes from flushes and compactions; while the disk is
             * too full for them, say so rather than wait forever. */
            if (db->nospace && !(frees && db->nospace_events == events))
                return status_copy(db->nospace);
            if (frees)
                db_reserve_serve_background(db);
            wait_for_room(db);
            continue;
        }
        return db_switch_memtable(db);
    }
}

/* What a barrier needs before it is written: no room in the memtable, but
 * a log a full disk broke is cut back and left (no sync may run on it, so
 * a barrier appended to it would wait forever). REQUIRES: mu held; the
 * caller leads the queue. */
lsm_status *db_leave_broken_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
    db_cut_broken_wal(db);
    if (db->bg_error || !db->wal_broken)
        return status_copy(db->bg_error);
    if (db_switch_must_wait(db))
        return db->nospace ? status_copy(db->nospace)
                           : status_new(LSM_NO_SPACE, "no room to leave a full write-ahead log");
    return db_switch_memtable(db);
}

