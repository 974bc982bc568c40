/*
 * db_defer_log.c — a sync's one call to log the deferred batches late
 * (db_fsync.c, when flushing them is not worth it).
 *
 * It takes the head of the write queue as a solo writer, so no group is
 * appended meanwhile and no leader is logging late (db_take_deferred's
 * rule): the late copies land in the log where a group's leader would have
 * put them (db_write.c), after every group published before and before
 * every group after. It leaves a log a full disk broke (no sync may run on
 * it), appends every deferred batch whole, and hands the queue on. The
 * sync stage then syncs the log as for any write; this never waits for it.
 * It calls down into the queue, rotation and the deferred list, and none of
 * them calls back.
 */
#include "db_impl.h"
#include "status.h"

/* Appends every deferred batch to the WAL. REQUIRES: mu held (released
 * while appending); the caller leads the queue. */
static lsm_status *log_late(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->head != NULL);
    struct deferred *late = db_take_deferred(db);
    if (late == NULL)
        return NULL;
    wal_writer *wal = db->wal;
    uint64_t bytes = 0;
    mutex_unlock(&db->mu);
    lsm_status *s = deferred_log_late(wal, late, &bytes);
    if (s == NULL)
        s = wal_flush(wal);
    uint64_t written = wal_offset(wal);
    if (s != NULL)
        s = status_wrap(s, "write-ahead log %06llu", (unsigned long long)db->wal_number);
    mutex_lock(&db->mu);
    db_end_late_log(db, late, s, bytes);
    db_wal_appended(db, s, written);
    return s;
}

lsm_status *db_log_deferred(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    struct writer w = {.batch = NULL, .solo = true};
    db->stats.writes++;
    db->stats.barriers++;
    bool leads = db_queue_wait(db, &w); /* solo: no leader takes it along */
    assert(leads);
    (void)leads;
    lsm_status *s = db_leave_broken_wal(db);
    if (s == NULL)
        s = log_late(db);
    db_cut_broken_wal(db); /* groups may wait for a sync on the log it broke */
    struct wakeups wk = {.n = 0};
    db_queue_pop_head(db, &w, &wk);
    mutex_unlock(&db->mu);
    db_wakeups_flush(&wk);
    mutex_lock(&db->mu);
    return s;
}
