/*
 * lsmctl — look into and maintain an lsmfs store that no one has open.
 *
 *   lsmctl stats DIR|MOUNTPOINT   the store's statistics (--json, --prometheus,
 *                                 --watch: lsmctl_stats.c)
 *   lsmctl info DIR|MOUNTPOINT    what the filesystem is and holds (lsmctl_info.c)
 *   lsmctl tables DIR             levels and table files
 *   lsmctl compact DIR [FROM TO]  compact a key range (all by default)
 *   lsmctl dump DIR [FROM [TO]]   keys and values, escaped, one pair a line
 *   lsmctl check DIR              read every block, verify every checksum
 *   lsmctl compact|check MNT      the same through a running mount's daemon
 *                                 (lsmctl_online.c)
 *   lsmctl snapshot MNT NAME      snapshot a mounted filesystem (also --list,
 *                                 --delete NAME; lsmctl_snapshot.c)
 *   lsmctl backup MNT|STORE DIR   incremental backups (also list, verify,
 *                                 purge, restore; lsmctl_backup.c)
 *
 * A store that is open elsewhere (mounted) is refused, except by `stats`
 * on a mount point, which reads the live daemon's stats through the root
 * directory's user.lsmfs.stats attribute. Stores open through store_open
 * (fs/store_open.h), as the daemon's do: a newer format is refused, and
 * compact writes tables with the filesystem's settings. All but `compact`
 * open the store read-only (lsm_options.read_only): they change no byte of
 * it and work on a read-only medium; a damaged log is read up to the
 * damage, which is reported (a problem for `check`).
 */
#include "lsm.h"
#include "lsmctl_backup.h"
#include "lsmctl_info.h"
#include "lsmctl_online.h"
#include "lsmctl_snapshot.h"
#include "lsmctl_stats.h"
#include "lsmctl_store.h"
#include "lsmfs_version.h"
#include "store_uri.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: lsmctl stats DIR|MOUNTPOINT [--json | --prometheus]\n"
               "       lsmctl stats MOUNTPOINT --watch[=SEC] [--count=N]\n"
               "       lsmctl info DIR|MOUNTPOINT\n"
               "       lsmctl tables DIR\n"
               "       lsmctl compact DIR [FROM TO] | MOUNTPOINT\n"
               "       lsmctl dump DIR [FROM [TO]]\n"
               "       lsmctl check DIR|MOUNTPOINT\n"
               "       lsmctl snapshot MNT NAME | MNT --list | MNT --delete NAME\n"
               "       lsmctl backup MNT|STORE DIR | list DIR | verify DIR [ID]\n"
               "                     | purge DIR --keep N | restore DIR ID DEST\n"
               "A store DIR may be rados:POOL/NAME (a store on Ceph); then give\n"
               "-o ceph_conf=PATH,ceph_id=NAME before the command if needed.\n");
}

/* Prints the error, prefixed by `what` unless the message names it already
 * (the store's messages name their files). */
static int fail(lsm_status *s, const char *what)
{
    const char *msg = lsm_status_message(s);
    if (strstr(msg, what) != NULL)
        fprintf(stderr, "lsmctl: %s\n", msg);
    else
        fprintf(stderr, "lsmctl: %s: %s\n", what, msg);
    lsm_status_free(s);
    return 1;
}

static lsm_db *open_store(const char *dir, bool write)
{
    return lsmctl_open_store(dir, write, NULL, NULL, NULL);
}

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != ' ' && c != '=')
            putchar(c);
        else
            printf("\\x%02x", c);
    }
}

/* Parses \xHH escapes (the dump format) so ranges can name binary keys. */
static size_t unescape(const char *in, char *out)
{
    size_t n = 0;
    for (const char *p = in; *p; p++) {
        unsigned v;
        if (p[0] == '\\' && p[1] == 'x' && sscanf(p + 2, "%2x", &v) == 1) {
            out[n++] = (char)v;
            p += 3;
        } else {
            out[n++] = *p;
        }
    }
    return n;
}

static int cmd_stats(const char *dir)
{
    char buf[65536];
    ssize_t n = getxattr(dir, "user.lsmfs.stats", buf, sizeof(buf) - 1);
    if (n >= 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        return 0;
    }
    lsm_db *db = lsmctl_open_store(dir, false, NULL, NULL, "use the mount point: lsmctl stats %s");
    if (db == NULL)
        return 1;
    char *text = lsm_property(db, "lsm.stats");
    fputs(text ? text : "", stdout);
    free(text);
    lsm_status *s = lsm_close(db);
    return s ? fail(s, "close") : 0;
}

