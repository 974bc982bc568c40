/* db_props.c — lsm_property(): the store's counters and its stats text. */
#include "db_impl.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* REQUIRES: mu held. */
static size_t memtable_bytes(lsm_db *db)
{
    size_t n = memtable_memory_usage(db->mem);
    for (int i = 0; i < db->nimm; i++)
        n += memtable_memory_usage(db->imm[i]);
    return n;
}

/* Numeric properties. REQUIRES: mu held. */
static bool u64_property(lsm_db *db, const char *name, uint64_t *out)
{
    const struct db_stats *st = &db->stats;
    int level;
    char tail;
    if (sscanf(name, "lsm.num-files-at-level%d%c", &level, &tail) == 1) {
        if (level < 0 || level >= NUM_LEVELS)
            return false;
        *out = (uint64_t)db->vs.current->nfiles[level];
        return true;
    }
    struct {
        const char *name;
        uint64_t value;
    } table[] = {
        {"lsm.writes", st->writes},
        {"lsm.barriers", st->barriers},
        {"lsm.write-groups", st->groups},
        {"lsm.wal-syncs", st->syncs},
        {"lsm.wal-bytes", st->wal_bytes},
        {"lsm.queue-wait-us", st->queue_wait_us},
        {"lsm.gather-wait-us", st->gather_wait_us},
        {"lsm.memtable-switches", st->rotations},
        {"lsm.sequence", db->last_seq},
        {"lsm.mem-usage", memtable_bytes(db)},
        {"lsm.immutable-memtables", (uint64_t)db->nimm},
        {"lsm.recovered-records", st->recovered_records},
        {"lsm.recovered-dropped-bytes", st->recovered_dropped_bytes},
        {"lsm.recovered-torn-bytes", st->recovered_torn_bytes},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(name, table[i].name) == 0) {
            *out = table[i].value;
            return true;
        }
    }
    return false;
}

bool lsm_property_u64(lsm_db *db, const char *name, uint64_t *out)
{
    mutex_lock(&db->mu);
    bool ok = u64_property(db, name, out);
    mutex_unlock(&db->mu);
    return ok;
}

/* The human-readable stats text. REQUIRES: mu held. */
static bool stats_text(lsm_db *db, buf *b)
{
    const struct db_stats *st = &db->stats;
    char line[512];
    uint64_t groups = st->groups ? st->groups : 1;
    uint64_t writes = st->writes ? st->writes : 1;
    int n = snprintf(line, sizeof(line),
                     "write path\n"
                     "  writes %" PRIu64 " (barriers %" PRIu64 "), groups %" PRIu64
                     ", wal syncs %" PRIu64 ", wal bytes %" PRIu64 "\n"
                     "  writes per group %.2f, queue wait %.1f us/write, gather wait %" PRIu64
                     " us total\n"
                     "  memtables %.1f MiB (%d immutable), switches %" PRIu64
                     ", last sequence %" PRIu64 "\n"
                     "  followers per leader:",
                     st->writes, st->barriers, st->groups, st->syncs, st->wal_bytes,
                     (double)(st->writes - st->barriers) / (double)groups,
                     (double)st->queue_wait_us / (double)writes, st->gather_wait_us,
                     (double)memtable_bytes(db) / 1048576.0, db->nimm, st->rotations,
                     db->last_seq);
    bool ok = buf_append(b, line, (size_t)n);
    for (int i = 0; ok && i < FOLLOWER_BUCKETS; i++) {
        if (st->followers[i] == 0)
            continue;
        n = snprintf(line, sizeof(line), " %d%s:%" PRIu64, i,
                     i == FOLLOWER_BUCKETS - 1 ? "+" : "", st->followers[i]);
        ok = buf_append(b, line, (size_t)n);
    }
    n = snprintf(line, sizeof(line),
                 "\nrecovery\n  records %" PRIu64 ", dropped bytes %" PRIu64
                 ", torn-tail bytes %" PRIu64 "\nbackground error: %s\n",
                 st->recovered_records, st->recovered_dropped_bytes, st->recovered_torn_bytes,
                 db->bg_error ? lsm_status_message(db->bg_error) : "none");
    ok = ok && buf_append(b, line, (size_t)n);
    for (int l = 0; ok && l < NUM_LEVELS; l++) {
        if (db->vs.current->nfiles[l] == 0)
            continue;
        n = snprintf(line, sizeof(line), "level %d: %d files, %" PRIu64 " bytes\n", l,
                     db->vs.current->nfiles[l], version_level_bytes(db->vs.current, l));
        ok = buf_append(b, line, (size_t)n);
    }
    return ok;
}

char *lsm_property(lsm_db *db, const char *name)
{
    buf b;
    buf_init(&b);
    bool known = true, ok = true;
    uint64_t v;
    mutex_lock(&db->mu);
    if (strcmp(name, "lsm.stats") == 0) {
        ok = stats_text(db, &b);
    } else if (strcmp(name, "lsm.background-error") == 0) {
        const char *m = db->bg_error ? lsm_status_message(db->bg_error) : "";
        ok = buf_append(&b, m, strlen(m));
    } else if (u64_property(db, name, &v)) {
        char num[32];
        ok = buf_append(&b, num, (size_t)snprintf(num, sizeof(num), "%" PRIu64, v));
    } else {
        known = false;
    }
    mutex_unlock(&db->mu);
    if (!known || !ok || !buf_append(&b, "", 1)) {
        buf_free(&b);
        return NULL;
    }
    return b.data;
}
