/*
 * Concurrency on a real lsmfs mount: directory listings with stable
 * offsets while other threads create and unlink, concurrent writers to
 * different files and to one file, concurrent appenders, and a namespace
 * stress whose link counts fsck and a walk must find consistent.
 *
 * Worker threads never call cmocka (its failures longjmp): they record the
 * first problem in a `struct tm_errs`, which the main thread reports.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 120
#define NTHREADS 8

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_concurrency test", NULL);
}

/* ------------------------------------------- listing while mutating */

enum { NBASE = 10000, NREADERS = 2, LISTINGS = 3, MAXNEW = 200000 };

struct listing_ctx {
    const struct tmount *m;
    struct tm_errs errs;
    atomic_bool stop;           /* set by main when the readers are done */
    atomic_int unlinked[NBASE]; /* 1 once a victim's unlink returned 0 */
    atomic_int created;         /* new-<i> exists for i < created */
    atomic_int listings_done;
    atomic_int unlink_count; /* successful unlinks so far */
    atomic_int overlapped;   /* listings during which both mutators ran */
};

/* Victims: the base entries the unlinker may remove. */
static bool is_victim(int i)
{
    return i % 10 == 0;
}

static void *unlinker(void *arg)
{
    struct listing_ctx *c = arg;
    const struct tmount *m = c->m;
    unsigned r = (unsigned)tm_seed() ^ 0x5151;
    int order[NBASE / 10];
    for (int i = 0; i < NBASE / 10; i++)
        order[i] = i * 10;
    for (int i = NBASE / 10 - 1; i > 0; i--) {
        int j = (int)((unsigned)rand_r(&r) % (unsigned)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < NBASE / 10 && !atomic_load(&c->stop); k++) {
        if (unlink(P("big/base-%05d", order[k])) != 0)
            tm_errs_add(&c->errs, "unlink base-%05d: %s", order[k], tm_errname(errno));
        else {
            atomic_store(&c->unlinked[order[k]], 1);
            atomic_fetch_add(&c->unlink_count, 1);
        }
        if (k % 16 == 0)
            tm_sleep_ms(1);
    }
    return NULL;
}

static void *creator(void *arg)
{
    struct listing_ctx *c = arg;
    const struct tmount *m = c->m;
    for (int i = 0; i < MAXNEW && !atomic_load(&c->stop); i++) {
        if (mknod(P("big/new-%06d", i), S_IFREG | 0644, 0) != 0) {
            tm_errs_add(&c->errs, "mknod new-%06d: %s", i, tm_errname(errno));
            break;
        }
        atomic_store(&c->created, i + 1);
        if (i % 16 == 0)
            tm_sleep_ms(1);
    }
    return NULL;
}

/* One full listing: no name twice, every untouched base entry once. */
static void list_once(struct listing_ctx *c, int reader, int round)
{
    const struct tmount *m = c->m;
    unsigned char *base_seen = calloc(NBASE, 1);
    unsigned char *new_seen = calloc(MAXNEW, 1);
    DIR *d = opendir(P("big"));
    if (!d) {
        tm_errs_add(&c->errs, "opendir: %s", tm_errname(errno));
        free(base_seen);
        free(new_seen);
        return;
    }
    struct dirent *e;
    int i, entries = 0;
    char tail;
    int unlinked0 = atomic_load(&c->unlink_count);
    int created0 = atomic_load(&c->created);
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        /* Stretch the listing so that the mutators run inside it. */
        if (++entries % 1000 == 0)
            tm_sleep_ms(2);
        if (sscanf(e->d_name, "base-%d%c", &i, &tail) == 1 && i >= 0 && i < NBASE) {
            if (base_seen[i]++)
                tm_errs_add(&c->errs, "reader %d round %d: base-%05d twice", reader, round, i);
        } else if (sscanf(e->d_name, "new-%d%c", &i, &tail) == 1 && i >= 0 && i < MAXNEW) {
            if (new_seen[i]++)
                tm_errs_add(&c->errs, "reader %d round %d: new-%06d twice", reader, round, i);
        } else {
            tm_errs_add(&c->errs, "reader %d: unexpected name \"%s\"", reader, e->d_name);
        }
    }
    if (errno)
        tm_errs_add(&c->errs, "readdir: %s", tm_errname(errno));
    closedir(d);
    if (atomic_load(&c->unlink_count) != unlinked0 && atomic_load(&c->created) != created0)
        atomic_fetch_add(&c->overlapped, 1);
    for (i = 0; i < NBASE; i++)
        if (!is_victim(i) && base_seen[i] != 1)
            tm_errs_add(&c->errs,
                        "reader %d round %d: untouched base-%05d "
                        "seen %d times",
                        reader, round, i, base_seen[i]);
    free(base_seen);
    free(new_seen);
}

