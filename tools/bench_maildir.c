/*
 * bench_maildir — maildir delivery, the way an MTA does it durably:
 * N writers each deliver messages of 2-16 KiB of text: create in tmp/, write,
 * fsync, close, rename into new/, fsync new/. Then every message is read
 * back and compared with what was written.
 *
 *   bench_maildir DIR [-w writers] [-n messages_per_writer] [-m min] [-M max]
 *                 [-b boxes] [-x PATH] [-k]
 *
 *   -b N     N mailboxes DIR/box0 .. DIR/boxN-1, writer i delivering into box
 *            i % N (default: one, DIR itself), as an MTA delivers to many
 *            users: the kernel's lock on new/ is then shared by fewer writers.
 *   -x PATH  read lsmfs's counters from the xattr user.lsmfs.stats of PATH
 *            (the lsmfs mount root) before and after, to report WAL syncs
 *            per delivery; DIR itself is tried when -x is not given.
 *   -k       keep one open descriptor of new/ per writer instead of opening
 *            it for each delivery's fsync (dovecot and qmail open it anew).
 *
 * Prints a human summary, the mean time of each step of a delivery (where
 * the writers wait: with a directory lock held by another writer's fsync of
 * new/, the rename step shows it), and one "RESULT maildir key=value ..."
 * line.
 * Exits 1 on any failed call or any message that does not read back intact.
 */
#include "bench_common.h"

#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

typedef struct config {
    const char *dir;
    int writers;
    int per_writer;
    size_t min_size, max_size;
    int boxes;
    const char *stats_path;
    bool keep_dirfd;
} config;

/* The steps of a delivery, timed separately. */
enum step { S_CREATE, S_WRITE, S_FSYNC, S_CLOSE, S_RENAME, S_FSYNC_DIR, S_COUNT };
static const char *const step_names[S_COUNT] = {"create", "write",  "fsync",
                                                "close",  "rename", "fsync-new"};

typedef struct writer {
    const config *cfg;
    int id;
    pthread_barrier_t *start;
    uint64_t *lat_ns;          /* per_writer entries; owned by this writer while it runs */
    uint64_t bad;              /* read-back mismatches */
    uint64_t step_ns[S_COUNT]; /* summed over this writer's deliveries */
    uint64_t t_start, t_end;   /* the writer's own clock readings */
} writer;

/* Message text: headers then lines of pseudo-random words, all determined
 * by (writer, index), so the reader can regenerate it. */
static size_t message(const config *c, int w, int i, char *buf)
{
    uint64_t st = ((uint64_t)w << 32) ^ (uint64_t)i ^ 0x6d61696c64697200ull;
    size_t size = c->min_size + bench_rng(&st) % (c->max_size - c->min_size + 1);
    size_t len = (size_t)snprintf(buf, size,
                                  "From: bench@example.org\nTo: user%d@example.org\n"
                                  "Subject: delivery %d of writer %d\n\n",
                                  w, i, w);
    size_t col = 0;
    while (len < size) {
        uint64_t r = bench_rng(&st);
        int wl = 2 + (int)(r % 8);
        for (int k = 0; k < wl && len < size; k++)
            buf[len++] = (char)('a' + (r >> (8 + 5 * k)) % 26);
        col += (size_t)wl + 1;
        if (len < size)
            buf[len++] = col > 70 ? '\n' : ' ';
        if (col > 70)
            col = 0;
    }
    return size;
}

/* The maildir writer w delivers into. */
static void box_dir(const config *c, int w, char *buf, size_t n)
{
    if (c->boxes <= 1)
        snprintf(buf, n, "%s", c->dir);
    else
        snprintf(buf, n, "%s/box%d", c->dir, w % c->boxes);
}

static void msg_name(char *buf, size_t n, int w, int i)
{
    snprintf(buf, n, "%d.M%dP%d.bench", 1700000000 + i, w, (int)getpid());
}

static void write_all(int fd, const char *buf, size_t len, const char *what)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            BENCH_DIE("write %s: %s", what, strerror(errno));
        buf += n;
        len -= (size_t)n;
    }
}

static void fsync_dir(const writer *wr, int keep_fd, const char *newdir)
{
    int fd = keep_fd >= 0 ? keep_fd : open(newdir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0)
        BENCH_DIE("writer %d: fsync %s: %s", wr->id, newdir, strerror(errno));
    if (keep_fd < 0)
        close(fd);
}

/* Ends step s of a delivery: adds the time since *t to it, restarts *t. */
static void step_done(writer *wr, enum step s, uint64_t *t)
{
    uint64_t now = bench_now_ns();
    wr->step_ns[s] += now - *t;
    *t = now;
}

