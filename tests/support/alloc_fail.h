/*
 * alloc_fail.h — for tests: makes one of the store's allocations fail
 * (through lsm_malloc.h's seam), counting them.
 *
 * The hook counts allocations in two streams: those of the thread that
 * armed it (a test's workload) and those of every other thread (the
 * store's background threads), so each stream is deterministic for a
 * deterministic workload. fault_env.c, the test env, allocates with the
 * C library: its bookkeeping is the test's, not the store's.
 */
#ifndef LSM_ALLOC_FAIL_H
#define LSM_ALLOC_FAIL_H

#include <stdbool.h>
#include <stdint.h>

enum lsm_alloc_stream {
    LSM_ALLOC_MAIN = 0,  /* the thread that called lsm_alloc_hook_arm */
    LSM_ALLOC_OTHER = 1, /* every other thread */
};

/* Counts allocations in both streams from zero from now on, and makes
 * allocation number fail_at (1-based) of `stream` return NULL; every other
 * allocation succeeds. fail_at 0: only count. Not to be armed while another
 * test arms it. */
void lsm_alloc_hook_arm(enum lsm_alloc_stream stream, uint64_t fail_at);
/* As lsm_alloc_hook_arm; with every_later, allocation fail_at and every
 * later one of `stream` fail (memory that never comes back). */
void lsm_alloc_hook_arm_from(enum lsm_alloc_stream stream, uint64_t fail_at, bool every_later);
/* Stops counting and failing (the counts stay readable). */
void lsm_alloc_hook_disarm(void);
/* Allocations of `stream` counted since the last arm. */
uint64_t lsm_alloc_hook_count(enum lsm_alloc_stream stream);
/* Whether the armed allocation has been failed since the last arm. */
bool lsm_alloc_hook_fired(void);

#endif
