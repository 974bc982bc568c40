/*
 * lsm.h — the public face of the lsmfs store: an LSM key-value store.
 *
 * Keys and values are arbitrary byte strings, ordered bytewise (memcmp, then
 * length). Every function here is safe to call from any number of threads at
 * once on the same lsm_db without outside locking. Iterators and batches are
 * not shared objects: one thread uses one at a time.
 *
 * Errors: functions return an lsm_status pointer. NULL means success; anything
 * else carries a code and a message and must be released with
 * lsm_status_free() (which accepts NULL). Nothing here aborts on I/O errors.
 *
 * Durability: a write with sync=true returns only after it, and every write
 * acknowledged before it, is on stable storage. A write without sync is in the
 * operating system (it survives a crash of the process, not a power cut) once
 * it returns; on RADOS it reaches the cluster at once, or, while syncs come
 * every few milliseconds, with the next sync (at most 50 ms after the last). A failed WAL write or sync puts the store into a sticky error
 * state: every later write fails with LSM_IO_ERROR; reads keep working.
 */
#ifndef LSM_H
#define LSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

enum lsm_code {
    LSM_OK = 0,
    LSM_NOT_FOUND,
    LSM_CORRUPTION,
    LSM_NOT_SUPPORTED,
    LSM_INVALID_ARGUMENT,
    LSM_IO_ERROR,
    LSM_BUSY,     /* the store is locked by another process or handle */
    LSM_NO_SPACE,  /* the disk is full (ENOSPC, EDQUOT) */
    LSM_READ_ONLY, /* a change asked of a store opened read_only (EROFS) */
    LSM_NO_MEMORY, /* an allocation failed (ENOMEM): nothing on disk is wrong */
};

typedef struct lsm_status lsm_status;

int lsm_status_code(const lsm_status *s);            /* LSM_OK for NULL */
const char *lsm_status_message(const lsm_status *s); /* "OK" for NULL */
/* The errno that best describes the status (0 for NULL; EIO, ENOSPC, ...). */
int lsm_status_errno(const lsm_status *s);
void lsm_status_free(lsm_status *s);

/* ------------------------------------------------------------------ env */

/* All file and OS access goes through an env (see store/env.h for its
 * definition and tests/support/fault_env.h for the tests' fault-injecting one). */
typedef struct lsm_env lsm_env;
lsm_env *lsm_env_default(void); /* POSIX; lives for the whole process */

/* -------------------------------------------------------------- options */

enum { LSM_WAL_AUTO = 0, LSM_WAL_MAPPED = 1, LSM_WAL_ZERO_FILL = 2 };

