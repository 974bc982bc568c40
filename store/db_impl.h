/*
 * db_impl.h — the inside of an lsm_db, shared by the store's db_*.c files
 * (struct lsm_db lists which part each owns).
 *
 * Locking. One mutex, `mu`, guards the fields marked [mu]. Fields marked
 * [leader] belong to whichever writer is at the head of the write queue: only
 * it touches them, with mu released while it does I/O; leadership passes
 * under mu, which orders those accesses. Fields marked [const] are set at
 * open and never change.
 *
 * The write side calls one way (tools/module_graph.sh store): db_fsync.c →
 * db_defer_log.c (a sync's late log) → db_write.c (queue, groups) →
 * db_rotate.c (room, memtable/WAL switch) → db_sync.c (sync stage) →
 * writer.c, db_defer.c (the deferred list), db_view.c, db_error.c. The
 * flush thread's idle switch (db_idle.c) and checkpoints enter at the queue.
 */
#ifndef LSM_DB_IMPL_H
#define LSM_DB_IMPL_H

#include "batch.h"
#include "cache.h"
#include "compaction.h"
#include "table_cache.h"
#include "env.h"
#include "memtable.h"
#include "mutex.h"
#include "pacing.h"
#include "writer.h"
#include "version.h"
#include "wal.h"

#include <stdatomic.h>

/* A batch written with defer_log: in the memtable, in no log yet (only its
 * WAL_DEFERRED marker is). It is logged late, whole, before the next logged
 * batch or by a sync (db_log_deferred), unless its memtable reaches a table
 * first.
 *
 * Memtable identity. A deferred batch belongs to the memtable it was
 * inserted into, named by that memtable's id (db->mem_id / db->imm_id):
 * ids are unique for the life of the lsm_db, never reused, and never a log
 * number — several memtables may start in the same log (recovery spills a
 * long log into several), so a log number does not say which memtable
 * holds a batch. Only the flush of memtable `id` may forget the batches
 * of `id` (db_drop_deferred, from db_compact.c's flush_one), or, for those
 * it could not see (out for a late logging that then failed), the return
 * of that list (db_end_late_log); db_view.c's
 * db_push_imm hands out the ids, db_write.c's write_group tags a batch
 * with mem_id and db_idle.c's retire_old_deferred looks for mem_id. */
struct deferred {
    struct deferred *next;
    uint64_t mem;    /* the id of its memtable (mem_id when written) */
    uint64_t at_us;  /* when it was written (env->now_micros) */
    memtable *owner; /* a reference to that memtable, which keeps the bytes */
    const char *data; /* the batch, sequence set (batch.h: its header says
                      * its first sequence and its count), taken from the
                      * writer's lsm_batch by its memtable (batch_give), not
                      * copied; valid while owner is */
    size_t len;
    buf spare; /* what the writer's batch gets instead (until deferred_take) */
};

/* What a reader needs, pinned as a unit ("super version"): the memtables and
 * the table version of one moment. Replaced under mu whenever any of them
 * changes; readers take a reference under mu and use it without the lock. */
struct readview {
    _Atomic int refs;
    memtable *mem;
    memtable **imm; /* newest first (in the same allocation) */
    int nimm, cap_imm;
    version *version;
};

struct lsm_snapshot {
    uint64_t seq;
    struct lsm_snapshot *prev, *next; /* [mu] list of live snapshots */
};

#define FOLLOWER_BUCKETS 17 /* 0..15 followers, and 16 or more */

/* WAL syncs that may run at once (db_sync.c, the sync stage): SYNC_MAX
 * while syncs are fast (a local disk: two overlapping fdatasyncs finish
 * about twice the syncs of one), SYNC_MAX_SLOW once a sync takes
 * SYNC_SLOW_US or more on average (RADOS: the OSD applies one object's
 * writes in order, so a second sync in flight only splits the group the
 * next one would share). db->sync_max holds the current one. */
#define SYNC_MAX 2
#define SYNC_MAX_SLOW 1
#define SYNC_SLOW_US 1000
_Static_assert(SYNC_MAX_SLOW <= SYNC_MAX, "sync_running_upto has SYNC_MAX slots");

/* Level-0 load at which compaction starts; writers are slowed from
 * L0_SLOWDOWN and wait at L0_STOP (pacing.h). */
#define L0_COMPACTION_TRIGGER 4

struct level_stats {
    uint64_t compactions;
    uint64_t read_bytes;    /* input bytes of compactions into this level */
    uint64_t written_bytes; /* bytes written into this level */
    uint64_t micros;
};

