/*
 * db.c — opening (recovery itself: db_recover.c), closing, reads and
 * snapshots of an lsm_db. Writes are in db_write.c, syncs in db_fsync.c,
 * user iterators in db_iter.c.
 */
#include "db_impl.h"
#include "db_recover.h"
#include "lsm_malloc.h"
#include "mempool.h"
#include "filename.h"
#include "version.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- open/close */

static lsm_status *check_is_store(lsm_db *db)
{
    bool exists;
    lsm_status *s = db_current_exists(db, &exists);
    if (s)
        return s;
    if (!exists)
        return status_new(LSM_INVALID_ARGUMENT, "%s: not an lsmfs store (no CURRENT file)",
                          db->dir);
    return NULL;
}

/* Exclusive LOCK, or for read_only a shared one that creates nothing. */
static lsm_status *lock_store(lsm_db *db)
{
    char *name = lock_file_name(db->dir);
    if (name == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = NULL;
    if (!db->opt.read_only)
        s = db->env->lock_file(db->env, name, &db->lock);
    else if (db->env->lock_file_shared != NULL)
        s = db->env->lock_file_shared(db->env, name, &db->lock);
    free(name);
    return s; /* LSM_BUSY: the env's reason names the lock and its holder */
}

static void free_memtables(lsm_db *db)
{
    if (db->view)
        db_unref_view(db, db->view);
    db->view = NULL;
    if (db->mem)
        memtable_unref(db->mem);
    for (int i = 0; i < db->nimm; i++)
        memtable_unref(db->imm[i]);
    free(db->imm);
    free(db->imm_log);
    free(db->imm_id);
}

static void db_free(lsm_db *db)
{
    mutex_lock(&db->mu);
    db_free_deferred(db);
    free_memtables(db);
    if (db->wal)
        lsm_status_free(wal_writer_close(db->wal));
    vset_destroy(&db->vs);
    mutex_unlock(&db->mu);
    if (db->lock)
        lsm_status_free(db->env->unlock_file(db->env, db->lock));
    batch_destroy(&db->group);
    mempool_release(); /* the buffers and blocks it pooled too (mempool.h) */
    lsm_status_free(db->bg_error);
    lsm_status_free(db->nospace);
    table_cache_free(db->tables);
    cache_free(db->block_cache);
    free(db->pending);
    pthread_cond_destroy(&db->gather_cv);
    pthread_cond_destroy(&db->sync_cv);
    pthread_cond_destroy(&db->work_cv);
    pthread_cond_destroy(&db->room_cv);
    mutex_destroy(&db->mu);
    free(db->dir);
    free(db);
}

static lsm_status *check_options(const lsm_options *o)
{
    if (o->write_buffer_size < (64u << 10))
        return status_new(LSM_INVALID_ARGUMENT, "write_buffer_size must be at least 64 KiB");
    if (o->block_size < 256 || o->block_size > (4u << 20))
        return status_new(LSM_INVALID_ARGUMENT, "block_size must be in [256, 4 MiB]");
    return NULL;
}

static lsm_db *db_alloc(const lsm_options *o, const char *dir)
{
    lsm_db *db = lsm_calloc(1, sizeof(*db));
    if (db == NULL)
        return NULL;
    db->opt = *o;
    db->env = o->env ? o->env : lsm_env_default();
    db->opt.env = db->env;
    db->dir = lsm_strdup(dir);
    db->expected_group = 1;
    db->sync_max = SYNC_MAX;
    db->next_mem_id = 1; /* db->mem is memtable 0 */
    /* A level's cost is known once a compaction moved an eighth of a flushed memtable. */
    pacer_init(&db->pacer, 4 * (uint64_t)o->write_buffer_size, o->write_buffer_size / 8);
    db->mem_cap = o->write_buffer_size;
    db->snapshots.next = db->snapshots.prev = &db->snapshots;
    mutex_init(&db->mu);
    cond_init_monotonic(&db->gather_cv);
    pthread_cond_init(&db->sync_cv, NULL);
    cond_init_monotonic(&db->work_cv); /* the flush thread's timed waits */
    pthread_cond_init(&db->room_cv, NULL);
    db->block_cache = cache_new(o->block_cache_size);
    db->tables = db->dir ? table_cache_new(db->env, db->dir, db->block_cache,
                                           o->max_open_files > 10 ? o->max_open_files - 10 : 10,
                                           o->mapped_reads)
                         : NULL;
    bool ok = db->dir && db->block_cache && db->tables && batch_init(&db->group) &&
              (db->mem = db_memtable_new(db)) != NULL;
    lsm_status *s = ok ? vset_init(&db->vs, db->env, db->dir, &db->mu) : NULL;
    if (!ok || s) {
        lsm_status_free(s);
        free(db->dir);
        if (db->mem)
            memtable_unref(db->mem);
        if (db->tables)
            table_cache_free(db->tables);
        if (db->block_cache)
            cache_free(db->block_cache);
        batch_destroy(&db->group);
        free(db);
        return NULL;
    }
    db->vs.l0_compaction_trigger = L0_COMPACTION_TRIGGER;
    db->vs.l0_unit_bytes = o->write_buffer_size;
    if (o->level1_bytes > 0)
        db->vs.level1_bytes = o->level1_bytes;
    return db;
}

/* After salvage_log the damaged log must go, or the next open meets the
 * damage again: the kept prefix is written to tables, which makes every
 * replayed log obsolete. */
static lsm_status *write_salvaged_prefix(lsm_db *db)
{
    lsm_status *s = db_flush_memtables(db, 0);
    if (s != NULL)
        return status_wrap(s, "writing the salvaged prefix to tables");
    return NULL;
}

lsm_status *lsm_open(const lsm_options *o, const char *dir, lsm_db **out)
{
    *out = NULL;
    lsm_status *s = check_options(o);
    if (s)
        return s;
    lsm_db *db = db_alloc(o, dir);
    if (db == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory opening %s", dir);
    if (o->create_if_missing && !o->read_only)
        s = env_create_dir_durable(db->env, dir);
    else
        s = check_is_store(db); /* before LOCK: leave foreign dirs untouched */
    if (s == NULL)
        s = lock_store(db);
    if (s == NULL && !o->read_only) /* a store made with looser modes */
        s = lsm_private_modes(db->env, dir, true, NULL, NULL, NULL);
    if (s == NULL) {
        mutex_lock(&db->mu);
        /* Recovery may need the reserve's space; it is made again after.
         * A read-only open touches no file. */
        bool reserve = !o->read_only;
        db->reserve_max = reserve ? db_reserve_max(db->env, dir, o->reserve_bytes) : 0;
        if (reserve)
            db_reserve_release(db);
        db->reserve_releases = db->reserve_tried_us = 0;
        s = db_recover(db);
        if (s == NULL && !db_install_view(db))
            s = status_new(LSM_NO_MEMORY, "out of memory");
        if (s == NULL && reserve) {
            (void)db_reserve_make(db); /* never needed to open */
            db_memtable_cap_update(db);
        }
        mutex_unlock(&db->mu);
    }
    if (s == NULL && !o->read_only)
        s = db_start_background(db);
    if (s == NULL && db->stats.recovered_salvaged && !o->read_only)
        s = write_salvaged_prefix(db);
    if (s) {
        db_stop_background(db); /* a no-op unless started */
        db_free(db);
        return s;
    }
    *out = db;
    return NULL;
}

/* After a clean flush the current log holds nothing: remove it so a closed
 * store is only its tables and MANIFEST (the next open starts a new log).
 * REQUIRES: mu held, background stopped. */
static void drop_empty_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->wal == NULL || memtable_entries(db->mem) != 0 || db->nimm != 0)
        return;
    lsm_status_free(wal_writer_close(db->wal));
    db->wal = NULL;
    char *name = log_file_name(db->dir, db->wal_number);
    if (name)
        lsm_status_free(db->env->remove_file(db->env, name));
    free(name);
}

