/*
 * fault_env.h — an env that wraps another and injects faults, for tests.
 *
 * It remembers, for every file written through it, how many bytes were last
 * synced, and which created/renamed/removed files have not yet had their
 * directory synced. fault_env_power_cut() then makes the disk look as it would
 * after a power failure: unsynced data is dropped (files truncated to their
 * synced length), files created since their directory's last sync vanish.
 * The wrapped env must not be used for the same files behind its back.
 */
#ifndef LSM_FAULT_ENV_H
#define LSM_FAULT_ENV_H

#include "env.h"

#include <stdbool.h>

typedef struct fault_env fault_env;

fault_env *fault_env_new(lsm_env *base); /* NULL if out of memory */
void fault_env_free(fault_env *fe);      /* only after every store using it is closed */
lsm_env *fault_env_env(fault_env *fe);   /* the env to put in lsm_options */

enum fault_op {
    FAULT_WRITE = 1 << 0, /* append/flush of a wfile */
    FAULT_SYNC = 1 << 1,  /* wfile sync */
    FAULT_SYNC_DIR = 1 << 2,
    FAULT_CREATE = 1 << 3, /* new_wfile */
    FAULT_RENAME = 1 << 4,
    FAULT_READ = 1 << 5,      /* sfile read / rfile pread and read_point */
    FAULT_MAP = 1 << 6,       /* rfile map (the store then reads with pread) */
    FAULT_DISK_FREE = 1 << 7, /* disk_free: the env cannot say */
};

/* From now on, operations in `ops` on paths containing `path_substr` (NULL:
 * any path) fail with errno `err` (EIO, ENOSPC, ...), after `skip` more
 * successful ones; `count` failures then stop (count < 0: forever). */
void fault_env_fail(fault_env *fe, unsigned ops, const char *path_substr, int err, int skip,
                    int count);
void fault_env_clear_failures(fault_env *fe);
/* Called in the failing thread, with no lock of the env held, each time a
 * failure of fault_env_fail strikes, before it is returned: a test orders
 * other work (the store's background threads) before the failure is seen.
 * It runs once the failing operation holds none of the env's locks. NULL:
 * none. */
typedef void (*fault_fail_hook)(void *ctx);
void fault_env_on_fail(fault_env *fe, fault_fail_hook hook, void *ctx);
/* Called at the start of every remove_file, with the path, in the removing
 * thread and with no lock of the env held (a test holds a remove back or
 * counts them). NULL: none. */
typedef void (*fault_remove_hook)(void *ctx, const char *path);
void fault_env_on_remove(fault_env *fe, fault_remove_hook hook, void *ctx);
/* on: a sync that fails loses the data it was to write, as Linux does after
 * a writeback error: it stays readable (the page cache), later syncs of the
 * file succeed without writing it, and a power cut truncates the file to
 * where it began. Off by default (a cut keeps what a later sync covered). */
void fault_env_set_lost_writeback(fault_env *fe, bool on);
/* From now on (set) disk_free reports at most `avail` bytes free; !set:
 * the truth again. (Writes do not fail for it: add a rule for that.) */
void fault_env_set_disk_avail(fault_env *fe, bool set, uint64_t avail);
/* From now on the env's sleep_micros sleeps at most us (0: as long as
 * asked), so a test need not wait out the store's retry delays. */
void fault_env_set_max_sleep_us(fault_env *fe, uint64_t us);
/* From now on the env's now_micros runs us later (it stays monotonic), so a
 * test need not wait out the store's idle delays. Nothing is woken: the
 * store sees it at its next look at the clock. */
void fault_env_advance_clock(fault_env *fe, uint64_t us);
/* The last hold_for_sync (env.h) any file of fe was given: 1 on, 0 off,
 * -1 never; *holds (if not NULL) gets how many times it was turned on. */
int fault_env_last_hold(fault_env *fe, uint64_t *holds);
/* Adds latency to every wfile sync (simulates a slow disk). */
void fault_env_set_sync_delay_us(fault_env *fe, uint64_t us);
/* on: a wfile sync's injected failure (fault_env_fail) strikes at the end
 * of its delay instead of at its start, so an early slow sync can fail
 * while a later one still runs. Off by default. */
void fault_env_set_sync_fails_late(fault_env *fe, bool on);
/* Simulates a power cut on everything written through this env: unsynced
 * data and unsynced directory entries are dropped from the disk. Files that
 * were open at the cut are dead from then on: their appends, flushes and
 * syncs fail with EIO and change nothing. Until a store next locks its
 * directory (lock_file: the machine restarted), creates, renames, removes,
 * mkdirs and rmdirs through the env fail with EIO too, so the store that
 * ran at the cut can then be closed without writing anything (not even new
 * files) and a new one opened. Reads work throughout. */
