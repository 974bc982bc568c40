/*
 * loop.h — lsmfs's request loop: worker threads take turns reading
 * /dev/fuse, and the one whose turn it is polls the device briefly before
 * it sleeps.
 *
 * Why: a FUSE request's round trip is mostly two wake-ups on the other CPU
 * (the daemon's, then the caller's). A caller that issues its requests one
 * after another — PostMark, tar, a maildir writer — sends the next one a
 * few microseconds after the reply to the last. A reader that is still
 * polling then takes it without being woken: the daemon's half of the
 * round trip goes. Polling stops after spin_us without a request, so an
 * idle mount costs no CPU, and only while it pays (spin.h): with many
 * callers the polls spend more CPU than the wake-ups they save.
 *
 * Leader/followers: one worker (the reader) owns the device; the others
 * wait on a condition variable, so a request wakes no crowd. Having read a
 * request that may wait (an fsync, a write to a stalled store), the reader
 * passes the turn to an idle worker (or starts one, up to max_threads)
 * before processing it, so it never holds up the rest; any other request
 * it processes at once and then reads again, so a caller's stream of short
 * requests costs no wake-up in the daemon at all; should one of those wait
 * after all (a store stall nobody foresaw), a watch thread passes the turn
 * on after 10 ms, so no request holds up the device. The reader polls only
 * while no other worker is processing (one waiting in an fsync included):
 * on two CPUs, a poller beside a busy worker takes the CPU the callers
 * need.
 */
#ifndef FS_LOOP_H
#define FS_LOOP_H

#include "fuse_api.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fuse_in_header; /* <linux/fuse.h> */

typedef struct loop_config {
    unsigned max_threads; /* workers at most (>= 1) */
    unsigned spin_us;     /* 0: the reader sleeps in poll(2) at once */
    /* Whether a request (in: its header, followed by its arguments; len
     * bytes in all) may take long or wait on something other than the CPU
     * and short locks: a sync, a stalled store, a large transfer. The
     * reader passes its turn on before processing such a request; any
     * other it processes before it reads again. */
    bool (*may_wait)(void *ctx, const struct fuse_in_header *in, size_t len);
    void *ctx;
    /* If not NULL: counts the waits for a request that polled the device
     * (spin.h), and those a request ended while it polled. */
    _Atomic uint64_t *polls, *poll_hits;
    /* If not NULL: called once the kernel has taken the INIT reply (what
     * it fixes at INIT, such as the readahead window, may change after). */
    void (*on_init)(void *init_ctx);
    void *init_ctx;
} loop_config;

/* Starts a thread named name (at most 15 characters: ps -L, /proc/PID/
 * task/TID/comm) with every signal blocked, so that the handlers (which end
 * the session) run on the main thread. Returns pthread_create's. */
int loop_start_thread(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);

/* pthread_cond_timedwait for ms from now (CLOCK_REALTIME, cv's clock).
 * REQUIRES: mu held. */
int loop_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, unsigned ms);

/* Serves se until it exits (unmount or a signal). Returns 0, or a negative
 * errno if the loop could not start or the device failed. */
int loop_run(struct fuse_session *se, const loop_config *cfg);

#endif
