/*
 * test_snapshot_diff.c — a snapshot is the tree as it was: writers change
 * a tree on the live mount (create, write, append, truncate, rename,
 * unlink, chmod, mkdir, rmdir, symlink, link, setxattr, none fsynced) and
 * stop at a barrier; there a file is written and left open, `cp -a` copies
 * the live tree and `lsmctl snapshot` is taken; the writers go on. The snapshot, mounted read-only,
 * must equal the copy: `diff -r`, and per entry its type, mode, size,
 * mtime, link count, symlink target and xattrs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mount.h"
#include "snaptool.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

enum { WRITERS = 4, DIRS = 4, NAMES = 24, MAX_FILE = 300 * 1024, OPEN_SIZE = 200 * 1024 };

static char out[1 << 16];

static int setup(void **state)
{
    return tm_setup(state, 240, "test_snapshot_diff", NULL);
}

/* The kernel's writeback cache: mtimes and sizes kept in the kernel too. */
static int setup_writeback(void **state)
{
    return tm_setup(state, 240, "test_snapshot_diff", "writeback");
}

/* ------------------------------------------------------------- writers */

/* The barrier: main sets pause; each writer, between two operations,
 * counts itself in paused and waits until main clears pause. */
struct barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool pause;    /* guarded by mu */
    int paused;    /* guarded by mu */
    atomic_bool stop;
};

struct writer {
    const struct tmount *m;
    int id;
    uint64_t rng;
    char *buf;
    struct barrier *b;
    struct tm_errs *errs;
    atomic_long ops; /* operations done */
};

