/*
 * batch.h — the WriteBatch encoding, inside the store.
 *
 * A batch is one byte string:
 *   fixed64 sequence | fixed32 count | records...
 *   record: TYPE_VALUE    varint32 klen, key, varint32 vlen, value
 *           TYPE_DELETION varint32 klen, key
 * The same bytes are what a WAL record holds, so a group of batches is
 * written by concatenating records and fixing the header. The public
 * functions (lsm_batch_*) are declared in lsm.h.
 *
 * Two more WAL records are not batches: a header and one tag byte (13
 * bytes; no batch with a record is that short):
 *   WAL_DEFERRED (sequence, count): a batch written with defer_log went to
 *       the memtable but not to the log. Its own record follows later
 *       ("logged late", before the next logged batch or sync) unless its
 *       memtable reaches a table first.
 *   WAL_EPOCH (0, 0): written by recovery after it dropped records: the
 *       records it skipped stay skipped in every later recovery.
 */
#ifndef LSM_BATCH_H
#define LSM_BATCH_H

#include "memtable.h"

#define BATCH_HEADER 12
#define WAL_MARKER_LEN (BATCH_HEADER + 1)

enum wal_record_kind { WAL_BATCH, WAL_DEFERRED, WAL_EPOCH };

struct lsm_batch {
    buf rep; /* always at least BATCH_HEADER bytes once initialised */
};

/* For batches embedded in other structs (no malloc of the lsm_batch). */
bool batch_init(lsm_batch *b);
void batch_destroy(lsm_batch *b);

uint64_t batch_sequence(const lsm_batch *b);
void batch_set_sequence(lsm_batch *b, uint64_t seq);
void batch_set_count(lsm_batch *b, uint32_t n);
static inline const char *batch_contents(const lsm_batch *b, size_t *n)
{
    *n = b->rep.len;
    return b->rep.data;
}
/* Replaces the contents with bytes read from the WAL; LSM_CORRUPTION if they
 * are too short to be a batch (records are checked when iterated). */
lsm_status *batch_set_contents(lsm_batch *b, const char *data, size_t n);
/* Inserts every record into m with sequences batch_sequence(b), +1, ...
 * REQUIRES: the memtable's writer serialisation. A malformed batch (bad
 * record, count mismatch, sequences past MAX_SEQUENCE) is LSM_CORRUPTION,
 * rejected whole before anything is inserted. Out of arena memory part-way
 * is LSM_NO_MEMORY with a prefix of the batch inserted: m then holds a
 * partial batch the caller must not use as if the write had happened (a
 * write makes it sticky, db_wal_appended; recovery fails the open). */
lsm_status *batch_insert_into(const lsm_batch *b, memtable *m);
/* The one way a batch's bytes change owner (a deferred batch, db_defer.c):
 * m keeps b's bytes (memtable_keep) and b, given *spare (room for
 * BATCH_HEADER bytes or more), is left empty as after lsm_batch_clear;
 * *spare is left empty. LSM_CORRUPTION (a malformed batch, as
 * batch_insert_into's) or LSM_NO_MEMORY: nothing changed. */
lsm_status *batch_give(lsm_batch *b, memtable *m, buf *spare);
/* Inserts the bytes (data, len) of a batch given to m (so checked), as
 * batch_insert_into: m's entries point at their big values (memtable.h). */
lsm_status *batch_insert_kept(const char *data, size_t len, memtable *m);
/* After batch_give of b's bytes (data, len) to m, the write failed: b is
 * as it was. Before batch_insert_kept (!inserted) b gets its own buffer back
 * and *spare its spare (memtable_unkeep); after an insert out of memory
 * part-way, a copy (b is left empty if there is no memory for it either:
 * the store's error is then sticky). */
void batch_take_back(lsm_batch *b, memtable *m, buf *spare, const char *data, size_t len,
                     bool inserted);

/* Encodes a WAL_DEFERRED or WAL_EPOCH record into out. */
void wal_marker_encode(char out[WAL_MARKER_LEN], enum wal_record_kind kind, uint64_t seq,
                       uint32_t count);
/* What a WAL record is; for a marker, *seq and *count get its header. */
enum wal_record_kind wal_record_kind_of(const char *rec, size_t n, uint64_t *seq, uint32_t *count);

#endif