struct reader_arg {
    struct listing_ctx *c;
    int id;
};

static void *reader(void *arg)
{
    struct reader_arg *a = arg;
    for (int round = 0; round < LISTINGS; round++)
        list_once(a->c, a->id, round);
    atomic_fetch_add(&a->c->listings_done, LISTINGS);
    return NULL;
}

static void final_listing_exact(struct listing_ctx *c)
{
    const struct tmount *m = c->m;
    static unsigned char base_seen[NBASE], new_seen[MAXNEW];
    memset(base_seen, 0, sizeof base_seen);
    memset(new_seen, 0, sizeof new_seen);
    DIR *d = opendir(P("big"));
    assert_non_null(d);
    struct dirent *e;
    int i, n = 0;
    char tail;
    while ((e = readdir(d)) != NULL) {
        if (sscanf(e->d_name, "base-%d%c", &i, &tail) == 1)
            base_seen[i]++;
        else if (sscanf(e->d_name, "new-%d%c", &i, &tail) == 1)
            new_seen[i]++;
        else if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            fail_msg("unexpected name \"%s\"", e->d_name);
        n++;
    }
    closedir(d);
    for (i = 0; i < NBASE; i++)
        if (base_seen[i] != (atomic_load(&c->unlinked[i]) ? 0 : 1))
            fail_msg("final listing: base-%05d seen %d times (unlinked: %d)", i, base_seen[i],
                     atomic_load(&c->unlinked[i]));
    int created = atomic_load(&c->created);
    for (i = 0; i < MAXNEW; i++)
        if (new_seen[i] != (i < created ? 1 : 0))
            fail_msg("final listing: new-%06d seen %d times (created %d)", i, new_seen[i], created);
}

static void test_readdir_while_mutating(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("big"), 0755));
    double t0 = tm_now();
    for (int i = 0; i < NBASE; i++)
        TM_OK(mknod(P("big/base-%05d", i), S_IFREG | 0644, 0));
    fprintf(stderr, "[concurrency] %d entries created in %.2f s\n", NBASE, tm_now() - t0);
    struct listing_ctx *c = calloc(1, sizeof *c);
    c->m = m;
    tm_errs_init(&c->errs);

    /* A quiet listing first: exactly the base entries. */
    list_once(c, -1, -1);
    tm_errs_check(&c->errs);

    pthread_t mut[2];
    assert_int_equal(pthread_create(&mut[0], NULL, unlinker, c), 0);
    assert_int_equal(pthread_create(&mut[1], NULL, creator, c), 0);
    struct reader_arg ra[NREADERS];
    for (int i = 0; i < NREADERS; i++)
        ra[i] = (struct reader_arg){c, i};
    tm_run_threads(NREADERS, reader, ra, sizeof ra[0]);
    atomic_store(&c->stop, true);
    pthread_join(mut[0], NULL);
    pthread_join(mut[1], NULL);
    int unl = 0;
    for (int i = 0; i < NBASE; i++)
        unl += atomic_load(&c->unlinked[i]);
    fprintf(stderr,
            "[concurrency] %d listings (%d overlapping both "
            "mutators) while %d unlinks and %d creates ran\n",
            atomic_load(&c->listings_done), atomic_load(&c->overlapped), unl,
            atomic_load(&c->created));
    tm_errs_check(&c->errs);
    if (atomic_load(&c->overlapped) == 0)
        fail_msg("no listing ran while the directory changed");
    final_listing_exact(c);
    tm_remount_checked(m);
    final_listing_exact(c);
    free(c);
}

/* ------------------------------------------------------------ writers */

struct writer_arg {
    const struct tmount *m;
    struct tm_errs *errs;
    int id;
    const char *path;
    size_t size;
    size_t stripe; /* same-file mode: thread id owns stripes id, id+N, ... */
};

