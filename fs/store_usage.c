/*
 * store_usage.c — the store's bytes for statfs: a listing at most every
 * STORE_USAGE_LIST_MS, the store's accounting in between (store_usage.h).
 */
#include "store_usage.h"

#include "status.h"
#include "store_files.h"

#include <stdio.h>
#include <string.h>

void store_usage_init(store_usage *u)
{
    memset(u, 0, sizeof *u);
    pthread_mutex_init(&u->mu, NULL);
}

void store_usage_destroy(store_usage *u)
{
    pthread_mutex_destroy(&u->mu);
}

/* Bytes the files in dir hold, but for RESERVE; false if it cannot be
 * listed (store_files_measure). */
static bool list_bytes(lsm_env *env, const char *dir, uint64_t *out)
{
    store_files f;
    lsm_status *s = store_files_measure(env, dir, &f);
    if (s != NULL) {
        lsm_status_free(s);
        return false;
    }
    *out = f.tables + f.logs + f.other;
    return true;
}

static void accounting(lsm_db *db, uint64_t *wal, uint64_t *tables)
{
    if (!lsm_property_u64(db, "lsm.wal-bytes", wal))
        *wal = 0;
    if (!lsm_property_u64(db, "lsm.total-table-bytes", tables))
        *tables = 0;
}

uint64_t store_usage_bytes(store_usage *u, lsm_db *db, lsm_env *env, const char *dir,
                           uint64_t now_ns)
{
    pthread_mutex_lock(&u->mu);
    uint64_t wal, tables, listed;
    accounting(db, &wal, &tables);
    bool due = !u->listed || now_ns - u->at_ns >= (uint64_t)STORE_USAGE_LIST_MS * 1000000;
    if (due && list_bytes(env, dir, &listed)) {
        /* What the store did while it was listed may be in the listing
         * or not: the bound covers it. */
        u->listed = true;
        u->bytes = listed;
        u->wal = wal;
        u->tables = tables;
        u->at_ns = now_ns;
    }
    /* Without a listing: the tables and what was logged since the store
     * opened. Table bytes may shrink (a compaction). */
    int64_t d = (int64_t)(wal - u->wal) + (int64_t)(tables - u->tables);
    uint64_t base = u->listed ? u->bytes : 0;
    uint64_t bytes = d < 0 && (uint64_t)-d > base ? 0 : base + (uint64_t)d;
    pthread_mutex_unlock(&u->mu);
    return bytes;
}
