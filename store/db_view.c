/*
 * db_view.c — the memtables (the active one, the immutable ones waiting for
 * their flush) and the read view that pins them with a table version for
 * readers (struct readview, db_impl.h).
 */
#include "db_impl.h"
#include "arena.h"
#include "lsm_malloc.h"

#include <stdlib.h>

/* Pooled only where a block is a small part of the write buffer: the
 * switch rule reads usage, which grows a whole block at a time. */
#define POOLED_MIN_WRITE_BUFFER (16 * (size_t)ARENA_POOLED_BLOCK)

memtable *db_memtable_new(const lsm_db *db)
{
    return db->opt.write_buffer_size >= POOLED_MIN_WRITE_BUFFER ? memtable_new_pooled()
                                                                  : memtable_new();
}

size_t db_memtable_bytes(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    size_t n = memtable_memory_usage(db->mem);
    for (int i = 0; i < db->nimm; i++)
        n += memtable_memory_usage(db->imm[i]);
    return n;
}

bool db_push_imm(lsm_db *db, memtable *fresh, uint64_t fresh_log)
{
    assert(mutex_held(&db->mu));
    if (db->nimm == db->cap_imm) {
        int cap = db->cap_imm ? db->cap_imm * 2 : 4;
        memtable **imm = lsm_realloc(db->imm, (size_t)cap * sizeof(*imm));
        if (imm == NULL)
            return false;
        db->imm = imm;
        uint64_t *logs = lsm_realloc(db->imm_log, (size_t)cap * sizeof(*logs));
        if (logs == NULL)
            return false;
        db->imm_log = logs;
        uint64_t *ids = lsm_realloc(db->imm_id, (size_t)cap * sizeof(*ids));
        if (ids == NULL)
            return false;
        db->imm_id = ids;
        db->cap_imm = cap;
    }
    db->imm[db->nimm] = db->mem;
    db->imm_log[db->nimm] = db->mem_log;
    db->imm_id[db->nimm++] = db->mem_id;
    db->mem = fresh;
    db->mem_log = fresh_log;
    db->mem_id = db->next_mem_id++;
    return true;
}

static void view_free(lsm_db *db, struct readview *rv)
{
    memtable_unref(rv->mem);
    for (int i = 0; i < rv->nimm; i++)
        memtable_unref(rv->imm[i]);
    if (rv->version) {
        bool held = mutex_held(&db->mu);
        if (!held)
            mutex_lock(&db->mu);
        version_unref(rv->version);
        if (!held)
            mutex_unlock(&db->mu);
    }
    free(rv);
}

struct readview *db_view_alloc(int cap_imm)
{
    struct readview *rv = lsm_calloc(1, sizeof(*rv) + (size_t)cap_imm * sizeof(memtable *));
    if (rv == NULL)
        return NULL;
    rv->imm = (memtable **)(rv + 1);
    rv->cap_imm = cap_imm;
    return rv;
}

bool db_install_view(lsm_db *db)
{
    struct readview *rv = db_view_alloc(db->nimm);
    if (rv == NULL)
        return false;
    db_view_install(db, rv);
    return true;
}

void db_view_install(lsm_db *db, struct readview *rv)
{
    assert(mutex_held(&db->mu) && db->nimm <= rv->cap_imm);
    atomic_init(&rv->refs, 1);
    rv->mem = db->mem;
    memtable_ref(rv->mem);
    for (int i = 0; i < db->nimm; i++) { /* db->imm is oldest first */
        rv->imm[i] = db->imm[db->nimm - 1 - i];
        memtable_ref(rv->imm[i]);
    }
    rv->nimm = db->nimm;
    rv->version = db->vs.current;
    version_ref(rv->version);
    struct readview *old = db->view;
    db->view = rv;
    if (old)
        db_unref_view(db, old);
}

struct readview *db_ref_view(lsm_db *db, uint64_t *seq, const lsm_read_options *ro)
{
    mutex_lock(&db->mu);
    struct readview *rv = db->view;
    atomic_fetch_add_explicit(&rv->refs, 1, memory_order_relaxed);
    *seq = (ro && ro->snapshot) ? ro->snapshot->seq : db->last_seq;
    mutex_unlock(&db->mu);
    return rv;
}

void db_unref_view(lsm_db *db, struct readview *rv)
{
    if (atomic_fetch_sub_explicit(&rv->refs, 1, memory_order_acq_rel) == 1)
        view_free(db, rv);
}
