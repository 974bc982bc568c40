/*
 * version_edit.h — one change to the set of files that make up the store, as
 * recorded in the MANIFEST: tables added to and removed from levels, the
 * oldest live log, the next file number, the last sequence number.
 *
 * Encoding: a sequence of (varint32 tag, fields) pairs; unknown tags are a
 * corruption error, so an older binary never misreads a newer store. A new
 * file's key and deletion counts follow its record as an optional tagged
 * field (TAG_FILE_COUNTS); a MANIFEST written before it leaves them 0
 * (unknown), which deletion-triggered compaction reads as "nothing to drop".
 */
#ifndef LSM_VERSION_EDIT_H
#define LSM_VERSION_EDIT_H

#include "dbformat.h"
#include "lsm.h"

#include <stdatomic.h>

#define NUM_LEVELS 7
/* Written as the first edit of every MANIFEST; a store without it, or with
 * another string, is not ours (or is of another format version). */
#define STORE_FORMAT "lsmfs-store-1"

typedef struct file_meta {
    int refs; /* versions holding this file; guarded by the db mutex */
    uint64_t number;
    uint64_t size;
    buf smallest; /* internal keys */
    buf largest;
    /* What the table builder counted (0, 0: unknown, from an older MANIFEST):
     * its distinct user keys and how many of them are deleted (table.h). Set
     * before the file joins an edit, immutable after. */
    uint64_t keys;
    uint64_t deletions;
    /* Point reads that may still search this table first in vain before it
     * is compacted down for them (file_allowed_seeks). [atomic] */
    atomic_int allowed_seeks;
} file_meta;

/* Seek compaction (LevelDB's rule). A point read that searches a table and
 * then must search another (the key was not in the first, or only deeper)
 * charges the first one a seek; a table that used up its allowed seeks is
 * compacted down (version->seek_file), which merges it with what the reads
 * went on to. Its allowance is the seeks that cost about as much as
 * compacting it: one per 16 KiB, at least 100. Reads over a tree a write
 * burst left uneven (tables in levels 0 and 1 short of their triggers) so
 * make it as even as compaction by size would, and only where they read. */
int file_allowed_seeks(uint64_t size);

file_meta *file_meta_new(uint64_t number, uint64_t size, const char *smallest, size_t slen,
                         const char *largest, size_t llen); /* refs = 0; NULL if OOM */
void file_meta_unref(file_meta *f);                         /* frees at 0 */

typedef struct new_file {
    int level;
    file_meta *f; /* owned (one reference) by the edit */
} new_file;

typedef struct deleted_file {
    int level;
    uint64_t number;
} deleted_file;

typedef struct version_edit {
    bool has_format;
    char format[32];
    bool has_log_number;
    uint64_t log_number; /* logs older than this are no longer needed */
    bool has_next_file;
    uint64_t next_file;
    bool has_last_seq;
    uint64_t last_seq;
    new_file *added;
    int nadded, cap_added;
    deleted_file *deleted;
    int ndeleted, cap_deleted;
    bool has_compact_pointer[NUM_LEVELS];
    buf compact_pointer[NUM_LEVELS];
} version_edit;

void version_edit_init(version_edit *e);
void version_edit_destroy(version_edit *e);
void version_edit_set_log_number(version_edit *e, uint64_t n);
void version_edit_set_next_file(version_edit *e, uint64_t n);
void version_edit_set_last_seq(version_edit *e, uint64_t s);
void version_edit_set_format(version_edit *e);
/* Takes a reference on f. false if out of memory. */
bool version_edit_add_file(version_edit *e, int level, file_meta *f);
bool version_edit_delete_file(version_edit *e, int level, uint64_t number);
bool version_edit_set_compact_pointer(version_edit *e, int level, const char *ikey, size_t n);

bool version_edit_encode(const version_edit *e, buf *out);
/* Parses into a fresh edit (initialised here); LSM_CORRUPTION on bad input. */
lsm_status *version_edit_decode(version_edit *e, const char *data, size_t n);

#endif
