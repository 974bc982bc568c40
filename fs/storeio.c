/*
 * storeio.c — a mounted filesystem's reads and writes of its store:
 * batches in, sequence stamps, shared syncs, counted reads, store errors
 * into errnos (storeio.h).
 */
#include "storeio.h"

#include "fuse_api.h"
#include "icache.h"
#include "inode_lock.h"

#include <errno.h>
#include <stdlib.h>

/* Whether the store refuses every write from now on (its sticky error);
 * false when it cannot tell (no memory to ask). */
static bool store_stuck(lsmfs *fs)
{
    char *e = lsm_property(fs->db, "lsm.background-error");
    bool stuck = e != NULL && e[0] != '\0';
    free(e);
    return stuck;
}

static int write_errno(lsmfs *fs, lsm_status *s, const char *what)
{
    int err = lsm_status_errno(s);
    if (err == 0)
        err = EIO;
    if (err == ENOMEM && !store_stuck(fs)) { /* this write's answer only: the next may work */
        lsm_status_free(s);
        return err;
    }
    if (err == ENOSPC) { /* not an error of the store: writes resume with space */
        if (!atomic_exchange(&fs->nospace_logged, true))
            fuse_log(FUSE_LOG_WARNING, "lsmfs: store %s: %s; deletes still work\n", what,
                     lsm_status_message(s));
        lsm_status_free(s);
        return err;
    }
    if (!atomic_exchange(&fs->write_error, true))
        fuse_log(FUSE_LOG_ERR, "lsmfs: store %s failed: %s; later writes will fail\n", what,
                 lsm_status_message(s));
    lsm_status_free(s);
    return err;
}

static void atomic_max(_Atomic uint64_t *v, uint64_t x)
{
    uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);
    while (cur < x && !atomic_compare_exchange_weak(v, &cur, x)) {
    }
}

int fs_commit(lsmfs *fs, lsm_batch *b, inode *const *touched, int n)
{
    return fs_commit_as(fs, b, touched, n, false);
}

int fs_commit_as(lsmfs *fs, lsm_batch *b, inode *const *touched, int n, unsigned flags)
{
    assert(lsm_batch_count(b) > 0);
    for (int i = 0; i < n; i++)
        assert(touched[i] == NULL || inode_wrheld(touched[i]));
    lsm_write_options wo = {.sync = false,
                            .defer_log = (flags & COMMIT_DEFER_LOG) && !fs->cfg.sync_all,
                            .frees_space = flags & COMMIT_FREES_SPACE};
    stats_inc(&fs->stats.store_writes);
    uint64_t seq = 0;
    lsm_status *s = lsm_write_seq(fs->db, &wo, b, &seq);
    if (s != NULL)
        return write_errno(fs, s, "write");
    if (atomic_load_explicit(&fs->nospace_logged, memory_order_relaxed))
        atomic_store(&fs->nospace_logged, false);
    /* Published before the stamps: a sync that reads committed_seq after
     * seeing a stamp covers it. */
    atomic_max(&fs->committed_seq, seq);
    for (int i = 0; i < n; i++)
        if (touched[i] != NULL) {
            atomic_max(&touched[i]->seq, seq);
            atomic_store(&touched[i]->deferred_last, wo.defer_log);
        }
    return 0;
}

uint64_t fs_committed_seq(lsmfs *fs)
{
    return atomic_load(&fs->committed_seq);
}

/* Makes every write up to seq durable. The store shares WAL syncs between
 * concurrent callers (and overlaps them), so this layer only keeps a
 * watermark to answer fsyncs of what is already on disk without a call, and
 * asks for everything committed so far, so one sync serves the fsyncs that
 * follow it. Returns 0 or an errno. */
int fs_sync_upto(lsmfs *fs, uint64_t seq)
{
    assert(inode_locks_held() == 0);
    if (atomic_load(&fs->durable_seq) >= seq) {
        stats_inc(&fs->stats.sync_free);
        return 0;
    }
    uint64_t covered = atomic_load(&fs->committed_seq);
    if (atomic_fetch_add(&fs->syncs_in_flight, 1) > 0)
        stats_inc(&fs->stats.sync_shared);
    stats_inc(&fs->stats.store_syncs);
    lsm_status *s = lsm_sync_upto(fs->db, covered);
    atomic_fetch_sub(&fs->syncs_in_flight, 1);
    if (s != NULL)
        return write_errno(fs, s, "sync");
    atomic_max(&fs->durable_seq, covered);
    return 0;
}

int fs_sync_inode(lsmfs *fs, inode *n)
{
    assert(inode_pinned(n));
    return fs_sync_upto(fs, atomic_load(&n->seq));
}

int fs_durable(lsmfs *fs)
{
    assert(inode_locks_held() == 0);
    return fs->cfg.sync_all ? fs_sync_upto(fs, atomic_load(&fs->committed_seq)) : 0;
}

int fs_read_errno(lsmfs *fs, lsm_status *s, const char *what)
{
    (void)fs;
    if (s == NULL)
        return 0;
    /* Not found and out of memory say nothing about the store. */
    int err = lsm_status_errno(s);
    if (err != ENOENT && err != ENOMEM) {
        err = EIO;
        fuse_log(FUSE_LOG_ERR, "lsmfs: store read (%s) failed: %s\n", what, lsm_status_message(s));
    }
    lsm_status_free(s);
    return err;
}

lsm_status *fs_get(lsmfs *fs, const schema_key *k, char **v, size_t *vlen)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    stats_inc(&fs->stats.store_gets);
    *v = NULL;
    *vlen = 0;
    return lsm_get(fs->db, &ro, k->b, k->len, v, vlen);
}

lsm_iter *fs_iter_new(lsmfs *fs, bool fill_cache)
{
    stats_inc(&fs->stats.store_scans);
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.fill_cache = fill_cache;
    return lsm_iter_new(fs->db, &ro);
}

void fs_iter_seek_before(lsm_iter *it, const void *key, size_t klen)
{
    lsm_iter_seek(it, key, klen);
    if (lsm_iter_valid(it))
        lsm_iter_prev(it);
    else
        lsm_iter_seek_last(it);
}

int fs_iter_end(lsmfs *fs, lsm_iter *it, int err, const char *what)
{
    lsm_status *s = lsm_iter_status(it);
    if (s != NULL && err == 0)
        err = fs_read_errno(fs, s, what);
    else
        lsm_status_free(s);
    lsm_iter_free(it);
    return err;
}