static uint64_t next(struct writer *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static unsigned pick(struct writer *w, unsigned n)
{
    return (unsigned)(next(w) % n);
}

/* A path in writer w's tree: kind 'f' file, 's' subdirectory, 'l' symlink. */
static const char *wpath(struct writer *w, char kind)
{
    return tm_path(w->m, "tree/w%d/d%u/%c%u", w->id, pick(w, DIRS), kind, pick(w, NAMES));
}

static size_t file_size(struct writer *w)
{
    unsigned r = pick(w, 100);
    return r < 70 ? pick(w, 4096) : r < 95 ? pick(w, 64 * 1024) : pick(w, MAX_FILE);
}

/* pwrite n bytes of seeded data at off into path (created if need be). */
static int write_at(struct writer *w, const char *path, size_t n, off_t off, int flags)
{
    tm_fill(w->buf, n, next(w), 0);
    int fd = open(path, O_WRONLY | flags, 0644);
    if (fd < 0)
        return -1;
    int e = tm_pwrite_all(fd, w->buf, n, off);
    close(fd);
    errno = -e;
    return e == 0 ? 0 : -1;
}

static int op_write(struct writer *w)
{
    const char *p = wpath(w, 'f');
    switch (pick(w, 3)) {
    case 0: /* new or replaced */
        return write_at(w, p, file_size(w), 0, O_CREAT | O_TRUNC);
    case 1: /* in place */
        return write_at(w, p, 1 + pick(w, 8192), (off_t)pick(w, 64 * 1024), 0);
    default: { /* append */
        struct stat st;
        if (stat(p, &st) != 0)
            return -1;
        return write_at(w, p, 1 + pick(w, 16384), st.st_size, 0);
    }
    }
}

static int op_meta(struct writer *w)
{
    char a[PATH_MAX];
    snprintf(a, sizeof a, "%s", wpath(w, 'f'));
    switch (pick(w, 9)) {
    case 0: return rename(a, wpath(w, 'f'));
    case 1: return unlink(pick(w, 2) ? a : wpath(w, 'l'));
    case 2: return chmod(a, 0400 | (mode_t)pick(w, 0400));
    case 3: return truncate(a, (off_t)pick(w, MAX_FILE));
    case 4: return mkdir(wpath(w, 's'), 0700 | (mode_t)pick(w, 077));
    case 5: return rmdir(wpath(w, 's'));
    case 6: return symlink(a + pick(w, 8), wpath(w, 'l'));
    case 7: return link(a, wpath(w, 'f'));
    default: {
        char v[64];
        int n = snprintf(v, sizeof v, "v%llu", (unsigned long long)next(w));
        return setxattr(a, pick(w, 2) ? "user.a" : "user.b", v, (size_t)n, 0);
    }
    }
}

/* Errors a random name may well get; any other is the filesystem's fault. */
static bool expected(int e)
{
    return e == ENOENT || e == EEXIST || e == ENOTEMPTY || e == EISDIR || e == ENOTDIR ||
           e == EACCES || e == EPERM;
}

/* Waits at the barrier while main holds it. */
static void barrier_wait(struct barrier *b)
{
    pthread_mutex_lock(&b->mu);
    if (b->pause) {
        b->paused++;
        pthread_cond_broadcast(&b->cv);
        while (b->pause)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

static void *writer_main(void *p)
{
    struct writer *w = p;
    while (!atomic_load(&w->b->stop)) {
        barrier_wait(w->b);
        errno = 0;
        int r = pick(w, 2) ? op_write(w) : op_meta(w);
        if (r != 0 && !expected(errno)) {
            tm_errs_add(w->errs, "writer %d: %s", w->id, tm_errname(errno));
            break;
        }
        atomic_fetch_add(&w->ops, 1);
    }
    return NULL;
}

/* ------------------------------------------------------------ listings */

static char **lines;
static size_t nlines, caplines;
static size_t root_len;

static void add_line(const char *s)
{
    if (nlines == caplines) {
        caplines = caplines ? 2 * caplines : 256;
        lines = realloc(lines, caplines * sizeof *lines);
        assert_non_null(lines);
    }
    lines[nlines] = strdup(s);
    assert_non_null(lines[nlines]);
    nlines++;
}

/* name=value of every xattr of path, in name order, appended to s. */
static void xattrs_of(const char *path, char *s, size_t cap)
{
    char names[4096], *sorted[64];
    ssize_t n = llistxattr(path, names, sizeof names);
    int k = 0;
    for (ssize_t i = 0; i < n && k < 64; i += (ssize_t)strlen(names + i) + 1)
        sorted[k++] = names + i;
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && strcmp(sorted[j - 1], sorted[j]) > 0; j--) {
            char *t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (int i = 0; i < k; i++) {
        char v[256];
        ssize_t vn = lgetxattr(path, sorted[i], v, sizeof v - 1);
        v[vn < 0 ? 0 : vn] = '\0';
        size_t len = strlen(s);
        snprintf(s + len, cap - len, " %s=%s", sorted[i], v);
    }
}

static int list_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)flag;
    (void)f;
    char s[2 * PATH_MAX + 256], target[PATH_MAX] = ""; /* path, target and the fields fit */
    if (S_ISLNK(st->st_mode)) {
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n < 0 ? 0 : n] = '\0';
    }
    /* A directory's size is the filesystem's own business (ext4: blocks). */
    long long size = S_ISDIR(st->st_mode) ? 0 : (long long)st->st_size;
    snprintf(s, sizeof s, ".%s mode=%o size=%lld mtime=%lld.%09ld nlink=%lu -> %s xattrs:",
             path + root_len, (unsigned)st->st_mode, size, (long long)st->st_mtim.tv_sec,
             st->st_mtim.tv_nsec, (unsigned long)st->st_nlink, target);
    xattrs_of(path, s, sizeof s);
    add_line(s);
    return 0;
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every entry below root, one line each, sorted, written to file. */
static void write_listing(const char *root, const char *file)
{
    nlines = 0;
    root_len = strlen(root);
    assert_int_equal(nftw(root, list_one, 32, FTW_PHYS), 0);
    qsort(lines, nlines, sizeof *lines, cmp_lines);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    for (size_t i = 0; i < nlines; i++) {
        fprintf(f, "%s\n", lines[i]);
        free(lines[i]);
    }
    assert_int_equal(fclose(f), 0);
}

/* Runs the shell command; its exit status, its output in out. */
static int shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int shell(const char *fmt, ...)
{
    char cmd[4 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The tree at snap equals the one at copy: contents and metadata. */
static void check_equal(const char *copy, const char *snap, const char *scratch)
{
    if (shell("diff -r --no-dereference '%s' '%s' 2>&1 | head -c 4000", copy, snap) != 0 ||
        out[0] != '\0')
        fail_msg("diff -r copy snapshot:\n%s", out);
    char a[PATH_MAX + 16], b[PATH_MAX + 16];
    snprintf(a, sizeof a, "%s/copy.lst", scratch);
    snprintf(b, sizeof b, "%s/snap.lst", scratch);
    write_listing(copy, a);
    write_listing(snap, b);
    if (shell("diff -u '%s' '%s' 2>&1 | head -c 4000", a, b) != 0 || out[0] != '\0')
        fail_msg("metadata, copy vs snapshot:\n%s", out);
    print_message("%zu entries equal\n", nlines);
}

/* --------------------------------------------------------------- test */

static void pause_writers(struct barrier *b)
{
    pthread_mutex_lock(&b->mu);
    b->pause = true;
    b->paused = 0;
    while (b->paused < WRITERS)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static void release_writers(struct barrier *b)
{
    pthread_mutex_lock(&b->mu);
    b->pause = false;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void make_trees(const struct tmount *m)
{
    TM_OK(mkdir(P("tree"), 0755));
    for (int w = 0; w < WRITERS; w++) {
        TM_OK(mkdir(P("tree/w%d", w), 0755));
        for (int d = 0; d < DIRS; d++)
            TM_OK(mkdir(P("tree/w%d/d%d", w, d), 0755));
    }
}

static long ops_done(struct writer *w)
{
    long n = 0;
    for (int i = 0; i < WRITERS; i++)
        n += atomic_load(&w[i].ops);
    return n;
}

/* tree/open, written and left open (with -o writeback its pages are only
 * in the kernel at the cut); its fd, or -1. buf: OPEN_SIZE bytes. */
static int open_written(const struct tmount *m, char *buf)
{
    int fd = open(P("tree/open"), O_WRONLY | O_CREAT | O_EXCL, 0644);
    tm_fill(buf, OPEN_SIZE, 7, 0);
    if (fd >= 0 && (tm_pwrite_all(fd, buf, OPEN_SIZE, 0) != 0 ||
                    tm_pwrite_all(fd, buf, 100, OPEN_SIZE + 5000) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_snapshot_equals_copy(void **state)
{
    struct tmount *m = *state;
    make_trees(m);
    struct barrier b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    struct tm_errs errs;
    tm_errs_init(&errs);
    struct writer w[WRITERS];
    pthread_t t[WRITERS];
    uint64_t seed = tm_seed();
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.m = m, .id = i, .rng = seed * 31 + (uint64_t)i + 1, .b = &b,
                              .errs = &errs, .buf = malloc(MAX_FILE)};
        assert_non_null(w[i].buf);
        assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
    }
    tm_sleep_ms(2000);
    pause_writers(&b);
    long at_cut = ops_done(w);
    int open_fd = open_written(m, w[0].buf);
    char copy[PATH_MAX + 16];
    snprintf(copy, sizeof copy, "%s/copy", m->root);
    int cp = shell("cp -a '%s' '%s' 2>&1", tm_path(m, "tree"), copy);
    int rc = tm_lsmctl(out, sizeof out, "snapshot %s cut", m->mnt);
    release_writers(&b);
    TM_OK(open_fd);
    close(open_fd);
    tm_sleep_ms(1000);
    atomic_store(&b.stop, true);
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        free(w[i].buf);
    }
    tm_errs_check(&errs);
    if (cp != 0 || rc != 0)
        fail_msg("cp -a: exit %d; lsmctl snapshot: exit %d: %s", cp, rc, out);
    long after = ops_done(w) - at_cut;
    print_message("%ld operations before the cut, %ld after\n", at_cut, after);
    assert_true(after > 0); /* the live tree changed after the cut */
    struct tmount *s = tm_mount_snapshot(m, "cut");
    check_equal(copy, tm_path(s, "tree"), m->root);
    assert_int_equal(tm_unmount(s), 0);
    tm_free(s);
    tm_rmtree(copy);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_snapshot_equals_copy, setup),
        TM_TEST(test_snapshot_equals_copy, setup_writeback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
