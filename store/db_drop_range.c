/*
 * db_drop_range.c — lsm_delete_files_in_range: whole tables inside a deleted
 * key range leave the version in one edit (contract in lsm.h).
 *
 * A table is dropped when its smallest and largest user keys both lie in
 * [begin, end), it is not an input of a running compaction (db->running:
 * that compaction's outputs would carry its keys back), and no older table
 * that stays overlaps it (its tombstones and newer values hide theirs: a
 * deleted key never shows again, so the call is safe at any time). While
 * the edit is written (mu released in vset_log_and_apply) db->dropping holds
 * off every compaction pick (db_compact.c), so none takes a table the edit
 * removes. Versions pinned by iterators, snapshots or a checkpoint keep their
 * tables until released (db_delete_obsolete_files sweeps only what no live
 * version names).
 */
#include "compaction.h"
#include "db_impl.h"
#include "lsm_malloc.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

/* Whether user key k (n bytes) lies in [begin, end). */
static bool key_inside(const char *k, size_t n, const char *begin, size_t blen, const char *end,
                       size_t elen)
{
    return bytes_compare(k, n, begin, blen) >= 0 && bytes_compare(k, n, end, elen) < 0;
}

static bool table_inside(const file_meta *f, const char *begin, size_t blen, const char *end,
                         size_t elen)
{
    return key_inside(f->smallest.data, ikey_user_len(f->smallest.len), begin, blen, end, elen) &&
           key_inside(f->largest.data, ikey_user_len(f->largest.len), begin, blen, end, elen);
}

/* Whether f is an input of a running compaction. REQUIRES: mu held. */
static bool in_use(lsm_db *db, const file_meta *f)
{
    assert(mutex_held(&db->mu));
    for (int lane = 0; lane < COMPACTION_LANES; lane++) {
        const compaction *c = db->running[lane];
        for (int w = 0; c != NULL && w < 2; w++)
            for (int i = 0; i < c->ninputs[w]; i++)
                if (c->inputs[w][i] == f)
                    return true;
    }
    return false;
}

/* The tables over the range that stay, oldest first as met (collect). */
struct kept {
    const file_meta **f;
    int n;
};

/* Whether a's user keys meet [lo, hi] (both ends included). */
static bool overlaps(const file_meta *a, const char *lo, size_t lon, const char *hi, size_t hin)
{
    return bytes_compare(a->smallest.data, ikey_user_len(a->smallest.len), hi, hin) <= 0 &&
           bytes_compare(a->largest.data, ikey_user_len(a->largest.len), lo, lon) >= 0;
}

/* Whether a table that stays overlaps f's keys: f, newer than all of them,
 * may hold the tombstone or the newer value that hides theirs. */
static bool shadows_kept(const struct kept *k, const file_meta *f)
{
    const char *lo = f->smallest.data, *hi = f->largest.data;
    size_t lon = ikey_user_len(f->smallest.len), hin = ikey_user_len(f->largest.len);
    for (int i = 0; i < k->n; i++)
        if (overlaps(k->f[i], lo, lon, hi, hin))
            return true;
    return false;
}

/* Decides for table f of `level` (met oldest first): dropped (added to e,
 * ++*n) or kept (added to k if it overlaps the range). false if out of
 * memory. REQUIRES: mu held. */
static bool judge(lsm_db *db, version_edit *e, struct kept *k, int level, const file_meta *f,
                  const char *begin, size_t blen, const char *end, size_t elen, int *n)
{
    if (table_inside(f, begin, blen, end, elen) && !in_use(db, f) && !shadows_kept(k, f)) {
        ++*n;
        return version_edit_delete_file(e, level, f->number);
    }
    if (overlaps(f, begin, blen, end, elen)) /* (one starting at end overlaps none inside) */
        k->f[k->n++] = f;
    return true;
}

/* Adds to e every table of the current version to drop; *n counts them.
 * Tables are met oldest first (the deepest level first, level 0 from its
 * oldest file), so a table is dropped only if none that stays is older
 * and overlaps it: what it deletes or overwrites never shows again. false
 * if out of memory. REQUIRES: mu held. */
static bool collect(lsm_db *db, version_edit *e, const char *begin, size_t blen, const char *end,
                    size_t elen, int *n)
{
    assert(mutex_held(&db->mu));
    const version *v = db->vs.current;
    int total = 0;
    for (int l = 0; l < NUM_LEVELS; l++)
        total += v->nfiles[l];
    struct kept k = {.f = lsm_malloc((size_t)(total + 1) * sizeof(*k.f)), .n = 0};
    bool ok = k.f != NULL;
    *n = 0;
    for (int l = NUM_LEVELS - 1; ok && l >= 0; l--)
        for (int j = 0; ok && j < v->nfiles[l]; j++) {
            int i = l == 0 ? v->nfiles[0] - 1 - j : j; /* level 0 is newest first */
            ok = judge(db, e, &k, l, v->files[l][i], begin, blen, end, elen, n);
        }
    free(k.f);
    return ok;
}

/* Writes the edit; a full disk gives up the reserve (dropping frees space)
 * and tries once more. REQUIRES: mu held (released while writing). */
static lsm_status *log_drop(lsm_db *db, version_edit *e)
{
    assert(mutex_held(&db->mu) && db->dropping);
    lsm_status *s = vset_log_and_apply(&db->vs, e, db->last_seq);
    if (lsm_status_code(s) == LSM_NO_SPACE && db_reserve_release(db)) {
        lsm_status_free(s);
        s = vset_log_and_apply(&db->vs, e, db->last_seq);
    }
    return s;
}

lsm_status *lsm_delete_files_in_range(lsm_db *db, const void *begin, size_t blen, const void *end,
                                      size_t elen)
{
    lsm_status *s = db_refuse_read_only(db);
    if (s)
        return s;
    mutex_lock(&db->mu);
    while (db->dropping) /* one drop at a time */
        cond_wait(&db->room_cv, &db->mu);
    version_edit e;
    version_edit_init(&e);
    int n = 0;
    if (db->bg_error) /* a write like any other: refused after a sticky error */
        s = status_copy(db->bg_error);
    else if (!collect(db, &e, begin, blen, end, elen, &n))
        s = status_new(LSM_NO_MEMORY, "out of memory");
    if (s == NULL && n > 0) {
        db->dropping = true;
        s = log_drop(db, &e);
        db->dropping = false;
        if (s == NULL) {
            db->stats.tables_dropped += (uint64_t)n;
            db->bg_progress++;
            db_install_view(db);
            db_delete_obsolete_files(db);
        }
        pthread_cond_broadcast(&db->work_cv);
        pthread_cond_broadcast(&db->room_cv);
    }
    mutex_unlock(&db->mu);
    version_edit_destroy(&e);
    return s;
}
