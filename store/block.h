/*
 * block.h — the sorted key/value blocks tables are made of (data blocks and
 * the index block), their builder, and an iterator over one.
 *
 * Format of a block:
 *   entry*  restart[num_restarts] (fixed32 each)  num_restarts (fixed32)
 *   entry = varint32 shared | varint32 unshared | varint32 value_len |
 *           key[shared..shared+unshared) | value
 * A key is stored as the number of bytes it shares with the previous key
 * plus the rest. Every `interval`-th entry is a restart point: it shares
 * nothing, and its offset is in the restart array, so a seek can binary
 * search the restart points and then scan at most `interval` entries.
 *
 * The iterator never trusts the bytes: every length is checked against the
 * block's bounds; a malformed block makes the iterator invalid with an
 * LSM_CORRUPTION status, never a read out of bounds.
 */
#ifndef LSM_BLOCK_H
#define LSM_BLOCK_H

#include "coding.h"
#include "iter.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLOCK_RESTART_INTERVAL 16 /* data blocks */

/* ------------------------------------------------------------ builder */

typedef struct block_builder {
    buf data;     /* entries; finish appends the restart array */
    buf restarts; /* fixed32 offsets of the restart points */
    buf last_key;
    int interval; /* entries per restart point */
    int counter;  /* entries since the last restart point */
    uint32_t entries;
    bool finished;
} block_builder;

void block_builder_init(block_builder *b, int restart_interval);
void block_builder_destroy(block_builder *b);
/* Empties the builder for the next block (keeps its memory). */
void block_builder_reset(block_builder *b);
/* REQUIRES: key > every key added since the last reset (in the caller's
 * order), not finished, klen and vlen < 4 GiB. false if out of memory
 * (the builder is then unchanged). */
bool block_builder_add(block_builder *b, const char *key, size_t klen, const char *val,
                       size_t vlen);
/* Appends the restart array; the block's bytes stay valid until the next
 * reset. false if out of memory. */
bool block_builder_finish(block_builder *b, const char **data, size_t *n);
/* The size the block has (once finished) or would have if finished now. */
static inline size_t block_builder_size(const block_builder *b)
{
    return b->finished ? b->data.len : b->data.len + b->restarts.len + 4;
}
static inline bool block_builder_empty(const block_builder *b)
{
    return b->entries == 0;
}

/* ------------------------------------------------------------- reader */

/* A parsed block: a view of bytes someone else owns. */
typedef struct block {
    const char *data;
    size_t size;
    uint32_t restart_offset; /* where the entries end and restarts begin */
    uint32_t num_restarts;   /* 0 for a block with no entries */
} block;

/* Checks the restart array (count, bounds, order) and fills *b. Returns
 * false if the bytes cannot be a block. */
bool block_parse(block *b, const char *data, size_t n);

/* An iterator over one block. It can live inside another structure (the
 * table iterator embeds one and points it at block after block without
 * allocating), or on the heap via block_iter_new. Keys are compared with
 * `cmp`, which must accept keys of any length (they come from disk).
 * Not movable once initialised (it may point into itself). */
typedef struct block_iter {
    iter base;
    iter_cmp_fn cmp;
    const char *data;        /* the block's bytes */
    const char *restarts;    /* its restart array */
    uint32_t restart_offset; /* end of the entries */
    uint32_t num_restarts;
    uint32_t cur;           /* offset of the current entry; restart_offset: invalid */
    uint32_t next;          /* offset of the entry after it */
    uint32_t restart_index; /* the restart point at or before cur */
    uint32_t restart_start; /* its offset */
    uint32_t restart_end;   /* the next one's, or restart_offset */
    const char *key;        /* into data (restart points), kbuf or back */
    size_t key_len;
    const char *val;
    uint32_t val_len;
    char *kbuf; /* rebuilt keys; kspace until one does not fit */
    size_t kcap;
    struct block_back *back; /* entries kept for stepping back; NULL until then */
    lsm_status *status;      /* first error met; the iterator stays invalid */
    char kspace[48];
} block_iter;

/* Initialises an iterator with no block (invalid until set_block). */
void block_iter_init(block_iter *it, iter_cmp_fn cmp);
/* Points the iterator at b (which must outlive its use here), unpositioned.
 * Clears any earlier status. NULL b: no entries. */
void block_iter_set_block(block_iter *it, const block *b);
void block_iter_destroy(block_iter *it);

/* A heap iterator over b (not owned: b must outlive it); NULL if OOM. */
iter *block_iter_new(const block *b, iter_cmp_fn cmp);

/* The iterator operations, callable directly (no indirect call). */
static inline bool block_iter_valid(const block_iter *it)
{
    return it->cur < it->restart_offset;
}
void block_iter_seek_first(block_iter *it);
void block_iter_seek_last(block_iter *it);
void block_iter_seek(block_iter *it, const char *target, size_t n);
void block_iter_next(block_iter *it); /* REQUIRES: valid */
/* REQUIRES: valid. Keys can only be rebuilt walking forward, so the first
 * step back into a restart interval records its entries (up to a bound)
 * and later steps back read the record: O(1) per step, not O(interval). */
void block_iter_prev(block_iter *it);
/* The error met, if any (owned by the iterator: do not free). */
static inline const lsm_status *block_iter_error(const block_iter *it)
{
    return it->status;
}

#endif
