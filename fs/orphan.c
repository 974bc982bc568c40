/*
 * orphan.c — the background reclaimer of unlinked inodes.
 */
#include "orphan.h"

#include "grow.h"
#include "storeio.h"
#include "data.h"
#include "fuse_api.h"
#include "icache.h"
#include "inode.h"
#include "xattr.h"
#include "lsm_malloc.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct reclaimer {
    lsmfs *fs;        /* [const] */
    pthread_t thread; /* [const] */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work arrived, stop or drain asked, or queue drained */
    uint64_t *queue;   /* [mu] orphans to reclaim chunk batch by chunk batch */
    size_t len, cap;   /* [mu] */
    /* [mu] Orphans the kernel let go of, each pinned in the inode cache,
     * freed together in one store batch (free_small). */
    inode **small;
    size_t nsmall, capsmall; /* [mu] */
    bool busy;               /* [mu] the thread is working outside mu */
    int draining;            /* [mu] threads in reclaimer_drain */
    bool stop;               /* [mu] */
};

bool orphan_in_use(lsmfs *fs, inode *n)
{
    assert(inode_wrheld(n));
    return !S_ISDIR(n->rec.mode) && icache_mark_orphan(fs->icache, n);
}

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

uint32_t orphan_nlink(const inode_rec *r, bool marked)
{
    return marked ? 0 : r->nlink;
}

int orphan_batch_mark(lsm_batch *b, uint64_t ino)
{
    schema_key k;
    key_orphan(&k, ino);
    return lsm_batch_put(b, k.b, k.len, "", 0) ? 0 : ENOMEM;
}

int orphan_batch_destroy(lsmfs *fs, lsm_batch *b, uint64_t ino, const inode_rec *r)
{
    assert(r->nlink == 0);
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
    key_inline(&k, ino);
    if (inode_has_inline_key(r) && !lsm_batch_delete(b, k.b, k.len))
        return ENOMEM;
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
    int err = lsm_batch_delete(b, k.b, k.len) ? fs_commit_as(fs, b, NULL, 0, COMMIT_FREES_SPACE)
                                              : ENOMEM;
    lsm_batch_free(b);
    return err;
}

/* Compacts chunks [from, to) of a freed file (to == UINT64_MAX: all from
 * `from` on), so their tables go now: deletes alone free no disk (they add
 * tombstones) until compaction happens to meet them. Best effort: a
 * failure (a full disk) leaves it to the usual compactions. */
static void compact_freed(lsmfs *fs, uint64_t ino, uint64_t from, uint64_t to)
{
    schema_key start, end;
    key_range(&start, &end, K_CHUNK, ino);
    key_chunk(&start, ino, from);
    if (to != UINT64_MAX)
        key_chunk(&end, ino, to);
    lsm_status *s = lsm_compact_range(fs->db, start.b, start.len, end.b, end.len);
    if (s != NULL && lsm_status_code(s) != LSM_NO_SPACE)
        fuse_log(FUSE_LOG_WARNING, "lsmfs: compacting freed inode %llu: %s\n",
                 (unsigned long long)ino, lsm_status_message(s));
    lsm_status_free(s);
}

/* Drops the tables that hold only the orphan's chunks, so only the chunks
 * in tables shared with other keys and in memtables need a tombstone. Its
 * range is dead (no name, nothing open, inode numbers never reused: alloc.h)
 * as lsm_delete_files_in_range asks. Called before every batch: tables a
 * compaction held at the last call (one failing on a full disk) and flushed
 * tombstones of earlier batches go as soon as they can. Best effort: a
 * failure leaves the chunks to the batches. */
static void drop_freed_tables(lsmfs *fs, uint64_t ino)
{
    schema_key start, end;
    key_range(&start, &end, K_CHUNK, ino);
    lsm_status *s = lsm_delete_files_in_range(fs->db, start.b, start.len, end.b, end.len);
    if (s != NULL && lsm_status_code(s) != LSM_NO_SPACE)
        fuse_log(FUSE_LOG_WARNING, "lsmfs: dropping the tables of freed inode %llu: %s\n",
                 (unsigned long long)ino, lsm_status_message(s));
    lsm_status_free(s);
}

/* Frees everything of one orphan: its chunk-only tables (drop_freed_tables,
 * before each batch), the rest a bounded batch at a time, each batch
 * starting where the last one stopped (a scan from chunk 0 would pass every
 * tombstone written before it); every ORPHAN_COMPACT_BATCHES batches the
 * range deleted so far is compacted, so a big file's space comes back as
 * it goes, not only after its last batch. */
