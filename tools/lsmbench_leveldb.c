/*
 * lsmbench_leveldb.c — LevelDB as a lsmbench engine, through LevelDB's C API.
 *
 * Built with -DHAVE_LEVELDB=1 when the Makefile finds leveldb/c.h; otherwise
 * bench_engine_leveldb() returns NULL and lsmbench says the engine is not
 * built. Options left alone keep LevelDB's own defaults (8 MiB internal block
 * cache, no bloom filter, snappy if built in), as db_bench does.
 */
#include "lsmbench_engine.h"

#include <stddef.h>

#ifndef HAVE_LEVELDB

const bench_engine *bench_engine_leveldb(void)
{
    return NULL;
}

#else

#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

/* What a bench_db is for this engine. Read-only after open. */
typedef struct ldb {
    leveldb_t *db;
    leveldb_options_t *options;
    leveldb_cache_t *cache;         /* NULL: LevelDB's internal default */
    leveldb_filterpolicy_t *filter; /* NULL: no filter */
    leveldb_readoptions_t *ro;
    leveldb_writeoptions_t *wo_sync;
    leveldb_writeoptions_t *wo_nosync;
} ldb;

static ldb *as_ldb(bench_db *db)
{
    return (ldb *)db;
}

/* LevelDB's error strings come from its own allocator; hand back ours. */
static char *take_error(char *err)
{
    if (err == NULL)
        return NULL;
    char *copy = strdup(err);
    leveldb_free(err);
    return copy != NULL ? copy : strdup("out of memory");
}

static void ldb_free(ldb *h)
{
    if (h->db != NULL)
        leveldb_close(h->db);
    if (h->options != NULL)
        leveldb_options_destroy(h->options);
    if (h->cache != NULL)
        leveldb_cache_destroy(h->cache);
    if (h->filter != NULL)
        leveldb_filterpolicy_destroy(h->filter);
    if (h->ro != NULL)
        leveldb_readoptions_destroy(h->ro);
    if (h->wo_sync != NULL)
        leveldb_writeoptions_destroy(h->wo_sync);
    if (h->wo_nosync != NULL)
        leveldb_writeoptions_destroy(h->wo_nosync);
    free(h);
}

static void apply_options(ldb *h, const bench_open_options *o)
{
    leveldb_options_set_create_if_missing(h->options, o->create);
    if (o->write_buffer_size > 0)
        leveldb_options_set_write_buffer_size(h->options, o->write_buffer_size);
    if (o->cache_size > 0) {
        h->cache = leveldb_cache_create_lru(o->cache_size);
        leveldb_options_set_cache(h->options, h->cache);
    }
    if (o->bloom_bits > 0) {
        h->filter = leveldb_filterpolicy_create_bloom(o->bloom_bits);
        leveldb_options_set_filter_policy(h->options, h->filter);
    }
    if (o->compression >= 0)
        leveldb_options_set_compression(h->options, o->compression ? leveldb_snappy_compression
                                                                   : leveldb_no_compression);
}

static char *l_open(const bench_open_options *o, const char *dir, bench_db **out)
{
    ldb *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return strdup("out of memory");
    h->options = leveldb_options_create();
    h->ro = leveldb_readoptions_create();
    h->wo_sync = leveldb_writeoptions_create();
    h->wo_nosync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(h->wo_sync, 1);
    apply_options(h, o);
    char *err = NULL;
    h->db = leveldb_open(h->options, dir, &err);
    if (err != NULL) {
        h->db = NULL;
        ldb_free(h);
        return take_error(err);
    }
    *out = (bench_db *)h;
    return NULL;
}

static char *l_close(bench_db *db)
{
    if (db != NULL)
        ldb_free(as_ldb(db));
    return NULL;
}

static char *l_destroy(const char *dir)
{
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;
    leveldb_destroy_db(o, dir, &err);
    leveldb_options_destroy(o);
    return take_error(err);
}

static bench_batch *l_batch_new(void)
{
    return (bench_batch *)leveldb_writebatch_create();
}