typedef struct lsm_options {
    bool create_if_missing; /* default false */
    bool error_if_exists;   /* default false */
    /* No effect, kept for source compatibility: damage in the middle of a
     * log is always an error (see salvage_log), and a damaged table block
     * always fails the read that needs it. */
    bool paranoid_checks;
    /* Recovery replays the logs up to the first damaged record and no
     * further: what it keeps is a prefix of the writes, as after a torn
     * tail. Zero-filled space followed by records (out-of-order writeback
     * before a power cut) ends the log quietly: nothing behind it was
     * covered by a completed sync. Damage followed by good records fails the
     * open with LSM_CORRUPTION (naming the log and byte offset), unless
     * salvage_log: then the open keeps the prefix, reports what it dropped
     * through report, and (unless read_only) writes the prefix to tables so
     * the damaged log is gone. Default false. */
    bool salvage_log;
    /* Opens without changing a byte: no LOCK file created (an existing one
     * is locked shared), no log replayed into tables, no file created or
     * deleted; the logs are replayed into memory. Every write and
     * compaction fails with LSM_READ_ONLY; a sync has nothing to do and
     * succeeds. Default false. */
    bool read_only;
    /* Called (if set) with one line for each thing recovery dropped or
     * refused: log, byte range, records. */
    void (*report)(void *ctx, const char *msg);
    /* Called (if set) with each key of each good record recovery did not
     * apply after damage, so a caller can say what the lost writes touched. */
    void (*report_dropped_key)(void *ctx, const void *key, size_t klen);
    void *report_ctx; /* for both */
    /* Bytes of memtable before it is switched and a new WAL started.
     * Default 8 MiB. */
    size_t write_buffer_size;
    /* Upper bound on memory used by all memtables (active + immutable);
     * writers are slowed, then stopped, as it is approached. Default 64 MiB. */
    size_t max_memtable_bytes;
    /* Table options (used once tables exist). */
    size_t block_size;       /* default 4096 */
    size_t block_cache_size; /* bytes; default 32 MiB */
    int bloom_bits_per_key;  /* default 10; 0 disables */
    bool compression;        /* lz4; default true */
    size_t target_file_size; /* default 4 MiB */
    /* Level 1 is compacted past this many bytes, each level below at ten
     * times the one above. Default 10 MiB (LevelDB's). */
    size_t level1_bytes;
    int max_open_files;      /* table cache capacity; default 1000 */
    /* Point reads of a table (a get's data block, its index and filter at
     * open) copy from a read-only mapping instead of a pread each; a disk
     * read error or a table cut short is still LSM_IO_ERROR, not a signal
     * (the env's guard). Scans read ahead with pread either way. Default
     * true; false: every read is a pread. */
    bool mapped_reads;
    /* In a bulk stream (a big file written for a long while: 128 write
     * buffers of big defer_log writes flushed in a row, db_impl.h), the
     * flush of a memtable that is mostly such writes writes its tables
     * around the page cache where the env can (env.h write_through:
     * O_DIRECT): their bytes are neither copied into the page cache nor
     * written back from it, and their first reads come from the disk.
     * Other tables, and a shorter write's, go through the page cache, which
     * serves them faster. Default true. */
    bool direct_table_writes;
    /* Group commit: how long a leader whose group needs a sync may wait for
     * more writers to join before it writes (microseconds; 0 disables). The
     * wait ends early once the usual crowd is there. Syncs that take over a
     * millisecond run one at a time and wait up to half a sync (at most
     * 10 ms) whatever this says. */
    uint32_t group_commit_delay_us; /* default 40 */
    /* A batch written with defer_log waits at most about this long in the
     * memtable outside the log while the store is idle: then its memtable
     * is written to a table (milliseconds; default 5000). */
    uint32_t deferred_max_age_ms;
    /* How the WAL makes room for its appends. LSM_WAL_MAPPED: space is
     * reserved with fallocate and appends are a memcpy into a shared
     * mapping — no system call per write; best when few writes sync.
     * LSM_WAL_ZERO_FILL: once the log is synced, a helper thread writes
     * zeros ahead of the appends, which use pwrite; a sync then writes only
     * the appended blocks; best when many writes sync, as in the
     * filesystem. LSM_WAL_AUTO (default):
     * the log switches between the two every 64 appends, zero-filled while
     * at least one append in four is synced. */
    int wal_mode;
    /* Tables are cut between two neighbouring keys for which this returns
     * different values (NULL, the default: no cuts), so keys of different
     * partitions never share a table. Bulk data kept apart from small
     * records that are rewritten all the time (the filesystem's file chunks
     * vs its inode records) makes tables of data appended in key order
     * that overlap no other: compaction moves them down without rewriting
     * them. Must be a pure function of the key. */
    uint32_t (*table_partition)(const void *key, size_t n);
    /* Within a partition, tables are also cut between neighbouring keys of
     * different segments (NULL, the default: no such cuts), but only where
     * the table already holds table_segment_bytes, or, in a flush, where
     * the segment starting there holds that many bytes of the memtable
     * itself: a long run of one segment (one file's chunks, written beside
     * others' at once) gets level-0 tables of its own, which
     * lsm_delete_files_in_range can drop whole, while short segments still
     * share tables. Never cuts a user key's versions apart. Must be a pure
     * function of the key. */
    uint64_t (*table_segment)(const void *key, size_t n);
    size_t table_segment_bytes; /* default 1 MiB */
    /* The most disk held back from ordinary writes in a RESERVE file, for
     * writes with frees_space and the flushes and compactions after them,
     * so a full store can always be emptied; removed at open so recovery
     * always has room. Its size follows the store's tables (the rule is
     * store/db_reserve.c's header), at most this and an eighth of the disk;
     * near a full disk memtables are capped to fit in it. 0 (default): no
     * reserve. */
    size_t reserve_bytes;
    /* A flush or compaction that found the disk full is retried after this
     * long (microseconds; default 100000), or at once when the store closes
     * or, for a flush, when a caller waits for one (a sync that flushes,
     * lsm_compact_range, lsm_checkpoint, close). */
    uint32_t full_disk_retry_us;
    lsm_env *env; /* default lsm_env_default() */
} lsm_options;