static int reclaim_one(struct reclaimer *rc, uint64_t ino)
{
    lsmfs *fs = rc->fs;
    inode_rec r;
    int err = inode_load(fs, ino, &r, NULL, NULL);
    if (err == ENOENT) /* a stale mark */
        return drop_orphan_record(fs, ino);
    if (err != 0)
        return err;
    r.nlink = orphan_nlink(&r, true);
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    bool more = true;
    uint64_t first = 0, compacted = 0, batches = 0;
    while (err == 0 && more) {
        pthread_mutex_lock(&rc->mu);
        bool stop = rc->stop;
        pthread_mutex_unlock(&rc->mu);
        if (stop)
            break;
        drop_freed_tables(fs, ino);
        lsm_batch_clear(b);
        uint64_t deleted, next; /* the record goes: its count need not follow */
        err = data_delete_chunks(fs, b, ino, first, ORPHAN_BATCH_CHUNKS, &more, &deleted, &next);
        if (err == 0 && !more)
            err = orphan_batch_destroy(fs, b, ino, &r);
        if (err == 0)
            err = fs_commit_as(fs, b, NULL, 0, COMMIT_FREES_SPACE);
        if (err == 0 && !more) {
            atomic_fetch_sub(&fs->inodes, 1);
            stats_inc(&fs->stats.reclaimed);
        }
        if (err == 0)
            first = next;
        if (err == 0 && more && ++batches % ORPHAN_COMPACT_BATCHES == 0) {
            compact_freed(fs, ino, compacted, first);
            compacted = first;
        }
    }
    lsm_batch_free(b);
    if (err == 0 && !more)
        compact_freed(fs, ino, compacted, UINT64_MAX);
    return err;
}

static int cmp_ino(const void *a, const void *b)
{
    uint64_t x = (*(inode *const *)a)->ino, y = (*(inode *const *)b)->ino;
    return x < y ? -1 : x > y;
}

/* What to do with one orphan the kernel let go of. REQUIRES: n->lock. */
enum small_fate { KEEP, DONE, DESTROY, RECLAIM };

static enum small_fate small_fate(lsmfs *fs, inode *n)
{
    assert(inode_wrheld(n));
    if (orphan_in_use(fs, n))
        return KEEP; /* a later forget frees it */
    if (n->gone || n->rec.nlink != 0)
        return DONE;
    return orphan_needs_reclaim(fs, &n->rec) ? RECLAIM : DESTROY;
}

/* Frees orphans v[0..n) (pinned; the pins are dropped here) in one batch.
 * They are locked in inode order (the lock order; nothing else is held) and
 * stay locked until the batch is in, so no request sees one half freed.
 * A failed write leaves the orphan marks for the next mount. */
static void free_small(struct reclaimer *rc, inode **v, size_t n)
{
    lsmfs *fs = rc->fs;
    qsort(v, n, sizeof *v, cmp_ino);
    enum small_fate fate[ORPHAN_FREE_BATCH];
    lsm_batch *b = lsm_batch_new();
    int err = b == NULL ? ENOMEM : 0;
    size_t destroyed = 0;
    for (size_t i = 0; i < n; i++) {
        fate[i] = KEEP;
        if (i > 0 && v[i] == v[i - 1])
            continue; /* forgotten twice (see small_fate) */
        /* Ascending (sorted above), but more than inode_wrlock tracks per
         * thread. */
        inode_wrlock_unordered(v[i]);
        fate[i] = small_fate(fs, v[i]);
        if (fate[i] == DESTROY && err == 0)
            err = orphan_batch_destroy(fs, b, v[i]->ino, &v[i]->rec);
        destroyed += fate[i] == DESTROY;
    }
    if (err == 0 && destroyed > 0) {
        stats_inc(&fs->stats.orphan_batches);
        err = fs_commit_as(fs, b, NULL, 0, COMMIT_FREES_SPACE);
    }
    if (err != 0)
        fuse_log(FUSE_LOG_ERR, "lsmfs: freeing %zu orphans: %s (left for next mount)\n",
                 destroyed, strerror(err));
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && v[i] == v[i - 1])
            continue;
        if (fate[i] == DESTROY && err == 0) {
            v[i]->gone = true;
            atomic_fetch_sub(&fs->inodes, 1);
            stats_inc(&fs->stats.orphans_freed);
        }
        if (fate[i] == RECLAIM)
            reclaimer_enqueue(rc, v[i]->ino);
        inode_unlock_unordered(v[i]);
    }
    for (size_t i = 0; i < n; i++)
        icache_put(fs->icache, v[i]);
    lsm_batch_free(b);
}

