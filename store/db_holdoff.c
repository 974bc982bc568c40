/*
 * db_holdoff.c — the one rule for compactions on a full disk: a compaction
 * that failed for space is not started again (by the compaction thread, nor
 * by lsm_compact_range) until it could get further than it did; nor is any
 * other that reads as much (its output would not fit either), while smaller
 * ones may run (they may fit, and free what they drop).
 *
 * It got as far as the disk's free space after the failure (its outputs
 * removed) let it: run again with no more room, it reads its inputs again
 * and fails at the same point (a storm of doomed compactions: issue 29). So
 * the next one waits until the free space has doubled, plus
 * HOLDOFF_MIN_GAIN (space freed by deletes, dropped tables, a flush's
 * deleted logs, the reserve given up, or outside the store), or until the
 * holdoff ends: 4 full-disk retry delays after the first failure, doubling
 * per failure in a row up to 64 (the disk's figure can be missing or wrong,
 * and a compaction that drops much may need less than it read). A success
 * clears it.
 */
#include "db_impl.h"

#define HOLDOFF_MIN_GAIN (1u << 20)
#define HOLDOFF_FIRST_RETRIES 4
#define HOLDOFF_MAX_RETRIES 64

/* The disk's free bytes now; HOLDOFF_UNKNOWN if the env cannot say.
 * REQUIRES: mu held. */
#define HOLDOFF_UNKNOWN UINT64_MAX
static uint64_t disk_avail(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t total = 0, avail = 0;
    lsm_status *s = db->env->disk_free(db->env, db->dir, &total, &avail);
    if (s != NULL) {
        lsm_status_free(s);
        return HOLDOFF_UNKNOWN;
    }
    return avail;
}

void db_holdoff_failed(lsm_db *db, uint64_t input_bytes)
{
    assert(mutex_held(&db->mu));
    if (db->holdoff_until_us == 0 || input_bytes < db->holdoff_bytes)
        db->holdoff_bytes = input_bytes;
    uint64_t first = (uint64_t)db->opt.full_disk_retry_us * HOLDOFF_FIRST_RETRIES;
    uint64_t max = (uint64_t)db->opt.full_disk_retry_us * HOLDOFF_MAX_RETRIES;
    uint64_t next = db->holdoff_us == 0 ? first : 2 * db->holdoff_us;
    db->holdoff_us = next < max ? next : max;
    db->holdoff_until_us = db->env->now_micros(db->env) + db->holdoff_us;
    db->holdoff_avail = disk_avail(db);
}

void db_holdoff_clear(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    db->holdoff_until_us = 0;
    db->holdoff_us = 0;
}

/* Whether the free space grew enough for the failed compaction to get
 * further. REQUIRES: mu held. */
static bool room_grew(lsm_db *db)
{
    if (db->holdoff_avail == HOLDOFF_UNKNOWN)
        return false;
    uint64_t avail = disk_avail(db);
    return avail != HOLDOFF_UNKNOWN && avail >= 2 * db->holdoff_avail + HOLDOFF_MIN_GAIN;
}

uint64_t db_holdoff_left_us(lsm_db *db, uint64_t input_bytes)
{
    assert(mutex_held(&db->mu));
    if (db->holdoff_until_us == 0 || input_bytes < db->holdoff_bytes)
        return 0;
    uint64_t now = db->env->now_micros(db->env);
    if (now >= db->holdoff_until_us || room_grew(db)) {
        db->holdoff_until_us = 0; /* holdoff_us stays: the next failure doubles it */
        return 0;
    }
    return db->holdoff_until_us - now;
}