/* Close's verdict: LSM_NO_SPACE says only that tables could not be
 * written; any failure that may put an acknowledged write at risk replaces
 * it (lsm.h). */
static void keep_at_risk(lsm_status **s, lsm_status *other)
{
    if (other != NULL && *s != NULL && lsm_status_code(*s) == LSM_NO_SPACE) {
        lsm_status_free(*s);
        *s = other;
        return;
    }
    status_keep_first(s, other);
}

/* A failed log step of close: any failure of it, a full disk too, may
 * leave acknowledged writes in no durable log. */
static lsm_status *at_risk(lsm_status *s)
{
    if (lsm_status_code(s) != LSM_NO_SPACE)
        return s;
    lsm_status *io = status_new(LSM_IO_ERROR, "logging the last writes at close: %s",
                                lsm_status_message(s));
    lsm_status_free(s);
    return io;
}

lsm_status *lsm_close(lsm_db *db)
{
    if (db == NULL)
        return NULL;
    if (db->opt.read_only) { /* nothing to write, no thread started */
        db_free(db);
        return NULL;
    }
    /* Write the memtables out, so the next open replays nothing and the
     * logs (with their preallocated space) can go. If that fails the logs
     * stay what recovery needs: every write goes into them (deferred
     * batches logged late) and is synced. Any failed step is reported,
     * the first one seen, even when the logs saved everything. */
    lsm_status *s = db_flush_memtables(db, 0);
    bool flushed = s == NULL;
    if (!flushed)
        keep_at_risk(&s, at_risk(lsm_sync(db)));
    db_stop_background(db);
    mutex_lock(&db->mu);
    /* no write or sync may be in flight at close */
    assert(db->head == NULL && db->sync_head == NULL && db->syncs_running == 0);
    bool sticky = db->bg_error != NULL;
    keep_at_risk(&s, status_copy(db->bg_error));
    if (!sticky && db->wal && !db->wal_broken && db->wal_synced < wal_offset(db->wal))
        keep_at_risk(&s, at_risk(wal_sync(db->wal)));
    if (s == NULL)
        drop_empty_wal(db);
    mutex_unlock(&db->mu);
    db_free(db);
    return s;
}

