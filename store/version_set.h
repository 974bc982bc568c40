/*
 * version_set.h — which tables make up the store, and the MANIFEST that
 * records it.
 *
 * A version is an immutable list of table files per level. The version set
 * holds the current version and the counters (next file number, oldest live
 * log, last sequence) and persists every change as a version edit appended
 * to the MANIFEST, synced before the change takes effect. CURRENT names the
 * live MANIFEST and is switched atomically (temp file, sync, rename, sync
 * the directory).
 *
 * Locking: every field is guarded by the db mutex passed to
 * vset_log_and_apply (the version set has no lock of its own); that function
 * releases the mutex while it writes the MANIFEST. Version reference counts
 * are guarded by the same mutex.
 */
#ifndef LSM_VERSION_SET_H
#define LSM_VERSION_SET_H

#include "env.h"
#include "version_edit.h"
#include "wal.h"

#include "mutex.h"

typedef struct version_set version_set;

typedef struct version {
    int refs; /* guarded by the db mutex */
    version_set *vset;
    /* Level 0: newest file first (files may overlap). Levels >= 1: sorted by
     * smallest key, disjoint. */
    file_meta **files[NUM_LEVELS];
    int nfiles[NUM_LEVELS];
    /* The level most in need of compaction and how much (>= 1: needed);
     * computed when the version is built (version.h). */
    int compaction_level;
    double compaction_score;
    double level_score[NUM_LEVELS]; /* each level's (the last: 0) */
    uint64_t level1_bytes;          /* level 1's target when scored */
    /* When no level is due by size: the tombstone-heavy file to compact down
     * (NULL: none) and its level; computed with the score (version.h). */
    file_meta *deletion_file;
    int deletion_level;
    /* A file point reads used up the allowed seeks of (file_allowed_seeks),
     * to compact down, and its level; NULL: none. Set once per version
     * (level first), under mu, by a reader charging a file with none left;
     * readers look without mu. [atomic, set under mu] */
    _Atomic(file_meta *) seek_file;
    int seek_level; /* [mu] */
    /* How loaded level 0 is, in tables: its depth (the most tables any one
     * key falls in — what a read may have to look into), or its bytes in
     * memtables' worth if that is more (so full tables that overlap
     * nothing, as from data written in key order, still move down in fours
     * and do not pile up as backlog). Level-0 compaction, slowdown and stop
     * go by it; it is the file count when every table overlaps every other
     * (LevelDB's measure), while small tables of a partition of their own
     * count only by their depth. */
    int l0_load;
    file_meta *l0_deepest; /* a file at the deepest point (NULL: level empty) */
    struct version *prev, *next; /* the list of live versions [mu] */
} version;

struct version_set {
    lsm_env *env;
    const char *dir;     /* not owned */
    mutex *mu;           /* the db mutex that guards everything here */
    uint64_t next_file;  /* next file number to hand out */
    uint64_t log_number; /* logs numbered below this are obsolete */
    uint64_t last_seq;   /* as last recorded in the MANIFEST */
    uint64_t manifest_number;
    wal_writer *manifest; /* NULL: the disk state is unknown (vset_state_known) */
    bool manifest_busy;   /* a log_and_apply is writing; others wait on cv */
    pthread_cond_t cv;
    version *current;          /* holds one reference */
    version live;              /* dummy head of the list of live versions */
    int l0_compaction_trigger; /* for version scores */
    uint64_t l0_unit_bytes;    /* a flushed memtable's size (write_buffer_size) */
    uint64_t level1_bytes;     /* level 1's target (lsm_options.level1_bytes) */
    buf compact_pointer[NUM_LEVELS];
};

lsm_status *vset_init(version_set *vs, lsm_env *env, const char *dir, mutex *mu);
void vset_destroy(version_set *vs);

/* Creates a brand-new store's MANIFEST and CURRENT. REQUIRES: mu held. */
lsm_status *vset_create(version_set *vs);
/* Reads CURRENT and the MANIFEST it names. LSM_INVALID_ARGUMENT if the
 * directory is not a store of ours (message says why). REQUIRES: mu held. */
lsm_status *vset_recover(version_set *vs);
/* Applies the edit to the current version and persists it, recording
 * next_file, the log number (where the edit lacks one) and last_seq — the
 * db's last sequence now, which every table written so far is below, so a
 * reopen never hands out a sequence number already used.
 * REQUIRES: mu held (released while writing, held again on return). */
lsm_status *vset_log_and_apply(version_set *vs, version_edit *e, uint64_t last_seq);

static inline uint64_t vset_new_file_number(version_set *vs)
{
    return vs->next_file++;
}
/* Whether the MANIFEST that CURRENT names is known to describe the
 * in-memory state: true once this process has written and synced a new
 * MANIFEST from it (vset_create, the first vset_log_and_apply after
 * vset_recover) and as long as every edit appended since was synced. After a
 * MANIFEST write or sync fails, or before the first one, the disk may name
 * files the memory does not (an edit that reached the disk although its sync
 * failed) or a MANIFEST other than manifest_number: no file may then be
 * deleted as obsolete. The next vset_log_and_apply starts a new MANIFEST
 * (new number, new CURRENT) from the in-memory state, which makes it true
 * again. The one rule every sweep (db_delete_obsolete_files) obeys.
 * REQUIRES: mu held. */
static inline bool vset_state_known(const version_set *vs)
{
    assert(mutex_held(vs->mu));
    return vs->manifest != NULL;
}
/* The edit that describes version v whole, as the first record of a
 * MANIFEST: the format, vs's counters (log number, next file, last
 * sequence: the caller may set others), every table of v and the compact
 * pointers. REQUIRES: mu held. */
lsm_status *vset_snapshot_of(version_set *vs, const version *v, version_edit *e);
/* Writes MANIFEST-number holding snap in dir (another store's directory:
 * a copy of this one), synced, then CURRENT naming it, the directory
 * synced after each. No lock needed. */
lsm_status *vset_write_copy(lsm_env *env, const char *dir, uint64_t number,
                            const version_edit *snap);
/* Makes sure `number` is never handed out (found on disk during recovery). */
void vset_mark_file_number_used(version_set *vs, uint64_t number);

/* Adds the number of every table in a live version to *numbers (malloc'd).
 * REQUIRES: mu held. */
bool vset_live_files(version_set *vs, uint64_t **numbers, int *n);

void version_ref(version *v);   /* REQUIRES: mu held */
void version_unref(version *v); /* REQUIRES: mu held */

#endif