void lsm_options_init(lsm_options *o);

typedef struct lsm_snapshot lsm_snapshot;

typedef struct lsm_read_options {
    const lsm_snapshot *snapshot; /* NULL: the latest state */
    bool verify_checksums;        /* default false */
    bool fill_cache;              /* default true */
} lsm_read_options;

void lsm_read_options_init(lsm_read_options *o);

typedef struct lsm_write_options {
    bool sync; /* default false */
    /* For large batches (whole file chunks): the batch's bytes stay out of
     * the write-ahead log if its memtable is written to a table before any
     * later logged write or sync needs them logged, so they reach the disk
     * once instead of twice (a sync that needs a quarter of a memtable or
     * more of such bytes, half or more of the memtables' contents, flushes
     * the memtables rather than log them). Until then a crash loses the
     * batch and every write after it (recovery keeps a prefix, as for any
     * write not yet synced). Ignored with sync. Default false. */
    bool defer_log;
    /* The write frees space (deletes, truncates): it may use the reserve
     * (lsm_options.reserve_bytes) that ordinary writes may not, so it
     * succeeds on a full disk. Default false. */
    bool frees_space;
} lsm_write_options;

/* ---------------------------------------------------------------- batch */

/* A WriteBatch: an ordered set of puts and deletes applied atomically — after
 * a crash either all of it is there or none of it. */
typedef struct lsm_batch lsm_batch;

lsm_batch *lsm_batch_new(void); /* NULL only if out of memory */
void lsm_batch_free(lsm_batch *b);
void lsm_batch_clear(lsm_batch *b);
/* put/delete/append return false if out of memory, or if a key of 4 GiB - 9
 * bytes or more, a value of 4 GiB or more, or more than 2^32 - 1 records
 * were asked for; the batch is then unchanged. */
bool lsm_batch_put(lsm_batch *b, const void *key, size_t klen, const void *val, size_t vlen);
bool lsm_batch_delete(lsm_batch *b, const void *key, size_t klen);
bool lsm_batch_append(lsm_batch *dst, const lsm_batch *src);
uint32_t lsm_batch_count(const lsm_batch *b);
size_t lsm_batch_size(const lsm_batch *b); /* encoded bytes */
/* Makes room for `bytes` more encoded bytes (a record takes its key and
 * value and a few bytes more), so a big batch is not grown, and copied,
 * step by step as it fills; the room may be memory a big batch freed
 * before. false if out of memory (b unchanged). */
bool lsm_batch_reserve(lsm_batch *b, size_t bytes);

typedef struct lsm_batch_handler {
    void *ctx;
    void (*put)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen);
    void (*del)(void *ctx, const void *key, size_t klen);
} lsm_batch_handler;
/* Calls the handler for each record in order. */
lsm_status *lsm_batch_iterate(const lsm_batch *b, const lsm_batch_handler *h);

/* ------------------------------------------------------------------- db */

typedef struct lsm_db lsm_db;

/* Opens (recovering after a crash if needed) the store in directory `dir`.
 * Fails with LSM_BUSY if another process or handle has it open. */
