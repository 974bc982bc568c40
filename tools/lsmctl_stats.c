/*
 * lsmctl_stats.c — lsmctl stats --json, --prometheus and --watch (see
 * lsmctl_stats.h). The field names are the daemon's and the store's metric
 * names, unchanged: they are the stable interface lsmctl.8 documents.
 */
#include "lsmctl_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define METRICS_MAX 256
#define NAME_MAX_LEN 64

struct metrics {
    int n;
    char name[METRICS_MAX][NAME_MAX_LEN];
    uint64_t value[METRICS_MAX];
};

/* Parses "name value" lines into m; false on a malformed line. */
static bool parse(const char *text, struct metrics *m)
{
    m->n = 0;
    for (const char *p = text; *p != '\0' && m->n < METRICS_MAX;) {
        int used = 0;
        if (sscanf(p, "%63s %" SCNu64 "%n", m->name[m->n], &m->value[m->n], &used) != 2)
            return false;
        m->n++;
        p += used;
        while (*p == '\n')
            p++;
    }
    return true;
}

/* The value of metric name in m, 0 when absent. */
static uint64_t get(const struct metrics *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->name[i], name) == 0)
            return m->value[i];
    return 0;
}

/* The live mount's metrics text (malloc'd), NULL with errno when dir is not
 * an lsmfs mount's root. */
