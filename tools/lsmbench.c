/*
 * lsmbench — a db_bench-compatible benchmark for the lsmfs store, able to run
 * the same benchmarks on LevelDB in the same binary (--engine=leveldb).
 *
 *   lsmbench [--benchmarks=fillseq,fillrandom,...] [--num=N] [--threads=T]
 *            [--value_size=100] [--key_size=16] [--db=DIR] [--use_existing_db=0|1]
 *            [--sync=0|1] [--engine=lsm|leveldb|lsm,leveldb] [--histogram=0|1] ...
 *
 * One line per benchmark in db_bench's format, with the throughput over wall
 * time appended (db_bench's micros/op sums the threads' time, so on its own it
 * hides what concurrency achieves):
 *
 *   fillrandom   :       2.345 micros/op;   47.2 MB/s; 426439 ops/s
 *
 * followed, where the engine has group-commit counters, by
 *
 *   stats: writes=N groups=G syncs=S followers_per_leader=F
 *
 * (deltas over that benchmark). Several engines in one --engine list each run
 * in a child process of their own, so each reports its own peak RSS.
 */
#include "lsm.h"
#include "store_uri.h"
#include "lsmbench_engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ================================================================ flags */

typedef struct flags {
    const char *benchmarks;
    long long num;   /* operations per thread */
    long long reads; /* -1: num */
    int threads;
    int value_size;
    int key_size;
    int batch;      /* entries per write batch (db_bench's entries_per_batch) */
    const char *db; /* NULL: /tmp/lsmbench/<engine> */
    bool use_existing_db;
    bool sync;
    const char *engines;
    bool histogram;
    long long stall_window;
    uint64_t seed;
    bench_open_options open;
} flags;

static const char default_benchmarks[] =
    "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,compact,readrandom,stats";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lsmbench [--flag=value ...]\n"
            "  --benchmarks=LIST     comma-separated, run in order (default %s);\n"
            "                        fillseq fillrandom overwrite fillsync readrandom readseq\n"
            "                        readreverse stallwatch compact stats\n"
            "  --num=N               operations per thread (default 1000000)\n"
            "  --reads=N             reads per thread for read benchmarks (default --num)\n"
            "  --threads=T           concurrent threads (default 1)\n"
            "  --value_size=B        (default 100)   --key_size=B (default 16)\n"
            "  --entries_per_batch=N puts per write batch (default 1)\n"
            "  --db=DIR              store directory (default /tmp/lsmbench/ENGINE;\n"
            "                        with several engines DIR/ENGINE; rados:POOL/NAME: on\n"
            "                        Ceph, conf from $CEPH_CONF)\n"
            "  --use_existing_db=0|1 keep the store; fill benchmarks are skipped\n"
            "  --sync=0|1            sync every write (fillsync always does)\n"
            "  --engine=LIST         lsm, leveldb, or lsm,leveldb (default lsm)\n"
            "  --histogram=0|1       per-operation latency percentiles\n"
            "  --stall_window=N      puts per stallwatch window (default 100000)\n"
            "  --seed=N              random seed (default 301)\n"
            "  --write_buffer_size=B --cache_size=B --bloom_bits=N --compression=0|1\n"
            "  --commit_delay_us=N   our group commit's gather wait (default 40)\n"
            "  --wal_mode=N          our WAL: 0 auto (default), 1 mapped, 2 zero-filled (lsmfs)\n"
            "  --mapped_reads=0|1    our point reads: pread (0) or the guarded mapping (1)\n"
            "                        engine tuning; unset keeps each engine's defaults\n",
            default_benchmarks);
}

static void flags_init(flags *f)
{
    memset(f, 0, sizeof(*f));
    f->benchmarks = default_benchmarks;
    f->num = 1000000;
    f->reads = -1;
    f->threads = 1;
    f->value_size = 100;
    f->key_size = 16;
    f->batch = 1;
    f->engines = "lsm";
    f->stall_window = 100000;
    f->seed = 301;
    f->open.bloom_bits = -1;
    f->open.compression = -1;
    f->open.commit_delay_us = -1;
    f->open.mapped_reads = -1;
}

static bool parse_ll(const char *s, long long lo, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo)
        return false;
    *out = v;
    return true;
}

/* Applies one numeric flag; false if name is not numeric or value is bad. */
static bool set_numeric(flags *f, const char *name, const char *val, bool *known)
{
    struct {
        const char *name;
        long long lo;
        long long *ll;
        int *i;
        bool *b;
        size_t *sz;
    } tab[] = {
        {"num", 1, &f->num, NULL, NULL, NULL},
        {"reads", 0, &f->reads, NULL, NULL, NULL},
        {"stall_window", 1, &f->stall_window, NULL, NULL, NULL},
        {"threads", 1, NULL, &f->threads, NULL, NULL},
        {"value_size", 0, NULL, &f->value_size, NULL, NULL},
        {"key_size", 1, NULL, &f->key_size, NULL, NULL},
        {"entries_per_batch", 1, NULL, &f->batch, NULL, NULL},
        {"bloom_bits", -1, NULL, &f->open.bloom_bits, NULL, NULL},
        {"commit_delay_us", -1, NULL, &f->open.commit_delay_us, NULL, NULL},
        {"wal_mode", 0, NULL, &f->open.wal_mode, NULL, NULL},
        {"mapped_reads", 0, NULL, &f->open.mapped_reads, NULL, NULL},
        {"compression", -1, NULL, &f->open.compression, NULL, NULL},
        {"use_existing_db", 0, NULL, NULL, &f->use_existing_db, NULL},
        {"sync", 0, NULL, NULL, &f->sync, NULL},
        {"histogram", 0, NULL, NULL, &f->histogram, NULL},
        {"write_buffer_size", 0, NULL, NULL, NULL, &f->open.write_buffer_size},
        {"cache_size", 0, NULL, NULL, NULL, &f->open.cache_size},
    };
    *known = false;
    for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++) {
        if (strcmp(name, tab[k].name) != 0)
            continue;
        *known = true;
        long long v;
        if (!parse_ll(val, tab[k].lo, &v))
            return false;
        if (tab[k].ll != NULL)
            *tab[k].ll = v;
        else if (tab[k].i != NULL) {
            if (v > 1 << 30)
                return false;
            *tab[k].i = (int)v;
        } else if (tab[k].b != NULL)
            *tab[k].b = v != 0;
        else
            *tab[k].sz = (size_t)v;
        return true;
    }
    return false;
}

