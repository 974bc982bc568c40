/*
 * icount.c — the inode count kept across a clean unmount (icount.h).
 */
#include "icount.h"

#include "fuse_api.h"
#include "schema.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An iterator over db as of snap (NULL: now); NULL out of memory. */
static lsm_iter *new_iter(lsm_db *db, const lsm_snapshot *snap)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.fill_cache = false;
    ro.snapshot = snap;
    return lsm_iter_new(db, &ro);
}

/* Counts the inode keys from it's position on into *count: stops after
 * `limit` more (EAGAIN, it on the next key) or once *stop (ECANCELED). */
static int count_on(lsm_iter *it, int64_t *count, uint64_t limit, const _Atomic bool *stop)
{
    for (; lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen;
        const char *key = lsm_iter_key(it, &klen);
        if (klen == 0 || key[0] != K_INODE)
            break;
        if (++*count % 4096 == 0 && stop != NULL && atomic_load(stop))
            return ECANCELED;
        if (--limit == 0) {
            lsm_iter_next(it);
            return EAGAIN;
        }
    }
    lsm_status *s = lsm_iter_status(it);
    int err = lsm_status_errno(s); /* EIO, ENOMEM out of memory (count_again) */
    lsm_status_free(s);
    return err;
}

static void seek_inodes(lsm_iter *it)
{
    char prefix = K_INODE;
    lsm_iter_seek(it, &prefix, 1);
}

int icount_scan(lsm_db *db, int64_t *count)
{
    lsm_iter *it = new_iter(db, NULL);
    if (it == NULL)
        return ENOMEM;
    seek_inodes(it);
    *count = 0;
    int err = count_on(it, count, UINT64_MAX, NULL);
    lsm_iter_free(it);
    return err;
}

/* Keys icount_start counts before it returns: a small store's count is
 * exact when the mount is (about 10 MB of records at most). */
#define SYNC_KEYS 4096

/* A count that ran out of memory starts again, at the same snapshot, after
 * a pause: the first this long, each next one twice the last, up to
 * RETRY_MAX_MS (memory short for long costs a recount a few seconds). */
#define RETRY_FIRST_MS 50
#define RETRY_MAX_MS 5000

struct icount_job {
    lsm_db *db;                 /* [const] */
    const lsm_snapshot *snap; /* [the thread] the store as of icount_start, until counted */
    lsm_iter *it;             /* [the thread] over snap */
    int64_t n;                /* [the thread] counted so far */
    int pause_ms;             /* [the thread] before the next count_again */
    _Atomic int64_t *total;
    _Atomic bool *known;
    _Atomic bool stop;
    pthread_t thread;
};

/* Waits the next pause or until stopped; false once stopped. */
static bool pause_unless_stopped(icount_job *j)
{
    j->pause_ms = j->pause_ms == 0 ? RETRY_FIRST_MS : j->pause_ms * 2;
    if (j->pause_ms > RETRY_MAX_MS)
        j->pause_ms = RETRY_MAX_MS;
    for (int ms = 0; ms < j->pause_ms && !atomic_load(&j->stop); ms += 10)
        usleep(10000);
    return !atomic_load(&j->stop);
}

/* Out of memory: the count so far dropped, a new iterator at the same
 * snapshot from the first inode key, once memory is back. ECANCELED once
 * stopped. */
static int count_again(icount_job *j)
{
    lsm_iter_free(j->it);
    j->it = NULL;
    j->n = 0;
    while (pause_unless_stopped(j))
        if ((j->it = new_iter(j->db, j->snap)) != NULL) {
            seek_inodes(j->it);
            return 0;
        }
    return ECANCELED;
}

static void *job_main(void *arg)
{
    icount_job *j = arg;
    (void)pthread_setname_np(pthread_self(), "lsmfs-icount");
    int err = count_on(j->it, &j->n, UINT64_MAX, &j->stop);
    bool said = false;
    while (err == ENOMEM) {
        if (!said)
            fuse_log(FUSE_LOG_WARNING, "lsmfs: counting inodes ran out of memory: counting "
                                       "again once memory is back (statfs shows fewer until "
                                       "then)\n");
        said = true;
        err = count_again(j);
        if (err == 0)
            err = count_on(j->it, &j->n, UINT64_MAX, &j->stop);
    }
    if (err == 0) {
        atomic_fetch_add(j->total, j->n);
        atomic_store(j->known, true);
    } else if (err != ECANCELED) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: counting inodes failed (%s): statfs shows fewer\n",
                 strerror(err));
    }
    lsm_snapshot_release(j->db, j->snap); /* counted: compactions may drop what it kept */
    j->snap = NULL;
    return NULL;
}

static void job_free(icount_job *j)
{
    lsm_iter_free(j->it);
    lsm_snapshot_release(j->db, j->snap);
    free(j);
}

int icount_start(lsm_db *db, _Atomic int64_t *total, _Atomic bool *known, icount_job **out)
{
    *out = NULL;
    icount_job *j = lsm_calloc(1, sizeof *j);
    if (j == NULL)
        return ENOMEM;
    j->db = db;
    if ((j->snap = lsm_snapshot_new(db)) == NULL || (j->it = new_iter(db, j->snap)) == NULL) {
        job_free(j);
        return ENOMEM;
    }
    seek_inodes(j->it);
    int err = count_on(j->it, &j->n, SYNC_KEYS, NULL);
    if (err != EAGAIN) { /* all counted, or an error */
        if (err == 0) {
            atomic_fetch_add(total, j->n);
            atomic_store(known, true);
        }
        job_free(j);
        return err;
    }
    j->total = total;
    j->known = known;
    atomic_init(&j->stop, false);
    err = pthread_create(&j->thread, NULL, job_main, j);
    if (err != 0) {
        job_free(j);
        return err;
    }
    *out = j;
    return 0;
}

void icount_stop(icount_job *j)
{
    if (j == NULL)
        return;
    atomic_store(&j->stop, true);
    pthread_join(j->thread, NULL);
    job_free(j);
}

int icount_current(lsm_db *db, bool *current, uint64_t *count)
{
    *current = false;
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    schema_key k;
    key_icount(&k);
    char *v = NULL;
    size_t vlen = 0;
    lsm_status *s = lsm_get(db, &ro, k.b, k.len, &v, &vlen);
    int err = s != NULL && lsm_status_code(s) != LSM_NOT_FOUND ? lsm_status_errno(s) : 0;
    uint64_t seq, last;
    if (s == NULL && icount_decode(v, vlen, count, &seq) &&
        lsm_property_u64(db, "lsm.sequence", &last))
        *current = seq == last;
    lsm_status_free(s);
    free(v);
    return err;
}

int icount_save(lsm_db *db, int64_t count)
{
    uint64_t last;
    if (count < 1 || !lsm_property_u64(db, "lsm.sequence", &last))
        return EINVAL;
    char v[SCHEMA_ICOUNT_LEN];
    icount_encode((uint64_t)count, last + 1, v); /* this batch's sequence */
    schema_key k;
    key_icount(&k);
    lsm_batch *b = lsm_batch_new();
    if (b == NULL || !lsm_batch_put(b, k.b, k.len, v, sizeof v)) {
        lsm_batch_free(b);
        return ENOMEM;
    }
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_write(db, &wo, b);
    lsm_batch_free(b);
    int err = s == NULL ? 0 : lsm_status_errno(s);
    if (s != NULL && err == 0)
        err = EIO;
    lsm_status_free(s);
    return err;
}
