/*
 * orphan.c — the background reclaimer of unlinked inodes.
 */
#include "orphan.h"

#include "commit.h"
#include "data.h"
#include "fuse_api.h"
#include "inode.h"
#include "xattr.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct reclaimer {
    lsmfs *fs;        /* [const] */
    pthread_t thread; /* [const] */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work arrived, stop asked, or queue drained */
    uint64_t *queue;   /* [mu] */
    size_t len, cap;   /* [mu] */
    bool busy;         /* [mu] the thread is reclaiming one */
    bool stop;         /* [mu] */
};

static bool chunked(const inode_rec *r)
{
    return S_ISREG(r->mode) && !(r->flags & INODE_F_INLINE);
}

bool orphan_needs_reclaim(const lsmfs *fs, const inode_rec *r)
{
    return chunked(r) && r->size > (uint64_t)ORPHAN_DIRECT_CHUNKS * fs->sb.chunk_size;
}

/* Deletes by name the chunks a small file may have: no stored byte lies at
 * or past its size. */
static int delete_small_chunks(lsmfs *fs, lsm_batch *b, uint64_t ino, const inode_rec *r)
{
    uint64_t cs = fs->sb.chunk_size, n = (r->size + cs - 1) / cs;
    for (uint64_t i = 0; i < n; i++) {
        schema_key k;
        key_chunk(&k, ino, i);
        if (!lsm_batch_delete(b, k.b, k.len))
            return ENOMEM;
    }
    return 0;
}

int orphan_batch_mark(lsm_batch *b, uint64_t ino)
{
    schema_key k;
    key_orphan(&k, ino);
    return lsm_batch_put(b, k.b, k.len, "", 0) ? 0 : ENOMEM;
}

int orphan_batch_destroy(lsmfs *fs, lsm_batch *b, uint64_t ino, const inode_rec *r)
{
    if (r->flags & INODE_F_XATTR) {
        int err = xattr_batch_remove_all(fs, b, ino);
        if (err != 0)
            return err;
    }
    if (chunked(r) && !orphan_needs_reclaim(fs, r)) {
        int err = delete_small_chunks(fs, b, ino, r);
        if (err != 0)
            return err;
    }
    schema_key k;
    key_inode(&k, ino);
    if (!lsm_batch_delete(b, k.b, k.len))
        return ENOMEM;
    key_orphan(&k, ino);
    return lsm_batch_delete(b, k.b, k.len) ? 0 : ENOMEM;
}

static int drop_orphan_record(lsmfs *fs, uint64_t ino)
{
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    schema_key k;
    key_orphan(&k, ino);
    int err = lsm_batch_delete(b, k.b, k.len) ? fs_commit(fs, b, NULL, 0) : ENOMEM;
    lsm_batch_free(b);
    return err;
}

/* Frees everything of one orphan, a bounded batch at a time. */
static int reclaim_one(struct reclaimer *rc, uint64_t ino)
{
    lsmfs *fs = rc->fs;
    inode_rec r;
    int err = inode_load(fs, ino, &r, NULL, NULL);
    /* The mark is what says the inode has no names (its record may still
     * hold the link count it had before its last unlink). */
    if (err == ENOENT) /* a stale mark */
        return drop_orphan_record(fs, ino);
    if (err != 0)
        return err;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    bool more = true;
    while (err == 0 && more) {
        pthread_mutex_lock(&rc->mu);
        bool stop = rc->stop;
        pthread_mutex_unlock(&rc->mu);
        if (stop)
            break;
        lsm_batch_clear(b);
        err = data_delete_chunks(fs, b, ino, 0, ORPHAN_BATCH_CHUNKS, &more);
        if (err == 0 && !more)
            err = orphan_batch_destroy(fs, b, ino, &r);
        if (err == 0)
            err = fs_commit(fs, b, NULL, 0);
        if (err == 0 && !more) {
            atomic_fetch_sub(&fs->inodes, 1);
            stats_inc(&fs->stats.reclaimed);
        }
    }
    lsm_batch_free(b);
    return err;
}

static void *reclaimer_main(void *arg)
{
    struct reclaimer *rc = arg;
    pthread_mutex_lock(&rc->mu);
    for (;;) {
        while (!rc->stop && rc->len == 0)
            pthread_cond_wait(&rc->cv, &rc->mu);
        if (rc->stop)
            break;
        uint64_t ino = rc->queue[--rc->len];
        rc->busy = true;
        pthread_mutex_unlock(&rc->mu);
        int err = reclaim_one(rc, ino);
        if (err != 0)
            fuse_log(FUSE_LOG_ERR, "lsmfs: reclaiming inode %llu: %s (left for next mount)\n",
                     (unsigned long long)ino, strerror(err));
        pthread_mutex_lock(&rc->mu);
        rc->busy = false;
        pthread_cond_broadcast(&rc->cv);
    }
    pthread_mutex_unlock(&rc->mu);
    return NULL;
}

void reclaimer_enqueue(reclaimer *rc, uint64_t ino)
{
    pthread_mutex_lock(&rc->mu);
    if (rc->len == rc->cap) {
        size_t cap = rc->cap ? rc->cap * 2 : 64;
        uint64_t *q = realloc(rc->queue, cap * sizeof *q);
        if (q == NULL) {
            pthread_mutex_unlock(&rc->mu);
            return;
        }
        rc->queue = q;
        rc->cap = cap;
    }
    rc->queue[rc->len++] = ino;
    pthread_cond_broadcast(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
}

void reclaimer_drain(reclaimer *rc)
{
    pthread_mutex_lock(&rc->mu);
    while (!rc->stop && (rc->len > 0 || rc->busy))
        pthread_cond_wait(&rc->cv, &rc->mu);
    pthread_mutex_unlock(&rc->mu);
}

/* Queues every orphan record in the store. */
static int scan_orphans(struct reclaimer *rc)
{
    lsm_iter *it = fs_iter_new(rc->fs, true);
    if (it == NULL)
        return ENOMEM;
    char prefix = K_ORPHAN;
    for (lsm_iter_seek(it, &prefix, 1); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen;
        const char *k = lsm_iter_key(it, &klen);
        uint64_t ino;
        if (klen == 0 || k[0] != K_ORPHAN)
            break;
        if (key_parse_ino(k, klen, K_ORPHAN, &ino))
            reclaimer_enqueue(rc, ino);
    }
    return fs_iter_end(rc->fs, it, 0, "orphan scan");
}

int reclaimer_start(lsmfs *fs, reclaimer **out)
{
    struct reclaimer *rc = calloc(1, sizeof *rc);
    if (rc == NULL)
        return ENOMEM;
    rc->fs = fs;
    pthread_mutex_init(&rc->mu, NULL);
    pthread_cond_init(&rc->cv, NULL);
    int err = scan_orphans(rc);
    if (err == 0)
        err = pthread_create(&rc->thread, NULL, reclaimer_main, rc);
    if (err != 0) {
        free(rc->queue);
        pthread_cond_destroy(&rc->cv);
        pthread_mutex_destroy(&rc->mu);
        free(rc);
        return err;
    }
    *out = rc;
    return 0;
}

void reclaimer_stop(reclaimer *rc)
{
    if (rc == NULL)
        return;
    pthread_mutex_lock(&rc->mu);
    rc->stop = true;
    pthread_cond_broadcast(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
    pthread_join(rc->thread, NULL);
    free(rc->queue);
    pthread_cond_destroy(&rc->cv);
    pthread_mutex_destroy(&rc->mu);
    free(rc);
}
