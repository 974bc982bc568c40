/*
 * db_idle.c — what the flush thread does while no write comes: switches out
 * an active memtable that holds an old deferred batch or, after a while,
 * deletions, so they reach a table (and the space they free comes back).
 * It leads the write queue for the switch as a solo writer, only if the
 * queue is empty, and never waits for room. After a longer quiet it gives
 * the process's pooled buffers back (mempool.h).
 */
#include "db_impl.h"
#include "mempool.h"
#include "status.h"

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
    if (!db_queue_empty(db) || db->bg_error || db_switch_must_wait(db))
        return false;
    struct writer w = {.batch = NULL, .solo = true};
    bool leads = db_queue_wait(db, &w); /* the head at once: the queue was empty */
    assert(leads);
    (void)leads;
    lsm_status *s = db_switch_memtable(db);
    struct wakeups wk = {.n = 0};
    db_queue_pop_head(db, &w, &wk);
    lsm_status_free(s); /* not sticky (see db_rotate.c's leave_wal): retried later */
    mutex_unlock(&db->mu);
    db_wakeups_flush(&wk);
    mutex_lock(&db->mu);
    return true;
}

/* When the oldest deferred batch has waited deferred_max_age_ms in the
 * active memtable and the write queue is empty, switches the memtable out
 * (the flush then writes it to a table). Returns the µs after which to
 * look again, 0 if nothing is deferred. REQUIRES: mu held. */
static uint64_t retire_old_deferred(lsm_db *db)
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

/* How long the store must see no write before the process's pooled
 * buffers are freed: longer than the pauses inside a stream of big writes
 * (which reuse them), short enough that an idle daemon shrinks soon. */
#define IDLE_POOLS_US 5000000

/* The idle clock: µs since a look first saw last_seq where it is now (a
 * write restarts it; looks come at least as often as any wait they asked
 * for). REQUIRES: mu held. */
static uint64_t idle_for(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t now = db->env->now_micros(db->env);
    if (db->idle_seq != db->last_seq) { /* written since the last look */
        db->idle_seq = db->last_seq;
        db->idle_since_us = now;
    }
    return now - db->idle_since_us;
}

/* Switches out an idle active memtable that holds deletions: returns the µs
 * after which to look again, 0 if it holds none (a write that adds some
 * wakes the flush thread: idle_watch). REQUIRES: mu held. */
static uint64_t flush_idle_deletions(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    db->idle_watch = memtable_deletions(db->mem) > 0;
    if (!db->idle_watch)
        return 0;
    uint64_t idle = idle_for(db);
    if (idle < IDLE_DELETIONS_US)
        return IDLE_DELETIONS_US - idle;
    if (!idle_switch(db))
        return DEFERRED_RETRY_US;
    db->idle_watch = false;
    return 0;
}

/* Frees the process's pooled buffers (mempool.h) once this store saw no
 * write for IDLE_POOLS_US, so never amid a stream of writes: returns the µs
 * after which to look again, 0 if nothing is pooled. The pools are shared
 * by every store of the process: freeing them while another store writes
 * costs it only a reuse (it allocates afresh), never correctness, as only
 * kept, unused buffers are freed. A pool refilled after the look is seen
 * at the next (after a flush or compaction). REQUIRES: mu held (released
 * while freeing: the caller's other looks come after, on fresh state). */
static uint64_t release_idle_pools(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (mempool_bytes() == 0) /* its locks are leaves */
        return 0;
    uint64_t idle = idle_for(db);
    if (idle < IDLE_POOLS_US)
        return IDLE_POOLS_US - idle;
    mutex_unlock(&db->mu);
    mempool_release();
    mutex_lock(&db->mu);
    return 0;
}

/* The sooner of two waits in µs, 0 meaning none. */
static uint64_t sooner(uint64_t a, uint64_t b)
{
    return a == 0 || (b != 0 && b < a) ? b : a;
}

uint64_t db_idle_look(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t p = release_idle_pools(db); /* first: it releases mu */
    uint64_t a = retire_old_deferred(db), b = flush_idle_deletions(db);
    uint64_t c = db_hold_wal(db); /* ends a hold no sync follows */
    return sooner(sooner(sooner(a, b), c), p);
}