/* lsmctl_info.h's read-only open. */
static lsm_db *open_store_ro(const char *dir)
{
    return open_store(dir, false);
}

/* lsmctl_stats.h's reader of a store no one has open. */
static char *store_metrics(const char *dir)
{
    lsm_db *db = open_store(dir, false);
    if (db == NULL)
        return NULL;
    char *text = lsm_property(db, "lsm.metrics");
    lsm_status *s = lsm_close(db);
    if (s) {
        free(text);
        fail(s, "close");
        return NULL;
    }
    return text;
}

static int cmd_tables(const char *dir)
{
    lsm_db *db = open_store(dir, false);
    if (db == NULL)
        return 1;
    char *text = lsm_property(db, "lsm.tables");
    fputs(text && *text ? text : "(no tables)\n", stdout);
    free(text);
    lsm_status *s = lsm_close(db);
    return s ? fail(s, "close") : 0;
}

/* The store's tables: bytes and files. */
struct table_size {
    uint64_t bytes, files;
};

static struct table_size table_size(lsm_db *db)
{
    struct table_size t = {0, 0};
    lsm_property_u64(db, "lsm.total-table-bytes", &t.bytes);
    char name[64];
    uint64_t n;
    for (int l = 0;; l++) {
        snprintf(name, sizeof name, "lsm.num-files-at-level%d", l);
        if (!lsm_property_u64(db, name, &n))
            break;
        t.files += n;
    }
    return t;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The progress line of a compaction, on a terminal: what the tables hold
 * now, redrawn twice a second until done. */
struct compact_progress {
    lsm_db *db;
    double start;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done; /* guarded by mu */
};

static void *show_compact_progress(void *arg)
{
    struct compact_progress *p = arg;
    struct timespec until;
    pthread_mutex_lock(&p->mu);
    while (!p->done) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 500000000;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) == 0 || p->done)
            continue;
        struct table_size t = table_size(p->db);
        fprintf(stderr, "\rcompacting: %.0f s, tables %.1f MiB in %" PRIu64 " files   ",
                now_s() - p->start, t.bytes / 1048576.0, t.files);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* lsm_compact_range, with a progress line on a terminal. */
static lsm_status *compact_showing(lsm_db *db, const char *f, size_t fn, const char *t, size_t tn)
{
    struct compact_progress p = {.db = db, .start = now_s(), .done = false};
    pthread_t th;
    bool shown = isatty(STDERR_FILENO) && pthread_mutex_init(&p.mu, NULL) == 0 &&
                 pthread_cond_init(&p.cv, NULL) == 0 &&
                 pthread_create(&th, NULL, show_compact_progress, &p) == 0;
    lsm_status *s = lsm_compact_range(db, f, fn, t, tn);
    if (shown) {
        pthread_mutex_lock(&p.mu);
        p.done = true;
        pthread_cond_signal(&p.cv);
        pthread_mutex_unlock(&p.mu);
        pthread_join(th, NULL);
        fputs("\r\033[K", stderr);
    }
    return s;
}

static int cmd_compact(const char *dir, const char *from, const char *to)
{
    lsm_db *db = open_store(dir, true);
    if (db == NULL)
        return 1;
    char *f = from ? malloc(strlen(from) + 1) : NULL;
    char *t = to ? malloc(strlen(to) + 1) : NULL;
    size_t fn = f ? unescape(from, f) : 0, tn = t ? unescape(to, t) : 0;
    double start = now_s();
    struct table_size before = table_size(db);
    lsm_status *s = compact_showing(db, f, fn, t, tn);
    free(f);
    free(t);
    if (s) {
        lsm_status_free(lsm_close(db));
        return fail(s, "compact");
    }
    struct table_size after = table_size(db);
    s = lsm_close(db);
    if (s)
        return fail(s, "close");
    printf("%s: compacted in %.1f s: tables %.1f MiB in %" PRIu64 " files -> %.1f MiB in %" PRIu64
           " files\n",
           dir, now_s() - start, before.bytes / 1048576.0, before.files, after.bytes / 1048576.0,
           after.files);
    return 0;
}