lsm_status *fault_env_power_cut(fault_env *fe);
/* The power is on again after a cut (what a store's lock_file also does). */
void fault_env_restart(fault_env *fe);
/* Counters for tests. */
uint64_t fault_env_syncs(fault_env *fe); /* wfile syncs that succeeded */
uint64_t fault_env_dir_syncs(fault_env *fe);

/* ------------------------------------------------------------ the sweep
 *
 * For an I/O-error sweep (tests/unit/test_io_sweep.c): every call below is
 * counted, and exactly one chosen call can be made to fail. Calls are
 * counted in two streams: those of the thread that started the count (the
 * workload) and those of every other thread (the store's background
 * threads). Each stream is deterministic for a deterministic workload even
 * though the two interleave as the scheduler likes. */
enum fault_call {
    FC_CREATE,    /* new_wfile */
    FC_APPEND,    /* wfile append */
    FC_FLUSH,     /* wfile flush */
    FC_SYNC,      /* wfile sync */
    FC_PREALLOC,  /* wfile preallocate */
    FC_CLOSE,     /* wfile close (the file is closed even when it fails) */
    FC_OPEN_READ, /* new_sfile, new_rfile */
    FC_READ,      /* sfile read */
    FC_SKIP,      /* sfile skip */
    FC_PREAD,     /* rfile pread, read_point */
    FC_LIST,      /* get_children */
    FC_REMOVE,
    FC_RENAME,
    FC_MKDIR,
    FC_RMDIR,
    FC_FILE_SIZE,
    FC_SYNC_FILE,
    FC_SYNC_DIR,
    FC_LOCK,
    FC_UNLOCK,
    FC_DISK_FREE,
    FC_TRUNCATE,
    FC_LINK,  /* link_file */
    FC_STAT,  /* path_info */
    FC_CHMOD, /* make_private */
    FC_MAP,   /* rfile map */
    FC_COUNT
};
const char *fault_call_name(enum fault_call c);

enum fault_kind {
    FAULT_EIO,       /* the call fails with EIO and does nothing */
    FAULT_ENOSPC,    /* the call fails with ENOSPC and does nothing */
    FAULT_POWER_CUT, /* fault_env_power_cut() just before the call, which
                      * then runs as it does after a cut (a lock fails: the
                      * machine is off, no store may start) */
    FAULT_SYNC_LIE,  /* a sync that makes its data durable and then reports
                      * EIO anyway */
    FAULT_DISK_FULL, /* the disk is full from this call on: it and every
                      * later call that allocates space (create, append,
                      * flush, preallocate, mkdir), in every stream, fail
                      * with ENOSPC, and disk_free reports nothing free,
                      * until the count stops */
    FAULT_KINDS
};
const char *fault_kind_name(enum fault_kind k);
/* Whether k is a fault call c can have: ENOSPC only where a call can take
 * space, the lying sync only for syncs, a full disk only where a call
 * allocates space. An injected EIO of a sync loses the data it was to write
 * when lost writeback is on (fault_env_set_lost_writeback), as a real
 * failed sync does. */
bool fault_kind_applies(enum fault_kind k, enum fault_call c);

enum { FAULT_STREAM_MAIN, FAULT_STREAM_OTHER, FAULT_STREAMS };

/* Called for every counted call (serialised; must not call into the env). */
typedef void (*fault_trace_fn)(void *ctx, int stream, uint64_t index, enum fault_call c,
                               const char *path);

/* Starts counting from zero; the calling thread is the main stream. trace
 * may be NULL. Disarms any armed fault. */
void fault_env_count_start(fault_env *fe, fault_trace_fn trace, void *ctx);
/* Makes call number `index` of `stream` (counted from the start) fail as k. */
void fault_env_arm(fault_env *fe, int stream, uint64_t index, enum fault_kind k);
/* Stops counting and disarms (the env then behaves as before the start). */
void fault_env_count_stop(fault_env *fe);
uint64_t fault_env_calls(fault_env *fe, int stream);
/* While held, directory syncs of every thread but the main stream's wait
 * (before they are counted). The store's background threads sync the
 * directory with no lock held, after writing a table and before the
 * MANIFEST names it: holding them keeps a flush from completing, so a test
 * can order writes before it without racing it. */
void fault_env_hold_dir_syncs(fault_env *fe, bool hold);
/* How many threads wait in a held directory sync right now (0 from the
 * release on, also while they are still waking up). */
int fault_env_held(fault_env *fe);
/* Whether the armed fault happened; if so *c and path (cap bytes) say on
 * which call. */
bool fault_env_fired(fault_env *fe, enum fault_call *c, char *path, size_t cap);

#endif