/* Returns 0 on success, 1 after printing an error, 2 for --help. */
static int parse_flags(flags *f, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 2;
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) != 0 || eq == NULL) {
            fprintf(stderr, "lsmbench: bad argument '%s' (flags are --name=value)\n", a);
            return 1;
        }
        char name[64];
        size_t nlen = (size_t)(eq - a - 2);
        if (nlen >= sizeof(name)) {
            fprintf(stderr, "lsmbench: unknown flag '%s'\n", a);
            return 1;
        }
        memcpy(name, a + 2, nlen);
        name[nlen] = '\0';
        const char *val = eq + 1;
        bool known;
        if (strcmp(name, "benchmarks") == 0)
            f->benchmarks = val;
        else if (strcmp(name, "db") == 0)
            f->db = val;
        else if (strcmp(name, "engine") == 0)
            f->engines = val;
        else if (strcmp(name, "seed") == 0) {
            long long v;
            if (!parse_ll(val, 0, &v))
                goto bad;
            f->seed = (uint64_t)v;
        } else if (!set_numeric(f, name, val, &known)) {
            if (known)
                goto bad;
            fprintf(stderr, "lsmbench: unknown flag '--%s'\n", name);
            return 1;
        }
        continue;
    bad:
        fprintf(stderr, "lsmbench: bad value in '%s'\n", a);
        return 1;
    }
    return 0;
}

/* =========================================================== randomness */

/* splitmix64: small, fast, and good enough to spread keys. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_uniform(uint64_t *state, uint64_t n)
{
    return rng_next(state) % n;
}

/* Values come from a pool of pieces that compress to half their size, as
 * db_bench's values do: each 100-byte piece is 50 random printable bytes
 * written twice. Values are consecutive slices of the pool. */
typedef struct value_pool {
    char *data;
    size_t len;
} value_pool;

static bool value_pool_init(value_pool *p, size_t value_size, uint64_t seed)
{
    enum { PIECE = 100, RANDOM_PART = 50 };
    p->len = 1 << 20;
    if (p->len < 2 * value_size)
        p->len = 2 * value_size;
    p->data = malloc(p->len);
    if (p->data == NULL)
        return false;
    uint64_t st = seed;
    for (size_t off = 0; off < p->len; off += PIECE) {
        char raw[RANDOM_PART];
        for (int i = 0; i < RANDOM_PART; i++)
            raw[i] = (char)(' ' + rng_uniform(&st, 95));
        for (size_t i = 0; i < PIECE && off + i < p->len; i++)
            p->data[off + i] = raw[i % RANDOM_PART];
    }
    return true;
}

static const char *value_next(const value_pool *p, size_t *pos, size_t value_size)
{
    if (*pos + value_size > p->len)
        *pos = 0;
    const char *v = p->data + *pos;
    *pos += value_size;
    return v;
}

/* Keys are decimal numbers zero-padded to key_size, as in db_bench. */
static void format_key(char *buf, int key_size, uint64_t k)
{
    for (int i = key_size - 1; i >= 0; i--) {
        buf[i] = (char)('0' + k % 10);
        k /= 10;
    }
}