static void deliver(writer *wr, int i, char *buf, int keep_fd)
{
    const config *c = wr->cfg;
    char name[96], box[3900], tmp[4096], dst[4096], newdir[4096];
    msg_name(name, sizeof(name), wr->id, i);
    box_dir(c, wr->id, box, sizeof(box));
    snprintf(tmp, sizeof(tmp), "%s/tmp/%s", box, name);
    snprintf(dst, sizeof(dst), "%s/new/%s", box, name);
    snprintf(newdir, sizeof(newdir), "%s/new", box);
    size_t len = message(c, wr->id, i, buf);
    uint64_t t = bench_now_ns();
    int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0)
        BENCH_DIE("create %s: %s", tmp, strerror(errno));
    step_done(wr, S_CREATE, &t);
    write_all(fd, buf, len, tmp);
    step_done(wr, S_WRITE, &t);
    if (fsync(fd) != 0)
        BENCH_DIE("fsync %s: %s", tmp, strerror(errno));
    step_done(wr, S_FSYNC, &t);
    if (close(fd) != 0)
        BENCH_DIE("close %s: %s", tmp, strerror(errno));
    step_done(wr, S_CLOSE, &t);
    if (rename(tmp, dst) != 0)
        BENCH_DIE("rename %s: %s", tmp, strerror(errno));
    step_done(wr, S_RENAME, &t);
    fsync_dir(wr, keep_fd, newdir);
    step_done(wr, S_FSYNC_DIR, &t);
}

static void *deliver_main(void *arg)
{
    writer *wr = arg;
    const config *c = wr->cfg;
    char *buf = malloc(c->max_size + 1);
    char box[3900], newdir[4096];
    box_dir(c, wr->id, box, sizeof(box));
    snprintf(newdir, sizeof(newdir), "%s/new", box);
    int keep_fd = c->keep_dirfd ? open(newdir, O_RDONLY | O_DIRECTORY) : -1;
    if (buf == NULL || (c->keep_dirfd && keep_fd < 0))
        BENCH_DIE("writer %d: setup failed: %s", wr->id, strerror(errno));
    pthread_barrier_wait(wr->start);
    wr->t_start = bench_now_ns();
    for (int i = 0; i < c->per_writer; i++) {
        uint64_t t0 = bench_now_ns();
        deliver(wr, i, buf, keep_fd);
        wr->lat_ns[i] = bench_now_ns() - t0;
    }
    wr->t_end = bench_now_ns();
    if (keep_fd >= 0)
        close(keep_fd);
    free(buf);
    return NULL;
}

/* Reads new/<name> back and compares it with the regenerated message. */
static bool verify_one(const writer *wr, int i, char *want, char *got)
{
    const config *c = wr->cfg;
    char name[96], box[3900], path[4096];
    msg_name(name, sizeof(name), wr->id, i);
    box_dir(c, wr->id, box, sizeof(box));
    snprintf(path, sizeof(path), "%s/new/%s", box, name);
    size_t len = message(c, wr->id, i, want);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "verify: open %s: %s\n", path, strerror(errno));
        return false;
    }
    size_t have = 0;
    ssize_t n;
    while (have <= len && (n = read(fd, got + have, c->max_size + 1 - have)) > 0)
        have += (size_t)n;
    close(fd);
    if (have != len || memcmp(want, got, len) != 0) {
        fprintf(stderr, "verify: %s: %zu bytes read, %zu expected, or content differs\n", path,
                have, len);
        return false;
    }
    return true;
}

static void *verify_main(void *arg)
{
    writer *wr = arg;
    size_t cap = wr->cfg->max_size + 1;
    char *want = malloc(cap), *got = malloc(cap);
    if (want == NULL || got == NULL)
        BENCH_DIE("out of memory");
    pthread_barrier_wait(wr->start);
    wr->t_start = bench_now_ns();
    for (int i = 0; i < wr->cfg->per_writer; i++)
        wr->bad += !verify_one(wr, i, want, got);
    wr->t_end = bench_now_ns();
    free(want);
    free(got);
    return NULL;
}

/* Runs fn on every writer, released together; returns the seconds from the
 * first writer's start to the last one's end (their own clocks: the main
 * thread may not run again before they finish). */
static double run_all(writer *ws, int n, void *(*fn)(void *))
{
    pthread_t *tids = calloc((size_t)n, sizeof(*tids));
    pthread_barrier_t start;
    if (tids == NULL || pthread_barrier_init(&start, NULL, (unsigned)n + 1) != 0)
        BENCH_DIE("out of memory");
    for (int i = 0; i < n; i++) {
        ws[i].start = &start;
        if (pthread_create(&tids[i], NULL, fn, &ws[i]) != 0)
            BENCH_DIE("pthread_create failed");
    }
    pthread_barrier_wait(&start);
    uint64_t first = UINT64_MAX, last = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(tids[i], NULL);
        first = ws[i].t_start < first ? ws[i].t_start : first;
        last = ws[i].t_end > last ? ws[i].t_end : last;
    }
    double secs = (double)(last - first) / 1e9;
    pthread_barrier_destroy(&start);
    free(tids);
    return secs;
}

/* The WAL sync counter from lsmfs's stats xattr (the store's stats text has
 * "wal syncs N"); false when not lsmfs. */
