/*
 * db_recover.h — recovery at open: the MANIFEST read, the live logs
 * replayed into memtables (a prefix of the writes, see replay_filter),
 * made durable and written to tables before open returns.
 */
#ifndef LSM_DB_RECOVER_H
#define LSM_DB_RECOVER_H

#include "lsm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Recovers the store into db (being opened): its version, its memtables,
 * last_seq and durable_seq, a fresh WAL unless read_only. REQUIRES: mu
 * held (released while flushing); background not started. */
lsm_status *db_recover(lsm_db *db);
/* *exists: whether the store has a CURRENT file (a store was made there). */
lsm_status *db_current_exists(lsm_db *db, bool *exists);

/* Recovery's view of deferred markers: which records to apply. */
struct replay_wait {
    uint64_t seq;
    uint32_t count;
};
typedef struct replay_filter {
    struct replay_wait *waiting; /* markers [head, n) whose batches must follow */
    size_t head, n, cap;
    bool skipping;    /* a deferred batch was lost: nothing after it applies */
    uint64_t skipped; /* records not applied for that */
    uint64_t lost;    /* deferred batches lost before an epoch */
} replay_filter;
void replay_filter_init(replay_filter *f);
void replay_filter_free(replay_filter *f);
/* Classifies the next WAL record (in log order, across all logs replayed):
 * *apply tells whether to apply it as a batch. */
lsm_status *replay_filter_check(replay_filter *f, const char *rec, size_t n, bool *apply);
/* Whether records were dropped, so recovery must write a WAL_EPOCH. */
bool replay_filter_dropped(const replay_filter *f);
/* Deferred batches found lost. */
uint64_t replay_filter_lost(const replay_filter *f);

#endif