static int decimal_digits(uint64_t v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* ================================================================ clock */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ============================================================ histogram */

/* Latencies in ns, 8 buckets per power of two: about 9% resolution. */
enum { HIST_SUB = 8, HIST_BUCKETS = 64 * HIST_SUB };

typedef struct histogram {
    uint64_t count, sum, min, max;
    uint64_t bucket[HIST_BUCKETS];
} histogram;

static int hist_index(uint64_t v)
{
    if (v < HIST_SUB)
        return (int)v;
    int msb = 63 - __builtin_clzll(v);
    return (msb - 2) * HIST_SUB + (int)((v >> (msb - 3)) & (HIST_SUB - 1));
}

static double hist_bucket_low(int b)
{
    if (b < HIST_SUB)
        return b;
    int octave = b / HIST_SUB;
    return (double)(HIST_SUB + b % HIST_SUB) * (double)(1ull << (octave - 1));
}

static void hist_add(histogram *h, uint64_t v)
{
    if (h->count == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->count++;
    h->sum += v;
    h->bucket[hist_index(v)]++;
}

static void hist_merge(histogram *into, const histogram *h)
{
    if (h->count == 0)
        return;
    if (into->count == 0 || h->min < into->min)
        into->min = h->min;
    if (h->max > into->max)
        into->max = h->max;
    into->count += h->count;
    into->sum += h->sum;
    for (int i = 0; i < HIST_BUCKETS; i++)
        into->bucket[i] += h->bucket[i];
}

static double hist_percentile(const histogram *h, double p)
{
    double want = p / 100.0 * (double)h->count;
    uint64_t seen = 0;
    for (int b = 0; b < HIST_BUCKETS; b++) {
        if (h->bucket[b] == 0)
            continue;
        if ((double)(seen + h->bucket[b]) >= want) {
            double lo = hist_bucket_low(b), hi = hist_bucket_low(b + 1);
            double frac = (want - (double)seen) / (double)h->bucket[b];
            double v = lo + (hi - lo) * frac;
            return v < (double)h->min ? (double)h->min : v > (double)h->max ? (double)h->max : v;
        }
        seen += h->bucket[b];
    }
    return (double)h->max;
}

static void hist_print(const histogram *h)
{
    if (h->count == 0)
        return;
    printf("histogram: count=%" PRIu64 " avg=%.2f p50=%.2f p99=%.2f p99.9=%.2f min=%.2f "
           "max=%.2f (micros per call)\n",
           h->count, (double)h->sum / (double)h->count / 1e3, hist_percentile(h, 50) / 1e3,
           hist_percentile(h, 99) / 1e3, hist_percentile(h, 99.9) / 1e3, (double)h->min / 1e3,
           (double)h->max / 1e3);
}

/* ============================================================ lsm engine */

/* Our store as a bench engine: a thin wrapper over store/lsm.h. */
typedef struct lsm_handle {
    lsm_db *db;
    lsm_read_options ro; /* read-only after open */
} lsm_handle;

static lsm_handle *as_lsm(bench_db *db)
{
    return (lsm_handle *)db;
}

/* Consumes s; returns its message as a malloc'd string (NULL if s is OK). */
static char *status_text(lsm_status *s)
{
    if (s == NULL)
        return NULL;
    char *msg = strdup(lsm_status_message(s));
    lsm_status_free(s);
    return msg != NULL ? msg : strdup("out of memory");
}

static char *e_open(const bench_open_options *bo, const char *dir, bench_db **out)
{
    lsm_handle *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return strdup("out of memory");
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = bo->create;
    if (bo->write_buffer_size > 0)
        o.write_buffer_size = bo->write_buffer_size;
    if (bo->cache_size > 0)
        o.block_cache_size = bo->cache_size;
    if (bo->bloom_bits >= 0)
        o.bloom_bits_per_key = bo->bloom_bits;
    if (bo->compression >= 0)
        o.compression = bo->compression != 0;
    if (bo->commit_delay_us >= 0)
        o.group_commit_delay_us = (uint32_t)bo->commit_delay_us;
    o.wal_mode = bo->wal_mode;
    if (bo->mapped_reads >= 0)
        o.mapped_reads = bo->mapped_reads != 0;
    lsm_read_options_init(&h->ro);
    char *path = NULL; /* --db may be rados:POOL/NAME (store_uri.h) */
    lsm_status *s = store_uri_resolve(dir, &o.env, &path);
    if (s == NULL)
        s = lsm_open(&o, path, &h->db);
    free(path);
    if (s != NULL) {
        free(h);
        return status_text(s);
    }
    *out = (bench_db *)h;
    return NULL;
}

static char *e_close(bench_db *db)
{
    if (db == NULL)
        return NULL;
    lsm_status *s = lsm_close(as_lsm(db)->db);
    free(db);
    return status_text(s);
}

static char *e_destroy(const char *dir)
{
    lsm_options o;
    lsm_options_init(&o);
    char *path = NULL;
    lsm_status *s = store_uri_resolve(dir, &o.env, &path);
    if (s == NULL)
        s = lsm_destroy(&o, path);
    free(path);
    return status_text(s);
}

static bench_batch *e_batch_new(void)
{
    return (bench_batch *)lsm_batch_new();
}

static void e_batch_free(bench_batch *b)
{
    lsm_batch_free((lsm_batch *)b);
}

static void e_batch_clear(bench_batch *b)
{
    lsm_batch_clear((lsm_batch *)b);
}

static bool e_batch_put(bench_batch *b, const char *key, size_t klen, const char *val, size_t vlen)
{
    return lsm_batch_put((lsm_batch *)b, key, klen, val, vlen);
}

static char *e_write(bench_db *db, bench_batch *b, bool sync)
{
    lsm_write_options wo = {.sync = sync};
    return status_text(lsm_write(as_lsm(db)->db, &wo, (lsm_batch *)b));
}

static char *e_get(bench_db *db, const char *key, size_t klen, bool *found, size_t *vlen)
{
    lsm_handle *h = as_lsm(db);
    char *val = NULL;
    size_t len = 0;
    lsm_status *s = lsm_get(h->db, &h->ro, key, klen, &val, &len);
    *found = s == NULL;
    *vlen = s == NULL ? len : 0;
    free(val);
    if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        return NULL;
    }
    return status_text(s);
}

static lsm_iter *as_it(const bench_iter *it)
{
    return (lsm_iter *)it;
}

static bench_iter *e_iter_new(bench_db *db)
{
    lsm_handle *h = as_lsm(db);
    return (bench_iter *)lsm_iter_new(h->db, &h->ro);
}

static void e_iter_free(bench_iter *it)
{
    lsm_iter_free(as_it(it));
}

static void e_iter_seek_first(bench_iter *it)
{
    lsm_iter_seek_first(as_it(it));
}

static void e_iter_seek_last(bench_iter *it)
{
    lsm_iter_seek_last(as_it(it));
}

static bool e_iter_valid(const bench_iter *it)
{
    return lsm_iter_valid(as_it(it));
}

static void e_iter_next(bench_iter *it)
{
    lsm_iter_next(as_it(it));
}

static void e_iter_prev(bench_iter *it)
{
    lsm_iter_prev(as_it(it));
}

static const char *e_iter_key(const bench_iter *it, size_t *klen)
{
    return lsm_iter_key(as_it(it), klen);
}

static const char *e_iter_value(const bench_iter *it, size_t *vlen)
{
    return lsm_iter_value(as_it(it), vlen);
}

static char *e_iter_error(const bench_iter *it)
{
    return status_text(lsm_iter_status(as_it(it)));
}

static char *e_property(bench_db *db, const char *name)
{
    return lsm_property(as_lsm(db)->db, name);
}

static char *e_compact_all(bench_db *db)
{
    return status_text(lsm_compact_range(as_lsm(db)->db, NULL, 0, NULL, 0));
}

static const bench_engine lsm_engine = {
    .name = "lsm",
    .prop_prefix = "lsm.",
    .open = e_open,
    .close = e_close,
    .destroy = e_destroy,
    .batch_new = e_batch_new,
    .batch_free = e_batch_free,
    .batch_clear = e_batch_clear,
    .batch_put = e_batch_put,
    .write = e_write,
    .get = e_get,
    .iter_new = e_iter_new,
    .iter_free = e_iter_free,
    .iter_seek_first = e_iter_seek_first,
    .iter_seek_last = e_iter_seek_last,
    .iter_valid = e_iter_valid,
    .iter_next = e_iter_next,
    .iter_prev = e_iter_prev,
    .iter_key = e_iter_key,
    .iter_value = e_iter_value,
    .iter_error = e_iter_error,
    .property = e_property,
    .compact_all = e_compact_all,
};

const bench_engine *bench_engine_lsm(void)
{
    return &lsm_engine;
}

/* ============================================================== running */

typedef struct bench_ctx {
    const flags *f;
    const bench_engine *eng;
    const char *dir;
    bench_db *db; /* NULL while closed; not changed while threads run */
    value_pool pool;
    uint64_t threads_started; /* over all benchmarks: gives each thread its own seed */
} bench_ctx;

/* One benchmark thread's tally. Owned by its thread while it runs, read by
 * the main thread after join. */
typedef struct thread_state {
    int id;
    bench_ctx *ctx;
    pthread_barrier_t *start_line;
    void (*method)(struct thread_state *t);
    uint64_t rng;
    size_t value_pos;
    uint64_t done, bytes, found;
    uint64_t start_ns, finish_ns;
    char *error; /* first error; the thread stops at it */
    histogram hist;
} thread_state;

static void record_op(thread_state *t, uint64_t started_ns)
{
    if (t->ctx->f->histogram)
        hist_add(&t->hist, now_ns() - started_ns);
}

/* Writes num entries in batches; keys sequential or uniform over [0, num). */
static void do_write(thread_state *t, bool seq, bool sync)
{
    const flags *f = t->ctx->f;
    const bench_engine *e = t->ctx->eng;
    bench_batch *b = e->batch_new();
    if (b == NULL) {
        t->error = strdup("out of memory");
        return;
    }
    char key[f->key_size];
    for (long long i = 0; i < f->num && t->error == NULL; i += f->batch) {
        e->batch_clear(b);
        for (long long j = 0; j < f->batch && i + j < f->num; j++) {
            uint64_t k = seq ? (uint64_t)(i + j) : rng_uniform(&t->rng, (uint64_t)f->num);
            format_key(key, f->key_size, k);
            const char *v = value_next(&t->ctx->pool, &t->value_pos, (size_t)f->value_size);
            if (!e->batch_put(b, key, sizeof(key), v, (size_t)f->value_size)) {
                t->error = strdup("out of memory");
                break;
            }
            t->done++;
            t->bytes += (uint64_t)(f->key_size + f->value_size);
        }
        if (t->error != NULL)
            break;
        uint64_t t0 = f->histogram ? now_ns() : 0;
        t->error = e->write(t->ctx->db, b, sync);
        record_op(t, t0);
    }
    e->batch_free(b);
}

static void m_fillseq(thread_state *t)
{
    do_write(t, true, t->ctx->f->sync);
}

static void m_fillrandom(thread_state *t)
{
    do_write(t, false, t->ctx->f->sync);
}

static void m_fillsync(thread_state *t)
{
    do_write(t, false, true);
}

static long long reads_per_thread(const flags *f)
{
    return f->reads < 0 ? f->num : f->reads;
}

static void m_readrandom(thread_state *t)
{
    const flags *f = t->ctx->f;
    const bench_engine *e = t->ctx->eng;
    char key[f->key_size];
    long long n = reads_per_thread(f);
    for (long long i = 0; i < n && t->error == NULL; i++) {
        format_key(key, f->key_size, rng_uniform(&t->rng, (uint64_t)f->num));
        bool found;
        size_t vlen;
        uint64_t t0 = f->histogram ? now_ns() : 0;
        t->error = e->get(t->ctx->db, key, sizeof(key), &found, &vlen);
        record_op(t, t0);
        t->found += found;
        t->done++;
    }
}

static void do_scan(thread_state *t, bool forward)
{
    const bench_engine *e = t->ctx->eng;
    bench_iter *it = e->iter_new(t->ctx->db);
    if (it == NULL) {
        t->error = strdup("out of memory");
        return;
    }
    long long n = reads_per_thread(t->ctx->f);
    bool hist = t->ctx->f->histogram;
    if (forward)
        e->iter_seek_first(it);
    else
        e->iter_seek_last(it);
    for (long long i = 0; i < n && e->iter_valid(it); i++) {
        size_t klen, vlen;
        e->iter_key(it, &klen);
        e->iter_value(it, &vlen);
        t->bytes += klen + vlen;
        t->done++;
        uint64_t t0 = hist ? now_ns() : 0;
        if (forward)
            e->iter_next(it);
        else
            e->iter_prev(it);
        record_op(t, t0);
    }
    t->error = e->iter_error(it);
    e->iter_free(it);
}

static void m_readseq(thread_state *t)
{
    do_scan(t, true);
}

static void m_readreverse(thread_state *t)
{
    do_scan(t, false);
}

static void *thread_main(void *arg)
{
    thread_state *t = arg;
    pthread_barrier_wait(t->start_line);
    t->start_ns = now_ns();
    t->method(t);
    t->finish_ns = now_ns();
    return NULL;
}

/* The merged result of one benchmark run. */
typedef struct run_result {
    uint64_t done, bytes, found;
    double thread_secs; /* summed over threads, as db_bench's micros/op uses */
    double wall_secs;
    histogram hist;
} run_result;

static void merge_threads(thread_state *ts, int n, run_result *r)
{
    memset(r, 0, sizeof(*r));
    uint64_t first = UINT64_MAX, last = 0;
    for (int i = 0; i < n; i++) {
        r->done += ts[i].done;
        r->bytes += ts[i].bytes;
        r->found += ts[i].found;
        r->thread_secs += (double)(ts[i].finish_ns - ts[i].start_ns) / 1e9;
        first = ts[i].start_ns < first ? ts[i].start_ns : first;
        last = ts[i].finish_ns > last ? ts[i].finish_ns : last;
        hist_merge(&r->hist, &ts[i].hist);
    }
    r->wall_secs = (double)(last - first) / 1e9;
}

/* Runs method on nthreads threads released together; false on any error. */
static bool run_threads(bench_ctx *c, void (*method)(thread_state *), int nthreads, run_result *r)
{
    thread_state *ts = calloc((size_t)nthreads, sizeof(*ts));
    pthread_t *tids = calloc((size_t)nthreads, sizeof(*tids));
    pthread_barrier_t start_line;
    if (ts == NULL || tids == NULL ||
        pthread_barrier_init(&start_line, NULL, (unsigned)nthreads) != 0) {
        fprintf(stderr, "lsmbench: out of memory\n");
        free(ts);
        free(tids);
        return false;
    }
    int started = 0;
    for (int i = 0; i < nthreads; i++) {
        ts[i] = (thread_state){.id = i, .ctx = c, .start_line = &start_line, .method = method};
        /* Unique per thread and benchmark, so a read benchmark does not
         * replay exactly the keys the fill before it wrote. */
        ts[i].rng = c->f->seed * 1000003u + ++c->threads_started;
        ts[i].value_pos = (size_t)i * 4099 % c->pool.len;
        if (pthread_create(&tids[i], NULL, thread_main, &ts[i]) != 0)
            break;
        started++;
    }
    if (started < nthreads) {
        /* The barrier would never open; this is a setup failure, not a result. */
        fprintf(stderr, "lsmbench: cannot start %d threads\n", nthreads);
        exit(1);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&start_line);
    bool ok = true;
    for (int i = 0; i < nthreads; i++) {
        if (ts[i].error != NULL) {
            if (ok)
                fprintf(stderr, "lsmbench: thread %d: %s\n", i, ts[i].error);
            ok = false;
            free(ts[i].error);
        }
    }
    merge_threads(ts, nthreads, r);
    free(ts);
    free(tids);
    return ok;
}

/* ============================================================ reporting */

static void report(const char *name, const run_result *r, const char *extra)
{
    double per_op = r->done > 0 ? r->thread_secs * 1e6 / (double)r->done : 0;
    double wall = r->wall_secs > 0 ? r->wall_secs : 1e-9;
    printf("%-12s : %11.3f micros/op;", name, per_op);
    if (r->bytes > 0)
        printf(" %6.1f MB/s;", (double)r->bytes / 1048576.0 / wall);
    printf(" %.0f ops/s", (double)r->done / wall);
    if (extra != NULL && extra[0] != '\0')
        printf(" %s", extra);
    printf("\n");
}

/* Group-commit counters, where the engine has them. */
typedef struct gc_counters {
    bool have;
    uint64_t writes, groups, syncs;
} gc_counters;

static bool property_u64(bench_ctx *c, const char *suffix, uint64_t *out)
{
    char name[96];
    snprintf(name, sizeof(name), "%s%s", c->eng->prop_prefix, suffix);
    char *v = c->eng->property(c->db, name);
    if (v == NULL)
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    bool ok = errno == 0 && end != v;
    free(v);
    *out = x;
    return ok;
}

static gc_counters read_counters(bench_ctx *c)
{
    gc_counters g = {0};
    g.have = property_u64(c, "writes", &g.writes) && property_u64(c, "write-groups", &g.groups) &&
             property_u64(c, "wal-syncs", &g.syncs);
    return g;
}

static void print_counter_delta(const gc_counters *before, const gc_counters *after)
{
    if (!before->have || !after->have || after->writes == before->writes)
        return; /* no counters, or a read-only benchmark: nothing to say */
    uint64_t w = after->writes - before->writes;
    uint64_t g = after->groups - before->groups;
    uint64_t s = after->syncs - before->syncs;
    double fpl = g > 0 ? (double)(w - g) / (double)g : 0.0;
    printf("stats: writes=%" PRIu64 " groups=%" PRIu64 " syncs=%" PRIu64
           " followers_per_leader=%.2f\n",
           w, g, s, fpl);
}

static void print_peak_rss(const char *engine)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        printf("peak_rss: %.1f MiB (engine %s)\n", (double)ru.ru_maxrss / 1024.0, engine);
}

