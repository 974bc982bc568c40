/*
 * db_reserve.c — the space reserve: a file (RESERVE in the store directory)
 * that holds disk space back from ordinary writes, as ext4's reserved
 * blocks do, so a full store can always be emptied.
 *
 * Its size (db_reserve_size, the one sizing rule): emptying a full store
 * takes room for (a) the flush of what sits unflushed: near a full disk
 * (less free than the reserve, the memtables and one more) a memtable is
 * full at a quarter of the reserve (RESERVE_MEM_SHARE, db_reserve_memtable_cap)
 * or at one batch larger than that, and a switch waits for the flush before
 * it, so two memtables hold at most half the reserve, or two batches; and
 * (b) the compaction that drops what the deletes delete, whose output is
 * written before its inputs go: a share of the store's tables, the other
 * half. Hence a RESERVE_STORE_SHARE-th of the tables, at least RESERVE_FLOOR
 * (two of the largest groups, MAX_GROUP_BYTES, so (a) holds for batches up
 * to that), at most reserve_max (the option, and an eighth of the disk).
 * A held reserve is made again, larger, once the rule asks twice its size.
 * A delete's own memtable (db_rotate.c switch_waits lets it switch past a
 * stuck flush) holds deletions only, which the floor's second batch covers.
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
 * memtable and log even where the disk is too low for another (db_rotate.c
 * switch_waits): the flush before it may fit only once what it frees is
 * gone. While its leader waits
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

uint64_t db_reserve_max(lsm_env *env, const char *dir, size_t wanted)
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

/* The sizing rule's constants (see the header). */
#define RESERVE_FLOOR (2u << 20)
#define RESERVE_STORE_SHARE 16
#define RESERVE_MEM_SHARE 4

uint64_t db_reserve_size(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t want = db_table_bytes(db) / RESERVE_STORE_SHARE;
    if (want < RESERVE_FLOOR)
        want = RESERVE_FLOOR;
    want = (want + RESERVE_CHUNK - 1) / RESERVE_CHUNK * RESERVE_CHUNK;
    return want < db->reserve_max ? want : db->reserve_max;
}

size_t db_reserve_memtable_cap(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t cap = db->reserve_bytes / RESERVE_MEM_SHARE;
    if (cap < (64u << 10)) /* the smallest write_buffer_size */
        cap = 64u << 10;
    return cap < db->opt.write_buffer_size ? (size_t)cap : db->opt.write_buffer_size;
}

/* Writes the reserve file; on any failure removes what was written. No lock
 * needed (only a leader or open calls it, one at a time). */
static lsm_status *write_reserve(lsm_db *db, const char *name, uint64_t size)
{
    static const char zeros[RESERVE_CHUNK];
    lsm_wfile *f;
    lsm_status *s = db->env->new_wfile(db->env, name, &f);
    if (s)
        return s;
    for (uint64_t done = 0; s == NULL && done < size; done += RESERVE_CHUNK) {
        uint64_t left = size - done;
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

/* Whether making (or growing) the reserve is to be looked at now: at most
 * every RESERVE_RETRY_US (it costs a disk_free, or a sum over the tables);
 * if so, stamps the time. REQUIRES: mu held. */
static bool reserve_try_due(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t now = db->env->now_micros(db->env);
    if (db->reserve_tried_us != 0 && now < db->reserve_tried_us + RESERVE_RETRY_US)
        return false;
    db->reserve_tried_us = now;
    return true;
}

/* Writes the reserve file of `size` bytes: a first one under its name, a
 * larger one (grow) beside it, renamed over it once whole, so a failure
 * leaves the old one held. Returns NULL if it is in place. REQUIRES: mu
 * held (released meanwhile); reserve_making set by the caller. */
static lsm_status *put_reserve(lsm_db *db, uint64_t size, bool grow)
{
    assert(mutex_held(&db->mu) && db->reserve_making);
    char *name = reserve_file_name(db->dir);
    char *fresh = grow ? reserve_new_file_name(db->dir) : NULL;
    if (name == NULL || (grow && fresh == NULL)) {
        free(name);
        free(fresh);
        return status_new(LSM_NO_MEMORY, "out of memory");
    }
    mutex_unlock(&db->mu);
    lsm_status *s = write_reserve(db, grow ? fresh : name, size);
    if (s == NULL && grow) {
        s = db->env->rename_file(db->env, fresh, name);
        if (s != NULL)
            lsm_status_free(db->env->remove_file(db->env, fresh));
    }
    mutex_lock(&db->mu);
    if (s == NULL && db->reserve_cancelled) {
        /* A release came while the file was written: its space is given
         * up (the release may have run before the file existed). */
        mutex_unlock(&db->mu);
        lsm_status_free(db->env->remove_file(db->env, name));
        mutex_lock(&db->mu);
    }
    free(name);
    free(fresh);
    return s;
}

bool db_reserve_make(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->reserve_max == 0)
        return true;
    /* While a larger one is written, the old one counts. */
    if (db->reserve_making || !reserve_try_due(db))
        return db->reserve_held;
    /* A held one is made again, larger, once the store wants twice it (so
     * it is rewritten at most log2(growth) times). */
    uint64_t size = db_reserve_size(db);
    bool grow = db->reserve_held;
    if (grow && size < 2 * db->reserve_bytes)
        return true;
    if (!grow)
        db->reserve_bytes = size; /* what ordinary writes wait for */
    uint64_t total = 0, avail = 0;
    lsm_status *s = db->env->disk_free(db->env, db->dir, &total, &avail);
    bool unknown = s != NULL; /* then writing it tells */
    lsm_status_free(s);
    if (!unknown && avail < 2 * size)
        return db->reserve_held;
    db->reserve_making = true;
    db->reserve_cancelled = false;
    s = put_reserve(db, size, grow);
    db->reserve_making = false; /* only now: no other maker races that remove */
    if (db->reserve_cancelled)
        db->reserve_held = false;
    else if (s == NULL)
        db->reserve_held = true;
    /* else as it was: a failed first one is not held, a failed larger one
     * left the old one in place */
    if (s == NULL && db->reserve_held) {
        db->reserve_bytes = size;
        db->frees_waiting = false;
    }
    lsm_status_free(s);
    return db->reserve_held;
}

bool db_reserve_release(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    char *name = reserve_file_name(db->dir);
    /* A larger one left by a crash goes too; one being written is the
     * maker's to remove (reserve_cancelled). */
    char *fresh = db->reserve_making ? NULL : reserve_new_file_name(db->dir);
    bool had = name && (db->reserve_held || db->reserve_making ||
                        db->env->file_exists(db->env, name) ||
                        (fresh != NULL && db->env->file_exists(db->env, fresh)));
    if (!had) {
        free(name);
        free(fresh);
        return false;
    }
    db->reserve_held = false;
    db->reserve_cancelled = db->reserve_making; /* the maker must not claim it */
    db->reserve_tried_us = db->env->now_micros(db->env);
    db->reserve_releases++;
    mutex_unlock(&db->mu);
    lsm_status *s = db->env->remove_file(db->env, name);
    lsm_status_free(s);
    if (fresh != NULL)
        lsm_status_free(db->env->remove_file(db->env, fresh));
    mutex_lock(&db->mu);
    free(name);
    free(fresh);
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
    if (frees_space || db->reserve_max == 0)
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