lsm_status *lsm_open(const lsm_options *o, const char *dir, lsm_db **out);
/* Waits for background work, writes the memtables to tables, syncs,
 * closes. Returns the first error of any step (the db is freed in every
 * case). If the tables could not be written (e.g. LSM_NO_SPACE), every
 * write, deferred ones too, is logged and synced first, so the next open
 * recovers all of it unless the log's own sync failed. LSM_NO_SPACE then
 * means exactly that: the last tables were not written, nothing
 * acknowledged is at risk (it is in synced logs, replayed at the next
 * open); any failure that may lose a write is reported instead, with
 * another code. NULL db is allowed. */
lsm_status *lsm_close(lsm_db *db);

lsm_status *lsm_put(lsm_db *db, const lsm_write_options *wo, const void *key, size_t klen,
                    const void *val, size_t vlen);
lsm_status *lsm_delete(lsm_db *db, const lsm_write_options *wo, const void *key, size_t klen);
/* Applies the batch atomically. A NULL or empty batch is a barrier: with
 * sync=true it returns once every write acknowledged before it is durable.
 * With defer_log the store may take the batch's bytes instead of copying
 * them: after a successful write the batch may be empty (as after
 * lsm_batch_clear); after a failed one it is as it was (but empty when the
 * store ran out of memory inserting it and again copying it back: that
 * error is sticky). */
lsm_status *lsm_write(lsm_db *db, const lsm_write_options *wo, lsm_batch *batch);
/* Everything acknowledged so far is made durable (a sync barrier). */
lsm_status *lsm_sync(lsm_db *db);
/* lsm_write that also reports, in *seq, a sequence number at or after the
 * batch's last record: lsm_sync_upto(db, *seq) later makes the batch
 * durable. */
lsm_status *lsm_write_seq(lsm_db *db, const lsm_write_options *wo, lsm_batch *batch, uint64_t *seq);
/* Makes every write with a sequence number <= seq durable. Returns at once,
 * touching no disk, when that is already so (a later sync covered it), so a
 * filesystem can answer fsync() for a file whose last change is already on
 * disk for free. */
lsm_status *lsm_sync_upto(lsm_db *db, uint64_t seq);
/* Whether a write issued now may sleep for background work: the writes are
 * being paced, or the memtable is nearly full while a switch would have to
 * wait (level 0 at its stop, no memory for another memtable). A hint, true
 * or false a moment later, for a caller that has something else it could do
 * while the write waits. Thread-safe; takes the store's mutex briefly. */
bool lsm_write_may_wait(lsm_db *db);

/* On success *val is a malloc'd copy (free() it) of *vlen bytes; a missing
 * key returns a status with code LSM_NOT_FOUND. */
lsm_status *lsm_get(lsm_db *db, const lsm_read_options *ro, const void *key, size_t klen,
                    char **val, size_t *vlen);

const lsm_snapshot *lsm_snapshot_new(lsm_db *db);
void lsm_snapshot_release(lsm_db *db, const lsm_snapshot *snap);

/* ------------------------------------------------------------- iterator */

typedef struct lsm_iter lsm_iter;

/* An iterator sees a consistent state: ro->snapshot, or the state when it was
 * created. It keeps what it reads alive until freed. */
lsm_iter *lsm_iter_new(lsm_db *db, const lsm_read_options *ro); /* NULL if OOM */
void lsm_iter_free(lsm_iter *it);
bool lsm_iter_valid(const lsm_iter *it);
void lsm_iter_seek_first(lsm_iter *it);
void lsm_iter_seek_last(lsm_iter *it);
void lsm_iter_seek(lsm_iter *it, const void *key, size_t klen); /* first key >= key */
void lsm_iter_next(lsm_iter *it);                               /* REQUIRES: valid */
void lsm_iter_prev(lsm_iter *it);                               /* REQUIRES: valid */
/* The returned pointers stay valid until the iterator moves or is freed. */
const char *lsm_iter_key(const lsm_iter *it, size_t *klen);
const char *lsm_iter_value(const lsm_iter *it, size_t *vlen);
/* NULL while no error was met; the caller frees a non-NULL status. */
lsm_status *lsm_iter_status(const lsm_iter *it);

/* ----------------------------------------------------------- properties */

