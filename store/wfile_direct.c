/*
 * wfile_direct.c — direct writes of a POSIX file (wfile_direct.h).
 *
 * DIRECT_DEPTH buffers of DIRECT_BUF bytes: one fills while the others are
 * written through an io_uring of the file's own, so building the next part
 * of a table overlaps the disk's work on the last. A buffer is filled again
 * only once its write completed. A write the filesystem refuses (EINVAL) or
 * cuts short is finished through the page cache, and the file stays
 * buffered from then on (its data is still in the buffer). Buffers come
 * from bufpool.h, as each new one would cost a page fault per page.
 */
#include "wfile_direct.h"

#include "bufpool.h"
#include "env_posix_hook.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Offsets and sizes of direct writes: a page, a multiple of every logical
 * block size in use (512, 4096). */
#define DIRECT_ALIGN 4096
#define DIRECT_BUF BUFPOOL_ALIGNED
#define DIRECT_DEPTH 2

struct slot {
    char *buf;    /* DIRECT_BUF bytes, aligned to DIRECT_ALIGN (bufpool.h) */
    size_t len;   /* bytes in buf (while busy: being written) */
    uint64_t off; /* where buf goes in the file */
    bool busy;    /* its write is in flight */
};

struct wfile_direct {
    int fd;       /* the file (O_DIRECT while direct) */
    bool direct;  /* false once a direct write was refused or cut short */
    int err;      /* the first failed write's errno; 0 if none */
    struct io_uring ring;
    struct slot slot[DIRECT_DEPTH];
    int cur;      /* the slot being filled (never busy) */
};

ssize_t (*env_posix_direct_done)(ssize_t res) = NULL;

/* Turns O_DIRECT on or off for fd: 0 or an errno. */
static int set_direct(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return errno;
    return fcntl(fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT) < 0 ? errno : 0;
}

static void free_direct(wfile_direct *d)
{
    for (int i = 0; i < DIRECT_DEPTH; i++)
        bufpool_aligned_put(d->slot[i].buf);
    io_uring_queue_exit(&d->ring);
    free(d);
}

wfile_direct *wfile_direct_start(int fd)
{
    wfile_direct *d = lsm_calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    if (io_uring_queue_init(DIRECT_DEPTH, &d->ring, 0) != 0) {
        free(d);
        return NULL;
    }
    bool ok = true;
    for (int i = 0; i < DIRECT_DEPTH; i++)
        ok = ok && (d->slot[i].buf = bufpool_aligned_get()) != NULL;
    if (!ok || set_direct(fd, true) != 0) {
        free_direct(d);
        return NULL;
    }
    d->fd = fd;
    d->direct = true;
    return d;
}

/* Writes n bytes at off through the page cache, the rest of the file too.
 * 0 or an errno. */
static int write_buffered(wfile_direct *d, const char *p, size_t n, uint64_t off)
{
    if (d->direct) {
        d->direct = false;
        int e = set_direct(d->fd, false);
        if (e != 0)
            return e;
    }
    return posix_write_all_at(d->fd, p, n, (off_t)off);
}

/* The end of slot i's write, res as io_uring reports it: a refused or
 * short direct write is finished through the page cache. */
static void slot_done(wfile_direct *d, int i, ssize_t res)
{
    struct slot *s = &d->slot[i];
    if (env_posix_direct_done != NULL)
        res = env_posix_direct_done(res);
    s->busy = false;
    int e = 0;
    if (res == -EINVAL || (res >= 0 && (size_t)res < s->len))
        e = write_buffered(d, s->buf + (res > 0 ? res : 0), s->len - (size_t)(res > 0 ? res : 0),
                           s->off + (uint64_t)(res > 0 ? res : 0));
    else if (res < 0)
        e = (int)-res;
    if (e != 0 && d->err == 0)
        d->err = e;
}

/* Waits until slot i's write (if any) has ended; others that end meanwhile
 * are taken too. */
static void slot_wait(wfile_direct *d, int i)
{
    while (d->slot[i].busy) {
        struct io_uring_cqe *cqe;
        int r = io_uring_wait_cqe(&d->ring, &cqe);
        if (r == -EINTR)
            continue;
        if (r < 0) { /* the ring failed: nothing more will be reported */
            for (int j = 0; j < DIRECT_DEPTH; j++)
                d->slot[j].busy = false;
            if (d->err == 0)
                d->err = -r;
            return;
        }
        int j = (int)io_uring_cqe_get_data64(cqe);
        ssize_t res = cqe->res;
        io_uring_cqe_seen(&d->ring, cqe);
        slot_done(d, j, res);
    }
}

/* Sends slot i's bytes (a multiple of DIRECT_ALIGN while direct) to the
 * disk: through the ring while direct, else at once through the page
 * cache. */
static void slot_send(wfile_direct *d, int i)
{
    struct slot *s = &d->slot[i];
    struct io_uring_sqe *sqe = d->direct ? io_uring_get_sqe(&d->ring) : NULL;
    if (sqe == NULL) {
        int e = write_buffered(d, s->buf, s->len, s->off);
        if (e != 0 && d->err == 0)
            d->err = e;
        return;
    }
    io_uring_prep_write(sqe, d->fd, s->buf, (unsigned)s->len, s->off);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
    s->busy = true;
    int r = io_uring_submit(&d->ring);
    if (r < 0) /* not sent: EINVAL finishes it through the page cache */
        slot_done(d, i, r);
}

int wfile_direct_append(wfile_direct *d, const void *p, size_t n)
{
    const char *src = p;
    while (n > 0 && d->err == 0) {
        struct slot *s = &d->slot[d->cur];
        size_t take = DIRECT_BUF - s->len < n ? DIRECT_BUF - s->len : n;
        memcpy(s->buf + s->len, src, take);
        s->len += take;
        src += take;
        n -= take;
        if (s->len == DIRECT_BUF) {
            uint64_t next_off = s->off + DIRECT_BUF;
            slot_send(d, d->cur);
            d->cur = (d->cur + 1) % DIRECT_DEPTH;
            slot_wait(d, d->cur);
            d->slot[d->cur].len = 0;
            d->slot[d->cur].off = next_off;
        }
    }
    return d->err;
}

int wfile_direct_finish(wfile_direct *d)
{
    struct slot *s = &d->slot[d->cur];
    size_t whole = d->direct ? s->len / DIRECT_ALIGN * DIRECT_ALIGN : 0;
    size_t tail = s->len - whole;
    uint64_t end = s->off + s->len;
    if (whole > 0 && d->err == 0) {
        s->len = whole;
        slot_send(d, d->cur);
    }
    for (int i = 0; i < DIRECT_DEPTH; i++)
        slot_wait(d, i);
    int e = d->err;
    if (e == 0)
        e = write_buffered(d, s->buf + whole, tail, s->off + whole); /* also ends O_DIRECT */
    if (e == 0 && lseek(d->fd, (off_t)end, SEEK_SET) < 0)
        e = errno;
    free_direct(d);
    return e;
}

void wfile_direct_drop(wfile_direct *d)
{
    for (int i = 0; i < DIRECT_DEPTH; i++)
        slot_wait(d, i); /* the kernel may still read a buffer */
    free_direct(d);
}
