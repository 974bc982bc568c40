/*
 * nowork_log.c — the durable mode's log (see nowork_log.h).
 */
#include "nowork_log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZERO_PIECE (1u << 20)

struct nw_log {
    int fd;
    uint64_t ring;             /* bytes; appends wrap around */
    _Atomic uint64_t head;     /* bytes ever reserved (offset = head % ring) */
    _Atomic uint64_t appended; /* appends completed */
    pthread_mutex_t sync_mu;   /* one fdatasync at a time */
    uint64_t synced;           /* GUARDED_BY(sync_mu): appends covered by a sync */
    int sync_error;            /* GUARDED_BY(sync_mu): sticky errno, 0 if none */
};

static int write_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int sync_parent(const char *path)
{
    char copy[PATH_MAX];
    if (strlen(path) >= sizeof(copy))
        return ENAMETOOLONG;
    strcpy(copy, path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return errno;
    int err = fsync(dfd) == 0 ? 0 : errno;
    close(dfd);
    return err;
}

/* Writes the ring's zeros and syncs them with the file's name. */
static int fill_ring(nw_log *l, const char *path)
{
    char *zeros = calloc(1, ZERO_PIECE);
    if (zeros == NULL)
        return ENOMEM;
    int err = 0;
    for (uint64_t off = 0; off < l->ring && err == 0; off += ZERO_PIECE) {
        uint64_t n = l->ring - off < ZERO_PIECE ? l->ring - off : ZERO_PIECE;
        err = write_all(l->fd, zeros, (size_t)n, off);
    }
    free(zeros);
    if (err == 0 && fsync(l->fd) != 0)
        err = errno;
    return err != 0 ? err : sync_parent(path);
}

int nw_log_open(const char *path, size_t ring_bytes, nw_log **out)
{
    *out = NULL;
    if (ring_bytes < 4096)
        return EINVAL;
    nw_log *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return ENOMEM;
    l->ring = ring_bytes;
    pthread_mutex_init(&l->sync_mu, NULL);
    l->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int err = l->fd < 0 ? errno : fill_ring(l, path);
    if (err != 0) {
        nw_log_close(l);
        return err;
    }
    *out = l;
    return 0;
}

int nw_log_append(nw_log *l, const void *data, size_t n)
{
    static const char zeros[4096];
    int err = 0;
    uint64_t at = atomic_fetch_add(&l->head, n) % l->ring;
    while (n > 0 && err == 0) {
        size_t piece = n;
        if (piece > l->ring - at)
            piece = (size_t)(l->ring - at); /* wraps around */
        if (data == NULL && piece > sizeof(zeros))
            piece = sizeof(zeros);
        err = write_all(l->fd, data != NULL ? data : zeros, piece, at);
        if (data != NULL)
            data = (const char *)data + piece;
        n -= piece;
        at = (at + piece) % l->ring;
    }
    if (err == 0)
        atomic_fetch_add(&l->appended, 1);
    return err;
}

int nw_log_sync(nw_log *l)
{
    uint64_t want = atomic_load(&l->appended);
    pthread_mutex_lock(&l->sync_mu);
    if (l->sync_error == 0 && l->synced < want) {
        /* Read after the lock: covers whatever was appended meanwhile. */
        uint64_t upto = atomic_load(&l->appended);
        if (fdatasync(l->fd) == 0)
            l->synced = upto;
        else
            l->sync_error = errno;
    }
    int err = l->sync_error;
    pthread_mutex_unlock(&l->sync_mu);
    return err;
}

void nw_log_close(nw_log *l)
{
    if (l == NULL)
        return;
    if (l->fd >= 0)
        close(l->fd);
    pthread_mutex_destroy(&l->sync_mu);
    free(l);
}
