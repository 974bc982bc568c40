/*
 * ishrink.c — the inode budget's thread (ishrink.h).
 */
#include "ishrink.h"

#include "lsm_malloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Victims asked for per round, and entries the hand passes at most. */
#define ROUND_VICTIMS 256
#define ROUND_SCAN 65536
/* How often the thread looks at the cache's size. */
#define PERIOD_MS 50

struct ishrink {
    icache *c;               /* [const] */
    struct fuse_session *se; /* [const] */
    size_t max;              /* [const] */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;                            /* [mu] */
    icache_victim victims[ROUND_VICTIMS]; /* [the thread] */
};

/* Waits PERIOD_MS or until stopped; returns false once stopped. */
static bool wait_period(ishrink *k)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += PERIOD_MS * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&k->mu);
    while (!k->stop && pthread_cond_timedwait(&k->cv, &k->mu, &t) != ETIMEDOUT)
        ;
    bool go_on = !k->stop;
    pthread_mutex_unlock(&k->mu);
    return go_on;
}

/* One pass of the clock hand while over the budget: asks the kernel to
 * drop what it found. The FORGETs come later, so the next period sees it. */
static void shrink(ishrink *k)
{
    size_t count = icache_count(k->c);
    if (count <= k->max)
        return;
    size_t want = count - k->max + k->max / 8;
    for (size_t asked = 0; asked < want;) {
        size_t n = want - asked < ROUND_VICTIMS ? want - asked : ROUND_VICTIMS;
        size_t got = icache_victims(k->c, k->victims, n, ROUND_SCAN);
        if (got == 0)
            return;
        for (size_t i = 0; i < got; i++)
            fuse_lowlevel_notify_inval_entry(k->se, k->victims[i].parent, k->victims[i].name,
                                             strlen(k->victims[i].name));
        asked += got;
    }
}

static void *shrink_main(void *arg)
{
    ishrink *k = arg;
    (void)pthread_setname_np(pthread_self(), "lsmfs-ishrink");
    while (wait_period(k))
        shrink(k);
    return NULL;
}

ishrink *ishrink_start(icache *c, struct fuse_session *se, size_t max, int *err)
{
    *err = 0;
    if (max == 0)
        return NULL;
    ishrink *k = lsm_calloc(1, sizeof *k);
    if (k == NULL) {
        *err = ENOMEM;
        return NULL;
    }
    k->c = c;
    k->se = se;
    k->max = max;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if ((*err = pthread_create(&k->thread, NULL, shrink_main, k)) != 0) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        free(k);
        return NULL;
    }
    return k;
}

void ishrink_stop(ishrink *k)
{
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thread, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
}