/* Properties (names as LevelDB's where they exist):
 *   "lsm.stats"                      human-readable stats text
 *   "lsm.num-files-at-level<N>" "lsm.bytes-at-level<N>"
 *   "lsm.writes" "lsm.write-groups" "lsm.wal-syncs" "lsm.wal-bytes"
 *   "lsm.sequence"                   last sequence number
 *   "lsm.background-error"           "" or the sticky error's message
 *   "lsm.full-disk-events"           flushes and compactions that found the disk full
 *   "lsm.oom-retries"                flushes and compactions out of memory (retried)
 *   "lsm.tables-dropped"             tables lsm_delete_files_in_range dropped
 *   "lsm.mem-usage"                  bytes in memtables
 *   "lsm.pooled-bytes"               freed big buffers and memtable blocks kept for reuse
 *                                    (the process's, every store's; freed once idle)
 *   "lsm.tables"                     one line per table: level, number, size, key range
 *   "lsm.metrics"                    every numeric property as "store_NAME VALUE" lines
 *                                    (NAME: the property's after "lsm.", '-' as '_'), then
 *                                    store_tables_level_N, store_table_bytes_level_N
 *   "lsm.total-table-bytes"          bytes of all tables
 *   "lsm.table-deletions"            keys deleted in tables (their newest entry there a deletion)
 *   "lsm.block-cache-hits" / "lsm.block-cache-misses"
 *   "lsm.paced-us" / "lsm.stopped-us"  time writers slept for the pacing clock / waited
 *                                    for room ("lsm.stall-us": both)
 *   "lsm.paced-rate"                 bytes written per second the pacer allows (0: unpaced)
 *   "lsm.compaction-debt-bytes"      bytes compaction must move to bring every level within
 *                                    its target (version.h)
 *   "lsm.background-busy"            1 while a flush or compaction runs or is
 *                                    due, 0 when the background is idle
 *   "lsm.compactions-side-by-side"   compactions that began while another lane's ran
 *   "lsm.background-jobs"            the background jobs running or due: the flush
 *                                    (0 or 1) and the compactions (one per lane
 *                                    running, else 1 if due): 0 to 3
 *   "lsm.bulk-run-bytes"             bytes of memtables of big writes flushed in a row
 *                                    (a bulk stream from 128 write buffers, db_impl.h)
 *   "lsm.background-running"         the flush and compactions running now (not those
 *                                    only due): 0 to 3. A running one's output is on
 *                                    disk beside its inputs until it ends
 * Returns a malloc'd string, or NULL for an unknown name. */
char *lsm_property(lsm_db *db, const char *name);
/* Numeric form; false if the name is unknown or not numeric. */
bool lsm_property_u64(lsm_db *db, const char *name, uint64_t *out);

/* Compacts the key range [begin, end] (NULL: unbounded) down the tree.
 * LSM_NO_SPACE without trying while a compaction that failed for space is
 * held off (db_holdoff.c). */
lsm_status *lsm_compact_range(lsm_db *db, const void *begin, size_t blen, const void *end,
                              size_t elen);
/* Drops, in one MANIFEST edit, every table (any level) whose keys all lie in
 * [begin, end), but for the inputs of a running compaction and for tables
 * that an older table staying overlaps (what they delete or overwrite must
 * not show again): a deleted range frees its disk without a tombstone per
 * key (RocksDB's DeleteFilesInRange). The caller's contract: no key in the
 * range is live, and none will be written there; it deletes whatever it
 * still finds there (tables that stay, memtables), and may call again at
 * any time (a compaction may have let go of tables). Iterators made before
 * keep reading the dropped tables until freed; a read at an lsm_snapshot
 * taken before (a sequence number, not a pinned version) sees them gone. It
 * frees space: on a full disk it may use the reserve (db_reserve.c). */
lsm_status *lsm_delete_files_in_range(lsm_db *db, const void *begin, size_t blen,
                                      const void *end, size_t elen);
