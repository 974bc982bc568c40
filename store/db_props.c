/* db_props.c — lsm_property(): the store's counters and its stats text. */
#include "db_impl.h"
#include "mempool.h"
#include "version.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* REQUIRES: mu held. */
uint64_t db_table_bytes(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t n = 0;
    for (int l = 0; l < NUM_LEVELS; l++)
        n += version_level_bytes(db->vs.current, l);
    return n;
}

/* Keys deleted in tables, as their builders counted them (tables named by
 * a MANIFEST older than the count add 0). */
static uint64_t table_deletions(lsm_db *db)
{
    uint64_t n = 0;
    for (int l = 0; l < NUM_LEVELS; l++)
        for (int i = 0; i < db->vs.current->nfiles[l]; i++)
            n += db->vs.current->files[l][i]->deletions;
    return n;
}

/* Appends s with bytes outside printable ASCII escaped as \xHH. */
static bool append_escaped(buf *b, const char *s, size_t n)
{
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char t[8];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            ok = buf_append(b, &s[i], 1);
        else
            ok = buf_append(b, t, (size_t)snprintf(t, sizeof(t), "\\x%02x", c));
    }
    return ok;
}

/* One line per table. REQUIRES: mu held. */
static bool tables_text(lsm_db *db, buf *b)
{
    const version *v = db->vs.current;
    bool ok = true;
    for (int l = 0; ok && l < NUM_LEVELS; l++) {
        for (int i = 0; ok && i < v->nfiles[l]; i++) {
            const file_meta *f = v->files[l][i];
            char line[128];
            int n =
                snprintf(line, sizeof(line), "level %d  %06" PRIu64 ".ldb  %10" PRIu64 " bytes  [",
                         l, f->number, f->size);
            ok = buf_append(b, line, (size_t)n) &&
                 append_escaped(b, f->smallest.data, ikey_user_len(f->smallest.len)) &&
                 buf_append(b, " .. ", 4) &&
                 append_escaped(b, f->largest.data, ikey_user_len(f->largest.len)) &&
                 buf_append(b, "]\n", 2);
        }
    }
    return ok;
}

/* Table bytes compactions wrote (trivial moves write none). REQUIRES: mu held. */
static uint64_t compaction_written(lsm_db *db)
{
    uint64_t sum = 0;
    for (int l = 1; l < NUM_LEVELS; l++)
        sum += db->stats.levels[l].written_bytes;
    return sum;
}

/* The background jobs running or due: the flush (0 or 1: a flush runs, or
 * a memtable waits for one) and the compactions (those running, else 1 if a
 * level needs one); a sticky error makes nothing due. A retry after a full
 * disk is due. REQUIRES: mu held. */
static uint64_t background_jobs(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    bool due = db->bg_error == NULL && lsm_status_code(db->nospace) != LSM_NO_MEMORY;
    uint64_t compactions = db->compacting > 0 ? (uint64_t)db->compacting
                           : (uint64_t)(due && version_needs_compaction(db->vs.current));
    return (uint64_t)(db->flushing || (due && db->nimm > 0)) + compactions;
}

struct u64_prop {
    const char *name;
    uint64_t value;
};
#define U64_PROPS_MAX 56

/* Every numeric property but the per-level ones into t (U64_PROPS_MAX
 * entries); returns how many. The block cache's counters lock every shard:
 * when `only` names another property they are left 0. REQUIRES: mu held. */