static struct timespec deadline_in_ms(int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (long)ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

/* Waits up to ORPHAN_GATHER_MS for more small orphans to join the first
 * one, unless a batch is full or someone waits for the work to end.
 * REQUIRES: rc->mu. */
static void gather_small(struct reclaimer *rc)
{
    struct timespec until = deadline_in_ms(ORPHAN_GATHER_MS);
    while (rc->nsmall < ORPHAN_FREE_BATCH && !rc->stop && rc->draining == 0)
        if (pthread_cond_timedwait(&rc->cv, &rc->mu, &until) == ETIMEDOUT)
            break;
}

/* Frees the small orphans queued, a batch at a time. REQUIRES: rc->mu,
 * which is dropped meanwhile. */
static void run_small(struct reclaimer *rc)
{
    inode *v[ORPHAN_FREE_BATCH];
    while (rc->nsmall > 0) {
        size_t n = rc->nsmall < ORPHAN_FREE_BATCH ? rc->nsmall : ORPHAN_FREE_BATCH;
        rc->nsmall -= n;
        memcpy(v, rc->small + rc->nsmall, n * sizeof *v);
        rc->busy = true;
        pthread_mutex_unlock(&rc->mu);
        free_small(rc, v, n);
        pthread_mutex_lock(&rc->mu);
        rc->busy = false;
    }
    pthread_cond_broadcast(&rc->cv);
}

static void run_one(struct reclaimer *rc)
{
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

/* Small orphans go first: each is one key or a few, and pins an inode. At
 * a stop they are still freed (their pins must go before the inode cache
 * does); large ones stay for the next mount. */
static void *reclaimer_main(void *arg)
{
    struct reclaimer *rc = arg;
    (void)pthread_setname_np(pthread_self(), "lsmfs-reclaim");
    pthread_mutex_lock(&rc->mu);
    for (;;) {
        while (!rc->stop && rc->len == 0 && rc->nsmall == 0)
            pthread_cond_wait(&rc->cv, &rc->mu);
        if (rc->nsmall > 0) {
            gather_small(rc);
            run_small(rc);
        } else if (rc->stop) {
            break;
        } else {
            run_one(rc);
        }
    }
    pthread_mutex_unlock(&rc->mu);
    return NULL;
}

bool reclaimer_free_later(reclaimer *rc, inode *n)
{
    pthread_mutex_lock(&rc->mu);
    bool ok = !rc->stop;
    if (ok) {
        inode **v = lsm_grow(rc->small, &rc->capsmall, rc->nsmall + 1, sizeof *v, ORPHAN_FREE_BATCH);
        ok = v != NULL;
        if (ok)
            rc->small = v;
    }
    if (ok) {
        rc->small[rc->nsmall++] = n;
        /* The first wakes the thread, which then gathers more; a full
         * batch ends the gathering early. */
        if (rc->nsmall == 1 || rc->nsmall == ORPHAN_FREE_BATCH)
            pthread_cond_broadcast(&rc->cv);
    }
    pthread_mutex_unlock(&rc->mu);
    return ok;
}

void reclaimer_enqueue(reclaimer *rc, uint64_t ino)
{
    pthread_mutex_lock(&rc->mu);
    uint64_t *q = lsm_grow(rc->queue, &rc->cap, rc->len + 1, sizeof *q, 64);
    if (q == NULL) {
        pthread_mutex_unlock(&rc->mu);
        return;
    }
    rc->queue = q;
    rc->queue[rc->len++] = ino;
    pthread_cond_broadcast(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
}

void reclaimer_drain(reclaimer *rc)
{
    pthread_mutex_lock(&rc->mu);
    rc->draining++;
    pthread_cond_broadcast(&rc->cv); /* no more gathering */
    while (!rc->stop && (rc->len > 0 || rc->nsmall > 0 || rc->busy))
        pthread_cond_wait(&rc->cv, &rc->mu);
    rc->draining--;
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
    struct reclaimer *rc = lsm_calloc(1, sizeof *rc);
    if (rc == NULL)
        return ENOMEM;
    rc->fs = fs;
    pthread_mutex_init(&rc->mu, NULL);
    pthread_condattr_t ca; /* gather_small's deadlines are monotonic */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rc->cv, &ca);
    pthread_condattr_destroy(&ca);
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
    assert(rc->nsmall == 0);
    free(rc->small);
    free(rc->queue);
    pthread_cond_destroy(&rc->cv);
    pthread_mutex_destroy(&rc->mu);
    free(rc);
}