/* Approximate bytes on disk used by keys in [begin, end). */
uint64_t lsm_approximate_size(lsm_db *db, const void *begin, size_t blen, const void *end,
                              size_t elen);

/* Reads every block of every table, verifying checksums. Each problem found
 * is passed to report (file and offset in the message); returns the first
 * problem (or NULL when the store is sound). Running out of memory is no
 * problem of the store: the check stops there, unreported, and returns that
 * LSM_NO_MEMORY status (the callers' "incomplete", never "sound"). */
lsm_status *lsm_verify(lsm_db *db, void (*report)(void *ctx, const char *msg), void *ctx);
/* lsm_verify of the tables of one level (0 .. LSM_LEVELS - 1) as of now, for
 * progress level by level; *tables and *bytes (each may be NULL) get how
 * many tables and bytes it read. */
#define LSM_LEVELS 7
lsm_status *lsm_verify_level(lsm_db *db, int level, void (*report)(void *ctx, const char *msg),
                             void *ctx, uint64_t *tables, uint64_t *bytes);

/* ----------------------------------------------------------- checkpoint */

typedef struct lsm_checkpoint_options {
    /* Copy every table (synced) instead of hard-linking it. Default false:
     * tables are linked where dest_dir's filesystem allows (the store's
     * own), copied elsewhere. */
    bool copy_tables;
} lsm_checkpoint_options;
void lsm_checkpoint_options_init(lsm_checkpoint_options *o);

typedef struct lsm_checkpoint_info {
    uint64_t seq;          /* the copy holds exactly the writes with sequence <= seq */
    uint64_t tables;       /* tables in it */
    uint64_t linked_bytes; /* of their bytes, hard-linked */
    uint64_t copied_bytes; /* copied */
    uint64_t cut_micros;   /* from the call until the cut was pinned */
    uint64_t total_micros; /* the whole call */
} lsm_checkpoint_info;

/* Makes dest_dir (which must not exist; its parent must) a copy of the
 * store as of one moment during the call (the cut, a memtable switch):
 * exactly the writes with sequence <= info->seq, which are every write
 * acknowledged before the call, deferred ones too, and no write that
 * began after the switch. Writers wait only for that switch. The memtables holding
 * writes before the cut are flushed to tables (waited for); the copy's
 * tables are hard links where dest_dir's filesystem allows, copies
 * otherwise; it has no log, and a fresh MANIFEST naming exactly those
 * tables. Every file and directory entry is synced before the call
 * returns; the copy opens as an ordinary store. It is built in a hidden
 * sibling (".NAME.tmp-...") renamed to dest_dir last: after a crash or an
 * error nothing is at dest_dir unless it is complete (an error in the very
 * last directory sync says so and leaves the complete copy). Refused with
 * the store's error while it has a sticky one (a failed WAL sync), with
 * LSM_READ_ONLY on a read_only store, LSM_INVALID_ARGUMENT if dest_dir
 * exists. One checkpoint runs at a time (others wait). info may be NULL. */
lsm_status *lsm_checkpoint(lsm_db *db, const char *dest_dir);
lsm_status *lsm_checkpoint_ex(lsm_db *db, const char *dest_dir, const lsm_checkpoint_options *o,
                              lsm_checkpoint_info *info);

/* --------------------------------------------------------------- backup */

/* Incremental backups of a store into a directory of their own (layout in
 * store/backup_meta.h): each backup copies only the tables no earlier one
 * in the directory holds (tables are shared by number, size and CRC32C),
 * plus its own MANIFEST and CURRENT (and, from a store not cleanly closed,
 * its logs). A backup is listed once its list of files (meta/ID, with
 * each file's size and checksums) is durable, written last: a backup cut
 * off by an error or a crash is never listed, and what it left is removed
 * by the next purge. Backups and purges of one directory take its LOCK
 * (LSM_BUSY while another holds it); verify and restore take it shared (so
 * no purge removes files under them: LSM_BUSY during a backup or purge);
 * list takes none (a list purged meanwhile is left out). List, verify and
 * restore change no byte of it. */