static void l_batch_free(bench_batch *b)
{
    if (b != NULL)
        leveldb_writebatch_destroy((leveldb_writebatch_t *)b);
}

static void l_batch_clear(bench_batch *b)
{
    leveldb_writebatch_clear((leveldb_writebatch_t *)b);
}

static bool l_batch_put(bench_batch *b, const char *key, size_t klen, const char *val, size_t vlen)
{
    leveldb_writebatch_put((leveldb_writebatch_t *)b, key, klen, val, vlen);
    return true;
}

static char *l_write(bench_db *db, bench_batch *b, bool sync)
{
    ldb *h = as_ldb(db);
    char *err = NULL;
    leveldb_write(h->db, sync ? h->wo_sync : h->wo_nosync, (leveldb_writebatch_t *)b, &err);
    return take_error(err);
}

static char *l_get(bench_db *db, const char *key, size_t klen, bool *found, size_t *vlen)
{
    ldb *h = as_ldb(db);
    char *err = NULL;
    size_t len = 0;
    char *val = leveldb_get(h->db, h->ro, key, klen, &len, &err);
    if (err != NULL)
        return take_error(err);
    *found = val != NULL;
    *vlen = val != NULL ? len : 0;
    leveldb_free(val);
    return NULL;
}

static leveldb_iterator_t *as_it(const bench_iter *it)
{
    return (leveldb_iterator_t *)it;
}

static bench_iter *l_iter_new(bench_db *db)
{
    ldb *h = as_ldb(db);
    return (bench_iter *)leveldb_create_iterator(h->db, h->ro);
}

static void l_iter_free(bench_iter *it)
{
    if (it != NULL)
        leveldb_iter_destroy(as_it(it));
}

static void l_iter_seek_first(bench_iter *it)
{
    leveldb_iter_seek_to_first(as_it(it));
}

static void l_iter_seek_last(bench_iter *it)
{
    leveldb_iter_seek_to_last(as_it(it));
}

static bool l_iter_valid(const bench_iter *it)
{
    return leveldb_iter_valid(as_it(it)) != 0;
}

static void l_iter_next(bench_iter *it)
{
    leveldb_iter_next(as_it(it));
}

static void l_iter_prev(bench_iter *it)
{
    leveldb_iter_prev(as_it(it));
}

static const char *l_iter_key(const bench_iter *it, size_t *klen)
{
    return leveldb_iter_key(as_it(it), klen);
}

static const char *l_iter_value(const bench_iter *it, size_t *vlen)
{
    return leveldb_iter_value(as_it(it), vlen);
}

static char *l_iter_error(const bench_iter *it)
{
    char *err = NULL;
    leveldb_iter_get_error(as_it(it), &err);
    return take_error(err);
}

static char *l_property(bench_db *db, const char *name)
{
    char *v = leveldb_property_value(as_ldb(db)->db, name);
    if (v == NULL)
        return NULL;
    char *copy = strdup(v);
    leveldb_free(v);
    return copy;
}

static char *l_compact_all(bench_db *db)
{
    leveldb_compact_range(as_ldb(db)->db, NULL, 0, NULL, 0);
    return NULL;
}

static const bench_engine leveldb_engine = {
    .name = "leveldb",
    .prop_prefix = "leveldb.",
    .open = l_open,
    .close = l_close,
    .destroy = l_destroy,
    .batch_new = l_batch_new,
    .batch_free = l_batch_free,
    .batch_clear = l_batch_clear,
    .batch_put = l_batch_put,
    .write = l_write,
    .get = l_get,
    .iter_new = l_iter_new,
    .iter_free = l_iter_free,
    .iter_seek_first = l_iter_seek_first,
    .iter_seek_last = l_iter_seek_last,
    .iter_valid = l_iter_valid,
    .iter_next = l_iter_next,
    .iter_prev = l_iter_prev,
    .iter_key = l_iter_key,
    .iter_value = l_iter_value,
    .iter_error = l_iter_error,
    .property = l_property,
    .compact_all = l_compact_all,
};

const bench_engine *bench_engine_leveldb(void)
{
    return &leveldb_engine;
}

#endif /* HAVE_LEVELDB */