struct db_stats {
    uint64_t writes;   /* calls to lsm_write (incl. put/delete) */
    uint64_t barriers; /* writers that carried no batch */
    uint64_t groups;   /* write groups = WAL appends */
    uint64_t syncs;    /* WAL syncs */
    uint64_t overlapped_syncs; /* WAL syncs started while another ran */
    uint64_t most_syncs_running; /* the most WAL syncs that ran at once */
    uint64_t wal_bytes;
    uint64_t followers[FOLLOWER_BUCKETS];
    _Atomic uint64_t queue_wait_us; /* total time writers waited (updated without mu) */
    uint64_t sync_us;               /* total time WAL syncs took */
    uint64_t gather_wait_us;        /* total time leaders waited for a group */
    uint64_t rotations;             /* memtable switches / new logs */
    uint64_t recovered_records;
    uint64_t recovered_dropped_bytes;
    uint64_t recovered_torn_bytes;
    uint64_t recovered_skipped;   /* records after a deferred batch that was lost */
    uint64_t recovered_lost;      /* deferred batches lost (never logged nor flushed) */
    bool recovered_salvaged;      /* salvage_log kept a prefix before damage */
    uint64_t deferred;            /* batches written with defer_log */
    uint64_t deferred_bytes;      /* their bytes (kept out of the WAL) */
    uint64_t late_logged_bytes;   /* of which logged late after all */
    uint64_t sync_flushes;        /* syncs that flushed memtables instead */
    uint64_t flushes;
    uint64_t flush_bytes; /* table bytes written by flushes */
    uint64_t user_bytes;  /* key + value bytes written by users */
    uint64_t slowdown_us; /* time writers were delayed to pace compaction */
    uint64_t stop_us;     /* time writers waited for room */
    uint64_t stops;
    uint64_t tables_dropped; /* by lsm_delete_files_in_range */
    uint64_t side_by_side;   /* compactions begun while another lane's ran */
    struct level_stats levels[NUM_LEVELS];
};

/* The parts of an lsm_db, each in a block headed by the file that owns it
 * (writes its fields); another part reads them only through the owner's
 * functions or, where noted, under the same lock. */
struct lsm_db {
    /* ---- the handle [const] (db.c) */
    char *dir;          /* [const] */
    lsm_options opt;    /* [const] */
    lsm_env *env;       /* [const] */
    lsm_filelock *lock; /* [const] */
    mutex mu;

    /* ---- the write queue and its groups (db_write.c) */
    struct writer *head, *tail; /* [mu] the write queue */
    int queue_len;              /* [mu] */
    lsm_batch group;            /* [leader] scratch batch for merged groups */
    uint64_t last_seq;          /* [mu] last sequence visible to readers */

    /* ---- the sync stage (db_sync.c): a group that needs durability leaves
     * the queue once it is in the WAL and the memtable, and waits here; a
     * waiter runs the WAL sync for every group written so far, while the
     * queue goes on appending behind it. Up to sync_max syncs overlap: a
     * group that a running sync does not cover starts the next at once. */
    int syncs_running;        /* [mu] WAL syncs in flight (or gathering) */
    int sync_max;             /* [mu] syncs that may overlap (learn_sync_time) */
    bool wal_held;            /* [mu] wal's flushes keep their bytes for a
                               * coming sync (db_hold_wal) */
    bool hold_watched;        /* [mu] the flush thread is in its idle loop,
                               * whose looks end a hold at its deadline
                               * (db_hold_watch) */
    uint64_t sync_end_us;     /* [mu] when the last WAL sync ended */
    uint64_t sync_us_avg;     /* [mu] moving average of a WAL sync's time */
    uint64_t sync_running_upto[SYNC_MAX]; /* [mu] what each running sync covers
                                         * (last_seq at its start; 0: none) */
    struct writer *syncer;    /* [mu] a waiting group told to run a sync, if any */
    pthread_cond_t sync_cv;   /* [mu] broadcast when a sync ends */
    struct writer *sync_head, *sync_tail; /* [mu] groups waiting for a sync */
    int sync_waiters;         /* [mu] writers in those groups */
    bool sync_gathering;      /* [mu] the syncer is still gathering waiters */
    int expected_group;       /* [mu] writers a sync tends to cover */
    pthread_cond_t gather_cv; /* [mu] gathering leaders and syncers wait here */
    int gatherers;            /* [mu] how many wait on gather_cv */
    uint64_t durable_seq;     /* [mu] every write with seq <= this is durable
                               * (raised by syncs, and by rotation's) */