static size_t u64_props(lsm_db *db, struct u64_prop *t, const char *only)
{
    const struct db_stats *st = &db->stats;
    uint64_t hits = 0, misses = 0;
    if (only == NULL || strncmp(only, "lsm.block-cache-", 16) == 0)
        cache_stats(db->block_cache, &hits, &misses);
    const struct u64_prop all[] = {
        {"lsm.writes", st->writes},
        {"lsm.reserve-bytes", db->reserve_bytes},
        {"lsm.memtable-cap", db->mem_cap},
        {"lsm.reserve-held", db->reserve_held},
        {"lsm.reserve-releases", db->reserve_releases},
        {"lsm.full-disk-events", db->nospace_events - db->oom_retries},
        {"lsm.oom-retries", db->oom_retries},
        {"lsm.tables-dropped", st->tables_dropped},
        {"lsm.barriers", st->barriers},
        {"lsm.write-groups", st->groups},
        {"lsm.wal-syncs", st->syncs},
        {"lsm.wal-syncs-overlapped", st->overlapped_syncs},
        {"lsm.wal-syncs-overlap-max", (uint64_t)db->sync_max},
        {"lsm.wal-syncs-most-running", st->most_syncs_running},
        {"lsm.wal-bytes", st->wal_bytes},
        {"lsm.queue-wait-us", st->queue_wait_us},
        {"lsm.gather-wait-us", st->gather_wait_us},
        {"lsm.wal-sync-us", st->sync_us},
        {"lsm.memtable-switches", st->rotations},
        {"lsm.sequence", db->last_seq},
        {"lsm.mem-usage", db_memtable_bytes(db)},
        {"lsm.pooled-bytes", mempool_bytes()},
        {"lsm.immutable-memtables", (uint64_t)db->nimm},
        {"lsm.recovered-records", st->recovered_records},
        {"lsm.recovered-dropped-bytes", st->recovered_dropped_bytes},
        {"lsm.recovered-torn-bytes", st->recovered_torn_bytes},
        {"lsm.recovered-skipped", st->recovered_skipped},
        {"lsm.recovered-lost-deferred", st->recovered_lost},
        {"lsm.recovered-salvaged", st->recovered_salvaged},
        {"lsm.deferred-writes", st->deferred},
        {"lsm.deferred-bytes", st->deferred_bytes},
        {"lsm.late-logged-bytes", st->late_logged_bytes},
        {"lsm.sync-flushes", st->sync_flushes},
        {"lsm.total-table-bytes", db_table_bytes(db)},
        {"lsm.table-deletions", table_deletions(db)},
        {"lsm.flushes", st->flushes},
        {"lsm.bulk-run-bytes", db->bulk_run},
        {"lsm.level0-load", (uint64_t)db->vs.current->l0_load},
        {"lsm.compaction-bytes-written", compaction_written(db)},
        {"lsm.compactions-side-by-side", st->side_by_side},
        {"lsm.stall-us", st->stop_us + st->slowdown_us},
        {"lsm.paced-us", st->slowdown_us},
        {"lsm.stopped-us", st->stop_us},
        {"lsm.paced-rate", (uint64_t)db->pacer.rate},
        {"lsm.compaction-debt-bytes", version_compaction_debt(db->vs.current)},
        {"lsm.block-cache-hits", hits},
        {"lsm.block-cache-misses", misses},
        {"lsm.user-bytes", st->user_bytes},
        {"lsm.background-busy", background_jobs(db) > 0},
        {"lsm.background-jobs", background_jobs(db)},
        {"lsm.background-running", (uint64_t)db->flushing + (uint64_t)db->compacting},
    };
    size_t n = sizeof(all) / sizeof(all[0]);
    _Static_assert(sizeof(all) / sizeof(all[0]) <= U64_PROPS_MAX, "raise U64_PROPS_MAX");
    memcpy(t, all, sizeof(all));
    return n;
}

/* Numeric properties. REQUIRES: mu held. */
static bool u64_property(lsm_db *db, const char *name, uint64_t *out)
{
    int level;
    char tail;
    if (strncmp(name, "lsm.num-files-at-level", 22) == 0 &&
        sscanf(name, "lsm.num-files-at-level%d%c", &level, &tail) == 1) {
        if (level < 0 || level >= NUM_LEVELS)
            return false;
        *out = (uint64_t)db->vs.current->nfiles[level];
        return true;
    }
    if (strncmp(name, "lsm.bytes-at-level", 18) == 0 &&
        sscanf(name, "lsm.bytes-at-level%d%c", &level, &tail) == 1) {
        if (level < 0 || level >= NUM_LEVELS)
            return false;
        *out = version_level_bytes(db->vs.current, level);
        return true;
    }
    struct u64_prop t[U64_PROPS_MAX];
    size_t n = u64_props(db, t, name);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(name, t[i].name) == 0) {
            *out = t[i].value;
            return true;
        }
    }
    return false;
}

