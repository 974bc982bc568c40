/*
 * bench_rtt — one FUSE round trip, as often as it goes: T threads each
 * stat their own file N times with statx(AT_STATX_FORCE_SYNC), which makes
 * a FUSE filesystem's kernel ask the daemon (one GETATTR) whatever the
 * attribute timeout — the same as a stat with attribute timeout 0.
 *
 *   bench_rtt DIR [-t threads] [-n stats_per_thread]
 *
 * Prints "RESULT rtt threads=T stats_per_s=OPS us_per_stat=US" (US: the
 * mean time of one stat in one thread). Exits 1 on any failed call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* statx */
#endif
#include "bench_common.h"

#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_RTT_DIE(...)                                                                       \
    do {                                                                                         \
        fprintf(stderr, "bench_rtt: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                     \
        exit(1);                                                                                 \
    } while (0)

typedef struct worker {
    char path[4096];
    long n;
    pthread_barrier_t *start;
    uint64_t t_start, t_end;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    struct statx stx;
    pthread_barrier_wait(w->start);
    w->t_start = bench_now_ns();
    for (long i = 0; i < w->n; i++)
        if (statx(AT_FDCWD, w->path, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &stx) != 0)
            BENCH_RTT_DIE("statx %s: %s", w->path, strerror(errno));
    w->t_end = bench_now_ns();
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1, opt;
    long n = 20000;
    while ((opt = getopt(argc, argv, "t:n:")) != -1) {
        if (opt == 't')
            threads = atoi(optarg);
        else if (opt == 'n')
            n = atol(optarg);
        else
            BENCH_RTT_DIE("usage: bench_rtt DIR [-t threads] [-n stats_per_thread]");
    }
    if (optind != argc - 1 || threads < 1 || n < 1)
        BENCH_RTT_DIE("usage: bench_rtt DIR [-t threads] [-n stats_per_thread]");
    const char *dir = argv[optind];
    worker *ws = calloc((size_t)threads, sizeof(*ws));
    pthread_t *ts = calloc((size_t)threads, sizeof(*ts));
    pthread_barrier_t start;
    if (ws == NULL || ts == NULL)
        BENCH_RTT_DIE("out of memory");
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        snprintf(ws[i].path, sizeof(ws[i].path), "%s/rtt%d", dir, i);
        int fd = open(ws[i].path, O_CREAT | O_WRONLY, 0644);
        if (fd < 0 || close(fd) != 0)
            BENCH_RTT_DIE("create %s: %s", ws[i].path, strerror(errno));
        ws[i].n = n;
        ws[i].start = &start;
    }
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ts[i], NULL, run, &ws[i]) != 0)
            BENCH_RTT_DIE("cannot start a thread");
    uint64_t first = UINT64_MAX, last = 0;
    double per = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ts[i], NULL);
        first = ws[i].t_start < first ? ws[i].t_start : first;
        last = ws[i].t_end > last ? ws[i].t_end : last;
        per += (double)(ws[i].t_end - ws[i].t_start) / 1e3 / (double)n / threads;
        unlink(ws[i].path);
    }
    double secs = (double)(last - first) / 1e9;
    printf("RESULT rtt threads=%d stats_per_s=%.0f us_per_stat=%.2f\n", threads,
           (double)n * threads / secs, per);
    free(ws);
    free(ts);
    return 0;
}
