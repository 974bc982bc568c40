/*
 * memtable.h — the in-memory write buffer: an arena skiplist of internal keys.
 *
 * Concurrency: one writer at a time (the caller serialises memtable_add; in
 * the store, the writer-queue leader), any number of readers at once without
 * locks — a reader never sees a half-linked node (nodes are published with
 * release stores and read with acquire loads). Reference counting is atomic.
 * Memory comes from an arena: no malloc per insert; it is freed all at once
 * when the last reference goes, with the batch buffers it keeps
 * (memtable_keep), whose big values its entries point at.
 */
#ifndef LSM_MEMTABLE_H
#define LSM_MEMTABLE_H

#include "coding.h"
#include "dbformat.h"
#include "iter.h"

typedef struct memtable memtable;

memtable *memtable_new(void); /* refcount 1; NULL if out of memory */
/* The same with its arena's blocks from the pool (arena_init_pooled); its
 * usage then grows a pooled block at a time. */
memtable *memtable_new_pooled(void);
void memtable_ref(memtable *m);
void memtable_unref(memtable *m);

/* Takes *bytes (a batch's, batch_insert_kept) to keep until m is freed;
 * *bytes is left empty. While it is the newest kept buffer, memtable_add
 * points at values of MEMTABLE_REF_MIN bytes or more lying in it instead of
 * copying them (memtable.c's `refers`: the one rule). Its length counts
 * in memtable_memory_usage. false if out of memory (nothing taken).
 * REQUIRES: the writer serialisation of memtable_add. */
#define MEMTABLE_REF_MIN 1024 /* a pointer and a cache miss cost less than the copy */
bool memtable_keep(memtable *m, buf *bytes);
/* Gives the newest kept buffer back into *bytes (a write that failed before
 * its insert). REQUIRES: no entry added since memtable_keep; the writer
 * serialisation. */
void memtable_unkeep(memtable *m, buf *bytes);

/* Inserts (user key, seq, type) -> value. REQUIRES: external serialisation
 * of writers; seq not already present for this key. Returns false only if
 * the arena could not grow (out of memory); the memtable is then unchanged. */
bool memtable_add(memtable *m, uint64_t seq, enum value_type type, const void *key, size_t klen,
                  const void *val, size_t vlen);

enum memtable_get_result {
    MEMTABLE_ABSENT = 0,  /* no entry for the key at or below seq */
    MEMTABLE_FOUND = 1,   /* *val is a malloc'd copy of the value */
    MEMTABLE_DELETED = 2, /* the newest visible entry is a deletion */
    MEMTABLE_NOMEM = 3,   /* found, but the copy could not be allocated */
};
/* Looks up the newest entry for key with sequence <= seq. */
enum memtable_get_result memtable_get(memtable *m, const void *key, size_t klen, uint64_t seq,
                                      char **val, size_t *vlen);

/* Bytes of arena in use and kept (what write_buffer_size is compared against). */
size_t memtable_memory_usage(const memtable *m);
/* Bytes of the batch buffers it keeps (memtable_keep): big writes' data. */
size_t memtable_kept_bytes(const memtable *m);
/* Whether at least half of m's bytes are kept buffers: a big file's data. */
bool memtable_mostly_kept(const memtable *m);
uint64_t memtable_entries(const memtable *m);
uint64_t memtable_deletions(const memtable *m); /* entries that are deletions */

/* An iterator over internal keys; holds a reference to m until freed. */
iter *memtable_iter_new(memtable *m);

#endif
