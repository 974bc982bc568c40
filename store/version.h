/*
 * version.h — reading a version: point lookups across the levels, iterators
 * over them, and the overlap queries compaction needs.
 *
 * A version is immutable once installed; everything here only reads it, and
 * the caller keeps it pinned (a reference, see version_set.h) meanwhile.
 */
#ifndef LSM_VERSION_H
#define LSM_VERSION_H

#include "memtable.h"
#include "table_cache.h"
#include "version_set.h"

/* Where a point read searched more than one table: the first one searched
 * (to charge a seek, file_allowed_seeks) and its level; file NULL if the
 * read searched at most one. */
typedef struct seek_charge {
    file_meta *file;
    int level;
} seek_charge;

/* Looks up the internal seek key (user key, seq, TYPE_SEEK) in v's tables:
 * level 0 newest first, then at most one file per deeper level, stopping at
 * the first entry found. Same results as memtable_get; *err is set (and
 * MEMTABLE_ABSENT returned) if a table could not be read. *charge says
 * which table, if any, the read owes a seek. */
enum memtable_get_result version_get(version *v, table_cache *tc, const lsm_read_options *ro,
                                     const char *ikey, size_t n, char **val, size_t *vlen,
                                     lsm_status **err, seek_charge *charge);

/* Index of the first file in a sorted level whose largest key >= ikey
 * (n when there is none). */
int level_find_file(file_meta *const *files, int n, const char *ikey, size_t klen);

/* Appends to *its (growing it with realloc) one iterator per level-0 file and
 * one concatenating iterator per deeper non-empty level. false if out of
 * memory (what was appended is still owned by the caller). */
bool version_add_iters(version *v, table_cache *tc, const lsm_read_options *ro, iter ***its, int *n,
                       int *cap);

/* An iterator over the files of a sorted level (disjoint, ascending), opening
 * each table only when reached. `files` must stay valid while it lives (it
 * belongs to a pinned version or a compaction). */
iter *level_iter_new(table_cache *tc, const lsm_read_options *ro, file_meta *const *files, int n);

/* Files of `level` whose user-key range intersects [begin, end] (NULL:
 * unbounded). For level 0 the range is widened to cover every overlapping
 * file transitively, as level-0 files overlap each other. *out is malloc'd;
 * false if out of memory (*out is then NULL). */
bool version_overlapping(const version *v, int level, const char *begin, size_t blen,
                         const char *end, size_t elen, file_meta ***out, int *n);
/* Whether any file of `level` intersects the user-key range [begin, end]. */
bool version_overlaps_level(const version *v, int level, const char *begin, size_t blen,
                            const char *end, size_t elen);

/* The level a flushed table of user keys [smallest, largest] goes to: 0,
 * unless it overlaps nothing there, then as deep as MAX_FLUSH_LEVEL while it
 * overlaps nothing in the next level and at most max_grandparent_bytes two
 * levels down (LevelDB's rule: data written in key order skips the moves
 * through levels 0 and 1, each of which costs a MANIFEST sync). */
#define MAX_FLUSH_LEVEL 2
int version_level_for_flush(const version *v, const char *smallest, size_t slen,
                            const char *largest, size_t llen, uint64_t max_grandparent_bytes);

/* Bytes of the tables in `level`. */
uint64_t version_level_bytes(const version *v, int level);
/* The byte size that triggers compaction of `level` (>= 1), level 1's
 * being level1_bytes. */
uint64_t version_max_bytes_for_level(uint64_t level1_bytes, int level);
#define VERSION_LEVEL1_BYTES (10u << 20) /* the default level1_bytes */
/* The compaction debt (level targets as v was scored with): the bytes compaction must move to bring every level
 * within its target — every level-0 byte, and what a level holds past its
 * target once the bytes from above arrived, level by level down (a measure,
 * shown by "lsm.compaction-debt-bytes"; nothing is decided by it). */
uint64_t version_compaction_debt(const version *v);
/* Sets v->level_score (>= 1: the level needs compaction), the most needed
 * level in v->compaction_level and its v->compaction_score, the
 * level-0 load and, when no level is due by size, v->deletion_file: of the
 * tombstone-heavy files above the last level, the one with the largest
 * share of deletions (the shallower on a tie). Compacting it down drops its
 * deletions with what they shadow, or carries them one level closer to it;
 * at the last level nothing is left below them (RocksDB's deletion-triggered
 * compaction, CompactOnDeletionCollector). */
void version_compute_score(version *v, int l0_trigger, uint64_t l0_unit_bytes,
                           uint64_t level1_bytes);

/* Whether f is tombstone-heavy: at least half of its keys are deleted (a
 * level whose deleted keys outweigh its live ones always holds such a
 * file). The one rule deletion-triggered compaction goes by. */
bool file_meta_tombstone_heavy(const file_meta *f);
/* Whether a compaction is due, by size, by seeks or by deletions. */
bool version_needs_compaction(const version *v);

#endif
