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
 */
#ifndef LSM_BATCH_H
#define LSM_BATCH_H

#include "memtable.h"

#define BATCH_HEADER 12

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
 * REQUIRES: the memtable's writer serialisation. LSM_CORRUPTION if a record
 * is malformed or the count does not match. */
lsm_status *batch_insert_into(const lsm_batch *b, memtable *m);

#endif