/* Own file: sequential writes of random sizes, then random overwrites. */
static void *own_file_writer(void *arg)
{
    struct writer_arg *a = arg;
    const struct tmount *m = a->m;
    unsigned r = (unsigned)tm_seed() + (unsigned)a->id;
    const char *path = P("w%d", a->id);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        tm_errs_add(a->errs, "open %s: %s", path, tm_errname(errno));
        return NULL;
    }
    char *buf = malloc(256 * KiB);
    uint64_t seed = 1000 + (uint64_t)a->id;
    for (size_t off = 0; off < a->size;) {
        size_t n = 1 + (unsigned)rand_r(&r) % (256 * KiB);
        if (n > a->size - off)
            n = a->size - off;
        tm_fill(buf, n, seed, off);
        int rc = tm_pwrite_all(fd, buf, n, (off_t)off);
        if (rc) {
            tm_errs_add(a->errs, "thread %d: write at %zu: %s", a->id, off, tm_errname(-rc));
            break;
        }
        off += n;
    }
    for (int k = 0; k < 200; k++) {
        size_t n = 1 + (unsigned)rand_r(&r) % 20000;
        size_t off = (unsigned)rand_r(&r) % (a->size - n);
        tm_fill(buf, n, seed, off);
        int rc = tm_pwrite_all(fd, buf, n, (off_t)off);
        if (rc) {
            tm_errs_add(a->errs, "thread %d: rewrite at %zu: %s", a->id, off, tm_errname(-rc));
            break;
        }
    }
    if (close(fd) != 0)
        tm_errs_add(a->errs, "thread %d: close: %s", a->id, tm_errname(errno));
    free(buf);
    return NULL;
}

static void test_writers_different_files(void **state)
{
    struct tmount *m = *state;
    const size_t size = 4 * MiB + 99;
    struct tm_errs errs;
    tm_errs_init(&errs);
    struct writer_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (struct writer_arg){.m = m, .errs = &errs, .id = i, .size = size};
    tm_run_threads(NTHREADS, own_file_writer, a, sizeof a[0]);
    tm_errs_check(&errs);
    for (int i = 0; i < NTHREADS; i++)
        tm_check_file(P("w%d", i), size, 1000 + (uint64_t)i);
    tm_remount_checked(m);
    for (int i = 0; i < NTHREADS; i++)
        tm_check_file(P("w%d", i), size, 1000 + (uint64_t)i);
}

