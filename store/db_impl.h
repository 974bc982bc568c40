/*
 * db_impl.h — the inside of an lsm_db, shared by db.c (open, recovery, reads,
 * properties), db_write.c (the writer queue) and db_iter.c (user iterators).
 *
 * Locking. One mutex, `mu`, guards the fields marked [mu]. Fields marked
 * [leader] belong to whichever writer is at the head of the write queue: only
 * it touches them, with mu released while it does I/O; leadership passes
 * under mu, which orders those accesses. Fields marked [const] are set at
 * open and never change.
 */
#ifndef LSM_DB_IMPL_H
#define LSM_DB_IMPL_H

#include "batch.h"
#include "env.h"
#include "memtable.h"
#include "mutex.h"
#include "version_set.h"
#include "wal.h"

#include <stdatomic.h>

/* A caller waiting in the write queue; lives on the caller's stack. */
struct writer {
    lsm_batch *batch;    /* NULL for a barrier [const] */
    bool sync;           /* [const] */
    bool done;           /* [mu] */
    lsm_status *status;  /* set before done [mu] */
    pthread_cond_t cv;   /* signalled when done or when it becomes the head */
    struct writer *next; /* [mu] */
};

/* What a reader needs, pinned as a unit ("super version"): the memtables and
 * the table version of one moment. Replaced under mu whenever any of them
 * changes; readers take a reference under mu and use it without the lock. */
struct readview {
    _Atomic int refs;
    memtable *mem;
    memtable **imm; /* newest first */
    int nimm;
    version *version;
};

struct lsm_snapshot {
    uint64_t seq;
    struct lsm_snapshot *prev, *next; /* [mu] list of live snapshots */
};

#define FOLLOWER_BUCKETS 17 /* 0..15 followers, and 16 or more */

struct db_stats {
    uint64_t writes;          /* calls to lsm_write (incl. put/delete) */
    uint64_t barriers;        /* writers that carried no batch */
    uint64_t groups;          /* write groups = WAL appends */
    uint64_t syncs;           /* WAL syncs */
    uint64_t wal_bytes;
    uint64_t followers[FOLLOWER_BUCKETS];
    uint64_t queue_wait_us;   /* total time writers waited in the queue */
    uint64_t gather_wait_us;  /* total time leaders waited for a group */
    uint64_t rotations;       /* memtable switches / new logs */
    uint64_t recovered_records;
    uint64_t recovered_dropped_bytes;
    uint64_t recovered_torn_bytes;
};

struct lsm_db {
    char *dir;           /* [const] */
    lsm_options opt;     /* [const] */
    lsm_env *env;        /* [const] */
    lsm_filelock *lock;  /* [const] */
    mutex mu;

    struct writer *head, *tail; /* [mu] the write queue */
    int queue_len;              /* [mu] */
    int expected_group;         /* [mu] writers a sync group tends to have */
    pthread_cond_t gather_cv;   /* a gathering leader waits here [mu] */
    bool gathering;             /* [mu] a leader is waiting on gather_cv */

    memtable *mem;          /* [mu] pointer; contents written by the leader */
    uint64_t mem_log;       /* [mu] the log holding mem's first entry */
    memtable **imm;         /* [mu] immutable memtables, oldest first */
    uint64_t *imm_log;      /* [mu] the log holding each one's first entry */
    int nimm, cap_imm;      /* [mu] */
    struct readview *view;  /* [mu] the current one (holds a reference) */

    wal_writer *wal;        /* [mu] pointer; appends by the leader */
    uint64_t wal_number;    /* [mu] */
    uint64_t wal_synced;    /* [leader] bytes of the current WAL known durable */
    lsm_batch group;        /* [leader] scratch batch for merged groups */

    uint64_t last_seq;      /* [mu] last sequence visible to readers */
    lsm_status *bg_error;   /* [mu] sticky: once set, every write fails */
    struct lsm_snapshot snapshots; /* [mu] list head (dummy) */
    version_set vs;         /* [mu] (see version_set.h) */
    struct db_stats stats;  /* [mu] */
};

/* db.c */
/* Replaces db->view after mem/imm/version changed. REQUIRES: mu held.
 * false if out of memory (the old view stays, still correct to read). */
bool db_install_view(lsm_db *db);
struct readview *db_ref_view(lsm_db *db, uint64_t *seq, const lsm_read_options *ro);
void db_unref_view(lsm_db *db, struct readview *rv);
/* Sets the sticky error if none is set yet (takes ownership of s).
 * REQUIRES: mu held. */
void db_set_bg_error(lsm_db *db, lsm_status *s);

/* db_write.c */
lsm_status *db_write(lsm_db *db, lsm_batch *batch, bool sync);
/* Opens a new WAL numbered `number` and makes its directory entry durable.
 * No lock needed. */
lsm_status *db_new_wal(lsm_db *db, uint64_t number, wal_writer **out);

/* db_iter.c: an iterator over user keys at sequence `seq`, taking
 * ownership of `internal` (a merge of everything in rv) and of the rv ref. */
lsm_iter *db_iter_new(lsm_db *db, struct readview *rv, iter *internal, uint64_t seq);

#endif
