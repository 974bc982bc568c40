/*
 * bench_smallfile — many small files: create D directories x F files of S
 * bytes, then stat, read (and verify), readdir and unlink them all, timing
 * each phase. Phases run back to back with no cache drop between them (stat
 * of just-written files is the point of the stat phase).
 *
 *   bench_smallfile DIR [-d dirs] [-f files_per_dir] [-s size] [-t threads]
 *                   [-k] [-p create,stat,read,readdir,unlink]
 *
 *   -k  keep the tree (skip unlink) — for measuring the space it takes.
 *
 * Files are split across threads by index (file i goes to thread i % T),
 * directories likewise for readdir. Prints a line per phase and one
 * "RESULT smallfile threads=T create=OPS ... " line (operations per second;
 * readdir counts entries). Exits 1 on any failed call or bad content.
 */
#include "bench_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

enum phase { P_CREATE, P_STAT, P_READ, P_READDIR, P_UNLINK, P_COUNT };
static const char *const phase_names[P_COUNT] = {"create", "stat", "read", "readdir", "unlink"};

typedef struct config {
    const char *dir;
    int dirs, files_per_dir, threads;
    size_t size;
    bool run[P_COUNT];
} config;

typedef struct worker {
    const config *cfg;
    int id;
    enum phase phase;
    pthread_barrier_t *start;
    char *want, *got; /* size + 1 bytes each; this worker's own */
    uint64_t ops;
    uint64_t t_start, t_end; /* the worker's own clock readings */
} worker;

static void file_path(const config *c, size_t idx, char *buf, size_t n)
{
    snprintf(buf, n, "%s/sf/d%04zu/f%07zu", c->dir, idx / (size_t)c->files_per_dir, idx);
}

static void do_create(worker *w, size_t idx, const char *path)
{
    bench_fill(w->want, w->cfg->size, idx * 7919 + 1);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0)
        BENCH_DIE("create %s: %s", path, strerror(errno));
    if (w->cfg->size > 0 && write(fd, w->want, w->cfg->size) != (ssize_t)w->cfg->size)
        BENCH_DIE("write %s: %s", path, strerror(errno));
    if (close(fd) != 0)
        BENCH_DIE("close %s: %s", path, strerror(errno));
}

static void do_stat(worker *w, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        BENCH_DIE("stat %s: %s", path, strerror(errno));
    if ((size_t)st.st_size != w->cfg->size || !S_ISREG(st.st_mode))
        BENCH_DIE("stat %s: size %lld, expected %zu", path, (long long)st.st_size, w->cfg->size);
}

static void do_read(worker *w, size_t idx, const char *path)
{
    size_t size = w->cfg->size;
    bench_fill(w->want, size, idx * 7919 + 1);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        BENCH_DIE("open %s: %s", path, strerror(errno));
    size_t have = 0;
    ssize_t n;
    while (have <= size && (n = read(fd, w->got + have, size + 1 - have)) > 0)
        have += (size_t)n;
    close(fd);
    if (have != size || memcmp(w->want, w->got, size) != 0)
        BENCH_DIE("read %s: %zu bytes or content differs (expected %zu)", path, have, size);
}

static void do_readdir(worker *w, int d)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/sf/d%04d", w->cfg->dir, d);
    DIR *dir = opendir(path);
    if (dir == NULL)
        BENCH_DIE("opendir %s: %s", path, strerror(errno));
    uint64_t n = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(dir);
    if (n != (uint64_t)w->cfg->files_per_dir)
        BENCH_DIE("readdir %s: %" PRIu64 " entries, expected %d", path, n, w->cfg->files_per_dir);
    w->ops += n;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const config *c = w->cfg;
    pthread_barrier_wait(w->start);
    w->t_start = bench_now_ns();
    if (w->phase == P_READDIR) {
        for (int d = w->id; d < c->dirs; d += c->threads)
            do_readdir(w, d);
        w->t_end = bench_now_ns();
        return NULL;
    }
    size_t total = (size_t)c->dirs * (size_t)c->files_per_dir;
    char path[4096];
    for (size_t i = (size_t)w->id; i < total; i += (size_t)c->threads) {
        file_path(c, i, path, sizeof(path));
        switch (w->phase) {
        case P_CREATE:
            do_create(w, i, path);
            break;
        case P_STAT:
            do_stat(w, path);
            break;
        case P_READ:
            do_read(w, i, path);
            break;
        default:
            if (unlink(path) != 0)
                BENCH_DIE("unlink %s: %s", path, strerror(errno));
        }
        w->ops++;
    }
    w->t_end = bench_now_ns();
    return NULL;
}

/* Runs one phase on all workers; returns operations per second. The span
 * is taken from the workers' own clocks: with more threads than CPUs the
 * main thread may not run again until they are done. */