/* Same file: write my stripes in a random order, each stripe whole. */
static void *stripe_writer(void *arg)
{
    struct writer_arg *a = arg;
    size_t nstripes = (a->size + a->stripe - 1) / a->stripe;
    size_t mine = 0;
    size_t *order = malloc((nstripes / NTHREADS + 1) * sizeof *order);
    for (size_t s = (size_t)a->id; s < nstripes; s += NTHREADS)
        order[mine++] = s;
    unsigned r = (unsigned)tm_seed() * 31u + (unsigned)a->id;
    for (size_t i = mine; i > 1; i--) {
        size_t j = (unsigned)rand_r(&r) % i;
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    int fd = open(a->path, O_WRONLY);
    char *buf = malloc(a->stripe);
    if (fd < 0)
        tm_errs_add(a->errs, "open %s: %s", a->path, tm_errname(errno));
    for (size_t i = 0; fd >= 0 && i < mine; i++) {
        size_t off = order[i] * a->stripe;
        size_t n = a->size - off < a->stripe ? a->size - off : a->stripe;
        tm_fill(buf, n, 77, off);
        int rc = tm_pwrite_all(fd, buf, n, (off_t)off);
        if (rc) {
            tm_errs_add(a->errs, "thread %d: stripe at %zu: %s", a->id, off, tm_errname(-rc));
            break;
        }
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    free(order);
    return NULL;
}

static void test_writers_same_file(void **state)
{
    struct tmount *m = *state;
    /* Unaligned stripes share pages with their neighbours' stripes. */
    static const size_t stripes[] = {1000, 4096, 65537};
    const size_t size = 6 * MiB + 5;
    struct tm_errs errs;
    tm_errs_init(&errs);
    for (size_t s = 0; s < sizeof stripes / sizeof *stripes; s++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s", P("shared%zu", s));
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        TM_OK(fd);
        close(fd);
        struct writer_arg a[NTHREADS];
        for (int i = 0; i < NTHREADS; i++)
            a[i] = (struct writer_arg){
                .m = m, .errs = &errs, .id = i, .path = path, .size = size, .stripe = stripes[s]};
        tm_run_threads(NTHREADS, stripe_writer, a, sizeof a[0]);
        tm_errs_check(&errs);
        tm_check_file(path, size, 77);
    }
    tm_remount_checked(m);
    for (size_t s = 0; s < sizeof stripes / sizeof *stripes; s++)
        tm_check_file(P("shared%zu", s), size, 77);
}

/* ----------------------------------------------------------- appenders */

enum { RECORDS = 300 };

struct record_head {
    uint32_t magic, thread, seq, len;
};
#define RECORD_MAGIC 0x4c534d46u

static size_t record_len(int thread, int seq)
{
    return sizeof(struct record_head) + 1 + (size_t)((thread * 7919 + seq * 104729) % 6000);
}

static void *appender(void *arg)
{
    struct writer_arg *a = arg;
    int fd = open(a->path, O_WRONLY | O_APPEND);
    if (fd < 0) {
        tm_errs_add(a->errs, "open %s: %s", a->path, tm_errname(errno));
        return NULL;
    }
    char buf[8192];
    for (int seq = 0; seq < RECORDS; seq++) {
        size_t len = record_len(a->id, seq);
        struct record_head h = {RECORD_MAGIC, (uint32_t)a->id, (uint32_t)seq, (uint32_t)len};
        memcpy(buf, &h, sizeof h);
        tm_fill(buf + sizeof h, len - sizeof h, (uint64_t)a->id, (uint64_t)seq << 16);
        ssize_t w = write(fd, buf, len);
        if (w != (ssize_t)len) {
            tm_errs_add(a->errs, "thread %d record %d: write = %zd, %s", a->id, seq, w,
                        tm_errname(errno));
            break;
        }
    }
    close(fd);
    return NULL;
}

static void check_records(const char *path)
{
    int fd = open(path, O_RDONLY);
    TM_OK(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    struct stat st;
    TM_OK(fstat(fd, &st));
    size_t total = 0;
    for (int t = 0; t < NTHREADS; t++)
        for (int s = 0; s < RECORDS; s++)
            total += record_len(t, s);
    if ((size_t)st.st_size != total)
        fail_msg("appended file is %lld bytes, expected %zu", (long long)st.st_size, total);
    char *all = malloc(total), want[8192];
    assert_int_equal(tm_pread_all(fd, all, total, 0), total);
    close(fd);
    int next[NTHREADS] = {0};
    for (size_t off = 0; off < total;) {
        struct record_head h;
        memcpy(&h, all + off, sizeof h);
        if (h.magic != RECORD_MAGIC || h.thread >= NTHREADS || (int)h.seq != next[h.thread] ||
            h.len != record_len((int)h.thread, (int)h.seq))
            fail_msg("bad record at offset %zu (thread %u seq %u len %u)", off, h.thread, h.seq,
                     h.len);
        tm_fill(want, h.len - sizeof h, h.thread, (uint64_t)h.seq << 16);
        if (memcmp(all + off + sizeof h, want, h.len - sizeof h) != 0)
            fail_msg("record thread %u seq %u at %zu is torn", h.thread, h.seq, off);
        next[h.thread]++;
        off += h.len;
    }
    free(all);
}

static void test_concurrent_appends(void **state)
{
    struct tmount *m = *state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", P("log"));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    TM_OK(fd);
    close(fd);
    struct tm_errs errs;
    tm_errs_init(&errs);
    struct writer_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (struct writer_arg){.m = m, .errs = &errs, .id = i, .path = path};
    tm_run_threads(NTHREADS, appender, a, sizeof a[0]);
    tm_errs_check(&errs);
    check_records(path);
    tm_remount_checked(m);
    check_records(path);
}

/* ---------------------------------------------------- namespace stress */

enum { NDIRS = 4, NNAMES = 40, STRESS_OPS = 1500 };

struct stress_arg {
    const struct tmount *m;
    struct tm_errs *errs;
    int id;
    atomic_int *ops_ok;
};

/* Races make ENOENT, EEXIST, ENOTDIR and EISDIR (a file and a directory
 * meeting) legitimate outcomes, and EPERM for link() of a directory;
 * anything else is a bug.  (Directories made here stay empty, so rmdir and
 * rename never see ENOTEMPTY.) */
static bool expected_race(int err, int kind)
{
    return err == ENOENT || err == EEXIST || err == ENOTDIR || err == EISDIR ||
           (kind == 6 && err == EPERM);
}

static void *stresser(void *arg)
{
    struct stress_arg *a = arg;
    const struct tmount *m = a->m;
    unsigned r = (unsigned)tm_seed() ^ (unsigned)(a->id * 2654435761u);
    for (int op = 0; op < STRESS_OPS; op++) {
        int d1 = (int)((unsigned)rand_r(&r) % NDIRS);
        int d2 = (int)((unsigned)rand_r(&r) % NDIRS);
        int n1 = (int)((unsigned)rand_r(&r) % NNAMES);
        int n2 = (int)((unsigned)rand_r(&r) % NNAMES);
        const char *p1 = P("s%d/n%d", d1, n1), *p2 = P("s%d/n%d", d2, n2);
        int kind = (int)((unsigned)rand_r(&r) % 10), rc;
        const char *what;
        switch (kind) {
        case 0:
        case 1:
            what = "mknod";
            rc = mknod(p1, S_IFREG | 0644, 0);
            break;
        case 2:
            what = "unlink";
            rc = unlink(p1);
            break;
        case 3:
        case 4:
        case 5:
            what = "rename";
            rc = rename(p1, p2);
            break;
        case 6:
            what = "link";
            rc = link(p1, p2);
            break;
        case 7:
            what = "mkdir";
            rc = mkdir(p1, 0755);
            break;
        case 8:
            what = "rmdir";
            rc = rmdir(p1);
            break;
        default:
            what = "symlink";
            rc = symlink("target", p1);
            break;
        }
        if (rc == 0)
            atomic_fetch_add(a->ops_ok, 1);
        else if (!expected_race(errno, kind))
            tm_errs_add(a->errs, "thread %d: %s %s: %s", a->id, what, p1, tm_errname(errno));
    }
    return NULL;
}

/* Every link count agrees with the names found by walking the tree. */
static void check_link_counts(const struct tmount *m)
{
    enum { MAXI = 4096 };
    struct seen {
        ino_t ino;
        nlink_t nlink;
        int names;
    } seen[MAXI];
    int nseen = 0;
    for (int d = 0; d < NDIRS; d++) {
        DIR *dir = opendir(P("s%d", d));
        assert_non_null(dir);
        struct dirent *e;
        int subdirs = 0;
        while ((e = readdir(dir)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            struct stat st;
            if (lstat(P("s%d/%s", d, e->d_name), &st) != 0)
                fail_msg("listed s%d/%s but lstat: %s", d, e->d_name, tm_errname(errno));
            if (S_ISDIR(st.st_mode)) {
                /* The stress only makes names one level deep: every
                 * directory it made is empty. */
                subdirs++;
                if (st.st_nlink != 2)
                    fail_msg("empty directory s%d/%s has nlink %llu", d, e->d_name,
                             (unsigned long long)st.st_nlink);
                continue;
            }
            int i = 0;
            while (i < nseen && seen[i].ino != st.st_ino)
                i++;
            if (i == nseen) {
                assert_true(nseen < MAXI);
                seen[nseen++] = (struct seen){st.st_ino, st.st_nlink, 0};
            }
            seen[i].names++;
        }
        closedir(dir);
        struct stat dst;
        TM_OK(lstat(P("s%d", d), &dst));
        if (dst.st_nlink != (nlink_t)(2 + subdirs))
            fail_msg("s%d has nlink %llu with %d subdirectories", d,
                     (unsigned long long)dst.st_nlink, subdirs);
    }
    for (int i = 0; i < nseen; i++)
        if (seen[i].nlink != (nlink_t)seen[i].names)
            fail_msg("inode %llu: nlink %llu but %d names", (unsigned long long)seen[i].ino,
                     (unsigned long long)seen[i].nlink, seen[i].names);
}

static void test_namespace_stress(void **state)
{
    struct tmount *m = *state;
    for (int d = 0; d < NDIRS; d++)
        TM_OK(mkdir(P("s%d", d), 0755));
    struct tm_errs errs;
    tm_errs_init(&errs);
    atomic_int ok = 0;
    struct stress_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (struct stress_arg){m, &errs, i, &ok};
    tm_run_threads(NTHREADS, stresser, a, sizeof a[0]);
    fprintf(stderr, "[concurrency] %d of %d namespace operations succeeded\n", atomic_load(&ok),
            NTHREADS * STRESS_OPS);
    tm_errs_check(&errs);
    check_link_counts(m);
    tm_remount_checked(m);
    check_link_counts(m);
}

int main(void)
{
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_readdir_while_mutating, setup), TM_TEST(test_writers_different_files, setup),
        TM_TEST(test_writers_same_file, setup),      TM_TEST(test_concurrent_appends, setup),
        TM_TEST(test_namespace_stress, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
