/*
 * bench_radosops.c — bench-radosops: what the RADOS env's name changes cost
 * against the floor, one durable append, side by side in one run:
 *
 *   CEPH_CONF=... bench-radosops [POOL [N]]     (POOL lsmfs, N 200)
 *
 * In a fresh directory of POOL: a 4 KiB append + sync on an open file (the
 * floor: one round trip), a link, a remove of a name whose object keeps
 * another, a remove of an object's last name, a create (new file, closed),
 * each N times one at a time (p50 and mean in ms, and p50 as a multiple of
 * the append's); then removes of last names by 1 and by 8 threads at once
 * (each its own files): removes/s, and the 8-thread figure over the
 * 1-thread one (1.0: the removes are serialised). Everything it made is
 * removed.
 */
#include "env.h"
#include "env_rados.h"
#include "status.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS_MAX 8

static lsm_env *env;
static char dir[128];

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void check(lsm_status *s, const char *what)
{
    if (s == NULL)
        return;
    fprintf(stderr, "bench-radosops: %s: %s\n", what, lsm_status_message(s));
    exit(1);
}

static void path(char *out, size_t cap, const char *kind, int t, int i)
{
    snprintf(out, cap, "%s/%s-%d-%d", dir, kind, t, i);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct figure {
    const char *name;
    double p50, mean;
};

static struct figure summarise(const char *name, double *ms, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += ms[i];
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    return (struct figure){name, ms[n / 2], sum / n};
}

/* Files kind-t-0 .. kind-t-(n-1), 1 KiB each, synced. */
static void make_files(const char *kind, int t, int n)
{
    char buf[1024], p[256];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < n; i++) {
        path(p, sizeof p, kind, t, i);
        check(env_write_file_sync(env, p, buf, sizeof buf), p);
    }
}

static struct figure time_appends(int n, double *ms)
{
    char p[256], buf[4096];
    memset(buf, 'a', sizeof buf);
    path(p, sizeof p, "wal", 0, 0);
    lsm_wfile *f;
    check(env->new_wfile(env, p, &f), p);
    for (int i = 0; i < n; i++) {
        double t0 = now_ms();
        check(f->ops->append(f, buf, sizeof buf), "append");
        check(f->ops->sync(f), "sync");
        ms[i] = now_ms() - t0;
    }
    check(f->ops->close(f), "close");
    check(env->remove_file(env, p), p);
    return summarise("append 4 KiB + sync (floor)", ms, n);
}

enum op { LINK, REMOVE_KEPT, REMOVE_LAST, CREATE };

static struct figure time_op(enum op op, int n, double *ms)
{
    static const char *names[] = {"link", "remove (object keeps a name)",
                                  "remove (last name: object too)", "create (new file, closed)"};
    for (int i = 0; i < n; i++) {
        char a[256], b[256];
        path(a, sizeof a, "f", 0, i);
        path(b, sizeof b, "l", 0, i);
        double t0 = now_ms();
        if (op == LINK) {
            check(env->link_file(env, a, b), b);
        } else if (op == REMOVE_KEPT) {
            check(env->remove_file(env, b), b);
        } else if (op == REMOVE_LAST) {
            check(env->remove_file(env, a), a);
        } else {
            lsm_wfile *f;
            check(env->new_wfile(env, a, &f), a);
            check(f->ops->close(f), a);
        }
        ms[i] = now_ms() - t0;
    }
    return summarise(names[op], ms, n);
}

struct worker {
    pthread_t th;
    int t, n;
};

static void *remover(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        char p[256];
        path(p, sizeof p, "r", w->t, i);
        check(env->remove_file(env, p), p);
    }
    return NULL;
}

/* Removes of last names by threads threads at once, n each: removes/s. */
static double removes_per_s(int threads, int n)
{
    struct worker w[THREADS_MAX];
    for (int t = 0; t < threads; t++)
        make_files("r", t, n);
    double t0 = now_ms();
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){.t = t, .n = n};
        pthread_create(&w[t].th, NULL, remover, &w[t]);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(w[t].th, NULL);
    return threads * n / ((now_ms() - t0) / 1e3);
}

int main(int argc, char **argv)
{
    env_rados_options o;
    env_rados_options_init(&o);
    o.pool = argc > 1 ? argv[1] : "lsmfs";
    int n = argc > 2 ? atoi(argv[2]) : 200;
    if (n < 1 || n > 100000) {
        fprintf(stderr, "usage: bench-radosops [POOL [N]]\n");
        return 2;
    }
    check(env_rados_open(&o, &env), "connect");
    snprintf(dir, sizeof dir, "radosops-%d-%ld", (int)getpid(), (long)time(NULL));
    check(env->create_dir(env, dir), dir);
    double *ms = malloc((size_t)n * sizeof *ms);
    if (ms == NULL)
        return 1;
    struct figure f[5];
    f[0] = time_appends(n, ms);
    make_files("f", 0, n);
    f[1] = time_op(LINK, n, ms);
    f[2] = time_op(REMOVE_KEPT, n, ms);
    f[3] = time_op(REMOVE_LAST, n, ms);
    f[4] = time_op(CREATE, n, ms);
    printf("| op | p50 ms | mean ms | p50 / append's |\n| --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < 5; i++)
        printf("| %s | %.2f | %.2f | %.2f |\n", f[i].name, f[i].p50, f[i].mean,
               f[i].p50 / f[0].p50);
    double one = removes_per_s(1, n), eight = removes_per_s(THREADS_MAX, n / 4 > 0 ? n / 4 : 1);
    printf("removes/s: 1 thread %.0f, %d threads %.0f (%.2fx)\n", one, THREADS_MAX, eight,
           eight / one);
    for (int i = 0; i < n; i++) { /* the creates' files */
        char a[256];
        path(a, sizeof a, "f", 0, i);
        check(env->remove_file(env, a), a);
    }
    check(env->remove_dir(env, dir), dir);
    free(ms);
    env_rados_close(env);
    return 0;
}