static char *mount_metrics(const char *dir)
{
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    if (buf == NULL)
        return NULL;
    ssize_t n = getxattr(dir, "user.lsmfs.metrics", buf, cap - 1);
    if (n < 0) {
        int e = errno;
        free(buf);
        errno = e;
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Reads dir's metrics (a mount's if it is one, else the store's) into m. */
static bool read_metrics(const char *dir, bool live_only, lsmctl_store_metrics_fn store,
                         struct metrics *m)
{
    char *text = mount_metrics(dir);
    if (text == NULL && live_only) {
        fprintf(stderr, "lsmctl: %s: not the mount point of a running lsmfs (--watch needs one)\n",
                dir);
        return false;
    }
    if (text == NULL && (text = store(dir)) == NULL)
        return false;
    bool ok = parse(text, m);
    free(text);
    if (!ok)
        fprintf(stderr, "lsmctl: %s: unreadable metrics\n", dir);
    return ok;
}

static void print_json(const struct metrics *m)
{
    printf("{");
    for (int i = 0; i < m->n; i++)
        printf("%s\n  \"%s\": %" PRIu64, i ? "," : "", m->name[i], m->value[i]);
    printf("\n}\n");
}

/* Metrics that are levels, not running totals. */
static bool is_gauge(const char *name)
{
    static const char *const gauges[] = {
        "fs_transport_uring",   "store_reserve_bytes",      "store_reserve_held",
        "store_sequence",       "store_mem_usage",          "store_immutable_memtables",
        "store_total_table_bytes", "store_level0_load",     "store_paced_rate",
        "store_background_busy", "store_background_jobs",   "store_recovered_",
        "store_tables_level_",  "store_table_bytes_level_",
    };
    for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++) {
        size_t n = strlen(gauges[i]);
        if (strncmp(name, gauges[i], n) == 0 && (gauges[i][n - 1] == '_' || name[n] == '\0'))
            return true;
    }
    return false;
}

/* Metrics that are one family with a label: the family is the prefix's
 * first family_len bytes, the label's value what follows the prefix. */
static const struct {
    const char *prefix;
    int family_len;
    const char *label;
} labelled[] = {
    {"fs_requests_", 11, "op"},
    {"store_tables_level_", 12, "level"},
    {"store_table_bytes_level_", 17, "level"},
};

/* One Prometheus sample, with a # TYPE line where a family begins; counters
 * end in _total. */
static void print_sample(const char *name, uint64_t v, char *last_family, size_t cap)
{
    int cut = (int)strlen(name);
    char label[NAME_MAX_LEN + 16] = "";
    for (size_t i = 0; i < sizeof labelled / sizeof labelled[0]; i++) {
        size_t n = strlen(labelled[i].prefix);
        if (strncmp(name, labelled[i].prefix, n) == 0) {
            cut = labelled[i].family_len;
            snprintf(label, sizeof label, "{%s=\"%s\"}", labelled[i].label, name + n);
        }
    }
    bool gauge = is_gauge(name);
    char fam[NAME_MAX_LEN + 16];
    snprintf(fam, sizeof fam, "lsmfs_%.*s%s", cut, name, gauge ? "" : "_total");
    if (strcmp(last_family, fam) != 0) {
        printf("# TYPE %s %s\n", fam, gauge ? "gauge" : "counter");
        snprintf(last_family, cap, "%s", fam);
    }
    printf("%s%s %" PRIu64 "\n", fam, label, v);
}

static void print_prometheus(const struct metrics *m)
{
    char last[NAME_MAX_LEN + 16] = "";
    for (int i = 0; i < m->n; i++)
        print_sample(m->name[i], m->value[i], last, sizeof last);
}

/* --watch's columns: request rates of these ops, then the rest. */
static const char *const watch_ops[] = {"lookup", "getattr", "create", "write", "read",
                                        "fsync", "unlink", "rename"};
#define WATCH_OPS (sizeof watch_ops / sizeof watch_ops[0])

static void watch_header(void)
{
    printf("%8s %8s", "time", "req/s");
    for (size_t i = 0; i < WATCH_OPS; i++)
        printf(" %7s", watch_ops[i]);
    printf(" %7s | %9s %7s %7s %9s %8s\n", "other", "stwrite/s", "sync/s", "wr/sync",
           "compMB/s", "stall%");
}

static double delta(const struct metrics *a, const struct metrics *b, const char *name)
{
    return (double)(get(b, name) - get(a, name));
}

/* One line of rates between samples a and b, secs apart. */
static void watch_line(const struct metrics *a, const struct metrics *b, double secs)
{
    char t[16], key[NAME_MAX_LEN];
    time_t now = time(NULL);
    struct tm tm;
    strftime(t, sizeof t, "%H:%M:%S", localtime_r(&now, &tm));
    double total = 0, shown = 0;
    for (int i = 0; i < b->n; i++)
        if (strncmp(b->name[i], "fs_requests_", 12) == 0)
            total += delta(a, b, b->name[i]);
    printf("%8s %8.0f", t, total / secs);
    for (size_t i = 0; i < WATCH_OPS; i++) {
        snprintf(key, sizeof key, "fs_requests_%s", watch_ops[i]);
        shown += delta(a, b, key);
        printf(" %7.0f", delta(a, b, key) / secs);
    }
    double writes = delta(a, b, "store_writes"), syncs = delta(a, b, "store_wal_syncs");
    printf(" %7.0f | %9.0f %7.0f %7.1f %9.2f %8.1f\n", (total - shown) / secs, writes / secs,
           syncs / secs, syncs > 0 ? writes / syncs : 0.0,
           delta(a, b, "store_compaction_bytes_written") / secs / 1048576.0,
           delta(a, b, "store_stall_us") / secs / 1e4);
    fflush(stdout);
}

static int watch(const char *dir, unsigned secs, long count, lsmctl_store_metrics_fn store)
{
    static struct metrics a, b;
    if (!read_metrics(dir, true, store, &a))
        return 1;
    watch_header();
    for (long i = 0; count <= 0 || i < count; i++) {
        struct timespec ts = {.tv_sec = secs};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        if (!read_metrics(dir, true, store, &b))
            return 1;
        watch_line(&a, &b, secs);
        a = b;
    }
    return 0;
}

/* "--watch" or "--watch=SEC" into *secs; false if arg is neither or SEC is
 * not 1..3600. */
static bool parse_watch(const char *arg, unsigned *secs)
{
    if (strcmp(arg, "--watch") == 0) {
        *secs = 1;
        return true;
    }
    char *end;
    if (strncmp(arg, "--watch=", 8) != 0)
        return false;
    unsigned long v = strtoul(arg + 8, &end, 10);
    if (end == arg + 8 || *end != '\0' || v < 1 || v > 3600)
        return false;
    *secs = (unsigned)v;
    return true;
}

int lsmctl_stats_formatted(int argc, char **argv, lsmctl_store_metrics_fn store_metrics)
{
    if (argc < 2)
        return 2;
    const char *dir = argv[0];
    bool json = false, prom = false;
    unsigned secs = 0;
    long count = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--prometheus") == 0)
            prom = true;
        else if (strncmp(argv[i], "--count=", 8) == 0 &&
                 (count = strtol(argv[i] + 8, &end, 10)) > 0 && *end == '\0')
            continue;
        else if (!parse_watch(argv[i], &secs)) {
            fprintf(stderr, "lsmctl: stats: %s: give --json, --prometheus or --watch[=SEC] "
                            "(1 to 3600) [--count=N]\n", argv[i]);
            return 2;
        }
    }
    if (json + prom + (secs > 0) != 1) {
        fprintf(stderr, "lsmctl: stats: give one of --json, --prometheus, --watch[=SEC]\n");
        return 2;
    }
    if (secs > 0)
        return watch(dir, secs, count, store_metrics);
    static struct metrics m;
    if (!read_metrics(dir, false, store_metrics, &m))
        return 1;
    if (json)
        print_json(&m);
    else
        print_prometheus(&m);
    return 0;
}

uint64_t lsmctl_metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtoull(p + n + 1, NULL, 10);
    return 0;
}
