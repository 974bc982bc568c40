/*
 * wal.h — the write-ahead log format: a sequence of 32 KiB blocks, each
 * holding record fragments:
 *   fixed32 masked crc32c(type byte + payload) | fixed16 length | type | payload
 * type is FULL (1), FIRST (2), MIDDLE (3) or LAST (4). A record that does
 * not fit in the rest of a block is split; fewer than 7 bytes left in a block
 * are zero-filled. Type 0 with length 0 (zeros) is padding/preallocated space.
 */
#ifndef LSM_WAL_H
#define LSM_WAL_H

#include "env.h"

#define WAL_BLOCK_SIZE 32768
#define WAL_HEADER_SIZE 7

enum wal_record_type {
    WAL_ZERO = 0,
    WAL_FULL = 1,
    WAL_FIRST = 2,
    WAL_MIDDLE = 3,
    WAL_LAST = 4,
};

/* ---- writer. One thread at a time (the writer-queue leader). */
typedef struct wal_writer wal_writer;

/* Takes ownership of f, which is empty or (offset > 0) already holds offset
 * bytes of log. NULL if out of memory (f is then closed). */
wal_writer *wal_writer_new(lsm_wfile *f, uint64_t offset);
/* Appends one record, fragmented over blocks. The bytes may sit in the
 * file's buffer until wal_flush/wal_sync. */
lsm_status *wal_add_record(wal_writer *w, const void *data, size_t n);
lsm_status *wal_flush(wal_writer *w);
lsm_status *wal_sync(wal_writer *w);
/* env.h's hold_for_sync for the log's file (nothing where the env has none). */
void wal_hold_for_sync(wal_writer *w, bool on);
uint64_t wal_offset(const wal_writer *w); /* bytes of log written so far */
/* Closes the file (no sync) and frees w. */
lsm_status *wal_writer_close(wal_writer *w);

/* ---- reader. */
typedef struct wal_reader wal_reader;

typedef struct wal_reader_stats {
    uint64_t records;
    uint64_t dropped_bytes;   /* skipped because of corruption in the middle */
    uint64_t corruptions;     /* corrupt regions met in the middle */
    uint64_t torn_tail_bytes; /* an incomplete or bad last record, dropped */
    bool torn_tail;
    uint64_t torn_tail_offset; /* where the torn tail began */
    const char *torn_tail_why; /* what was wrong there (static text) */
    uint64_t damage_offset; /* where the first corrupt region met in the middle began */
    const char *damage_why; /* what it was (static text); NULL if none */
    bool hole;              /* the log ended at a zero hole (wal_reader_end_at_hole) */
    uint64_t hole_offset;   /* where that hole began */
} wal_reader_stats;

/* Takes ownership of f. With paranoid, corruption in the middle of the log
 * (bad data followed by good records) is an error; without, it is skipped and
 * counted. A bad or incomplete record at the very end (a torn write) is
 * never an error: it is dropped and reported in the stats. `name` is used in
 * messages. NULL if out of memory (f is then closed). */
wal_reader *wal_reader_new(lsm_sfile *f, const char *name, bool paranoid);
/* Makes zero-filled space followed by good records the end of the log (a
 * torn tail ending at the hole) instead of damage in the middle: after a
 * power cut with out-of-order writeback, the records behind a hole were
 * never covered by a completed sync (a sync would have written the hole
 * too), so they were never acknowledged durable. For the WAL only; the
 * MANIFEST, synced edit by edit, keeps treating a hole as corruption. */
void wal_reader_end_at_hole(wal_reader *r);
/* Reads the next whole record. On success *rec points at n bytes valid until
 * the next call; *eof is set at the end of the log. */
lsm_status *wal_read_record(wal_reader *r, const char **rec, size_t *n, bool *eof);
const wal_reader_stats *wal_reader_stats_get(const wal_reader *r);
void wal_reader_free(wal_reader *r);

#endif
