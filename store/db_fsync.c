/*
 * db_fsync.c — lsm_sync_upto, top-down: the deferred batches the sync must
 * cover are made durable first (db_defer.c's, by a flush or logged late by
 * db_defer_log.c), then the sync stage (db_sync.c) waits for a WAL sync
 * that covers the target. It never enters the write queue itself; it calls
 * down into the flush, the late log and the sync stage, and none of them
 * calls back.
 */
#include "db_impl.h"
#include "status.h"

/* Makes the deferred batches up to `target` durable: by flushing the
 * memtables when those batches are many bytes and most of what the
 * memtables hold (a table holds them anyway once flushed, so they reach the
 * disk once, as they would have without the sync), else by logging them
 * late (db_log_deferred). Flushing a
 * small amount would cut a small table for every fsync; flushing memtables
 * full of other data would make the sync wait for all of it. A flush that
 * fails for a full disk falls back to the log. REQUIRES: mu held (released
 * meanwhile). */
static lsm_status *make_deferred_durable(lsm_db *db, uint64_t target)
{
    assert(mutex_held(&db->mu));
    uint64_t bytes = db_deferred_bytes_upto(db, target);
    if (bytes >= db->opt.write_buffer_size / 4 && 2 * bytes >= db_memtable_bytes(db)) {
        mutex_unlock(&db->mu);
        lsm_status *s = db_flush_memtables(db, target);
        mutex_lock(&db->mu);
        db->stats.sync_flushes += s == NULL;
        bool done = s == NULL && !db_deferred_upto(db, target);
        lsm_status_free(s);
        if (done)
            return NULL;
    }
    return db_log_deferred(db);
}

lsm_status *lsm_sync_upto(lsm_db *db, uint64_t seq)
{
    if (db->opt.read_only) /* no write of this handle to make durable */
        return NULL;
    struct wakeups wk = {.n = 0};
    mutex_lock(&db->mu);
    /* The target is taken now: were it raised past a deferred batch
     * written meanwhile, which is in no log, no sync could ever cover it. */
    uint64_t target = seq < db->last_seq ? seq : db->last_seq;
    if (db_deferred_upto(db, target)) {
        lsm_status *s = make_deferred_durable(db, target);
        if (s != NULL) {
            mutex_unlock(&db->mu);
            return s;
        }
    }
    lsm_status *s = db_sync_wait(db, target, &wk);
    mutex_unlock(&db->mu);
    db_wakeups_flush(&wk);
    return s;
}

lsm_status *lsm_sync(lsm_db *db)
{
    return lsm_sync_upto(db, UINT64_MAX);
}
