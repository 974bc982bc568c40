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
    FAULT_READ = 1 << 5, /* sfile read / rfile pread */
};

/* From now on, operations in `ops` on paths containing `path_substr` (NULL:
 * any path) fail with errno `err` (EIO, ENOSPC, ...), after `skip` more
 * successful ones; `count` failures then stop (count < 0: forever). */
void fault_env_fail(fault_env *fe, unsigned ops, const char *path_substr, int err, int skip,
                    int count);
void fault_env_clear_failures(fault_env *fe);
/* on: a sync that fails loses the data it was to write, as Linux does after
 * a writeback error: it stays readable (the page cache), later syncs of the
 * file succeed without writing it, and a power cut truncates the file to
 * where it began. Off by default (a cut keeps what a later sync covered). */
void fault_env_set_lost_writeback(fault_env *fe, bool on);
/* From now on (set) disk_free reports at most `avail` bytes free; !set:
 * the truth again. (Writes do not fail for it: add a rule for that.) */
void fault_env_set_disk_avail(fault_env *fe, bool set, uint64_t avail);
/* Adds latency to every wfile sync (simulates a slow disk). */
void fault_env_set_sync_delay_us(fault_env *fe, uint64_t us);
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

#endif
