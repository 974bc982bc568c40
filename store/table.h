/*
 * table.h — sorted string tables: immutable files of internal keys and
 * values, written once by a builder (flush, compaction) and read by many
 * threads at once.
 *
 * File format (all integers little-endian; offsets from the file start):
 *
 *   data block 1 | trailer        blocks of ~block_size bytes (before
 *   ...                           compression) holding the entries in
 *   data block N | trailer        order, restart interval 16 (block.h)
 *   filter       | trailer        one bloom filter (bloom.h) over the user
 *                                 keys of the whole table (absent when
 *                                 bloom_bits_per_key is 0)
 *   index block  | trailer        restart interval 1: one entry per data
 *                                 block, key = a separator >= the block's
 *                                 last key and < the next block's first,
 *                                 value = varint64 offset, varint64 size
 *   footer (48 bytes):
 *     fixed64 filter offset, fixed64 filter size (size 0: no filter)
 *     fixed64 index offset,  fixed64 index size
 *     fixed32 format version (1)
 *     fixed32 masked crc32c of the 36 bytes above
 *     fixed64 magic TABLE_MAGIC
 *
 *   trailer (5 bytes): 1 byte type (0 raw, 1 lz4), fixed32 masked crc32c
 *   of the stored block bytes followed by the type byte.
 *   An lz4 block is varint32 uncompressed size | LZ4 data; it is used only
 *   when that is at least 1/8 smaller than the raw block.
 *
 * A handle's size excludes the trailer. One filter per table (not one per
 * 2 KiB of data as in LevelDB): a get checks it before the index, so a
 * table without the key costs one hash and one cache line, no block.
 *
 * Reading never trusts the file: every block's checksum is verified when
 * it is read from the file (whatever ro->verify_checksums says: the cost is
 * small next to the read, and returning garbage is not an option), every
 * handle is bounds-checked, and decoding is bounds-checked (block.h). Any
 * damage is an LSM_CORRUPTION status naming the table and the offset.
 */
#ifndef LSM_TABLE_H
#define LSM_TABLE_H

#include "cache.h"
#include "env.h"
#include "iter.h"
#include "lsm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TABLE_MAGIC UINT64_C(0x3174626c73666d73) /* "smfslbt1" read as bytes */
#define TABLE_FORMAT_VERSION 1
#define TABLE_FOOTER_SIZE 48
#define TABLE_TRAILER_SIZE 5
enum table_block_type { TABLE_BLOCK_RAW = 0, TABLE_BLOCK_LZ4 = 1 };

typedef struct table_options {
    size_t block_size;      /* target raw size of a data block */
    int bloom_bits_per_key; /* 0: no filter */
    bool compression;       /* lz4 where it saves at least 1/8 */
} table_options;

static inline void table_options_from(table_options *to, const lsm_options *o)
{
    to->block_size = o->block_size;
    to->bloom_bits_per_key = o->bloom_bits_per_key;
    to->compression = o->compression;
}

/* ------------------------------------------------------------ builder */

/* Writes one table to `file` (not owned: the caller syncs and closes it
 * after finish). Not thread-safe. */
typedef struct table_builder table_builder;

table_builder *table_builder_new(const table_options *o, lsm_wfile *file); /* NULL if OOM */
/* Appends an entry. REQUIRES: ikey (an internal key, >= 8 bytes) sorts
 * after every key added before; not finished. The first error (I/O, out
 * of memory) sticks: this and every later call return a copy of it. */
lsm_status *table_builder_add(table_builder *b, const char *ikey, size_t klen, const char *val,
                              size_t vlen);
/* Writes the last data block, filter, index and footer. */
lsm_status *table_builder_finish(table_builder *b);
/* Frees the builder; if not finished, the partial file is simply left for
 * the caller to delete. */
void table_builder_free(table_builder *b);

uint64_t table_builder_entries(const table_builder *b);
/* The distinct user keys added, and how many of them are deleted (their
 * newest entry here a deletion): what deletion-triggered compaction goes by
 * (version.h). Older versions of a key are not counted: a key created,
 * rewritten and deleted within one memtable is one deleted key. */
uint64_t table_builder_keys(const table_builder *b);
uint64_t table_builder_deletions(const table_builder *b);
/* Bytes written so far (the file's size once finished). */
uint64_t table_builder_file_size(const table_builder *b);
/* The first and last internal keys added (REQUIRES: entries > 0). */
const char *table_builder_smallest(const table_builder *b, size_t *n);
const char *table_builder_largest(const table_builder *b, size_t *n);

/* ------------------------------------------------------------- reader */

/* An open table. Thread-safe: any number of gets and iterators at once. */
typedef struct sstable sstable;

/* Reads and checks the footer, index and filter. Takes ownership of file
 * (closed on failure too). `number` names the table in error messages;
 * block_cache (may be NULL) caches its decoded data blocks. */
lsm_status *table_open(lsm_rfile *file, uint64_t file_size, uint64_t number, cache *block_cache,
                       sstable **out);
void table_free(sstable *t); /* REQUIRES: no iterator over t is left */

/* Memory the table holds while open (index and filter). */
size_t table_memory_usage(const sstable *t);

/* Called by table_get with the entry found; key and value are valid only
 * during the call. */
typedef void (*table_get_fn)(void *ctx, const char *ikey, size_t klen, const char *val,
                             size_t vlen);

/* Looks up the internal seek key ikey = (user key, seq, TYPE_SEEK): if the
 * table has an entry for that user key with sequence <= seq, calls fn once
 * with the newest such entry (a value or a deletion: the caller parses its
 * type). The bloom filter is checked on the user key before any data block
 * is read. Returns NULL when no error occurred, whether found or not.
 * ro may be NULL (defaults: fill the cache). */
lsm_status *table_get(sstable *t, const lsm_read_options *ro, const char *ikey, size_t n,
                      table_get_fn fn, void *ctx);

/* An iterator over the table's internal keys, both directions. `cleanup`
 * (may be NULL) is called with `arg` when it is freed (the table cache uses
 * it to unpin the table). NULL if out of memory (cleanup not called). */
iter *table_iter_new(sstable *t, const lsm_read_options *ro, void (*cleanup)(void *arg), void *arg);

/* The file offset where the entries >= ikey begin (for size estimates):
 * the offset of the block that would hold ikey, or the end of the data for
 * a key past the last. */
uint64_t table_approximate_offset(sstable *t, const char *ikey, size_t n);

#endif
