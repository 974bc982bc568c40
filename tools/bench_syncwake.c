/*
 * bench_syncwake.c — how long a non-sync write waits behind sync writers.
 *
 * `--sync-writers` threads (4) put small values with sync on a store whose
 * every WAL sync takes `--sync-delay-us` (4000: the fault env's simulated
 * slow disk); one more thread puts `--value-kb` (200) KiB values without
 * sync, back to back (or `--gap-us` apart), for `--seconds` (3). Prints the non-sync
 * write's mean and p99 latency: a leader that handed the queue on but held
 * the next head's wake-up across its fdatasync shows up here as a mean of
 * about one sync delay.
 *
 *   bin/bench-syncwake [--dir=D] [--seconds=3] [--sync-writers=4]
 *                      [--sync-delay-us=4000] [--value-kb=200] [--buffer-mb=8]
 *                      [--gap-us=0]
 *
 * --buffer-mb sets write_buffer_size (a larger one keeps memtable switches
 * and flushes, which the non-sync writer also waits for, out of the figure).
 */
#include "bench_common.h"
#include "fault_env.h"
#include "lsm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

static lsm_db *db;
static atomic_bool stop;
static atomic_int failures;

static void put(const char *key, const char *val, size_t vlen, bool sync)
{
    lsm_write_options wo = {.sync = sync};
    lsm_status *s = lsm_put(db, &wo, key, strlen(key), val, vlen);
    if (s != NULL) {
        fprintf(stderr, "bench-syncwake: put: %s\n", lsm_status_message(s));
        atomic_fetch_add(&failures, 1);
        lsm_status_free(s);
    }
}

static void *sync_writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    char key[32];
    for (uint64_t i = 0; !atomic_load(&stop); i++) {
        snprintf(key, sizeof(key), "s%d_%08" PRIu64, id, i);
        put(key, "0123456789abcdef", 16, true);
    }
    return NULL;
}

struct big {
    size_t vlen;
    long gap_us;
    uint64_t *lat_ns;
    size_t n, cap;
};

static void *big_writer(void *arg)
{
    struct big *b = arg;
    char *val = malloc(b->vlen);
    char key[32];
    if (val == NULL)
        return NULL;
    bench_fill(val, b->vlen, 1);
    while (!atomic_load(&stop) && b->n < b->cap) {
        snprintf(key, sizeof(key), "b%08zu", b->n % 64);
        uint64_t t0 = bench_now_ns();
        put(key, val, b->vlen, false);
        b->lat_ns[b->n++] = bench_now_ns() - t0;
        if (b->gap_us > 0)
            usleep((useconds_t)b->gap_us);
    }
    free(val);
    return NULL;
}

static long arg_long(const char *a, const char *name, long cur)
{
    size_t n = strlen(name);
    return strncmp(a, name, n) == 0 && a[n] == '=' ? strtol(a + n + 1, NULL, 10) : cur;
}

struct config {
    long seconds, writers, delay_us, value_kb, buffer_mb, gap_us;
    const char *dir; /* NULL: a temporary directory */
};

/* Reads the --name=value arguments into c; false if one is out of range. */
static bool parse_args(int argc, char **argv, struct config *c)
{
    *c = (struct config){.seconds = 3, .writers = 4, .delay_us = 4000, .value_kb = 200,
                         .buffer_mb = 8, .gap_us = 0};
    for (int i = 1; i < argc; i++) {
        c->seconds = arg_long(argv[i], "--seconds", c->seconds);
        c->writers = arg_long(argv[i], "--sync-writers", c->writers);
        c->delay_us = arg_long(argv[i], "--sync-delay-us", c->delay_us);
        c->value_kb = arg_long(argv[i], "--value-kb", c->value_kb);
        c->buffer_mb = arg_long(argv[i], "--buffer-mb", c->buffer_mb);
        c->gap_us = arg_long(argv[i], "--gap-us", c->gap_us);
        if (strncmp(argv[i], "--dir=", 6) == 0)
            c->dir = argv[i] + 6;
    }
    return c->seconds > 0 && c->writers > 0 && c->writers <= 64 && c->delay_us >= 0 &&
           c->value_kb > 0 && c->buffer_mb > 0 && c->buffer_mb <= 1024 && c->gap_us >= 0;
}