lsm_status *lsm_destroy(const lsm_options *o, const char *dir)
{
    lsm_env *env = o->env ? o->env : lsm_env_default();
    char **names;
    int n;
    lsm_status *s = env->get_children(env, dir, &names, &n);
    if (s) {
        lsm_status_free(s);
        return NULL; /* nothing there */
    }
    char path[4096];
    lsm_filelock *lock = NULL;
    snprintf(path, sizeof(path), "%s/LOCK", dir);
    s = env->lock_file(env, path, &lock);
    for (int i = 0; s == NULL && i < n; i++) {
        uint64_t number;
        enum file_type type;
        if (!parse_file_name(names[i], &number, &type) || type == FILE_LOCK)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        s = env->remove_file(env, path);
    }
    env_free_children(names, n);
    if (lock) {
        lsm_status_free(env->unlock_file(env, lock));
        snprintf(path, sizeof(path), "%s/LOCK", dir);
        lsm_status_free(env->remove_file(env, path));
    }
    return s;
}

/* ------------------------------------------------------------------ writes */

lsm_status *lsm_write(lsm_db *db, const lsm_write_options *wo, lsm_batch *batch)
{
    lsm_status *s = db_refuse_read_only(db);
    return s ? s : db_write(db, batch, wo, NULL);
}

lsm_status *lsm_write_seq(lsm_db *db, const lsm_write_options *wo, lsm_batch *batch, uint64_t *seq)
{
    lsm_status *s = db_refuse_read_only(db);
    return s ? s : db_write(db, batch, wo, seq);
}

lsm_status *lsm_put(lsm_db *db, const lsm_write_options *wo, const void *key, size_t klen,
                    const void *val, size_t vlen)
{
    lsm_batch b;
    if (!batch_init(&b))
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = lsm_batch_put(&b, key, klen, val, vlen)
                        ? lsm_write(db, wo, &b)
                        : status_new(LSM_NO_MEMORY, "out of memory");
    batch_destroy(&b);
    return s;
}

lsm_status *lsm_delete(lsm_db *db, const lsm_write_options *wo, const void *key, size_t klen)
{
    lsm_batch b;
    if (!batch_init(&b))
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = lsm_batch_delete(&b, key, klen) ? lsm_write(db, wo, &b)
                                                    : status_new(LSM_NO_MEMORY, "out of memory");
    batch_destroy(&b);
    return s;
}

/* ------------------------------------------------------------------- reads */

/* Looks key up in the memtables of rv, newest first. */
static enum memtable_get_result get_from_memtables(struct readview *rv, const void *key,
                                                   size_t klen, uint64_t seq, char **val,
                                                   size_t *vlen)
{
    enum memtable_get_result r = memtable_get(rv->mem, key, klen, seq, val, vlen);
    for (int i = 0; r == MEMTABLE_ABSENT && i < rv->nimm; i++)
        r = memtable_get(rv->imm[i], key, klen, seq, val, vlen);
    return r;
}