static int cmd_dump(const char *dir, const char *from, const char *to)
{
    lsm_db *db = open_store(dir, false);
    if (db == NULL)
        return 1;
    lsm_iter *it = lsm_iter_new(db, NULL);
    if (it == NULL) {
        lsm_close(db);
        fprintf(stderr, "lsmctl: out of memory\n");
        return 1;
    }
    char *f = from ? malloc(strlen(from) + 1) : NULL;
    char *t = to ? malloc(strlen(to) + 1) : NULL;
    size_t fn = f ? unescape(from, f) : 0, tn = t ? unescape(to, t) : 0;
    if (f)
        lsm_iter_seek(it, f, fn);
    else
        lsm_iter_seek_first(it);
    for (; lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn, vn;
        const char *k = lsm_iter_key(it, &kn);
        if (t) {
            size_t m = kn < tn ? kn : tn;
            int c = memcmp(k, t, m);
            if (c > 0 || (c == 0 && kn >= tn))
                break; /* TO is exclusive */
        }
        const char *v = lsm_iter_value(it, &vn);
        print_escaped(k, kn);
        putchar('=');
        print_escaped(v, vn);
        putchar('\n');
    }
    lsm_status *s = lsm_iter_status(it);
    lsm_iter_free(it);
    free(f);
    free(t);
    if (s) {
        lsm_status_free(lsm_close(db));
        return fail(s, "dump");
    }
    s = lsm_close(db);
    return s ? fail(s, "close") : 0;
}

static void report(void *ctx, const char *msg)
{
    (*(int *)ctx)++;
    printf("problem: %s\n", msg);
}

static int cmd_check(const char *dir)
{
    int problems = 0;
    lsm_db *db = lsmctl_open_store(dir, false, report, &problems, NULL);
    if (db == NULL)
        return 1;
    lsm_status *s = lsm_verify(db, report, &problems);
    if (lsm_status_code(s) == LSM_NO_MEMORY) { /* the check did not finish */
        lsm_status_free(lsm_close(db));
        return fail(s, "check");
    }
    lsm_status_free(s);
    lsm_status *c = lsm_close(db);
    if (c)
        return fail(c, "close");
    printf("%s: %s (%d problem%s)\n", dir, problems ? "DAMAGED" : "ok", problems,
           problems == 1 ? "" : "s");
    return problems ? 1 : 0;
}

static int run(int argc, char **argv)
{
    /* -o ceph_conf=PATH,ceph_id=NAME first: for stores on RADOS. */
    for (; argc >= 3 && !strcmp(argv[1], "-o"); argc -= 2, argv += 2) {
        lsm_status *bad = store_uri_options(argv[2]);
        if (bad != NULL) {
            fprintf(stderr, "lsmctl: %s\n", lsm_status_message(bad));
            lsm_status_free(bad);
            return 2;
        }
    }
    if (argc >= 2 && !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1], *dir = argv[2];
    if (!strcmp(cmd, "snapshot"))
        return lsmctl_snapshot(argc - 2, argv + 2);
    if (!strcmp(cmd, "backup"))
        return lsmctl_backup(argc - 2, argv + 2);
    const char *a = argc > 3 ? argv[3] : NULL, *b = argc > 4 ? argv[4] : NULL;
    if (!strcmp(cmd, "stats") && argc == 3)
        return cmd_stats(dir);
    if (!strcmp(cmd, "stats") && argc > 3) {
        int rc = lsmctl_stats_formatted(argc - 2, argv + 2, store_metrics);
        if (rc == 2)
            usage(stderr);
        return rc;
    }
    if ((!strcmp(cmd, "compact") || !strcmp(cmd, "check")) && argc == 3 &&
        lsmctl_is_lsmfs_mount(dir))
        return cmd[1] == 'o' ? lsmctl_online_compact(dir) : lsmctl_online_check(dir);
    if (!strcmp(cmd, "info") && argc == 3)
        return lsmctl_info(dir, open_store_ro);
    if (!strcmp(cmd, "tables") && argc == 3)
        return cmd_tables(dir);
    if (!strcmp(cmd, "compact") && (argc == 3 || argc == 5))
        return cmd_compact(dir, a, b);
    if (!strcmp(cmd, "dump") && argc <= 5)
        return cmd_dump(dir, a, b);
    if (!strcmp(cmd, "check") && argc == 3)
        return cmd_check(dir);
    usage(stderr);
    return 2;
}

/* The RADOS connections close before exit: librados' threads outliving
 * main met OpenSSL torn down by exit's handlers (SIGSEGV in 2 of 15 failed
 * restores, whose connection nothing closed). */
int main(int argc, char **argv)
{
    version_help_or_exit(argc, argv, "lsmctl", usage);
    int rc = run(argc, argv);
    store_uri_shutdown();
    return rc;
}
