/*
 * syncahead.c — WAL syncs started before an fsync asks for them; see
 * syncahead.h.
 */
#include "syncahead.h"

#include "commit.h"
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* A directory fsynced within this long counts as fsynced often. */
#define HOT_US 1000000

struct syncahead {
    lsmfs *fs;           /* [const] */
    pthread_t thread;    /* [const] */
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* [mu] */
    bool wanted;         /* [mu] a sync is asked for */
    bool stop;           /* [mu] */
};

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* Requests that arrive while a sync runs merge into the next one, which
 * covers everything committed by the time it starts. A failed sync is
 * logged and made sticky by the store; the fsync that needed it reports it. */
static void *ahead_main(void *arg)
{
    syncahead *sa = arg;
    pthread_mutex_lock(&sa->mu);
    for (;;) {
        while (!sa->wanted && !sa->stop)
            pthread_cond_wait(&sa->cv, &sa->mu);
        if (sa->stop)
            break;
        sa->wanted = false;
        pthread_mutex_unlock(&sa->mu);
        stats_inc(&sa->fs->stats.sync_ahead);
        (void)fs_sync_committed(sa->fs);
        pthread_mutex_lock(&sa->mu);
    }
    pthread_mutex_unlock(&sa->mu);
    return NULL;
}

int syncahead_start(lsmfs *fs, syncahead **out)
{
    syncahead *sa = calloc(1, sizeof *sa);
    if (sa == NULL)
        return ENOMEM;
    sa->fs = fs;
    pthread_mutex_init(&sa->mu, NULL);
    pthread_cond_init(&sa->cv, NULL);
    int err = pthread_create(&sa->thread, NULL, ahead_main, sa);
    if (err != 0) {
        pthread_cond_destroy(&sa->cv);
        pthread_mutex_destroy(&sa->mu);
        free(sa);
        return err;
    }
    *out = sa;
    return 0;
}

void syncahead_stop(syncahead *sa)
{
    if (sa == NULL)
        return;
    pthread_mutex_lock(&sa->mu);
    sa->stop = true;
    pthread_cond_signal(&sa->cv);
    pthread_mutex_unlock(&sa->mu);
    pthread_join(sa->thread, NULL);
    pthread_cond_destroy(&sa->cv);
    pthread_mutex_destroy(&sa->mu);
    free(sa);
}

void syncahead_note_fsyncdir(inode *d)
{
    atomic_store_explicit(&d->fsyncdir_us, now_us(), memory_order_relaxed);
}

void syncahead_changed(syncahead *sa, inode *d)
{
    uint64_t at = atomic_load_explicit(&d->fsyncdir_us, memory_order_relaxed);
    if (at == 0 || now_us() - at > HOT_US)
        return;
    pthread_mutex_lock(&sa->mu);
    if (!sa->wanted) {
        sa->wanted = true;
        pthread_cond_signal(&sa->cv);
    }
    pthread_mutex_unlock(&sa->mu);
}