lsm_status *lsm_get(lsm_db *db, const lsm_read_options *ro, const void *key, size_t klen,
                    char **val, size_t *vlen)
{
    uint64_t seq;
    struct readview *rv = db_ref_view(db, &seq, ro);
    enum memtable_get_result r = get_from_memtables(rv, key, klen, seq, val, vlen);
    lsm_status *err = NULL;
    if (r == MEMTABLE_ABSENT) {
        /* The seek key on the stack: every lookup that misses the memtables
         * (most of a filesystem's) would otherwise pay a malloc. */
        char small[256];
        char *ik = klen + IKEY_TRAILER <= sizeof(small) ? small : lsm_malloc(klen + IKEY_TRAILER);
        if (ik != NULL) {
            memcpy(ik, key, klen);
            encode_fixed64(ik + klen, pack_seq_type(seq, TYPE_SEEK));
            seek_charge charge;
            r = version_get(rv->version, db->tables, ro, ik, klen + IKEY_TRAILER, val, vlen,
                            &err, &charge);
            db_charge_seek(db, rv->version, &charge);
        } else {
            err = status_new(LSM_NO_MEMORY, "out of memory");
        }
        if (ik != small)
            free(ik);
    }
    db_unref_view(db, rv);
    if (err)
        return err;
    switch (r) {
    case MEMTABLE_FOUND:
        return NULL;
    case MEMTABLE_NOMEM:
        return status_new(LSM_NO_MEMORY, "out of memory reading a value");
    default:
        return status_not_found();
    }
}

lsm_iter *lsm_iter_new(lsm_db *db, const lsm_read_options *ro)
{
    uint64_t seq;
    struct readview *rv = db_ref_view(db, &seq, ro);
    int cap = 1 + rv->nimm + rv->version->nfiles[0] + NUM_LEVELS;
    iter **children = lsm_malloc((size_t)cap * sizeof(*children));
    if (children == NULL) {
        db_unref_view(db, rv);
        return NULL;
    }
    int k = 0;
    children[k++] = memtable_iter_new(rv->mem);
    for (int i = 0; i < rv->nimm; i++)
        children[k++] = memtable_iter_new(rv->imm[i]);
    bool ok = true;
    for (int i = 0; i < k; i++)
        ok = ok && children[i] != NULL;
    ok = ok && version_add_iters(rv->version, db->tables, ro, &children, &k, &cap);
    iter *merged = ok ? iter_new_merging(children, k, ikey_compare) : NULL;
    if (merged == NULL) {
        for (int i = 0; i < k; i++)
            iter_free(children[i]);
    }
    free(children);
    if (merged == NULL) {
        db_unref_view(db, rv);
        return NULL;
    }
    return db_iter_new(db, rv, merged, seq);
}

/* ---------------------------------------------------------------- snapshots */

const lsm_snapshot *lsm_snapshot_new(lsm_db *db)
{
    struct lsm_snapshot *s = lsm_malloc(sizeof(*s));
    if (s == NULL)
        return NULL;
    mutex_lock(&db->mu);
    s->seq = db->last_seq;
    s->next = &db->snapshots;
    s->prev = db->snapshots.prev;
    s->prev->next = s;
    db->snapshots.prev = s;
    mutex_unlock(&db->mu);
    return s;
}

void lsm_snapshot_release(lsm_db *db, const lsm_snapshot *snap)
{
    if (snap == NULL)
        return;
    struct lsm_snapshot *s = (struct lsm_snapshot *)snap;
    mutex_lock(&db->mu);
    s->prev->next = s->next;
    s->next->prev = s->prev;
    mutex_unlock(&db->mu);
    free(s);
}

/* -------------------------------------------------------------- properties */

/* Bytes of the tables of v before user key k (NULL: the end of each). */
static uint64_t offset_in_version(lsm_db *db, version *v, const void *k, size_t kn)
{
    buf ik;
    buf_init(&ik);
    if (k && !buf_put_ikey(&ik, k, kn, MAX_SEQUENCE, TYPE_SEEK))
        return 0;
    uint64_t sum = 0;
    for (int l = 0; l < NUM_LEVELS; l++) {
        for (int i = 0; i < v->nfiles[l]; i++) {
            file_meta *f = v->files[l][i];
            if (k == NULL || ikey_compare(f->largest.data, f->largest.len, ik.data, ik.len) < 0) {
                sum += f->size; /* entirely before k */
            } else if (ikey_compare(f->smallest.data, f->smallest.len, ik.data, ik.len) < 0) {
                uint64_t off = 0;
                lsm_status *s = table_cache_approximate_offset(db->tables, f->number, f->size,
                                                               ik.data, ik.len, &off);
                lsm_status_free(s);
                sum += off;
            }
        }
    }
    buf_free(&ik);
    return sum;
}

uint64_t lsm_approximate_size(lsm_db *db, const void *begin, size_t blen, const void *end,
                              size_t elen)
{
    uint64_t seq;
    struct readview *rv = db_ref_view(db, &seq, NULL);
    uint64_t lo = begin ? offset_in_version(db, rv->version, begin, blen) : 0;
    uint64_t hi = offset_in_version(db, rv->version, end, elen);
    db_unref_view(db, rv);
    return hi > lo ? hi - lo : 0;
}