/* ============================================================ db control */

static bool dir_exists(const char *dir)
{
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool open_db(bench_ctx *c, bool create)
{
    bench_open_options o = c->f->open;
    o.create = create;
    char *err = c->eng->open(&o, c->dir, &c->db);
    if (err != NULL) {
        fprintf(stderr, "lsmbench: open %s (%s): %s\n", c->dir, c->eng->name, err);
        free(err);
        c->db = NULL;
        return false;
    }
    return true;
}

static bool close_db(bench_ctx *c)
{
    char *err = c->eng->close(c->db);
    c->db = NULL;
    if (err != NULL) {
        fprintf(stderr, "lsmbench: close %s: %s\n", c->dir, err);
        free(err);
        return false;
    }
    return true;
}

static bool destroy_db(bench_ctx *c)
{
    if (!dir_exists(c->dir))
        return true;
    char *err = c->eng->destroy(c->dir);
    if (err != NULL) {
        fprintf(stderr, "lsmbench: destroy %s: %s\n", c->dir, err);
        free(err);
        return false;
    }
    return true;
}

static bool fresh_db(bench_ctx *c)
{
    return close_db(c) && destroy_db(c) && open_db(c, true);
}

/* Bytes of the regular files in dir (stores keep their files flat), split
 * into logs (*.log), tables (*.ldb, *.sst) and the rest. */
typedef struct dir_usage {
    uint64_t total, logs, tables, other;
} dir_usage;

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

static dir_usage dir_bytes(const char *dir)
{
    dir_usage u = {0};
    DIR *d = opendir(dir);
    if (d == NULL)
        return u;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        uint64_t sz = (uint64_t)st.st_size;
        u.total += sz;
        if (has_suffix(de->d_name, ".log"))
            u.logs += sz;
        else if (has_suffix(de->d_name, ".ldb") || has_suffix(de->d_name, ".sst"))
            u.tables += sz;
        else
            u.other += sz;
    }
    closedir(d);
    return u;
}

