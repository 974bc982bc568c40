/*
 * commit.c — batches into the store, sequence stamps, shared syncs, and
 * store errors into errnos.
 */
#include "commit.h"

#include "fuse_api.h"
#include "icache.h"

#include <errno.h>

static int write_errno(lsmfs *fs, lsm_status *s, const char *what)
{
    int err = lsm_status_errno(s);
    if (err == 0)
        err = EIO;
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
    lsm_write_options wo = {.sync = false};
    stats_inc(&fs->stats.store_writes);
    uint64_t seq = 0;
    lsm_status *s = lsm_write_seq(fs->db, &wo, b, &seq);
    if (s != NULL)
        return write_errno(fs, s, "write");
    /* Published before the stamps: a sync that reads committed_seq after
     * seeing a stamp covers it. */
    atomic_max(&fs->committed_seq, seq);
    for (int i = 0; i < n; i++)
        if (touched[i] != NULL)
            atomic_max(&touched[i]->seq, seq);
    return 0;
}

uint64_t fs_committed_seq(lsmfs *fs)
{
    return atomic_load(&fs->committed_seq);
}

/* One sync that covers everything committed before it started; the caller
 * is the only thread syncing. Returns 0 or an errno. */
static int lead_sync(lsmfs *fs, uint64_t *covered)
{
    *covered = atomic_load(&fs->committed_seq);
    stats_inc(&fs->stats.store_syncs);
    lsm_status *s = lsm_sync_upto(fs->db, *covered);
    return s ? write_errno(fs, s, "sync") : 0;
}

int fs_sync_upto(lsmfs *fs, uint64_t seq)
{
    pthread_mutex_lock(&fs->sync_mu);
    bool waited = false;
    while (fs->durable_seq < seq && fs->syncing) {
        waited = true;
        pthread_cond_wait(&fs->sync_cv, &fs->sync_mu);
    }
    if (fs->durable_seq >= seq) {
        pthread_mutex_unlock(&fs->sync_mu);
        stats_inc(waited ? &fs->stats.sync_shared : &fs->stats.sync_free);
        return 0;
    }
    fs->syncing = true;
    pthread_mutex_unlock(&fs->sync_mu);
    uint64_t covered;
    int err = lead_sync(fs, &covered);
    pthread_mutex_lock(&fs->sync_mu);
    fs->syncing = false;
    if (err == 0 && covered > fs->durable_seq)
        fs->durable_seq = covered;
    pthread_cond_broadcast(&fs->sync_cv);
    pthread_mutex_unlock(&fs->sync_mu);
    return err;
}

int fs_sync_inode(lsmfs *fs, inode *n)
{
    return fs_sync_upto(fs, atomic_load(&n->seq));
}

int fs_durable(lsmfs *fs)
{
    return fs->cfg.sync_all ? fs_sync_upto(fs, atomic_load(&fs->committed_seq)) : 0;
}

int fs_read_errno(lsmfs *fs, lsm_status *s, const char *what)
{
    (void)fs;
    if (s == NULL)
        return 0;
    int code = lsm_status_code(s);
    int err = ENOENT;
    if (code != LSM_NOT_FOUND) {
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