/* "lsm.metrics": every numeric property as a "store_NAME VALUE" line (the
 * property's name after "lsm.", '-' as '_'), then the tables and their bytes
 * per level. REQUIRES: mu held. */
static bool metrics_text(lsm_db *db, buf *b)
{
    struct u64_prop t[U64_PROPS_MAX];
    size_t n = u64_props(db, t, NULL);
    bool ok = true;
    char line[128];
    for (size_t i = 0; ok && i < n; i++) {
        int len = snprintf(line, sizeof(line), "store_%s %" PRIu64 "\n", t[i].name + 4, t[i].value);
        for (int c = 6; c < len; c++)
            if (line[c] == '-')
                line[c] = '_';
        ok = buf_append(b, line, (size_t)len);
    }
    for (int l = 0; ok && l < NUM_LEVELS; l++) {
        int len = snprintf(line, sizeof(line), "store_tables_level_%d %d\n", l,
                           db->vs.current->nfiles[l]);
        ok = buf_append(b, line, (size_t)len);
    }
    for (int l = 0; ok && l < NUM_LEVELS; l++) {
        int len = snprintf(line, sizeof(line), "store_table_bytes_level_%d %" PRIu64 "\n", l,
                           version_level_bytes(db->vs.current, l));
        ok = buf_append(b, line, (size_t)len);
    }
    return ok;
}

bool lsm_property_u64(lsm_db *db, const char *name, uint64_t *out)
{
    mutex_lock(&db->mu);
    bool ok = u64_property(db, name, out);
    mutex_unlock(&db->mu);
    return ok;
}

/* The stats text's write path: counts, then followers per leader.
 * REQUIRES: mu held. */
static bool write_path_text(lsm_db *db, buf *b)
{
    const struct db_stats *st = &db->stats;
    char line[512];
    uint64_t groups = st->groups ? st->groups : 1;
    uint64_t writes = st->writes ? st->writes : 1;
    int n = snprintf(
        line, sizeof(line),
        "write path\n"
        "  writes %" PRIu64 " (barriers %" PRIu64 "), groups %" PRIu64 ", wal syncs %" PRIu64
        " (%" PRIu64 " overlapping another), wal bytes %" PRIu64 "\n"
        "  writes per group %.2f, queue wait %.1f us/write, gather wait %" PRIu64 " us total, wal sync %.0f us avg\n"
        "  memtables %.1f MiB (%d immutable), pooled buffers %.1f MiB, switches %" PRIu64
        ", last sequence %" PRIu64 "\n"
        "  followers per leader:",
        st->writes, st->barriers, st->groups, st->syncs, st->overlapped_syncs, st->wal_bytes,
        (double)(st->writes - st->barriers) / (double)groups,
        (double)st->queue_wait_us / (double)writes, st->gather_wait_us,
        st->syncs ? (double)st->sync_us / (double)st->syncs : 0.0,
        (double)db_memtable_bytes(db) / 1048576.0, db->nimm, (double)mempool_bytes() / 1048576.0,
        st->rotations, db->last_seq);
    bool ok = buf_append(b, line, (size_t)n);
    for (int i = 0; ok && i < FOLLOWER_BUCKETS; i++) {
        if (st->followers[i] == 0)
            continue;
        n = snprintf(line, sizeof(line), " %d%s:%" PRIu64, i, i == FOLLOWER_BUCKETS - 1 ? "+" : "",
                     st->followers[i]);
        ok = buf_append(b, line, (size_t)n);
    }
    n = snprintf(line, sizeof(line),
                 "\n  deferred writes %" PRIu64 " (%" PRIu64 " bytes, %" PRIu64
                 " logged late); syncs that flushed them %" PRIu64,
                 st->deferred, st->deferred_bytes, st->late_logged_bytes, st->sync_flushes);
    return ok && buf_append(b, line, (size_t)n);
}