    /* ---- memtables and the read view (db_view.c; rotation pushes) */
    memtable *mem;         /* [mu] pointer; contents written by the leader */
    uint64_t mem_log;      /* [mu] the log holding mem's first entry */
    uint64_t mem_id;       /* [mu] mem's identity (see struct deferred) */
    uint64_t next_mem_id;  /* [mu] the id the next memtable gets */
    memtable **imm;        /* [mu] immutable memtables, oldest first */
    uint64_t *imm_log;     /* [mu] the log holding each one's first entry */
    uint64_t *imm_id;      /* [mu] each one's identity */
    int nimm, cap_imm;     /* [mu] */
    struct readview *view; /* [mu] the current one (holds a reference) */

    /* ---- the WAL and its rotation (db_rotate.c; the queue's leader
     * appends and sets wal_written, the sync stage reads them) */
    wal_writer *wal;     /* [mu] pointer; appends by the leader */
    uint64_t wal_number; /* [mu] */
    uint64_t wal_written; /* [mu] bytes of the current WAL holding published groups */
    uint64_t wal_synced;  /* [mu] bytes of the current WAL known durable */
    bool wal_switching;   /* [mu] a memtable switch is leaving the WAL:
                           * no sync may start on it */
    /* An append to the current WAL found the disk full (db_write.c sets
     * it, db_rotate.c's db_cut_broken_wal cuts): the file may end in a torn record past wal_written
     * and its writer fails from then on. No sync runs on it; it is cut back
     * to wal_written and synced (wal_cut), then left for a new log by the
     * next memtable switch. Not sticky: nothing acknowledged was lost. */
    bool wal_broken; /* [mu] */
    bool wal_cut;    /* [mu] the broken WAL is cut back and durable */

    /* ---- the deferred log (db_defer.c): deferred batches in no log and
     * no table, oldest first. While the queue's head (a group's leader, or
     * db_defer_log.c's solo writer for a sync) logs them late (detached
     * from the list, mu released), deferred_floor is the first one's
     * sequence, else 0: no sync may claim them durable before they are in
     * the log. */
    struct deferred *deferred_head, *deferred_tail; /* [mu] */
    uint64_t deferred_floor;                        /* [mu] */

    /* ---- errors and a full disk (db_error.c; db_compact.c's retries) */
    lsm_status *bg_error;          /* [mu] sticky: once set, every write fails */
    lsm_status *nospace;           /* [mu] the disk was full (or memory short) for a flush or compaction;
                                    * not sticky: retried, cleared by the next success */
    uint64_t nospace_events;       /* [mu] background attempts retried later, the disk full
                                    * or memory short (retry_later_if_full): one count for
                                    * both, as the writers waiting for room watch it for
                                    * any retry (each gives them nospace) */
    uint64_t oom_retries;          /* [mu] of those, the ones out of memory
                                    * ("lsm.oom-retries"; the rest "lsm.full-disk-events") */
    uint64_t flush_asked;          /* [mu] callers that began waiting for a flush: a
                                    * full-disk retry wait of the flush thread ends */
    /* ---- compactions held off after one failed for space (db_holdoff.c) */
    uint64_t holdoff_until_us; /* [mu] 0: none held off */
    uint64_t holdoff_us;       /* [mu] the last holdoff (doubles per failure in a row) */
    uint64_t holdoff_avail;    /* [mu] the disk's free bytes after the failure
                                * (UINT64_MAX: unknown) */
    uint64_t holdoff_bytes;    /* [mu] the least input bytes of one that failed in this
                                * holdoff: smaller compactions may run */
    /* ---- the space reserve (db_reserve.c) */
    uint64_t reserve_max;      /* [const after open] the most it may be; 0: none */
    uint64_t reserve_bytes;    /* [mu] its size (db_reserve_size when last made) */
    size_t mem_cap;            /* [mu] the active memtable is full at this many bytes:
                                * write_buffer_size, less near a full disk (twice it
                                * in a bulk stream: db_rotate.c memtable_full_at) */
    uint64_t bulk_run;         /* [mu] bytes of the memtables flushed in a row that were
                                * mostly big writes (memtable_mostly_kept) */
    size_t mem_cap_checked;    /* [mu] the active memtable's bytes when mem_cap was set */
    bool reserve_held;         /* [mu] the RESERVE file is there, full size */
    uint64_t reserve_tried_us; /* [mu] when making it was last tried */
    uint64_t reserve_releases; /* [mu] times it was given up for lack of space */
    bool reserve_making;       /* [mu] db_reserve_make is writing the file (mu released) */
    bool reserve_cancelled;    /* [mu] a release came while it was: it is not held */
    bool frees_waiting;        /* [mu] a write that frees space came since the reserve
                                * was last made: background work may use the reserve */
    bool frees_holding;        /* [mu] a freeing leader waits for room on a full disk:
                                * no compaction starts (db_reserve_frees_wait) */

