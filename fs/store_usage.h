/*
 * store_usage.h — statfs's "used": the bytes the store's files hold, but
 * for its RESERVE file (lsm_options.reserve_bytes, neither used nor free).
 *
 * Listing the store directory (a size per file, through the env) costs a
 * dozen calls, and a mail server asks statfs once per message; so the
 * listing is taken at most every STORE_USAGE_LIST_MS, and in between the
 * answer is that listing plus what the store's own accounting changed
 * since: WAL bytes appended (lsm.wal-bytes) and table bytes
 * (lsm.total-table-bytes, flushes and compactions). Bound: what this
 * accounting misses (logs and tables deleted, the MANIFEST's growth, files
 * of other processes) or counts twice (appends into a log's preallocated
 * room, at most 1 MiB a log) shows right within STORE_USAGE_LIST_MS. A listing that
 * fails keeps the last one (or none: the accounting alone) and is tried
 * again at the next call.
 */
#ifndef FS_STORE_USAGE_H
#define FS_STORE_USAGE_H

#include "env.h"
#include "lsm.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define STORE_USAGE_LIST_MS 1000

typedef struct store_usage {
    /* A leaf lock, held across the listing: one lister at a time, and the
     * calls that wait for it get its result. Guards every field below. */
    pthread_mutex_t mu;
    bool listed;          /* a listing succeeded */
    uint64_t bytes;       /* its total */
    uint64_t wal, tables; /* the store's accounting when it was taken */
    uint64_t at_ns;       /* when (CLOCK_MONOTONIC) */
} store_usage;

void store_usage_init(store_usage *u);
void store_usage_destroy(store_usage *u);

/* The bytes the store `db`, whose files are in `dir` of `env`, holds as of
 * now_ns (CLOCK_MONOTONIC). */
uint64_t store_usage_bytes(store_usage *u, lsm_db *db, lsm_env *env, const char *dir,
                           uint64_t now_ns);

#endif
