/*
 * writer.h — a writer: a caller of the write path, on its own stack, and
 * how it learns its fate. The queue (db_write.c) and the sync stage
 * (db_sync.c) both hand writers on through these, and neither calls the
 * other back to do it. The fields' locks refer to the db's mu (db_impl.h).
 */
#ifndef LSM_WRITER_H
#define LSM_WRITER_H

#include "batch.h"
#include "lsm.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How a queued writer learns its fate (writer.state). */
enum writer_state {
    WRITER_WAITING = 0,
    WRITER_LEADER = 1, /* it is now the head: it must lead a group */
    WRITER_DONE = 2,   /* its write is done: status and seq are set */
    WRITER_SYNCER = 3, /* waiting for durability, it must now run the sync */
};

/* A caller waiting in the write queue; lives on the caller's stack. A
 * follower sleeps on its own futex, not on mu: a leader wakes its whole
 * group at once and none of them needs the mutex to return. */
struct writer {
    lsm_batch *batch;    /* NULL for a barrier [const] */
    bool sync;           /* [const] */
    bool solo;           /* never joins a group: wants the head to itself [const] */
    bool defer;          /* its batch may stay out of the WAL (defer_log) [const] */
    bool frees;          /* it frees space: may use the reserve (frees_space) [const] */
    uint64_t seq;        /* last sequence of its group; written before DONE */
    lsm_status *status;  /* written before DONE */
    _Atomic int state;   /* enum writer_state; release-stored by the waker */
    struct writer *next; /* [mu] in the queue; then [leader] its group's links */
    /* In the sync stage, a group waiting for durability is represented by
     * its leader: */
    struct writer *last;      /* [mu] the group's last member */
    uint64_t target;          /* [mu] durable_seq the group waits for */
    int count;                /* [mu] writers in the group */
    struct writer *sync_next; /* [mu] next group waiting for a sync */
};

/* Wake-ups a leader owes, issued after it lets go of mu so the woken
 * writers do not find the mutex held for a string of system calls. */
#define WAKE_BATCH 64
struct wakeups {
    _Atomic int *addr[WAKE_BATCH];
    int n;
};
/* Hand-off between writers (see db_write.c): publishes w's state and wakes
 * it now or, with wk, at db_wakeups_flush (no lock needed for that). */
void db_writer_wake(struct writer *w, enum writer_state st, struct wakeups *wk);
void db_wakeups_flush(struct wakeups *wk);
/* Waits, without mu, until w is no longer WAITING; returns its state. */
enum writer_state db_writer_wait(struct writer *w);
/* Finishes the followers (leader, last] of a group with s and seq.
 * REQUIRES: mu held. */
void db_finish_group(struct writer *leader, struct writer *last, lsm_status *s, uint64_t seq,
                     struct wakeups *wk);

#endif
