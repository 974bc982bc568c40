/*
 * loop.c — the request loop (see loop.h).
 */
#include "loop.h"

#include "spin.h"

#include <linux/fuse.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* How often a sleeping reader looks whether a signal ended the session
 * (the signal handler only sets libfuse's exit flag). */
#define EXIT_CHECK_MS 200
/* A request the reader runs itself that has not ended after this long is
 * taken to wait after all: the watch hands the turn to another worker. */
#define INLINE_STALL_MS 10

struct loop {
    struct fuse_session *se; /* [const] */
    int fd;                  /* [const] the device, O_NONBLOCK */
    loop_config cfg;         /* [const] */
    pthread_mutex_t mu;
    pthread_cond_t turn_cv; /* idle workers wait here for the reader's turn */
    pthread_cond_t done_cv; /* loop_run waits here for the end */
    bool reading;           /* [mu] a worker has the turn */
    bool stop;              /* [mu] the session is over: workers exit */
    int err;                /* [mu] the device error that ended it, or 0 */
    unsigned idle;          /* [mu] workers waiting on turn_cv */
    _Atomic unsigned busy;  /* workers processing a request (the reader
                             * polls only while this is 0) */
    spin_gate spin;         /* [the reader's turn] whether polling pays */
    unsigned nthreads;      /* [mu] workers started (never shrinks) */
    pthread_t *threads;     /* [mu] the first nthreads are started */
    /* The stall watch (watch()): a worker that processes a request it read
     * without passing the turn on counts it here; if the same one is still
     * running after INLINE_STALL_MS with nobody reading, the turn goes on. */
    pthread_cond_t watch_cv;   /* the watch sleeps here */
    pthread_t watcher;         /* [const once started] */
    bool watch_asleep;         /* [mu] waiting untimed: wake it */
    unsigned inline_running;   /* [mu] such requests in progress */
    uint64_t inline_seq;       /* [mu] such requests begun, ever */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count(_Atomic uint64_t *c)
{
    if (c != NULL)
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Whether a polling reader, waiting since start, polls on: while no other
 * worker is busy and spin time is left; else the wait is a miss. */
static bool poll_on(struct loop *l, uint64_t start)
{
    uint64_t t = now_ns();
    if (atomic_load_explicit(&l->busy, memory_order_relaxed) == 0 && t < start + l->spin.spin_ns)
        return true;
    spin_gate_miss(&l->spin, t - start);
    return false;
}

/* Reads one request into buf: if none is there yet, tries the device until
 * spin_us have passed without one (if polling pays: spin.h), then sleeps in
 * poll(2). Returns the request's size, 0 when the session is over, or a
 * negative errno. [the reader] */
static int receive(struct loop *l, struct fuse_buf *buf)
{
    bool waiting = false; /* the device said EAGAIN: a wait began at start */
    bool polling = false;
    uint64_t start = 0;
    for (;;) {
        int r = fuse_session_receive_buf(l->se, buf);
        if (fuse_session_exited(l->se))
            return 0;
        if (r > 0 && polling) {
            spin_gate_hit(&l->spin, now_ns() - start);
            count(l->cfg.poll_hits);
        }
        if (r != -EAGAIN && r != -EINTR)
            return r == -ENODEV ? 0 : r;
        if (!waiting) {
            waiting = true;
            start = now_ns();
            polling = spin_gate_poll(&l->spin);
            if (polling)
                count(l->cfg.polls);
        }
        if (polling && (polling = poll_on(l, start)))
            continue; /* the read(2) that said EAGAIN is pause enough */
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, EXIT_CHECK_MS) < 0 && errno != EINTR)
            return -errno;
    }
}

static void *worker(void *arg);

static const struct fuse_in_header *header(const struct fuse_buf *buf)
{
    assert(buf->size >= sizeof(struct fuse_in_header) && !(buf->flags & FUSE_BUF_IS_FD));
    return buf->mem;
}

/* Serves the request in buf. [any worker, mu not held] */
static void process(struct loop *l, const struct fuse_buf *buf)
{
    uint32_t op = header(buf)->opcode;
    atomic_fetch_add_explicit(&l->busy, 1, memory_order_relaxed);
    fuse_session_process_buf(l->se, buf); /* the reply is in the kernel's hands */
    atomic_fetch_sub_explicit(&l->busy, 1, memory_order_relaxed);
    if (op == FUSE_INIT && l->cfg.on_init != NULL)
        l->cfg.on_init(l->cfg.init_ctx);
}

int loop_start_thread(pthread_t *t, void *(*fn)(void *), void *arg, const char *name)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int err = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err == 0)
        (void)pthread_setname_np(*t, name);
    return err;
}

/* Starts a worker. REQUIRES: mu held. */
static int start_worker(struct loop *l)
{
    assert(l->nthreads < l->cfg.max_threads);
    int err = loop_start_thread(&l->threads[l->nthreads], worker, l, "lsmfs-fuse");
    if (err == 0)
        l->nthreads++;
    return err;
}

