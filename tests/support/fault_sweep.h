/*
 * fault_sweep.h — sweeping one fault over every env call of an operation
 * (a backup, a checkpoint): the operation run with the fault armed at call
 * N, for each N until it makes fewer calls, in each fault kind.
 */
#ifndef LSMFS_FAULT_SWEEP_H
#define LSMFS_FAULT_SWEEP_H

#include "fault_env.h"
#include "testutil.h"

/* One run of the operation under an armed fault. */
typedef struct tu_faulted {
    lsm_status *s;     /* what the operation returned (the caller frees it) */
    bool fired;        /* the armed fault happened, */
    bool cut;          /* as a power cut */
    bool done;         /* the operation reported success */
    enum fault_call c; /* the call the fault hit (when fired) */
    char path[512];    /* and its path */
} tu_faulted;

/* Runs op(ctx) through fe with fault k armed at call `index` of `stream`
 * into *out. Unfaulted, an operation of the main stream must succeed. */
void tu_fault_run(fault_env *fe, int stream, uint64_t index, enum fault_kind k,
                  lsm_status *(*op)(void *ctx), void *ctx, tu_faulted *out);
/* Fails the test if the operation (`what`) reported success although a
 * fault other than a power cut hit one of its files (path containing
 * `where`). */
void tu_fault_not_claimed(const tu_faulted *f, enum fault_kind k, const char *where,
                          const char *what);

/* For each of the n kinds: one(stream, index, kind, ctx) for index 0,
 * stride, 2 * stride, ... (stride 1: every call) of the main stream until
 * it returns false (the operation made fewer calls), then for the first
 * `others` calls of the other stream (the store's background threads).
 * Returns the runs counted. */
int tu_fault_sweep(const enum fault_kind *kinds, size_t n, uint64_t stride, uint64_t others,
                   bool (*one)(int stream, uint64_t index, enum fault_kind k, void *ctx),
                   void *ctx);

#endif