/* =========================================================== benchmarks */

static bool bench_threads(bench_ctx *c, const char *name, void (*method)(thread_state *))
{
    gc_counters before = read_counters(c);
    run_result r;
    bool ok = run_threads(c, method, c->f->threads, &r);
    char extra[96] = "";
    if (method == m_readrandom)
        snprintf(extra, sizeof(extra), "(%" PRIu64 " of %" PRIu64 " found)", r.found, r.done);
    report(name, &r, extra);
    gc_counters after = read_counters(c);
    print_counter_delta(&before, &after);
    if (c->f->histogram)
        hist_print(&r.hist);
    return ok;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_levels(bench_ctx *c)
{
    printf(" files/level");
    for (int level = 0; level < 16; level++) {
        char suffix[40];
        uint64_t n;
        snprintf(suffix, sizeof(suffix), "num-files-at-level%d", level);
        if (!property_u64(c, suffix, &n))
            break;
        printf("%c%" PRIu64, level == 0 ? ' ' : ',', n);
    }
}

/* Where a stallwatch window's time went, from the engine's counters (ours
 * only: LevelDB has none of them). */
typedef struct window_probe {
    bool have;
    uint64_t paced_us, stopped_us, compacted, l1_bytes, l0_load, jobs, debt;
} window_probe;

static window_probe probe_window(bench_ctx *c)
{
    window_probe p = {0};
    p.have = property_u64(c, "paced-us", &p.paced_us) &&
             property_u64(c, "stopped-us", &p.stopped_us) &&
             property_u64(c, "compaction-bytes-written", &p.compacted) &&
             property_u64(c, "bytes-at-level1", &p.l1_bytes) &&
             property_u64(c, "level0-load", &p.l0_load) &&
             property_u64(c, "background-jobs", &p.jobs) &&
             property_u64(c, "compaction-debt-bytes", &p.debt);
    return p;
}

/* The window's paced and stopped milliseconds, MiB compactions wrote in it,
 * and at its end level 0's load, level 1's MiB, the background jobs and the
 * compaction debt (pacing.h). */
static void print_probe(const window_probe *a, const window_probe *b)
{
    if (!a->have || !b->have)
        return;
    printf(" paced %.0f ms stopped %.0f ms compacted %.1f MiB; L0 load %" PRIu64
           " L1 %.1f MiB jobs %" PRIu64 " debt %.1f MiB",
           (double)(b->paced_us - a->paced_us) / 1e3, (double)(b->stopped_us - a->stopped_us) / 1e3,
           (double)(b->compacted - a->compacted) / 1048576.0, b->l0_load,
           (double)b->l1_bytes / 1048576.0, b->jobs, (double)b->debt / 1048576.0);
}

/* Where the writer's time goes, for either engine: its thread's CPU and
 * its wait for a CPU (the kernel's schedstat: on-CPU and run-queue ns),
 * and the whole process's CPU (the writer's and the background threads'). */
typedef struct cpu_probe {
    bool have;
    uint64_t run_ns, queued_ns, process_ns;
} cpu_probe;

static cpu_probe probe_cpu(void)
{
    cpu_probe p = {0};
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f != NULL) {
        p.have = fscanf(f, "%" SCNu64 " %" SCNu64, &p.run_ns, &p.queued_ns) == 2;
        fclose(f);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        p.process_ns = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
                       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
    else
        p.have = false;
    return p;
}

/* The window's writer CPU, its wait for a CPU and the CPU of the other
 * threads (background work), in ms. */
static void print_cpu(const cpu_probe *a, const cpu_probe *b)
{
    if (!a->have || !b->have)
        return;
    uint64_t run = b->run_ns - a->run_ns, all = b->process_ns - a->process_ns;
    printf(" writer cpu %.0f ms runq %.0f ms, others cpu %.0f ms;", (double)run / 1e6,
           (double)(b->queued_ns - a->queued_ns) / 1e6, all > run ? (double)(all - run) / 1e6 : 0);
}

/* One window of the seed-003 experiment: `window` puts of key "%d_%d"
 * (index in window, random) and value "%d" (random). */
static char *stall_window(bench_ctx *c, bench_batch *b, uint64_t *rng, long long window)
{
    char key[32], val[16];
    for (long long i = 0; i < window; i++) {
        int kl = snprintf(key, sizeof(key), "%lld_%d", i, (int)(rng_next(rng) >> 33));
        int vl = snprintf(val, sizeof(val), "%d", (int)(rng_next(rng) >> 33));
        c->eng->batch_clear(b);
        if (!c->eng->batch_put(b, key, (size_t)kl, val, (size_t)vl))
            return strdup("out of memory");
        char *err = c->eng->write(c->db, b, c->f->sync);
        if (err != NULL)
            return err;
    }
    return NULL;
}

/* Single-threaded by design (it reproduces one writer's experience). */
static bool bench_stallwatch(bench_ctx *c)
{
    const flags *f = c->f;
    long long window = f->stall_window < f->num ? f->stall_window : f->num;
    long long nwin = f->num / window;
    double *secs = calloc((size_t)nwin, sizeof(double));
    bench_batch *b = c->eng->batch_new();
    if (secs == NULL || b == NULL) {
        fprintf(stderr, "lsmbench: out of memory\n");
        free(secs);
        c->eng->batch_free(b);
        return false;
    }
    gc_counters before = read_counters(c);
    uint64_t rng = f->seed;
    uint64_t start = now_ns();
    char *err = NULL;
    long long w;
    window_probe probe = probe_window(c);
    cpu_probe cpu = probe_cpu();
    for (w = 0; w < nwin && err == NULL; w++) {
        uint64_t t0 = now_ns();
        err = stall_window(c, b, &rng, window);
        secs[w] = (double)(now_ns() - t0) / 1e9;
        cpu_probe cpu_next = probe_cpu();
        printf("window %5lld: %9.6f s;", w, secs[w]);
        print_cpu(&cpu, &cpu_next);
        cpu = cpu_next;
        print_levels(c);
        window_probe next = probe_window(c);
        print_probe(&probe, &next);
        probe = next;
        printf("\n");
        fflush(stdout);
    }
    run_result r = {.done = (uint64_t)(w * window), .wall_secs = (double)(now_ns() - start) / 1e9};
    r.thread_secs = r.wall_secs;
    report("stallwatch", &r, NULL);
    gc_counters after = read_counters(c);
    print_counter_delta(&before, &after);
    double max = 0;
    for (long long i = 0; i < w; i++)
        max = secs[i] > max ? secs[i] : max;
    qsort(secs, (size_t)w, sizeof(double), compare_double);
    double median = w == 0 ? 0 : w % 2 ? secs[w / 2] : (secs[w / 2 - 1] + secs[w / 2]) / 2;
    printf("stallwatch: windows=%lld median=%.6f max=%.6f max/median=%.2f\n", w, median, max,
           median > 0 ? max / median : 0.0);
    free(secs);
    c->eng->batch_free(b);
    if (err != NULL) {
        fprintf(stderr, "lsmbench: stallwatch: %s\n", err);
        free(err);
        return false;
    }
    return true;
}

/* Live key+value bytes, by a full scan. */
static bool live_bytes(bench_ctx *c, uint64_t *keys, uint64_t *bytes)
{
    bench_iter *it = c->eng->iter_new(c->db);
    if (it == NULL)
        return false;
    *keys = *bytes = 0;
    for (c->eng->iter_seek_first(it); c->eng->iter_valid(it); c->eng->iter_next(it)) {
        size_t kl, vl;
        c->eng->iter_key(it, &kl);
        c->eng->iter_value(it, &vl);
        ++*keys;
        *bytes += kl + vl;
    }
    char *err = c->eng->iter_error(it);
    c->eng->iter_free(it);
    if (err != NULL) {
        fprintf(stderr, "lsmbench: scan: %s\n", err);
        free(err);
        return false;
    }
    return true;
}

/* db_bench's compact, then the space it leaves: store bytes vs live bytes. */
static bool bench_compact(bench_ctx *c)
{
    uint64_t t0 = now_ns();
    char *err = c->eng->compact_all(c->db);
    run_result r = {.done = 1, .wall_secs = (double)(now_ns() - t0) / 1e9};
    r.thread_secs = r.wall_secs;
    report("compact", &r, NULL);
    if (err != NULL) {
        fprintf(stderr, "lsmbench: compact: %s\n", err);
        free(err);
        return false;
    }
    uint64_t keys, live;
    if (!live_bytes(c, &keys, &live))
        return false;
    dir_usage u = dir_bytes(c->dir);
    printf("space: store_bytes=%" PRIu64 " live_keys=%" PRIu64 " live_bytes=%" PRIu64
           " store/live=%.3f (logs %" PRIu64 ", tables %" PRIu64 ", other %" PRIu64 ")\n",
           u.total, keys, live, live > 0 ? (double)u.total / (double)live : 0.0, u.logs, u.tables,
           u.other);
    return true;
}

static bool bench_stats(bench_ctx *c)
{
    char name[64];
    snprintf(name, sizeof(name), "%sstats", c->eng->prop_prefix);
    char *text = c->eng->property(c->db, name);
    printf("%s\n", text != NULL ? text : "(no stats property)");
    free(text);
    return true;
}

typedef struct bench_def {
    const char *name;
    void (*method)(thread_state *t); /* NULL: special, see run_one */
    bool fresh;                      /* starts from an empty store */
} bench_def;

static const bench_def bench_defs[] = {
    {"fillseq", m_fillseq, true},
    {"fillrandom", m_fillrandom, true},
    {"overwrite", m_fillrandom, false},
    {"fillsync", m_fillsync, true},
    {"readrandom", m_readrandom, false},
    {"readseq", m_readseq, false},
    {"readreverse", m_readreverse, false},
    {"stallwatch", NULL, true},
    {"compact", NULL, false},
    {"stats", NULL, false},
};

static const bench_def *find_bench(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(bench_defs) / sizeof(bench_defs[0]); i++)
        if (strlen(bench_defs[i].name) == len && strncmp(bench_defs[i].name, name, len) == 0)
            return &bench_defs[i];
    return NULL;
}