/* Hands the reader's turn to an idle worker, or to a new one. If none can
 * start, the turn waits for the next worker to finish its request.
 * REQUIRES: mu held. */
static void pass_turn(struct loop *l)
{
    if (l->idle > 0)
        pthread_cond_signal(&l->turn_cv);
    else if (l->nthreads < l->cfg.max_threads && start_worker(l) != 0 && l->nthreads == 1)
        fuse_log(FUSE_LOG_WARNING, "lsmfs: cannot start a worker thread; serving with one\n");
}

int loop_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, unsigned ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)ms * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    return pthread_cond_timedwait(cv, mu, &until);
}

/* The stall watch: while a request read without handing the turn on runs
 * (inline_running), it looks every INLINE_STALL_MS whether requests are
 * still begun; if none was and nobody reads /dev/fuse, the one running
 * waits on something after all (a store stall lsm_write_may_wait did not
 * foresee), and it passes the turn on so that no request is stuck behind
 * it. Asleep while nothing runs inline. */
static void *watch(void *arg)
{
    struct loop *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        if (l->inline_running == 0) {
            l->watch_asleep = true;
            pthread_cond_wait(&l->watch_cv, &l->mu);
            l->watch_asleep = false;
            continue;
        }
        uint64_t seq = l->inline_seq;
        loop_cond_wait_ms(&l->watch_cv, &l->mu, INLINE_STALL_MS);
        if (!l->stop && l->inline_running > 0 && l->inline_seq == seq && !l->reading)
            pass_turn(l);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Ends the session for every worker. REQUIRES: mu held. */
static void end_session(struct loop *l, int err)
{
    if (!l->stop) {
        l->stop = true;
        l->err = err;
        fuse_session_exit(l->se);
    }
    pthread_cond_broadcast(&l->turn_cv);
    pthread_cond_broadcast(&l->done_cv);
    pthread_cond_broadcast(&l->watch_cv);
}

static void *worker(void *arg)
{
    struct loop *l = arg;
    struct fuse_buf buf = {.mem = NULL};
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        if (l->reading) {
            l->idle++;
            pthread_cond_wait(&l->turn_cv, &l->mu);
            l->idle--;
            continue;
        }
        l->reading = true;
        pthread_mutex_unlock(&l->mu);
        int r = receive(l, &buf);
        /* Asked before taking mu: the answer may take the store's mutex. */
        bool hand_off = r > 0 && l->cfg.may_wait(l->cfg.ctx, header(&buf), buf.size);
        pthread_mutex_lock(&l->mu);
        l->reading = false;
        if (r <= 0) {
            end_session(l, r);
            break;
        }
        if (!l->stop && hand_off)
            pass_turn(l);
        if (!hand_off) {
            l->inline_running++;
            l->inline_seq++;
            if (l->watch_asleep)
                pthread_cond_signal(&l->watch_cv);
        }
        pthread_mutex_unlock(&l->mu);
        process(l, &buf);
        pthread_mutex_lock(&l->mu);
        if (!hand_off)
            l->inline_running--;
    }
    pthread_mutex_unlock(&l->mu);
    free(buf.mem);
    return NULL;
}

int loop_run(struct fuse_session *se, const loop_config *cfg)
{
    assert(cfg->max_threads >= 1 && cfg->may_wait != NULL);
    struct loop l = {.se = se, .fd = fuse_session_fd(se), .cfg = *cfg};
    spin_gate_init(&l.spin, (uint64_t)cfg->spin_us * 1000);
    int flags = fcntl(l.fd, F_GETFL);
    if (flags < 0 || fcntl(l.fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -errno;
    l.threads = calloc(cfg->max_threads, sizeof(*l.threads));
    if (l.threads == NULL)
        return -ENOMEM;
    pthread_mutex_init(&l.mu, NULL);
    pthread_cond_init(&l.turn_cv, NULL);
    pthread_cond_init(&l.done_cv, NULL);
    pthread_cond_init(&l.watch_cv, NULL);
    pthread_mutex_lock(&l.mu);
    int err = loop_start_thread(&l.watcher, watch, &l, "lsmfs-watch");
    bool watching = err == 0;
    if (err == 0)
        err = start_worker(&l);
    if (err != 0)
        l.err = -err;
    while (err == 0 && !l.stop)
        pthread_cond_wait(&l.done_cv, &l.mu);
    unsigned n = l.nthreads;
    pthread_mutex_unlock(&l.mu);
    if (err != 0) { /* the watch ends with the session */
        pthread_mutex_lock(&l.mu);
        end_session(&l, l.err);
        pthread_mutex_unlock(&l.mu);
    }
    for (unsigned i = 0; i < n; i++) /* no worker starts once stop is set */
        pthread_join(l.threads[i], NULL);
    if (watching)
        pthread_join(l.watcher, NULL);
    pthread_cond_destroy(&l.watch_cv);
    pthread_cond_destroy(&l.done_cv);
    pthread_cond_destroy(&l.turn_cv);
    pthread_mutex_destroy(&l.mu);
    free(l.threads);
    fcntl(l.fd, F_SETFL, flags);
    return l.err;
}