typedef struct lsm_backup_options {
    lsm_env *env; /* of the backup directory (and store_dir); default lsm_env_default() */
    /* Of the store: lsm_backup_store's store_dir, lsm_backup_restore's
     * dest (e.g. RADOS, with a local backup directory); default env. */
    lsm_env *store_env;
    /* Called (if set) as a backup or a restore copies: done of total
     * bytes to copy. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} lsm_backup_options;
void lsm_backup_options_init(lsm_backup_options *o);

typedef struct lsm_backup_info {
    uint64_t id;           /* 1, 2, ... in the order taken */
    uint64_t seq;          /* holds exactly the writes with sequence <= seq */
    int64_t time;          /* when taken, seconds since 1970 */
    uint64_t files;        /* files in it */
    uint64_t bytes;        /* of all its files */
    uint64_t copied_bytes; /* copied when it was taken (the rest was shared) */
} lsm_backup_info;

/* Backs up the open store db into backup_dir (created if missing): a
 * writable db through a checkpoint (lsm_checkpoint, hard links) in a
 * hidden directory of its own that is removed afterwards (if that fails,
 * e.g. out of memory, by the next backup of the store); a read_only one
 * (which no one else can be writing) from its files as they are. The
 * store's env is used for everything (o->env is ignored). info may be NULL. */
lsm_status *lsm_backup(lsm_db *db, const char *backup_dir, const lsm_backup_options *o,
                       lsm_backup_info *info);
/* Backs up the store in store_dir, which no process may have open for
 * writing (a checkpoint or a snapshot, or a store not in use): it is
 * opened read_only for the length of the backup. */
lsm_status *lsm_backup_store(const char *store_dir, const char *backup_dir,
                             const lsm_backup_options *o, lsm_backup_info *info);
/* The backups in backup_dir, oldest first: *out (malloc'd, free()) of *n. */
lsm_status *lsm_backup_list(const char *backup_dir, const lsm_backup_options *o,
                            lsm_backup_info **out, size_t *n);
/* Reads every byte of backup id (0: of every backup) against its
 * checksums. Each problem (a damaged or missing file, the file and the
 * offset of its first damaged 64 KiB) goes to report (may be NULL);
 * returns the first (LSM_CORRUPTION for damage), NULL when all is sound.
 * Out of memory is no problem of the backup: it is not reported, the check
 * stops, incomplete, and returns the first problem found before, else
 * LSM_NO_MEMORY. */
lsm_status *lsm_backup_verify(const char *backup_dir, uint64_t id, const lsm_backup_options *o,
                              void (*report)(void *ctx, const char *msg), void *ctx);
/* Removes all but the newest keep backups (*removed of them, may be NULL):
 * their lists first (synced), then the files no remaining backup lists,
 * and whatever a cut-off backup left. Refused (nothing removed) when a
 * remaining list is damaged. */
lsm_status *lsm_backup_purge(const char *backup_dir, uint64_t keep, const lsm_backup_options *o,
                             uint64_t *removed);
/* Makes dest (which must not exist; its parent must) a store holding
 * backup id, each file checked against its checksum: built in a hidden
 * sibling and renamed to dest once complete and synced, as a checkpoint. */
lsm_status *lsm_backup_restore(const char *backup_dir, uint64_t id, const char *dest,
                               const lsm_backup_options *o);

/* The store's own modes (env.h: ENV_DIR_MODE, ENV_FILE_MODE): dir and
 * each entry in it (links aside) with a group or other permission bit is
 * passed to report (may be NULL) with its mode and, when fix, made
 * private. *loose (may be NULL) counts them. A writable lsm_open does this
 * with fix; fix false changes nothing. env NULL: the default env. */
lsm_status *lsm_private_modes(lsm_env *env, const char *dir, bool fix,
                              void (*report)(void *ctx, const char *path, unsigned mode),
                              void *ctx, int *loose);

/* Removes every file of the store in dir (which must not be open). */
lsm_status *lsm_destroy(const lsm_options *o, const char *dir);

#ifdef __cplusplus
}
#endif
#endif /* LSM_H */