/* Checks the whole list before anything runs. */
static bool check_benchmarks(const char *list)
{
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len > 0 && find_bench(p, len) == NULL) {
            fprintf(stderr, "lsmbench: unknown benchmark '%.*s'\n", (int)len, p);
            return false;
        }
        p += len + (p[len] == ',');
    }
    return true;
}

/* The tree a benchmark on an existing store starts from (the one before it
 * may have left compactions running: neither lsmbench nor db_bench waits). */
static void print_start_state(bench_ctx *c, const char *name)
{
    uint64_t jobs;
    printf("%-12s : start:", name);
    print_levels(c);
    if (property_u64(c, "background-jobs", &jobs))
        printf(" background jobs %" PRIu64, jobs);
    printf("\n");
}

static bool run_one(bench_ctx *c, const bench_def *d)
{
    if (d->fresh) {
        if (c->f->use_existing_db) {
            printf("%-12s : skipped (--use_existing_db is true)\n", d->name);
            return true;
        }
        if (!fresh_db(c))
            return false;
    }
    if (!d->fresh && d->method != NULL)
        print_start_state(c, d->name);
    bool ok;
    if (d->method != NULL)
        ok = bench_threads(c, d->name, d->method);
    else if (strcmp(d->name, "stallwatch") == 0)
        ok = bench_stallwatch(c);
    else if (strcmp(d->name, "compact") == 0)
        ok = bench_compact(c);
    else
        ok = bench_stats(c);
    fflush(stdout);
    return ok;
}