static double run_phase(worker *ws, const config *c, enum phase p, double *secs)
{
    pthread_t tids[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)c->threads + 1);
    for (int i = 0; i < c->threads; i++) {
        ws[i].phase = p;
        ws[i].ops = 0;
        ws[i].start = &start;
        if (pthread_create(&tids[i], NULL, worker_main, &ws[i]) != 0)
            BENCH_DIE("pthread_create failed");
    }
    pthread_barrier_wait(&start);
    uint64_t ops = 0, first = UINT64_MAX, last = 0;
    for (int i = 0; i < c->threads; i++) {
        pthread_join(tids[i], NULL);
        ops += ws[i].ops;
        first = ws[i].t_start < first ? ws[i].t_start : first;
        last = ws[i].t_end > last ? ws[i].t_end : last;
    }
    *secs = (double)(last - first) / 1e9;
    pthread_barrier_destroy(&start);
    return (double)ops / *secs;
}

static void tree_dirs(const config *c, bool create)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/sf", c->dir);
    if (create && mkdir(c->dir, 0755) != 0 && errno != EEXIST)
        BENCH_DIE("mkdir %s: %s", c->dir, strerror(errno));
    if (create && mkdir(path, 0755) != 0)
        BENCH_DIE("mkdir %s: %s (remove an old tree first)", path, strerror(errno));
    for (int d = 0; d < c->dirs; d++) {
        snprintf(path, sizeof(path), "%s/sf/d%04d", c->dir, d);
        if ((create ? mkdir(path, 0755) : rmdir(path)) != 0)
            BENCH_DIE("%s %s: %s", create ? "mkdir" : "rmdir", path, strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/sf", c->dir);
    if (!create && rmdir(path) != 0)
        BENCH_DIE("rmdir %s: %s", path, strerror(errno));
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_smallfile DIR [-d dirs] [-f files_per_dir] [-s size] "
                    "[-t threads] [-k] [-p create,stat,read,readdir,unlink]\n");
    exit(2);
}

static void parse_phases(config *c, const char *list)
{
    for (int p = 0; p < P_COUNT; p++) {
        const char *hit = strstr(list, phase_names[p]);
        size_t n = strlen(phase_names[p]);
        c->run[p] =
            hit != NULL && (hit == list || hit[-1] == ',') && (hit[n] == '\0' || hit[n] == ',');
    }
}

static void parse(int argc, char **argv, config *c)
{
    *c = (config){.dirs = 10, .files_per_dir = 2000, .threads = 1, .size = 1024};
    for (int p = 0; p < P_COUNT; p++)
        c->run[p] = true;
    int opt;
    while ((opt = getopt(argc, argv, "d:f:s:t:kp:")) != -1) {
        switch (opt) {
        case 'd':
            c->dirs = atoi(optarg);
            break;
        case 'f':
            c->files_per_dir = atoi(optarg);
            break;
        case 's':
            c->size = bench_parse_size(optarg);
            break;
        case 't':
            c->threads = atoi(optarg);
            break;
        case 'k':
            c->run[P_UNLINK] = false;
            break;
        case 'p':
            parse_phases(c, optarg);
            break;
        default:
            usage();
        }
    }
    if (optind != argc - 1 || c->dirs < 1 || c->files_per_dir < 1 || c->threads < 1 ||
        c->threads > 64 || !c->run[P_CREATE])
        usage(); /* every run starts by creating its tree */
    c->dir = argv[optind];
}

int main(int argc, char **argv)
{
    config c;
    parse(argc, argv, &c);
    worker ws[64];
    for (int i = 0; i < c.threads; i++) {
        ws[i] = (worker){.cfg = &c, .id = i};
        ws[i].want = malloc(c.size + 1);
        ws[i].got = malloc(c.size + 1);
        if (ws[i].want == NULL || ws[i].got == NULL)
            BENCH_DIE("out of memory");
    }
    tree_dirs(&c, true);
    printf("smallfile: %d threads, %d dirs x %d files of %zu bytes\n", c.threads, c.dirs,
           c.files_per_dir, c.size);
    char result[512];
    int len = snprintf(result, sizeof(result), "RESULT smallfile threads=%d", c.threads);
    for (int p = 0; p < P_COUNT; p++) {
        if (!c.run[p])
            continue;
        double secs, rate = run_phase(ws, &c, (enum phase)p, &secs);
        printf("  %-8s %10.0f ops/s  (%.3f s)\n", phase_names[p], rate, secs);
        len +=
            snprintf(result + len, sizeof(result) - (size_t)len, " %s=%.0f", phase_names[p], rate);
    }
    if (c.run[P_UNLINK])
        tree_dirs(&c, false);
    printf("%s\n", result);
    for (int i = 0; i < c.threads; i++) {
        free(ws[i].want);
        free(ws[i].got);
    }
    return 0;
}