/* The stats text's recovery counts and sticky errors. REQUIRES: mu held. */
static bool recovery_text(lsm_db *db, buf *b)
{
    const struct db_stats *st = &db->stats;
    char line[512];
    int n = snprintf(line, sizeof(line),
                     "\nrecovery\n  records %" PRIu64 ", dropped bytes %" PRIu64
                     ", torn-tail bytes %" PRIu64 ", skipped %" PRIu64 " after %" PRIu64
                     " lost deferred writes\nbackground error: %s\ndisk full: %s\n",
                     st->recovered_records, st->recovered_dropped_bytes, st->recovered_torn_bytes,
                     st->recovered_skipped, st->recovered_lost,
                     db->bg_error ? lsm_status_message(db->bg_error) : "none",
                     db->nospace ? lsm_status_message(db->nospace) : "no");
    if (n >= (int)sizeof(line)) /* a long error message: cut */
        n = (int)sizeof(line) - 1;
    return buf_append(b, line, (size_t)n);
}

/* The stats text's table of levels; *written gets the bytes written to
 * tables over all levels. REQUIRES: mu held. */
static bool levels_text(lsm_db *db, buf *b, uint64_t *written)
{
    const struct db_stats *st = &db->stats;
    char line[512];
    int n = snprintf(line, sizeof(line),
                     "tables\n  level  files        MiB  compactions  read MiB  written MiB    "
                     "secs\n");
    bool ok = buf_append(b, line, (size_t)n);
    *written = 0;
    for (int l = 0; ok && l < NUM_LEVELS; l++) {
        const struct level_stats *ls = &st->levels[l];
        *written += ls->written_bytes;
        if (db->vs.current->nfiles[l] == 0 && ls->written_bytes == 0)
            continue;
        n = snprintf(line, sizeof(line), "  %5d %6d %10.1f %12" PRIu64 " %9.1f %12.1f %7.1f\n", l,
                     db->vs.current->nfiles[l],
                     (double)version_level_bytes(db->vs.current, l) / 1048576.0, ls->compactions,
                     (double)ls->read_bytes / 1048576.0, (double)ls->written_bytes / 1048576.0,
                     (double)ls->micros / 1e6);
        ok = buf_append(b, line, (size_t)n);
    }
    return ok;
}

/* The stats text's last lines: flushes, amplification, stalls, the block
 * cache; `written` is levels_text's. REQUIRES: mu held. */
static bool background_text(lsm_db *db, buf *b, uint64_t written)
{
    const struct db_stats *st = &db->stats;
    char line[512];
    uint64_t hits, misses;
    cache_stats(db->block_cache, &hits, &misses);
    char pacing[96];
    int at = db->pacer.rate > 0 ? snprintf(pacing, sizeof(pacing), "pacing at %.1f MiB/s now, ",
                                           db->pacer.rate / 1048576.0)
                                : snprintf(pacing, sizeof(pacing), "not pacing now, ");
    snprintf(pacing + at, sizeof(pacing) - (size_t)at, "compaction owes %.1f MiB",
             (double)version_compaction_debt(db->vs.current) / 1048576.0);
    int n = snprintf(
        line, sizeof(line),
        "  flushes %" PRIu64 ", write amplification %.2f (table bytes written / user bytes)\n"
        "  writer stalls: %.3f s paced, %.3f s stopped (%" PRIu64 " stops); %s\n"
        "  block cache: %.1f%% hits (%" PRIu64 " of %" PRIu64 ")\n",
        st->flushes, st->user_bytes ? (double)written / (double)st->user_bytes : 0.0,
        (double)st->slowdown_us / 1e6, (double)st->stop_us / 1e6, st->stops,
        pacing,
        hits + misses ? 100.0 * (double)hits / (double)(hits + misses) : 0.0, hits, hits + misses);
    return buf_append(b, line, (size_t)n);
}

/* The human-readable stats text. REQUIRES: mu held. */
static bool stats_text(lsm_db *db, buf *b)
{
    uint64_t written = 0;
    return write_path_text(db, b) && recovery_text(db, b) && levels_text(db, b, &written) &&
           background_text(db, b, written);
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
    } else if (strcmp(name, "lsm.tables") == 0) {
        ok = tables_text(db, &b);
    } else if (strcmp(name, "lsm.metrics") == 0) {
        ok = metrics_text(db, &b);
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