    /* ---- versions, snapshots, counters (db.c, version_set.c, db_props.c) */
    struct lsm_snapshot snapshots; /* [mu] list head (dummy) */
    version_set vs;                /* [mu] (see version_set.h) */
    struct db_stats stats;         /* [mu] */

    /* ---- background work (db_compact.c): one thread flushes immutable
     * memtables, one per compaction lane compacts (compaction.h), so a
     * flush never waits behind a long compaction, nor level 0 behind a
     * deep one. */
    cache *block_cache;  /* [const] thread-safe */
    table_cache *tables; /* [const] thread-safe */
    pthread_t flush_thread;
    struct compact_lane {
        lsm_db *db;       /* [const after open] */
        int lane;         /* [const after open] */
        pthread_t thread; /* [const after open] */
    } lanes[COMPACTION_LANES];
    bool threads_started;      /* [const after open] */
    atomic_bool shutting_down; /* written under mu; merge_inputs polls it unlocked */
    pthread_cond_t work_cv;    /* background threads wait for work [mu] */
    pthread_cond_t room_cv;    /* writers wait for a flush/compaction [mu] */
    int compacting;            /* [mu] compactions running (background or manual) */
    bool compact_manual;       /* [mu] lsm_compact_range runs or waits for the lanes to
                                * end theirs: no compaction is picked */
    struct compaction *running[COMPACTION_LANES]; /* [mu] per lane, the one whose inputs
                                * are in use (NULL: none): lsm_delete_files_in_range
                                * leaves them; no two touch one level (compaction.h) */
    bool dropping;             /* [mu] lsm_delete_files_in_range's edit is being written:
                                * no compaction is picked (db_drop_range.c) */
    bool flushing;             /* [mu] the flush thread is flushing (or sweeping) */
    bool sweeping;             /* [mu] db_delete_obsolete_files runs (mu released
                                * while it removes) */
    uint64_t sweeps_asked;     /* [mu] calls of db_delete_obsolete_files so far */
    uint64_t sweeps_done;      /* [mu] every call up to this one is served: a
                                * sweep listed the directory after it */
    uint64_t *pending;         /* [mu] numbers of tables being written */
    int npending, cap_pending;
    uint64_t bg_progress;      /* [mu] flushes, compactions and table drops that succeeded */
    bool idle_watch;           /* [mu] the flush thread times an idle memtable that holds
                                * deletions (else a write adding some wakes it) */
    uint64_t idle_seq;         /* [mu] last_seq at the flush thread's last idle look */
    uint64_t idle_since_us;    /* [mu] when last_seq was last seen to change there */

    /* ---- lsm_checkpoint (db_checkpoint.c), one at a time: while
     * ckpt_waiting, the flush of the memtable with id ckpt_mem_id pins the
     * version it installs as ckpt_version (a reference), the checkpoint's
     * cut. */
    bool checkpointing;    /* [mu] a checkpoint runs */
    bool ckpt_waiting;     /* [mu] */
    uint64_t ckpt_mem_id;  /* [mu] */
    version *ckpt_version; /* [mu] */
    /* ---- lsm_backup (db_backup.c) */
    unsigned backups_running; /* [mu] backups of this store under way */

    /* ---- pacing (pacing.h: the pacer is fed by db_compact.c, the clock
     * charged by db_write.c, read by db_rotate.c) */
    pacer pacer;     /* [mu] the rate compaction sustains */
    pace_clock pace; /* [mu] the pacing clock writers are held to */
};

/* db_view.c: the memtables and the read view over them. */
/* A new memtable for db's write buffer (pooled blocks when it is large). */
memtable *db_memtable_new(const lsm_db *db);
/* Bytes of all memtables. REQUIRES: mu held. */
size_t db_memtable_bytes(lsm_db *db);
/* Makes mem immutable (logged from mem_log) and fresh the active memtable,
 * whose first entry will be in log fresh_log; fresh gets a new id (see
 * struct deferred). false if out of memory (nothing changed). REQUIRES: mu
 * held. */
