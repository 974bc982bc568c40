/*
 * db_reserve.c — the space reserve: a file of reserve_bytes (RESERVE in the
 * store directory) that holds disk space back from ordinary writes, as
 * ext4's reserved blocks do, so a full store can always be emptied.
 *
 * The rule: an ordinary write goes ahead only while the reserve is held
 * (the file is there, full size). The reserve serves only work that frees
 * space: the WAL append of a write that frees space (lsm_write_options
 * .frees_space: deletes, truncates), and, once such a write has come, the
 * flushes and compactions ahead of and after it (a flush of the writes that
 * filled the disk, with no delete behind it, never takes it), and the
 * MANIFEST append of lsm_delete_files_in_range (db_drop_range.c), which frees
 * whole tables. Then the file
 * is removed and its space serves them; ordinary writes then get LSM_NO_SPACE until the file can be made
 * again (tried at most every RESERVE_RETRY_US, once the disk has room for it
 * and as much again, or the env cannot say: a failed disk_free never
 * refuses writes). Opening removes it first, so recovery never lacks
 * space, and makes it again after. The reserve is never needed to open.
 *
 * Freeing comes first on a full disk: a write that frees space fails for
 * space only once nothing else can make room. It may switch to a new
 * memtable and log even where the disk is too low for another or level 0
 * is at its stop (db_rotate.c switch_waits): the flush before it may fit
 * only once what it frees is gone, and no compaction starts while it
 * waits. While its leader waits
 * (frees_holding: from its first try that met the full disk until it is
 * written or fails) no compaction starts, so the reserve's space
 * goes to the flushes and the log append it needs, not to a compaction's
 * output; after each failed try it gives the reserve up, wakes the flush and
 * waits until the running flush or compaction has ended (its output kept or
 * removed) or a due one was tried again, then tries again. It fails only
 * when FREES_IDLE_TRIES tries in a row failed with no progress in between (no
 * flush or compaction succeeded, none still running: a compaction that fails
 * for space again and again is no progress), or after FREES_WAIT_US in all.
 */
#include "db_impl.h"
#include "filename.h"
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESERVE_RETRY_US 100000
#define RESERVE_CHUNK (64u << 10)

uint64_t db_reserve_size(lsm_env *env, const char *dir, size_t wanted)
{
    uint64_t total = 0, avail = 0;
    lsm_status *s = wanted != 0 ? env->disk_free(env, dir, &total, &avail) : NULL;
    if (wanted == 0 || s != NULL) {
        lsm_status_free(s); /* the disk's size unknown: no cap */
        return wanted;
    }
    uint64_t cap = total / 8; /* never more than an eighth of the disk */
    return wanted < cap ? wanted : cap;
}

/* Writes the reserve file; on any failure removes what was written. No lock
 * needed (only a leader or open calls it, one at a time). */
static lsm_status *write_reserve(lsm_db *db, const char *name)
{
    static const char zeros[RESERVE_CHUNK];
    lsm_wfile *f;
    lsm_status *s = db->env->new_wfile(db->env, name, &f);
    if (s)
        return s;
    for (uint64_t done = 0; s == NULL && done < db->reserve_bytes; done += RESERVE_CHUNK) {
        uint64_t left = db->reserve_bytes - done;
        s = f->ops->append(f, zeros, left < RESERVE_CHUNK ? (size_t)left : RESERVE_CHUNK);
    }
    if (s == NULL)
        s = f->ops->sync(f);
    lsm_status *c = f->ops->close(f);
    if (s == NULL)
        s = c;
    else
        lsm_status_free(c);
    if (s)
        lsm_status_free(db->env->remove_file(db->env, name));
    return s;
}

