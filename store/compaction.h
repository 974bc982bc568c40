/*
 * compaction.h — choosing what to compact, and the rules applied while
 * compacting (LevelDB's leveled scheme).
 *
 * Level 0 is compacted when it holds l0_compaction_trigger files, deeper
 * levels when their bytes exceed level1_bytes * 10^(level-1). A compaction of
 * level L takes one file of L (the one after the level's compact pointer, so
 * successive compactions rotate through the key space) — for level 0 every
 * file overlapping it — plus the overlapping files of L+1, and writes new
 * files into L+1, split at the target file size and wherever an output would
 * overlap too much of L+2 (so the next compaction stays small).
 *
 * Two compactions may run at once, one per lane (db_compact.c runs a thread
 * per lane): level-0 compactions on lane 0, every deeper one on lane 1, so
 * level 1 keeps draining while a deep compaction runs and level 0 never waits
 * behind a deep compaction. The rule that makes it safe: no two running
 * compactions touch one level (compaction_levels). compaction_choose keeps
 * it, so does a manual compaction (it runs alone), and run_compaction
 * asserts it. With it a compaction's inputs, outputs and the levels its
 * deletions are judged against (below its output level, read in its own
 * pinned version) change under it only by moves further down, and a key's
 * versions keep their order by level.
 */
#ifndef LSM_COMPACTION_H
#define LSM_COMPACTION_H

#include "version.h"

typedef struct compaction {
    int level; /* inputs from level and level + 1 */
    bool for_deletions; /* picked for a tombstone-heavy file (version.h) */
    uint64_t max_output_file_size;
    version *input_version; /* holds a reference */
    file_meta **inputs[2];
    int ninputs[2];
    file_meta **grandparents; /* files of level + 2 overlapping the inputs */
    int ngrandparents;
    int grand_index; /* [compacting thread] should_stop_before state */
    bool seen_key;
    uint64_t overlapped_bytes;
    int level_ptrs[NUM_LEVELS]; /* [compacting thread] is_base_level state */
    version_edit edit;          /* what the compaction does, filled as it runs */
} compaction;

#define COMPACTION_LANES 2
/* The lane that compacts `level`. */
int compaction_lane(int level);
/* The levels a compaction of `level` reads and writes, bit l for level l. */
unsigned compaction_levels(int level);

/* Why a compaction is picked. */
enum compaction_why { PICK_NONE, PICK_SIZE, PICK_SEEKS, PICK_DELETIONS };
/* The level `lane` should compact in v while the levels in `busy`
 * (compaction_levels of the running ones) are taken: its most needed level
 * by size whose levels are free, unless a more needed level of the other
 * lane that shares a level with it could start (that one goes first, as
 * with one thread); else, while no level of v is due by size,
 * v's seek_file, else its deletion_file, if in the lane and free. Returns
 * the level (-1 and PICK_NONE: nothing). */
int compaction_choose(const version *v, int lane, unsigned busy, enum compaction_why *why);
/* The compaction of `level` for `why` (PICK_NONE not allowed), or NULL
 * (out of memory). REQUIRES: mu; level and why are what compaction_choose
 * returned for vs->current under the same hold of mu. */
compaction *compaction_pick(version_set *vs, uint64_t target_file_size, int level,
                            enum compaction_why why);
/* A compaction of `level` restricted to user keys [begin, end] (NULL:
 * unbounded), or NULL if nothing there. REQUIRES: mu. */
compaction *compaction_pick_range(version_set *vs, int level, const char *begin, size_t blen,
                                  const char *end, size_t elen, uint64_t target_file_size);
/* REQUIRES: mu (drops the version reference). */
void compaction_free(compaction *c);

/* A single input file that can just move down a level (nothing to merge,
 * little overlap below; picked for its deletions, only while a deeper level
 * still holds keys they may shadow — else rewriting it drops them). */
bool compaction_is_trivial_move(const compaction *c);
/* Records the deletion of every input file in c->edit. */
bool compaction_add_input_deletions(compaction *c);
/* True if no level below the output level holds user key ukey, so a
 * deletion of it can be dropped. Calls must come in ascending key order. */
bool compaction_is_base_level_for_key(compaction *c, const char *ukey, size_t ulen);
/* True if the output file should end before internal key ikey (it would
 * overlap too much of level + 2). Calls in ascending order. */
bool compaction_should_stop_before(compaction *c, const char *ikey, size_t n);
/* A merging iterator over every input. NULL if out of memory. */
iter *compaction_input_iter(compaction *c, table_cache *tc);
uint64_t compaction_input_bytes(const compaction *c);

/* An output may overlap at most this many bytes of the grandparent level
 * (target: the table size compactions aim for). */
uint64_t max_grandparent_overlap(uint64_t target);

#endif