bool db_push_imm(lsm_db *db, memtable *fresh, uint64_t fresh_log);
/* A view with room for cap_imm immutable memtables, to fill in with
 * db_view_install; NULL if out of memory. Free an unused one with free(). */
struct readview *db_view_alloc(int cap_imm);
/* Fills rv (from db_view_alloc, room for db->nimm) from mem/imm/version
 * and makes it db->view. REQUIRES: mu held. */
void db_view_install(lsm_db *db, struct readview *rv);
/* Replaces db->view after imm or version changed; false if out of memory.
 * The old view then stays: correct to read only while every memtable
 * written since is in it, so a change that adds one (a memtable switch)
 * allocates its view first (db_view_alloc) and never fails here; a flush
 * or a new version leaves the old view showing the same data. REQUIRES: mu
 * held. */
bool db_install_view(lsm_db *db);
struct readview *db_ref_view(lsm_db *db, uint64_t *seq, const lsm_read_options *ro);
void db_unref_view(lsm_db *db, struct readview *rv);

/* db_error.c: why a change is refused. */
/* LSM_READ_ONLY if the store was opened read_only, else NULL: every entry
 * point that changes the store calls it first. */
lsm_status *db_refuse_read_only(const lsm_db *db);
/* Sets the sticky error if none is set yet (takes ownership of s).
 * REQUIRES: mu held. */
void db_set_bg_error(lsm_db *db, lsm_status *s);

/* db_write.c: the write queue and its groups. */
/* Puts w in the queue and waits until it is the head (returns true, mu
 * held: the caller leads) or a leader has done its write (returns false,
 * mu not held). REQUIRES: mu held. */
bool db_queue_wait(lsm_db *db, struct writer *w);
/* Removes the head writer w without writing anything and hands the queue
 * on (waking the next head now or, with wk, at db_wakeups_flush).
 * REQUIRES: mu held; w is the head. */
void db_queue_pop_head(lsm_db *db, struct writer *w, struct wakeups *wk);
/* Whether no writer is queued (a solo writer would lead at once).
 * REQUIRES: mu held. */
bool db_queue_empty(lsm_db *db);
/* *seq (may be NULL) gets the last sequence of the write's group. */
lsm_status *db_write(lsm_db *db, lsm_batch *batch, const lsm_write_options *wo, uint64_t *seq);

/* db_defer.c: deferred logging (see there). */
/* A deferred batch for the memtable with id `mem`, still empty: made before
 * the write. NULL if out of memory. No lock needed. */
struct deferred *deferred_new(uint64_t mem);
/* mem (whose id d was made for) takes b's bytes (batch_give; b is left
 * empty: lsm.h, defer_log) and d refers to them, holding a reference to
 * mem. LSM_NO_MEMORY, LSM_CORRUPTION (batch_give): nothing changed.
 * [leader], before the WAL append. */
lsm_status *deferred_take(struct deferred *d, lsm_batch *b, memtable *mem);
/* The WAL_DEFERRED marker of d's batch, what the log gets instead. */
void deferred_marker(const struct deferred *d, char out[WAL_MARKER_LEN]);
/* Inserts d's batch into its memtable, pointing at its big values
 * (batch_insert_kept). On failure b, from which d took them, gets them
 * back (batch_take_back) [leader]. */
lsm_status *deferred_insert(struct deferred *d, lsm_batch *b);
/* The WAL append failed: b gets its bytes back, d is as deferred_new made
 * it. [leader] */
void deferred_give_back(struct deferred *d, lsm_batch *b);
/* Frees d (not linked in a list; NULL: nothing), dropping its memtable
 * reference: the memtable, not d, frees the bytes. */
void deferred_free(struct deferred *d);
/* Adds d, the newest deferred batch (timed from now, counted in the
 * stats). REQUIRES: mu held. */
void db_keep_deferred(lsm_db *db, struct deferred *d);
/* Takes every deferred batch, for the caller to log late (sets
 * deferred_floor). REQUIRES: mu held; no late logging in progress. */
struct deferred *db_take_deferred(lsm_db *db);
/* Appends the list's batches to the WAL; *bytes gets how many. [leader] */
lsm_status *deferred_log_late(wal_writer *wal, const struct deferred *list, uint64_t *bytes);
/* After deferred_log_late of `list` (may be NULL) ended with s, `bytes`
 * appended: clears deferred_floor; on a full disk (LSM_NO_SPACE: the log is
 * cut back) puts the list back in front, to be logged again in the next
 * log (but for batches whose memtable was flushed meanwhile: forgotten),
 * else frees it and counts the bytes as logged late. REQUIRES: mu held. */
