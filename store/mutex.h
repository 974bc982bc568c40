/*
 * mutex.h — a pthread mutex that knows its owner, so functions documented
 * "REQUIRES: mu held" can assert it (SQLite-style), and condition waits on it.
 */
#ifndef LSM_MUTEX_H
#define LSM_MUTEX_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct mutex {
    pthread_mutex_t m;
    _Atomic uintptr_t owner; /* thread_id() of the holder, 0 when free */
} mutex;

/* A cheap per-thread identity (pthread_t is an address on Linux/glibc). */
static inline uintptr_t thread_id(void)
{
    return (uintptr_t)pthread_self();
}

static inline void mutex_init(mutex *mu)
{
    pthread_mutex_init(&mu->m, NULL);
    atomic_init(&mu->owner, 0);
}
static inline void mutex_destroy(mutex *mu)
{
    pthread_mutex_destroy(&mu->m);
}
static inline void mutex_lock(mutex *mu)
{
    pthread_mutex_lock(&mu->m);
    atomic_store_explicit(&mu->owner, thread_id(), memory_order_relaxed);
}
static inline void mutex_unlock(mutex *mu)
{
    assert(atomic_load_explicit(&mu->owner, memory_order_relaxed) == thread_id());
    atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&mu->m);
}
/* True if the calling thread holds mu (for assertions). */
static inline bool mutex_held(mutex *mu)
{
    return atomic_load_explicit(&mu->owner, memory_order_relaxed) == thread_id();
}
static inline void cond_wait(pthread_cond_t *cv, mutex *mu)
{
    assert(mutex_held(mu));
    atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
    pthread_cond_wait(cv, &mu->m);
    atomic_store_explicit(&mu->owner, thread_id(), memory_order_relaxed);
}
/* The CLOCK_MONOTONIC time us microseconds from now. */
static inline struct timespec monotonic_deadline(uint64_t us)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(us / 1000000);
    t.tv_nsec += (long)(us % 1000000) * 1000;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Waits at most until the CLOCK_MONOTONIC time `deadline`; the cv must have
 * been initialised with cond_init_monotonic. */
static inline int cond_timedwait(pthread_cond_t *cv, mutex *mu, const struct timespec *deadline)
{
    assert(mutex_held(mu));
    atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
    int r = pthread_cond_timedwait(cv, &mu->m, deadline);
    atomic_store_explicit(&mu->owner, thread_id(), memory_order_relaxed);
    return r;
}
static inline int cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int r = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return r;
}

#endif
