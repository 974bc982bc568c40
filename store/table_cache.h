/*
 * table_cache.h — the store's open tables, kept in an LRU cache keyed by
 * file number so that at most `capacity` table files are open at once.
 *
 * A miss opens "<dir>/<number:06>.ldb" through the env (reading its footer,
 * index and filter); errors are not cached, so a later call retries.
 * Gets and iterators pin their table while they use it: evicting or
 * erasing a table never pulls it from under a reader — it is closed when
 * the last user lets go.
 *
 * Thread-safe: every function may be called from any thread at once (the
 * cache's shard mutexes are the only locks; two threads missing on the same
 * table may both open it, and one copy then wins).
 */
#ifndef LSM_TABLE_CACHE_H
#define LSM_TABLE_CACHE_H

#include "cache.h"
#include "env.h"
#include "iter.h"
#include "table.h"

typedef struct table_cache table_cache;

/* dir is copied; block_cache (may be NULL) is shared by all tables and
 * must outlive the table cache. mapped: each table is mapped as it is
 * opened, for its point reads (env.h's mapped reads; read with pread
 * where the env cannot). NULL if out of memory. */
table_cache *table_cache_new(lsm_env *env, const char *dir, cache *block_cache, int capacity,
                             bool mapped);
/* REQUIRES: no iterator from table_cache_iter is left. */
void table_cache_free(table_cache *tc);

/* table_get (see table.h) on table `number`. file_size is the table's
 * size as recorded in the version (0: ask the env). */
lsm_status *table_cache_get(table_cache *tc, const lsm_read_options *ro, uint64_t number,
                            uint64_t file_size, const char *ikey, size_t n, table_get_fn fn,
                            void *ctx);
/* An iterator over table `number`. Never NULL: on error (the table cannot
 * be opened, out of memory) an empty iterator carrying the status. */
iter *table_cache_iter(table_cache *tc, const lsm_read_options *ro, uint64_t number,
                       uint64_t file_size);
lsm_status *table_cache_approximate_offset(table_cache *tc, uint64_t number, uint64_t file_size,
                                           const char *ikey, size_t n, uint64_t *offset);
/* Forgets table `number` (its file is being deleted). */
void table_cache_evict(table_cache *tc, uint64_t number);

#endif