void db_end_late_log(lsm_db *db, struct deferred *list, const lsm_status *s, uint64_t bytes);
/* Forgets the deferred batches of the memtable with id `mem`, now in a
 * table (see struct deferred). REQUIRES: mu held. */
void db_drop_deferred(lsm_db *db, uint64_t mem);
/* Frees every deferred batch (at close). */
void db_free_deferred(lsm_db *db);
/* The highest sequence a sync starting now may make durable: last_seq, or
 * just below the first deferred batch not yet in the log. REQUIRES: mu. */
uint64_t db_sync_ceiling(lsm_db *db);
/* Whether a deferred batch with sequence <= seq is not in the log yet.
 * REQUIRES: mu held. */
bool db_deferred_upto(lsm_db *db, uint64_t seq);
/* Bytes of the deferred batches with sequences <= seq waiting to be logged
 * (not those being logged late right now). REQUIRES: mu held. */
uint64_t db_deferred_bytes_upto(lsm_db *db, uint64_t seq);

/* db_defer_log.c: a sync's late log of the deferred batches. */
/* Logs every deferred batch late, as a solo writer at the head of the write
 * queue (leaving a log a full disk broke first); the caller's sync then
 * covers them. A full disk puts them back (LSM_NO_SPACE). REQUIRES: mu
 * held (released while waiting and appending). */
lsm_status *db_log_deferred(lsm_db *db);

/* db_sync.c: the sync stage (its states and invariants are listed there). */
/* Waits until every write with sequence <= target (<= last_seq; no
 * deferred batch <= target outside the log) is durable, sharing WAL syncs
 * with concurrent writers, as a barrier of its own that never enters the
 * write queue; the wake-ups it owes go to wk. Fails once the store has a
 * sticky error. REQUIRES: mu held (released while waiting). */
lsm_status *db_sync_wait(lsm_db *db, uint64_t target, struct wakeups *wk);
/* Wakes gatherers once the crowd they wait for is there. REQUIRES: mu. */
void db_gather_signal(lsm_db *db);
/* Waits (at most group_commit_delay_us) for the usual crowd of sync
 * writers; at_head: the caller leads the queue. REQUIRES: mu held. */
void db_gather(lsm_db *db, bool at_head);
/* Waits until every write up to target is durable for the group [g, last]
 * of n writers (g off the queue), then finishes g's followers; returns g's
 * status. REQUIRES: mu held (released while waiting). */
lsm_status *db_wait_durable(lsm_db *db, struct writer *g, struct writer *last, uint64_t target,
                            int n, struct wakeups *wk);
/* Finishes the waiting groups whose target is durable, or with error s
 * those no running sync covers. REQUIRES: mu held. */
void db_finish_synced(lsm_db *db, lsm_status *s, struct writer *self, struct wakeups *wk);
/* Tells the first waiting group no running sync covers to run the next
 * sync, if one may start. REQUIRES: mu held. */
/* Slow syncs (a RADOS round trip): while a sync waits, runs or ended less
 * than a few syncs' time ago, the WAL's flushes keep their bytes for the
 * next sync (env.h's hold_for_sync), so a sync's waiters share one round
 * trip instead of queueing behind a send of their own at the OSD; past that
 * the hold ends and a write goes out at once. Who ends a hold: the sync's
 * own end while a sync is coming, else the flush thread's idle look at the
 * deadline, so a hold past the syncs needs that look (hold_watched).
 * Returns the µs after which to call it again to end the hold (0: not
 * held). Lock order: db->mu, then the WAL file's own lock. REQUIRES: mu
 * held. */
uint64_t db_hold_wal(lsm_db *db);
/* The flush thread enters (true) or leaves (false) its idle loop: leaving,
 * it ends a hold no coming sync ends (it cannot look at the deadline while
 * it flushes). REQUIRES: mu held. */
void db_hold_watch(lsm_db *db, bool watched);
void db_hand_off_sync(lsm_db *db, struct wakeups *wk);

/* db_rotate.c: memtable and WAL rotation (see there). Every function but
 * db_new_wal and db_switch_must_wait REQUIRES mu held (released around
 * file I/O) and the caller leading the write queue (db->head != NULL,
 * asserted). */
/* Opens a new WAL numbered `number` and makes its directory entry durable;
 * `tight`: made for a freeing write on a full disk (frees_holding), it
 * reserves its room in small steps, so it takes little of what freeing
 * needs. No lock needed. */