static void print_header(const bench_ctx *c)
{
    const flags *f = c->f;
    printf("lsmbench: engine=%s db=%s threads=%d\n", c->eng->name, c->dir, f->threads);
    printf("Keys:       %d bytes each\n", f->key_size);
    printf("Values:     %d bytes each (%d bytes after compression)\n", f->value_size,
           f->value_size / 2);
    printf("Entries:    %lld per thread\n", f->num);
    printf("------------------------------------------------\n");
}

/* Runs every benchmark on one engine; returns the exit status. */
static int run_suite(const flags *f, const bench_engine *eng, const char *dir)
{
    bench_ctx c = {.f = f, .eng = eng, .dir = dir};
    if (!value_pool_init(&c.pool, (size_t)f->value_size, f->seed)) {
        fprintf(stderr, "lsmbench: out of memory\n");
        return 1;
    }
    print_header(&c);
    bool ok = (f->use_existing_db || destroy_db(&c)) && open_db(&c, !f->use_existing_db);
    for (const char *p = f->benchmarks; ok && *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len > 0)
            ok = run_one(&c, find_bench(p, len));
        p += len + (p[len] == ',');
    }
    if (c.db != NULL && !close_db(&c))
        ok = false;
    print_peak_rss(eng->name);
    free(c.pool.data);
    return ok ? 0 : 1;
}