static bool read_syncs(const char *path, uint64_t *out)
{
    static const char *const keys[] = {"wal syncs", "wal-syncs", "wal_syncs"};
    char buf[8192];
    ssize_t n = path != NULL ? getxattr(path, "user.lsmfs.stats", buf, sizeof(buf) - 1) : -1;
    if (n <= 0)
        return false;
    buf[n] = '\0';
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        char *p = strstr(buf, keys[k]);
        if (p == NULL)
            continue;
        p += strlen(keys[k]);
        while (*p != '\0' && (*p < '0' || *p > '9') && *p != '\n')
            p++;
        if (*p >= '0' && *p <= '9') {
            *out = strtoull(p, NULL, 10);
            return true;
        }
    }
    return false;
}

static void make_dirs(const char *dir)
{
    char path[4096];
    static const char *const subs[] = {"", "/tmp", "/new", "/cur"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s%s", dir, subs[i]);
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            BENCH_DIE("mkdir %s: %s", path, strerror(errno));
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_maildir DIR [-w writers] [-n messages_per_writer] "
                    "[-m min_bytes] [-M max_bytes] [-b boxes] [-x lsmfs_root] [-k]\n");
    exit(2);
}

static void parse(int argc, char **argv, config *c)
{
    *c = (config){.writers = 1, .per_writer = 500, .min_size = 2048, .max_size = 16384, .boxes = 1};
    int opt;
    while ((opt = getopt(argc, argv, "w:n:m:M:b:x:k")) != -1) {
        switch (opt) {
        case 'w':
            c->writers = atoi(optarg);
            break;
        case 'n':
            c->per_writer = atoi(optarg);
            break;
        case 'm':
            c->min_size = bench_parse_size(optarg);
            break;
        case 'M':
            c->max_size = bench_parse_size(optarg);
            break;
        case 'b':
            c->boxes = atoi(optarg);
            break;
        case 'x':
            c->stats_path = optarg;
            break;
        case 'k':
            c->keep_dirfd = true;
            break;
        default:
            usage();
        }
    }
    if (optind != argc - 1 || c->writers < 1 || c->per_writer < 1 || c->min_size < 128 ||
        c->max_size < c->min_size || c->boxes < 1)
        usage();
    c->dir = argv[optind];
}

int main(int argc, char **argv)
{
    config c;
    parse(argc, argv, &c);
    make_dirs(c.dir);
    for (int b = 0; c.boxes > 1 && b < c.boxes; b++) {
        char box[3900];
        box_dir(&c, b, box, sizeof(box));
        make_dirs(box);
    }
    size_t total = (size_t)c.writers * (size_t)c.per_writer;
    uint64_t *lat = calloc(total, sizeof(*lat));
    writer *ws = calloc((size_t)c.writers, sizeof(*ws));
    if (lat == NULL || ws == NULL)
        BENCH_DIE("out of memory");
    for (int i = 0; i < c.writers; i++)
        ws[i] = (writer){.cfg = &c, .id = i, .lat_ns = lat + (size_t)i * (size_t)c.per_writer};
    const char *stats = c.stats_path != NULL ? c.stats_path : c.dir;
    uint64_t syncs0 = 0, syncs1 = 0;
    bool have_syncs = read_syncs(stats, &syncs0);

    double dsecs = run_all(ws, c.writers, deliver_main);
    have_syncs = have_syncs && read_syncs(stats, &syncs1);
    double rsecs = run_all(ws, c.writers, verify_main);

    uint64_t bad = 0;
    for (int i = 0; i < c.writers; i++)
        bad += ws[i].bad;
    qsort(lat, total, sizeof(*lat), bench_cmp_u64);
    double rate = (double)total / dsecs;
    double p50 = (double)bench_percentile(lat, total, 50) / 1e6;
    double p99 = (double)bench_percentile(lat, total, 99) / 1e6;
    char spd[32] = "NA";
    if (have_syncs)
        snprintf(spd, sizeof(spd), "%.3f", (double)(syncs1 - syncs0) / (double)total);
    printf("maildir: writers=%d boxes=%d deliveries=%zu in %.3f s: %.0f deliveries/s, latency p50 %.3f ms "
           "p99 %.3f ms; syncs/delivery %s\n",
           c.writers, c.boxes, total, dsecs, rate, p50, p99, spd);
    printf("maildir: mean per step (us):");
    for (int s = 0; s < S_COUNT; s++) {
        uint64_t sum = 0;
        for (int i = 0; i < c.writers; i++)
            sum += ws[i].step_ns[s];
        printf(" %s %.0f", step_names[s], (double)sum / 1e3 / (double)total);
    }
    printf("\n");
    printf("maildir: read back %zu messages in %.3f s (%.0f/s): %" PRIu64 " bad\n", total, rsecs,
           (double)total / rsecs, bad);
    printf("RESULT maildir writers=%d boxes=%d deliveries_per_s=%.0f p50_ms=%.3f p99_ms=%.3f "
           "read_per_s=%.0f bad=%" PRIu64 " syncs_per_delivery=%s\n",
           c.writers, c.boxes, rate, p50, p99, (double)total / rsecs, bad, spd);
    free(lat);
    free(ws);
    return bad == 0 ? 0 : 1;
}