lsm_status *db_new_wal(lsm_db *db, uint64_t number, bool tight, wal_writer **out);
/* Decides whether a write of `adding` bytes may go ahead, delays it to pace
 * compaction, or waits for room; switches the memtable when full (at its
 * cap, or with no room left under the cap for `adding`), or always (force)
 * if it holds data. A writer that frees space (frees) waits once more on a
 * full disk (see there). */
lsm_status *db_make_room_for_write(lsm_db *db, bool force, bool frees, size_t adding);
/* Bytes the active memtable may still take while the disk is low (its cap
 * lowered, db_memtable_cap_update); SIZE_MAX otherwise. REQUIRES: mu held. */
size_t db_memtable_room(lsm_db *db);
/* Whether the store is in a bulk stream: a big file written for a long
 * while, BULK_STREAM_BUFFERS write buffers of big writes flushed in a row
 * (bulk_run). Then, and only then, memtables of big writes are full at
 * twice the write buffer (db_rotate.c) and their flushes write around the
 * page cache (direct_table_writes, db_compact.c): a shorter write is served
 * faster by the page cache. REQUIRES: mu held. */
#define BULK_STREAM_BUFFERS 128
bool db_bulk_stream(const lsm_db *db);

/* Sets mem_cap for a new active memtable: write_buffer_size, or while the
 * disk is low db_reserve_memtable_cap, so what sits unflushed near a full
 * disk fits in the reserve. REQUIRES: mu held. */
void db_memtable_cap_update(lsm_db *db);
/* Switches to a new memtable and WAL; the old memtable becomes immutable
 * and the flush thread is woken. A failed switch is not sticky. */
lsm_status *db_switch_memtable(lsm_db *db);
/* Whether a switch must wait for background work (memory, level 0 or the
 * disk): room then comes only from flushes and compactions. REQUIRES: mu
 * held (no leadership needed). */
bool db_switch_must_wait(lsm_db *db);
/* After an append found the disk full (wal_broken): cuts the log back to
 * its last whole group and syncs it, finishing the groups that waited for
 * a sync on it; a failure is sticky. */
void db_cut_broken_wal(lsm_db *db);
/* After the leader's append to the WAL (mu released meanwhile) ended with
 * s: the log now holds `written` bytes of published writes; or it is broken
 * by a full disk (wal_broken: cut back by db_cut_broken_wal before anything
 * else uses it); any other failure is sticky. */
void db_wal_appended(lsm_db *db, lsm_status *s, uint64_t written);
/* What a barrier needs: a log a full disk broke is cut back and left for a
 * new one (no sync may run on it); returns the sticky error or why it could
 * not be left. */
lsm_status *db_leave_broken_wal(lsm_db *db);

/* db_idle.c: the flush thread's look at an idle store. */
/* What the idle flush thread does: retires an old deferred batch, flushes an
 * active memtable that holds deletions once no write came for a while
 * (IDLE_DELETIONS_US), and frees the process's pooled buffers after a longer
 * quiet (IDLE_POOLS_US). Returns the µs after which to look again, 0 if
 * nothing is due. REQUIRES: mu held (released meanwhile). */
uint64_t db_idle_look(lsm_db *db);

/* The bytes of every table in the current version (db_props.c).
 * REQUIRES: mu held. */
uint64_t db_table_bytes(lsm_db *db);

/* db_reserve.c: the space reserve (see there). */
/* The most the reserve may be on the disk at dir: `wanted` (the option),
 * at most an eighth of the disk. */
uint64_t db_reserve_max(lsm_env *env, const char *dir, size_t wanted);
/* The reserve's size for this store: the one sizing rule (see there).
 * REQUIRES: mu held. */
uint64_t db_reserve_size(lsm_db *db);
/* The cap on the active memtable while the disk is low (see db_reserve.c).
 * REQUIRES: mu held. */
size_t db_reserve_memtable_cap(lsm_db *db);
/* Makes the reserve file if it is not there and the disk has room for it
 * (tried at most every RESERVE_RETRY_US); returns whether it is held.
 * REQUIRES: mu held (released while writing); a leader or open. */
bool db_reserve_make(lsm_db *db);
/* Removes the reserve file, if any, so its space serves what frees space;
 * returns whether there was one. REQUIRES: mu held (released meanwhile). */
bool db_reserve_release(lsm_db *db);
/* Background work is stuck on a full disk (nospace) and a write that frees
 * space came (frees_waiting, set by its leader): the reserve is given up to
 * that work, which retries at once. Called by the flush and compaction
 * threads when they find the disk full, and by a freeing writer once it is
 * in the log, or when it must wait for them. REQUIRES: mu held. */