/* Opens the global db in dir over fe with c's buffer size; false (said on
 * stderr) on failure. o is kept for lsm_destroy. */
static bool open_store(const struct config *c, const char *dir, fault_env *fe, lsm_options *o)
{
    fault_env_set_sync_delay_us(fe, (uint64_t)c->delay_us);
    lsm_options_init(o);
    o->create_if_missing = true;
    o->env = fault_env_env(fe);
    o->write_buffer_size = (size_t)c->buffer_mb << 20;
    o->max_memtable_bytes = 4 * o->write_buffer_size;
    lsm_status *s = lsm_open(o, dir, &db);
    if (s != NULL) {
        fprintf(stderr, "bench-syncwake: open %s: %s\n", dir, lsm_status_message(s));
        return false;
    }
    return true;
}

/* Runs the sync writers and the big writer for c->seconds; b gets the big
 * writer's latencies. */
static void run_writers(const struct config *c, struct big *b)
{
    pthread_t t[65];
    for (long i = 0; i < c->writers; i++)
        pthread_create(&t[i], NULL, sync_writer, (void *)(intptr_t)i);
    pthread_create(&t[c->writers], NULL, big_writer, b);
    sleep((unsigned)c->seconds);
    atomic_store(&stop, true);
    for (long i = 0; i <= c->writers; i++)
        pthread_join(t[i], NULL);
}

/* Prints the RESULT line: the non-sync write's mean, p50 and p99. Sorts
 * b's latencies. */
static void report(const struct config *c, struct big *b)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < b->n; i++)
        sum += b->lat_ns[i];
    qsort(b->lat_ns, b->n, sizeof(*b->lat_ns), bench_cmp_u64);
    printf("syncwake: sync_writers=%ld sync_delay_us=%ld value_kb=%ld gap_us=%ld nonsync_writes=%zu "
           "mean_ms=%.2f p50_ms=%.2f p99_ms=%.2f\n",
           c->writers, c->delay_us, c->value_kb, c->gap_us, b->n,
           b->n ? (double)sum / (double)b->n / 1e6 : 0.0,
           (double)bench_percentile(b->lat_ns, b->n, 50) / 1e6,
           (double)bench_percentile(b->lat_ns, b->n, 99) / 1e6);
}

/* Closes the global db; a failure counts as one. */
static void close_store(void)
{
    lsm_status *s = lsm_close(db);
    if (s != NULL) {
        fprintf(stderr, "bench-syncwake: close: %s\n", lsm_status_message(s));
        atomic_fetch_add(&failures, 1);
        lsm_status_free(s);
    }
}

int main(int argc, char **argv)
{
    struct config c;
    if (!parse_args(argc, argv, &c)) {
        fprintf(stderr, "bench-syncwake: bad arguments\n");
        return 2;
    }
    char tmp[] = "/tmp/bench-syncwake-XXXXXX";
    const char *dir = c.dir;
    if (dir == NULL && (dir = mkdtemp(tmp)) == NULL) {
        perror("bench-syncwake: mkdtemp");
        return 1;
    }
    fault_env *fe = fault_env_new(lsm_env_default());
    if (fe == NULL)
        return 1;
    lsm_options o;
    if (!open_store(&c, dir, fe, &o))
        return 1;
    struct big b = {.vlen = (size_t)c.value_kb << 10, .gap_us = c.gap_us,
                    .cap = (size_t)c.seconds * 100000};
    b.lat_ns = calloc(b.cap, sizeof(*b.lat_ns));
    run_writers(&c, &b);
    report(&c, &b);
    close_store();
    fault_env_free(fe);
    free(b.lat_ns);
    o.env = NULL;
    if (dir == tmp) { /* ours: remove it */
        lsm_status_free(lsm_destroy(&o, dir));
        rmdir(dir);
    }
    return atomic_load(&failures) ? 1 : 0;
}
