/* wal_prefill.c — a WAL's zero-filled mode and its zeroer; see wal_prefill.h. */
#include "wal_prefill.h"

#include "lsm_malloc.h"
#include "port.h"

#include <pthread.h>
#include <stdlib.h>

/* The appending thread, a syncing thread and the zeroer meet here; zlk
 * orders *pos against the zeroer's writes. */
struct wal_prefill {
    struct wal_prefill_io io; /* [const] */
    uint64_t *pos;            /* [zlk while active] offset of the next append */
    pthread_mutex_t zlk;
    pthread_cond_t zcv;   /* the zeroer waits here for work */
    uint64_t step;        /* [const] bytes kept zeroed ahead of the appends */
    uint64_t zero_end;    /* [zlk] zeros reach this far (synced) */
    uint64_t size;        /* [zlk] the file's size as we made it */
    bool active;          /* [zlk] zero-filling (auto mode may pause it) */
    bool wanted;          /* [zlk] a round is asked for */
    bool closing;         /* [zlk] the file is closing: the zeroer exits */
    bool started;         /* [zlk] the zeroer thread exists */
    pthread_t thread;     /* [zlk] valid once started */
};

#define ZERO_PIECE (64u << 10)
static const char zeros[ZERO_PIECE];

/* Zeros are written and synced a round at a time, keeping about `step`
 * bytes ahead of the appends: small rounds, because a WAL sync that queues
 * behind the zeroer's fdatasync waits for the whole round. */
#define ZERO_ROUND (256u << 10)

/* Whether the zeros are less than a step (minus a round) ahead of the
 * appends. REQUIRES: zlk held. */
static bool zero_wants_more(const struct wal_prefill *z)
{
    uint64_t round = z->step < ZERO_ROUND ? z->step : ZERO_ROUND;
    return *z->pos + z->step > z->zero_end + round;
}

struct wal_prefill *wal_prefill_new(const struct wal_prefill_io *io, uint64_t *pos, uint64_t end,
                                    uint64_t step, bool active)
{
    struct wal_prefill *z = lsm_calloc(1, sizeof(*z));
    if (z == NULL)
        return NULL;
    z->io = *io;
    z->pos = pos;
    pthread_mutex_init(&z->zlk, NULL);
    pthread_cond_init(&z->zcv, NULL);
    z->step = step;
    z->active = active;
    z->zero_end = z->size = end;
    *pos = end;
    return z;
}

int wal_prefill_append(struct wal_prefill *z, const void *data, size_t n)
{
    pthread_mutex_lock(&z->zlk);
    int err = z->io.write_at(z->io.ctx, data, n, *z->pos);
    if (err == 0) {
        *z->pos += n;
        if (*z->pos > z->size)
            z->size = *z->pos;
    }
    pthread_mutex_unlock(&z->zlk);
    return err;
}

/* Writes zeros over [from, to), piece by piece, each piece only where no
 * append has reached yet (checked under zlk, which appends hold). Returns 0
 * or an errno. [zeroer] */
static int zero_range(struct wal_prefill *z, uint64_t from, uint64_t to)
{
    int err = 0;
    for (uint64_t off = from; off < to && err == 0; off += ZERO_PIECE) {
        uint64_t end = off + ZERO_PIECE < to ? off + ZERO_PIECE : to;
        pthread_mutex_lock(&z->zlk);
        if (!z->active) { /* back to mapped appends: pos is no longer ours */
            pthread_mutex_unlock(&z->zlk);
            break;
        }
        uint64_t start = off > *z->pos ? off : *z->pos;
        if (start < end) {
            err = z->io.write_at(z->io.ctx, zeros, (size_t)(end - start), start);
            if (err == 0 && end > z->size)
                z->size = end;
        }
        pthread_mutex_unlock(&z->zlk);
    }
    return err;
}

/* The zeroer: each round zeros ZERO_ROUND bytes past what appends and earlier
 * rounds reached, then syncs them. A failed write of zeros only ends the
 * help (the WAL still works, with dearer syncs); a failed sync is sticky for
 * the file (io.sync): the page it could not write may be an append's. */
static void *zeroer_main(void *arg)
{
    struct wal_prefill *z = arg;
    port_thread_name("lsm-walzero");
    pthread_mutex_lock(&z->zlk);
    for (;;) {
        while (!z->wanted && !z->closing)
            pthread_cond_wait(&z->zcv, &z->zlk);
        if (z->closing)
            break;
        z->wanted = false;
        if (!z->active)
            continue;
        uint64_t from = z->zero_end > *z->pos ? z->zero_end : *z->pos;
        uint64_t to = from + (z->step < ZERO_ROUND ? z->step : ZERO_ROUND);
        pthread_mutex_unlock(&z->zlk);
        int err = zero_range(z, from, to);
        if (err == 0)
            err = z->io.sync(z->io.ctx);
        pthread_mutex_lock(&z->zlk);
        if (err != 0)
            break;
        if (to > z->zero_end)
            z->zero_end = to;
        if (z->active && zero_wants_more(z))
            z->wanted = true; /* another round right away */
    }
    pthread_mutex_unlock(&z->zlk);
    return NULL;
}

void wal_prefill_after_sync(struct wal_prefill *z)
{
    pthread_mutex_lock(&z->zlk);
    if (z->active && !z->closing && zero_wants_more(z)) {
        if (!z->started && pthread_create(&z->thread, NULL, zeroer_main, z) == 0)
            z->started = true;
        z->wanted = true;
        pthread_cond_signal(&z->zcv);
    }
    pthread_mutex_unlock(&z->zlk);
}

void wal_prefill_resume(struct wal_prefill *z, uint64_t reserved)
{
    pthread_mutex_lock(&z->zlk);
    z->active = true;
    if (reserved > z->size)
        z->size = reserved;
    z->zero_end = *z->pos;
    pthread_mutex_unlock(&z->zlk);
}

uint64_t wal_prefill_pause(struct wal_prefill *z)
{
    pthread_mutex_lock(&z->zlk);
    z->active = false; /* the zeroer stops before its next piece */
    uint64_t size = z->size;
    pthread_mutex_unlock(&z->zlk);
    return size;
}

uint64_t wal_prefill_free(struct wal_prefill *z)
{
    pthread_mutex_lock(&z->zlk);
    z->closing = true;
    pthread_cond_signal(&z->zcv);
    bool started = z->started;
    pthread_mutex_unlock(&z->zlk);
    if (started)
        pthread_join(z->thread, NULL);
    uint64_t size = z->size;
    pthread_cond_destroy(&z->zcv);
    pthread_mutex_destroy(&z->zlk);
    free(z);
    return size;
}
