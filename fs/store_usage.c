/*
 * store_usage.c — the store's bytes for statfs: a listing at most every
 * STORE_USAGE_LIST_MS, the store's accounting in between (store_usage.h).
 */
#include "store_usage.h"

#include "filename.h"
#include "status.h"

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
 * listed. A name that cannot be sized (a directory: snapshots/; a file
 * deleted meanwhile) counts nothing. */
static bool list_bytes(lsm_env *env, const char *dir, uint64_t *out)
{
    char **names;
    int n;
    lsm_status *s = env->get_children(env, dir, &names, &n);
    if (s != NULL) {
        lsm_status_free(s);
        return false;
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        uint64_t size, number;
        enum file_type type;
        if ((parse_file_name(names[i], &number, &type) && type == FILE_RESERVE) ||
            snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            continue;
        if ((s = env->file_size(env, path, &size)) == NULL)
            total += size;
        lsm_status_free(s);
    }
    env_free_children(names, n);
    *out = total;
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