bool db_reserve_make(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->reserve_held || db->reserve_bytes == 0)
        return true;
    if (db->reserve_making)
        return false;
    uint64_t now = db->env->now_micros(db->env);
    if (db->reserve_tried_us != 0 && now < db->reserve_tried_us + RESERVE_RETRY_US)
        return false;
    db->reserve_tried_us = now;
    uint64_t total = 0, avail = 0;
    lsm_status *s = db->env->disk_free(db->env, db->dir, &total, &avail);
    bool unknown = s != NULL; /* then writing it tells */
    lsm_status_free(s);
    if (!unknown && avail < 2 * db->reserve_bytes)
        return false;
    char *name = reserve_file_name(db->dir);
    if (name == NULL)
        return false;
    db->reserve_making = true;
    db->reserve_cancelled = false;
    mutex_unlock(&db->mu);
    s = write_reserve(db, name);
    mutex_lock(&db->mu);
    if (s == NULL && db->reserve_cancelled) {
        /* A release came while the file was written: its space is given
         * up (the release may have run before the file existed). */
        mutex_unlock(&db->mu);
        lsm_status_free(db->env->remove_file(db->env, name));
        mutex_lock(&db->mu);
    }
    db->reserve_making = false; /* only now: no other maker races that remove */
    free(name);
    db->reserve_held = s == NULL && !db->reserve_cancelled;
    if (db->reserve_held)
        db->frees_waiting = false;
    lsm_status_free(s);
    return db->reserve_held;
}

bool db_reserve_release(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    char *name = reserve_file_name(db->dir);
    bool had = name && (db->reserve_held || db->reserve_making ||
                        db->env->file_exists(db->env, name));
    if (!had) {
        free(name);
        return false;
    }
    db->reserve_held = false;
    db->reserve_cancelled = db->reserve_making; /* the maker must not claim it */
    db->reserve_tried_us = db->env->now_micros(db->env);
    db->reserve_releases++;
    mutex_unlock(&db->mu);
    lsm_status *s = db->env->remove_file(db->env, name);
    mutex_lock(&db->mu);
    lsm_status_free(s);
    free(name);
    return true;
}

void db_reserve_serve_background(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (!db->frees_waiting || db->nospace == NULL)
        return;
    db_reserve_release(db);
    db->flush_asked++; /* a flush waiting to retry does so now (wait_to_retry) */
    pthread_cond_broadcast(&db->work_cv);
}

#define FREES_WAIT_US 10000000
#define FREES_IDLE_TRIES 2

void db_reserve_frees_hold(lsm_db *db, struct frees_wait *fw)
{
    assert(mutex_held(&db->mu));
    if (fw->deadline_us == 0)
        fw->deadline_us = db->env->now_micros(db->env) + FREES_WAIT_US;
    db->frees_holding = true;
}

/* Whether a freeing write should wait on: background work is running, or
 * none ended since it looked (progress, events). REQUIRES: mu held. */
static bool background_pending(lsm_db *db, uint64_t progress, uint64_t events)
{
    assert(mutex_held(&db->mu));
    return db->compacting || db->flushing ||
           (db->bg_progress == progress && db->nospace_events == events);
}

bool db_reserve_frees_wait(lsm_db *db, struct frees_wait *fw)
{
    assert(mutex_held(&db->mu) && db->frees_holding);
    if (db->bg_error || fw->idle >= FREES_IDLE_TRIES ||
        db->env->now_micros(db->env) >= fw->deadline_us)
        return false;
    db_reserve_release(db);
    uint64_t progress = db->bg_progress, events = db->nospace_events;
    db->flush_asked++; /* a flush waiting to retry does so now (wait_to_retry) */
    pthread_cond_broadcast(&db->work_cv);
    struct timespec t = monotonic_deadline(2 * (uint64_t)db->opt.full_disk_retry_us);
    while (db->bg_error == NULL && background_pending(db, progress, events) &&
           cond_timedwait(&db->room_cv, &db->mu, &t) != ETIMEDOUT)
        ;
    bool progressed = db->bg_progress != progress || db->compacting;
    fw->idle = progressed ? 0 : fw->idle + 1;
    return true;
}

void db_reserve_frees_done(lsm_db *db, struct frees_wait *fw)
{
    assert(mutex_held(&db->mu));
    if (fw->deadline_us == 0)
        return;
    db->frees_holding = false;
    pthread_cond_broadcast(&db->work_cv); /* a compaction may start now */
}

lsm_status *db_reserve_check(lsm_db *db, bool frees_space)
{
    assert(mutex_held(&db->mu));
    if (frees_space || db->reserve_bytes == 0)
        return NULL;
    /* While background work is stuck for space, what an ordinary write
     * adds could not be flushed either: it would only grow what the
     * reserve must flush once a delete comes. */
    if (db->nospace == NULL && db_reserve_make(db))
        return NULL;
    return status_new(LSM_NO_SPACE,
                      "the disk is full: its last %llu KiB are kept for deletes",
                      (unsigned long long)(db->reserve_bytes >> 10));
}