/* ================================================================= main */

static const bench_engine *find_engine(const char *name, size_t len)
{
    if (len == 3 && strncmp(name, "lsm", 3) == 0)
        return bench_engine_lsm();
    if (len == 7 && strncmp(name, "leveldb", 7) == 0) {
        const bench_engine *e = bench_engine_leveldb();
        if (e == NULL)
            fprintf(stderr, "lsmbench: the leveldb engine is not built (install LevelDB's "
                            "development files, e.g. libleveldb-dev, and rebuild)\n");
        return e;
    }
    fprintf(stderr, "lsmbench: unknown engine '%.*s' (lsm, leveldb)\n", (int)len, name);
    return NULL;
}

static int mkdir_parents(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -1;
    for (char *s = buf + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return 0;
}

static int run_engine(const flags *f, const bench_engine *eng, bool several)
{
    char dir[4096];
    if (f->db == NULL)
        snprintf(dir, sizeof(dir), "/tmp/lsmbench/%s", eng->name);
    else if (several)
        snprintf(dir, sizeof(dir), "%s/%s", f->db, eng->name);
    else
        snprintf(dir, sizeof(dir), "%s", f->db);
    if (!store_uri_is_rados(dir) && mkdir_parents(dir) != 0) {
        fprintf(stderr, "lsmbench: cannot create the parents of %s: %s\n", dir, strerror(errno));
        return 1;
    }
    return run_suite(f, eng, dir);
}

/* Each engine in a child of its own, so peak RSS is per engine. */
static int run_forked(const flags *f, const bench_engine *eng)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("lsmbench: fork");
        return 1;
    }
    if (pid == 0) {
        int rc = run_engine(f, eng, true);
        fflush(stdout);
        _exit(rc);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return 1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static bool validate(const flags *f)
{
    if (!check_benchmarks(f->benchmarks))
        return false;
    int need = decimal_digits((uint64_t)(f->num - 1));
    if (f->key_size < need) {
        fprintf(stderr, "lsmbench: --key_size=%d cannot hold %d-digit keys\n", f->key_size, need);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    flags f;
    flags_init(&f);
    int rc = parse_flags(&f, argc, argv);
    if (rc == 2)
        usage(stdout);
    if (rc == 1)
        fprintf(stderr, "lsmbench: --help lists the flags\n");
    if (rc != 0)
        return rc == 2 ? 0 : 1;
    if (!validate(&f))
        return 1;
    const bench_engine *engines[8];
    int n = 0;
    for (const char *p = f.engines; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len > 0) {
            if (n == 8 || (engines[n] = find_engine(p, len)) == NULL)
                return 1;
            n++;
        }
        p += len + (p[len] == ',');
    }
    if (n == 0) {
        fprintf(stderr, "lsmbench: no engine given\n");
        return 1;
    }
    if (n == 1) { /* RADOS connections closed before exit (see lsmctl's main) */
        rc = run_engine(&f, engines[0], false);
        store_uri_shutdown();
        return rc;
    }
    rc = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0)
            printf("\n");
        rc |= run_forked(&f, engines[i]);
    }
    return rc;
}