void db_reserve_serve_background(lsm_db *db);
/* A freeing leader's wait for room on a full disk (db_reserve_frees_wait). */
struct frees_wait {
    uint64_t deadline_us; /* 0: not waiting yet */
    int idle;             /* failed tries in a row with no background progress */
};
/* The freeing leader's write met a full disk: holds off new compactions
 * (frees_holding) while it waits. REQUIRES: mu held; the caller leads the
 * queue. */
void db_reserve_frees_hold(lsm_db *db, struct frees_wait *fw);
/* The freeing leader's write failed with LSM_NO_SPACE: returns false if it
 * must fail now (db_reserve.c's rule), else waits for the background work
 * that may make room and returns true: try again. REQUIRES: mu held (released
 * while waiting); the caller leads the queue and holds (db_reserve_frees_hold). */
bool db_reserve_frees_wait(lsm_db *db, struct frees_wait *fw);
/* Ends the hold (compactions may start). REQUIRES: mu held. */
void db_reserve_frees_done(lsm_db *db, struct frees_wait *fw);
/* NULL if a write may go ahead: it frees space, or the reserve is held (or
 * could be made again); else LSM_NO_SPACE. REQUIRES: mu held; a leader. */
lsm_status *db_reserve_check(lsm_db *db, bool frees_space);

/* db_holdoff.c: no compaction after one failed for space until it could get
 * further (the rule is there). */
/* A compaction reading input_bytes failed for space (its outputs removed).
 * REQUIRES: mu held. */
void db_holdoff_failed(lsm_db *db, uint64_t input_bytes);
/* A compaction succeeded: the next failure starts the holdoff afresh.
 * REQUIRES: mu held. */
void db_holdoff_clear(lsm_db *db);
/* 0 if a compaction reading input_bytes may start now, else the µs until it
 * may (sooner if the disk's free space grows). REQUIRES: mu held. */
uint64_t db_holdoff_left_us(lsm_db *db, uint64_t input_bytes);

/* db_compact.c */
lsm_status *db_start_background(lsm_db *db);
/* Charges a point read's seek (version_get's charge) to its table; the read
 * that uses up the table's allowance makes it v's seek_file, due for
 * compaction if v is current (file_allowed_seeks). Nothing on a read_only
 * store. REQUIRES: mu not held; v pinned. */
void db_charge_seek(lsm_db *db, version *v, const seek_charge *charge);
/* Writes the recovered (immutable) memtables to tables, synced, oldest
 * first, each installed before the next, so what recovery read back from a
 * log is made durable from memory and the log can go: an fdatasync on a
 * new file description is not trusted with it (pages whose writeback failed
 * in an earlier process read back from the page cache, and the new sync
 * succeeds without writing them). A full disk leaves the rest to the flush
 * thread; any other error is returned. REQUIRES: mu held (released while
 * writing); background not started. */
lsm_status *db_flush_recovered(lsm_db *db);
/* Stops the background threads. REQUIRES: mu not held. */
void db_stop_background(lsm_db *db);
/* Deletes files no live version, pending output or live log needs; does
 * nothing while the MANIFEST on disk is unknown (vset_state_known). One
 * sweep runs at a time: a call that finds one running waits until a sweep
 * that listed the directory after the call has finished (the running one
 * goes again), so two never remove one file (on RADOS a remove is several
 * ops) and every file obsolete at the call is gone at its return.
 * REQUIRES: mu held (released while deleting or waiting). */
void db_delete_obsolete_files(lsm_db *db);
/* Switches the memtable if it holds data and waits for the flushes: of
 * every memtable (deferred_upto 0), or only until no deferred batch with a
 * sequence <= deferred_upto is outside the tables and the log. Returns the
 * error of a flush that failed meanwhile (also for a full disk). */
lsm_status *db_flush_memtables(lsm_db *db, uint64_t deferred_upto);
/* The oldest sequence any snapshot can see. REQUIRES: mu held. */
uint64_t db_smallest_snapshot(lsm_db *db);

/* db_checkpoint.c: memtable mem_id was just flushed, its version
 * installed; pins it if a checkpoint awaits that one. REQUIRES: mu held. */
void db_checkpoint_flushed(lsm_db *db, uint64_t mem_id);

/* db_iter.c: an iterator over user keys at sequence `seq`, taking
 * ownership of `internal` (a merge of everything in rv) and of the rv ref. */
lsm_iter *db_iter_new(lsm_db *db, struct readview *rv, iter *internal, uint64_t seq);

#endif
