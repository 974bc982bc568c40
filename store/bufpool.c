/* bufpool.c — big buffers kept for reuse; see bufpool.h. */
#include "bufpool.h"
#include "lsm_malloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define POOL_SLOTS ((int)(BUFPOOL_MAX_BYTES / BUFPOOL_MIN))

static struct {
    pthread_mutex_t mu;
    buf kept[POOL_SLOTS]; /* [mu] the first n */
    int n;                /* [mu] */
    size_t bytes;         /* [mu] their capacities added up */
    char *aligned[BUFPOOL_ALIGNED_KEPT]; /* [mu] the first naligned */
    int naligned;                        /* [mu] */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

void bufpool_release(buf *b)
{
    bool keep = false;
    if (b->cap >= BUFPOOL_MIN) {
        pthread_mutex_lock(&pool.mu);
        keep = pool.n < POOL_SLOTS && pool.bytes + b->cap <= BUFPOOL_MAX_BYTES;
        if (keep) {
            pool.kept[pool.n++] = *b;
            pool.bytes += b->cap;
        }
        pthread_mutex_unlock(&pool.mu);
    }
    if (!keep)
        buf_free(b);
    buf_init(b);
}

/* Takes a kept buffer with room for `need` bytes into *out; false if none. */
static bool take(size_t need, buf *out)
{
    pthread_mutex_lock(&pool.mu);
    int i = pool.n - 1;
    while (i >= 0 && pool.kept[i].cap < need)
        i--;
    if (i >= 0) {
        *out = pool.kept[i];
        pool.bytes -= out->cap;
        pool.kept[i] = pool.kept[--pool.n];
    }
    pthread_mutex_unlock(&pool.mu);
    return i >= 0;
}

bool bufpool_reserve(buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return true;
    buf kept;
    if (extra <= SIZE_MAX - b->len && b->len + extra >= BUFPOOL_MIN && take(b->len + extra, &kept)) {
        if (b->len > 0)
            memcpy(kept.data, b->data, b->len);
        kept.len = b->len;
        buf_free(b);
        *b = kept;
        return true;
    }
    return buf_reserve(b, extra);
}

char *bufpool_aligned_get(void)
{
    char *b = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.naligned > 0)
        b = pool.aligned[--pool.naligned];
    pthread_mutex_unlock(&pool.mu);
    return b != NULL ? b : lsm_aligned_alloc(4096, BUFPOOL_ALIGNED);
}

void bufpool_aligned_put(char *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&pool.mu);
    bool keep = pool.naligned < BUFPOOL_ALIGNED_KEPT;
    if (keep)
        pool.aligned[pool.naligned++] = b;
    pthread_mutex_unlock(&pool.mu);
    if (!keep)
        free(b);
}

void bufpool_drain(void)
{
    pthread_mutex_lock(&pool.mu);
    int n = pool.n, na = pool.naligned;
    buf kept[POOL_SLOTS];
    char *aligned[BUFPOOL_ALIGNED_KEPT];
    memcpy(kept, pool.kept, sizeof(buf) * (size_t)n);
    memcpy(aligned, pool.aligned, sizeof(char *) * (size_t)na);
    pool.n = 0;
    pool.bytes = 0;
    pool.naligned = 0;
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < n; i++)
        buf_free(&kept[i]);
    for (int i = 0; i < na; i++)
        free(aligned[i]);
}

size_t bufpool_bytes(void)
{
    pthread_mutex_lock(&pool.mu);
    size_t n = pool.bytes + (size_t)pool.naligned * BUFPOOL_ALIGNED;
    pthread_mutex_unlock(&pool.mu);
    return n;
}
