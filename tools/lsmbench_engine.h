/*
 * lsmbench_engine.h — the small engine interface lsmbench runs its benchmarks
 * through, so our store and LevelDB execute exactly the same benchmark code.
 *
 * An engine is a table of function pointers over opaque handles. Every
 * function that can fail returns NULL on success or a malloc'd error message
 * (free() it). Handles follow the underlying engine's threading rules: a db is
 * shared by all benchmark threads, a batch or iterator by one thread only.
 */
#ifndef LSMBENCH_ENGINE_H
#define LSMBENCH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_db bench_db;
typedef struct bench_batch bench_batch;
typedef struct bench_iter bench_iter;

/* Tuning passed through to the engine; a negative value (or 0 for sizes)
 * keeps the engine's own default, so by default each engine runs the way a
 * user gets it. */
typedef struct bench_open_options {
    bool create;              /* create if missing */
    size_t write_buffer_size; /* 0: engine default */
    size_t cache_size;        /* block cache bytes; 0: engine default */
    int bloom_bits;           /* -1: engine default; 0: none */
    int commit_delay_us;      /* -1: engine default (ours only: group commit gather) */
    int wal_mode;             /* ours only: lsm_options.wal_mode */
    int mapped_reads;         /* ours only: lsm_options.mapped_reads; -1: default */
    int compression;          /* -1: engine default; 0 off; 1 on */
} bench_open_options;

typedef struct bench_engine {
    const char *name;        /* "lsm", "leveldb" */
    const char *prop_prefix; /* "lsm." / "leveldb." for property names */

    char *(*open)(const bench_open_options *o, const char *dir, bench_db **out);
    char *(*close)(bench_db *db);      /* NULL db allowed */
    char *(*destroy)(const char *dir); /* removes the store in dir */

    bench_batch *(*batch_new)(void); /* NULL only if out of memory */
    void (*batch_free)(bench_batch *b);
    void (*batch_clear)(bench_batch *b);
    /* false only if out of memory */
    bool (*batch_put)(bench_batch *b, const char *key, size_t klen, const char *val, size_t vlen);
    char *(*write)(bench_db *db, bench_batch *b, bool sync);

    /* *found tells whether the key exists; the value is read and dropped. */
    char *(*get)(bench_db *db, const char *key, size_t klen, bool *found, size_t *vlen);

    bench_iter *(*iter_new)(bench_db *db); /* NULL only if out of memory */
    void (*iter_free)(bench_iter *it);
    void (*iter_seek_first)(bench_iter *it);
    void (*iter_seek_last)(bench_iter *it);
    bool (*iter_valid)(const bench_iter *it);
    void (*iter_next)(bench_iter *it);
    void (*iter_prev)(bench_iter *it);
    const char *(*iter_key)(const bench_iter *it, size_t *klen);
    const char *(*iter_value)(const bench_iter *it, size_t *vlen);
    char *(*iter_error)(const bench_iter *it);

    /* Full property name (prefix included); malloc'd string or NULL if unknown. */
    char *(*property)(bench_db *db, const char *name);
    /* Compacts the whole key space. */
    char *(*compact_all)(bench_db *db);
} bench_engine;

/* Our store; always built. */
const bench_engine *bench_engine_lsm(void);
/* LevelDB through its C API; NULL when lsmbench was built without it. */
const bench_engine *bench_engine_leveldb(void);

#endif
