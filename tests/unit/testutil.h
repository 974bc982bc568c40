/*
 * testutil.h — what the unit test programs share: deterministic random
 * numbers, temporary directories, status assertions, worker threads, and
 * in-memory files for the store's env interfaces.
 *
 * Header-only (static inline): every unit test program is one .c file
 * linked with libstore (and libfs), so this needs no build rule. Include it
 * instead of cmocka.h; it brings cmocka and the headers cmocka needs.
 * Everything here runs on the main thread unless its comment says otherwise
 * (cmocka's failures longjmp and must not happen on a worker thread).
 */
#ifndef LSMFS_TESTUTIL_H
#define LSMFS_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coding.h"
#include "crc32c.h"
#include "env.h"
#include "env_rados_impl.h"
#include "lsm.h"
#include "status.h"

/* ------------------------------------------------------ random numbers */

/* xorshift64: a deterministic stream from a non-zero seed, so that failures
 * reproduce. Advances *state and returns the new value. Thread-safe as long
 * as each thread has its own state. */
static inline uint64_t tu_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* A 64-bit LCG (Knuth's MMIX constants); returns the top 31 bits. Kept
 * beside xorshift so the tests written against it draw the same values. */
static inline uint64_t tu_lcg31(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 33;
}

/* ------------------------------------------------------- the test env */

/* The store suites that run over RADOS too (tests/ceph/run.sh sets
 * LSM_TEST_ENV=rados and LSM_CEPH_CONF): there tu_env() is the test
 * cluster's pool and tu_mkdtemp/tu_rmtree make and remove directories in
 * it; elsewhere the POSIX env and /tmp. */
static inline bool tu_on_rados(void)
{
    const char *e = getenv("LSM_TEST_ENV");
    return e != NULL && strcmp(e, "rados") == 0;
}

/* The test cluster's env (tu_env) and the lease it writes under (a
 * program may shorten it before its first tu_env()). */
static lsm_env *tu_rados_env;
static uint32_t tu_rados_lease_ms = 3000;

/* Closes the program's RADOS env at exit: librados' threads left running
 * met OpenSSL torn down by exit's handlers (SIGSEGV now and then). Run
 * before OpenSSL's handler: registered after the connection made it. */
static inline void tu_close_rados_env(void)
{
    env_rados_close(tu_rados_env);
    tu_rados_env = NULL;
}

/* The env the suites use: lsm_env_default(), or (tu_on_rados) one RADOS
 * env for the whole program (not to be used across a fork: exec a child). */
static inline lsm_env *tu_env(void)
{
    if (!tu_on_rados())
        return lsm_env_default();
    if (tu_rados_env == NULL) {
        env_rados_options o;
        env_rados_options_init(&o);
        o.pool = "lsmfs"; /* tests/ceph/cluster.sh's */
        o.ceph_conf = getenv("LSM_CEPH_CONF");
        o.lease_ms = tu_rados_lease_ms;
        if (o.ceph_conf == NULL)
            fail_msg("LSM_TEST_ENV=rados without LSM_CEPH_CONF (use tests/ceph/run.sh)");
        lsm_status *s = env_rados_open(&o, &tu_rados_env);
        if (s != NULL)
            fail_msg("env_rados_open: %s", lsm_status_message(s));
        atexit(tu_close_rados_env);
    }
    return tu_rados_env;
}

/* After a writer of the store in dir died (a crash): returns once a new
 * writer may open it. Locally at once (the lock went with the process);
 * on RADOS once the dead writer's lease has lapsed (taken and let go
 * here: the dead writer is then fenced off), or the test fails. */
static inline void tu_wait_unlocked(const char *dir)
{
    if (!tu_on_rados())
        return;
    lsm_env *env = tu_env();
    char lock[1024];
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    for (int i = 0; i < 300; i++) {
        lsm_filelock *l = NULL;
        lsm_status *s = env->lock_file(env, lock, &l);
        if (s == NULL) {
            if ((s = env->unlock_file(env, l)) != NULL)
                fail_msg("unlock %s: %s", lock, lsm_status_message(s));
            return;
        }
        if (lsm_status_code(s) != LSM_BUSY)
            fail_msg("lock %s: %s", lock, lsm_status_message(s));
        lsm_status_free(s);
        usleep(100 * 1000);
    }
    fail_msg("%s: the dead writer's lease never lapsed", dir);
}

/* The status expr must be OK, or the test fails naming what. */
#define ASSERT_OK_(expr, what)                                                                     \
    do {                                                                                           \
        lsm_status *s_ = (expr);                                                                   \
        if (s_ != NULL)                                                                            \
            fail_msg("%s: %s", (what), lsm_status_message(s_));                                    \
    } while (0)

/* ----------------------------------------------- temporary directories */

/* Makes a fresh directory /tmp/lsm-test-<name>-XXXXXX (on RADOS:
 * lsm-test-<name>-<pid>-<nanos> in the pool); its path goes to out. */
static inline void tu_mkdtemp(char *out, size_t cap, const char *name)
{
    if (tu_on_rados()) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int n = snprintf(out, cap, "lsm-test-%s-%d-%ld%09ld", name, (int)getpid(),
                         (long)ts.tv_sec, ts.tv_nsec);
        assert_true(n > 0 && (size_t)n < cap);
        lsm_env *env = tu_env();
        lsm_status *s = env->create_dir(env, out);
        if (s != NULL)
            fail_msg("mkdir %s: %s", out, lsm_status_message(s));
        return;
    }
    int n = snprintf(out, cap, "/tmp/lsm-test-%s-XXXXXX", name);
    assert_true(n > 0 && (size_t)n < cap);
    if (mkdtemp(out) == NULL)
        fail_msg("mkdtemp %s: %s", out, strerror(errno));
}

/* Removes path (file or directory) and everything below it through env. */
static inline void tu_env_rmtree(lsm_env *env, const char *path)
{
    lsm_status *s = env->remove_file(env, path);
    if (s == NULL)
        return;
    lsm_status_free(s);
    char **names;
    int n;
    if ((s = env->get_children(env, path, &names, &n)) != NULL) {
        lsm_status_free(s);
        return; /* nothing there */
    }
    for (int i = 0; i < n; i++) {
        char sub[1024];
        if (snprintf(sub, sizeof sub, "%s/%s", path, names[i]) >= (int)sizeof sub)
            fail_msg("path too long");
        tu_env_rmtree(env, sub);
    }
    env_free_children(names, n);
    if ((s = env->remove_dir(env, path)) != NULL)
        fail_msg("removing %s: %s", path, lsm_status_message(s));
}

static inline int tu_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes path and everything below it (no shell; links are not followed).
 * Fails the test if anything could not be removed. */
static inline void tu_rmtree(const char *path)
{
    if (tu_on_rados()) {
        tu_env_rmtree(tu_env(), path);
        return;
    }
    if (nftw(path, tu_remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fail_msg("removing %s: %s", path, strerror(errno));
}

/* ------------------------------------------ files through the test env */

/* The whole file at path, read through tu_env() (malloc'd; its length in
 * *n), or the test fails. */
static inline char *tu_read_file(const char *path, size_t *n)
{
    char *data = NULL;
    lsm_status *s = env_read_file(tu_env(), path, &data, n);
    if (s != NULL)
        fail_msg("reading %s: %s", path, lsm_status_message(s));
    return data;
}

/* Writes n bytes at off of the existing file at path in place (damage by
 * hand, behind the store's back): a pwrite, or on RADOS a write to the
 * file's object (which keeps its fence epoch and name count). */
static inline void tu_pwrite(const char *path, long off, const void *data, size_t n)
{
    if (tu_on_rados()) {
        struct rados_env *re = rados_env_of(tu_env());
        struct rados_entry e;
        lsm_status *s = rados_resolve(re, path, &e);
        if (s != NULL || !e.found || e.is_dir)
            fail_msg("%s: %s", path, s ? lsm_status_message(s) : "no such file");
        int r = rados_write(re->io, e.oid, data, n, (uint64_t)off);
        if (r < 0)
            fail_msg("writing %zu bytes at %ld of %s: %s", n, off, path, strerror(-r));
        return;
    }
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, data, n, off) != (ssize_t)n)
        fail_msg("writing %zu bytes at %ld of %s: %s", n, off, path, strerror(errno));
    close(fd);
}

/* Copies the files of dir (not its subdirectories, nor hidden names) to a
 * new directory to, through tu_env(), as the OS or the cluster has them
 * now (what a process crash leaves). A dir that does not exist leaves to
 * empty. */
static inline void tu_copy_dir_but(const char *dir, const char *to, const char *skip);
static inline void tu_copy_dir(const char *dir, const char *to)
{
    tu_copy_dir_but(dir, to, NULL);
}
/* tu_copy_dir without the file named `skip` (NULL: none). */
static inline void tu_copy_dir_but(const char *dir, const char *to, const char *skip)
{
    lsm_env *env = tu_env();
    ASSERT_OK_(env->create_dir(env, to), "mkdir");
    if (!env->file_exists(env, dir))
        return;
    char **names;
    int n;
    ASSERT_OK_(env->get_children(env, dir, &names, &n), dir);
    for (int i = 0; i < n; i++) {
        char from[1024], dst[1024];
        uint64_t size;
        lsm_path_info pi;
        snprintf(from, sizeof from, "%s/%s", dir, names[i]);
        snprintf(dst, sizeof dst, "%s/%s", to, names[i]);
        ASSERT_OK_(env->path_info(env, from, &pi), from);
        if (names[i][0] == '.' || pi.kind != LSM_PATH_FILE ||
            (skip != NULL && strcmp(names[i], skip) == 0))
            continue;
        ASSERT_OK_(env->file_size(env, from, &size), from);
        ASSERT_OK_(env_copy_file(env, from, env, dst, size, NULL, NULL), dst);
    }
    env_free_children(names, n);
}

static inline int tu_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* tu_dir_digest on RADOS: the names, sizes and CRC32C of dir's files. */
static inline char *tu_env_digest(const char *dir)
{
    lsm_env *env = tu_env();
    char **names;
    int n;
    ASSERT_OK_(env->get_children(env, dir, &names, &n), dir);
    qsort(names, (size_t)n, sizeof *names, tu_cmp_names);
    size_t cap = 64 + (size_t)n * 300, used;
    char *out = malloc(cap);
    if (out == NULL)
        fail_msg("out of memory");
    used = (size_t)snprintf(out, cap, "files of %s\n", dir);
    for (int i = 0; i < n; i++) {
        char path[1024];
        lsm_path_info pi;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        ASSERT_OK_(env->path_info(env, path, &pi), path);
        uint32_t crc = 0;
        size_t len = 0;
        if (pi.kind == LSM_PATH_FILE) {
            char *data = tu_read_file(path, &len);
            crc = crc32c(data, len);
            free(data);
        }
        used += (size_t)snprintf(out + used, cap - used, "%.200s %d %zu %08x\n", names[i],
                                 (int)pi.kind, len, crc);
    }
    env_free_children(names, n);
    return out;
}

/* dir's mtime (a file created or removed changes it), a listing of its
 * files (names, sizes, modes) and the sha256 of each, as
 * a malloc'd string: equal before and after means no byte changed. On
 * RADOS (no mtimes, modes or shell): a first line, then each name, size
 * and CRC32C (tu_env_digest). */
static inline char *tu_dir_digest(const char *dir)
{
    if (tu_on_rados())
        return tu_env_digest(dir);
    char cmd[4096 + 128];
    if (strlen(dir) > 4096)
        fail_msg("path too long");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && stat -c '%%y' . && ls -lA --time-style=+ | sed 1d; sha256sum * 2>/dev/null",
             dir);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        fail_msg("popen: %s", cmd);
    size_t cap = 1 << 16;
    char *out = calloc(1, cap);
    if (out == NULL)
        fail_msg("out of memory");
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    pclose(p);
    return out;
}

/* Fails unless dir's digest is still `before` (from tu_dir_digest). */
static inline void tu_assert_dir_unchanged(const char *dir, const char *before)
{
    char *after = tu_dir_digest(dir);
    if (strcmp(after, before) != 0)
        fail_msg("%s changed:\nbefore:\n%s\nafter:\n%s", dir, before, after);
    free(after);
}

/* Path (into out) of the highest-numbered file "<number>.<ext>" in dir
 * (through tu_env()); fails the test when there is none. */
static inline void tu_newest_file(const char *dir, const char *ext, char *out, size_t cap)
{
    char **names;
    int n;
    ASSERT_OK_(tu_env()->get_children(tu_env(), dir, &names, &n), dir);
    unsigned long best = 0;
    for (int i = 0; i < n; i++) {
        unsigned long num;
        char got[8];
        if (sscanf(names[i], "%lu.%7s", &num, got) == 2 && strcmp(got, ext) == 0 && num > best)
            best = num;
    }
    env_free_children(names, n);
    if (best == 0)
        fail_msg("no .%s file in %s", ext, dir);
    if (snprintf(out, cap, "%s/%06lu.%s", dir, best, ext) >= (int)cap)
        fail_msg("path too long");
}

/* Bytes of path up to its last non-zero byte (a log's preallocated space
 * is zeros). */
static inline long tu_used_bytes(const char *path)
{
    size_t n;
    char *data = tu_read_file(path, &n);
    long used = 0;
    for (size_t i = 0; i < n; i++)
        if (data[i] != 0)
            used = (long)i + 1;
    free(data);
    return used;
}

/* XORs the byte at off of path with mask (damage by hand). */
static inline void tu_xor_byte(const char *path, long off, int mask)
{
    size_t n;
    char *data = tu_read_file(path, &n);
    if (off < 0 || (size_t)off >= n)
        fail_msg("byte %ld of %s: the file has %zu", off, path, n);
    unsigned char c = (unsigned char)data[off] ^ (unsigned char)mask;
    free(data);
    tu_pwrite(path, off, &c, 1);
}

/* ---------------------------------------------------------- assertions */

/* expr (an lsm_status *) must be OK; otherwise the test fails with the
 * expression and the status message. */
#define ASSERT_OK(expr) ASSERT_OK_(expr, #expr)

static inline bool tu_mentions(const lsm_status *s, const char *needle)
{
    return needle == NULL || strstr(lsm_status_message(s), needle) != NULL;
}

/* expr must fail with `code` and a message containing `needle` (NULL: any
 * message); the status is freed. */
#define ASSERT_FAILS(expr, code, needle)                                                           \
    do {                                                                                           \
        lsm_status *s_ = (expr);                                                                   \
        if (lsm_status_code(s_) != (code))                                                         \
            fail_msg("%s: want code %d, got %d (%s)", #expr, (code), lsm_status_code(s_),          \
                     lsm_status_message(s_));                                                      \
        if (!tu_mentions(s_, (needle)))                                                            \
            fail_msg("%s: \"%s\" not in \"%s\"", #expr, (const char *)(needle),                    \
                     lsm_status_message(s_));                                                      \
        lsm_status_free(s_);                                                                       \
    } while (0)

/* Whether env lists name in dir. */
static inline bool tu_has_child(lsm_env *env, const char *dir, const char *name)
{
    char **names;
    int n;
    ASSERT_OK(env->get_children(env, dir, &names, &n));
    bool found = false;
    for (int i = 0; i < n; i++)
        found |= strcmp(names[i], name) == 0;
    env_free_children(names, n);
    return found;
}

/* Options that create a store in env (NULL: the default), with a write
 * buffer of wbs bytes (0: the default). */
static inline void tu_db_options(lsm_options *o, lsm_env *env, size_t wbs)
{
    lsm_options_init(o);
    o->create_if_missing = true;
    o->env = env ? env : tu_env();
    if (wbs)
        o->write_buffer_size = wbs;
}

/* Opens (creating) the store in dir with tu_db_options. */
static inline lsm_db *tu_open_db(const char *dir, lsm_env *env, size_t wbs)
{
    lsm_options o;
    tu_db_options(&o, env, wbs);
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(&o, dir, &db));
    return db;
}

/* Opens the existing store in dir with the default options (read_only if
 * asked), or the test fails. */
static inline lsm_db *tu_open_existing(const char *dir, bool read_only)
{
    lsm_options o;
    lsm_options_init(&o);
    o.read_only = read_only;
    o.env = tu_env();
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(&o, dir, &db));
    return db;
}

static inline void tu_fail_report(void *ctx, const char *msg)
{
    (void)ctx;
    fail_msg("verify: %s", msg);
}

/* lsm_verify of db finds nothing, or the test fails naming the problem. */
static inline void tu_verify_clean(lsm_db *db)
{
    ASSERT_OK(lsm_verify(db, tu_fail_report, NULL));
}

/* Key k (a string) of db holds value v (a string), or the test fails. */
static inline void tu_assert_value(lsm_db *db, const char *k, const char *v)
{
    char *got;
    size_t gn;
    lsm_status *s = lsm_get(db, NULL, k, strlen(k), &got, &gn);
    if (s)
        fail_msg("%s: %s", k, lsm_status_message(s));
    assert_int_equal(gn, strlen(v));
    assert_memory_equal(got, v, gn);
    free(got);
}

static inline bool tu_put_hex(buf *b, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char h[3];
        snprintf(h, sizeof h, "%02x", (unsigned char)p[i]);
        if (!buf_append(b, h, 2))
            return false;
    }
    return true;
}

/* Everything db holds, as one string "key=value\n..." in hex (malloc'd). */
static inline char *tu_dump_db(lsm_db *db)
{
    buf b;
    buf_init(&b);
    lsm_iter *it = lsm_iter_new(db, NULL);
    assert_non_null(it);
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn, vn;
        const char *k = lsm_iter_key(it, &kn), *v = lsm_iter_value(it, &vn);
        assert_true(tu_put_hex(&b, k, kn) && buf_append(&b, "=", 1) && tu_put_hex(&b, v, vn) &&
                    buf_append(&b, "\n", 1));
    }
    ASSERT_OK(lsm_iter_status(it));
    lsm_iter_free(it);
    assert_true(buf_append(&b, "", 1));
    return b.data;
}

/* A numeric property of an open store (it must exist). */
static inline uint64_t tu_prop(lsm_db *db, const char *name)
{
    uint64_t v = 0;
    if (!lsm_property_u64(db, name, &v))
        fail_msg("no property %s", name);
    return v;
}

/* Calls fn for each table of "lsm.tables" with its smallest and largest
 * user keys as printed there (each runs on to " .. " or "]"); returns how
 * many tables there are. */
static inline int tu_each_table(lsm_db *db, void (*fn)(void *ctx, const char *lo, const char *hi),
                                void *ctx)
{
    char *t = lsm_property(db, "lsm.tables");
    assert_non_null(t);
    int tables = 0;
    for (char *p = strchr(t, '['); p; p = strchr(p + 1, '[')) {
        char *q = strstr(p, " .. ");
        assert_non_null(q);
        fn(ctx, p + 1, q + 4);
        tables++;
    }
    free(t);
    return tables;
}

/* ------------------------------------------------------------- threads */

#define TU_MAX_THREADS 64

/* Runs fn on n threads at once, the i-th on (char *)args + i * size (an
 * array of per-thread arguments), and waits for all of them. fn must not
 * call cmocka: it reports through its argument. */
static inline void tu_run_threads(int n, void *(*fn)(void *), void *args, size_t size)
{
    pthread_t t[TU_MAX_THREADS];
    assert_true(n > 0 && n <= TU_MAX_THREADS);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * size), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
}

/* ----------------------------------------------------- in-memory files */

/* A wfile appending to the caller's buf. After `fail_after` more appends
 * (< 0: never) every append fails with `fail_errno` and writes nothing.
 * Flushes and syncs are counted. close() frees it (not the buf). */
typedef struct tu_wfile {
    lsm_wfile base;
    buf *out;
    long fail_after;
    int fail_errno;
    int flushes, syncs;
    int appends; /* append calls made */
} tu_wfile;

static inline lsm_status *tu_wfile_append(lsm_wfile *f, const void *data, size_t n)
{
    tu_wfile *w = (tu_wfile *)f;
    w->appends++;
    if (w->fail_after == 0)
        return status_from_errno(w->fail_errno, "append (injected)");
    if (w->fail_after > 0)
        w->fail_after--;
    return buf_append(w->out, data, n) ? NULL : status_new(LSM_NO_MEMORY, "out of memory");
}

static inline lsm_status *tu_wfile_flush(lsm_wfile *f)
{
    ((tu_wfile *)f)->flushes++;
    return NULL;
}

static inline lsm_status *tu_wfile_sync(lsm_wfile *f)
{
    ((tu_wfile *)f)->syncs++;
    return NULL;
}

static inline lsm_status *tu_wfile_preallocate(lsm_wfile *f, uint64_t len, enum wfile_space mode)
{
    (void)f;
    (void)len;
    (void)mode;
    return NULL;
}

static inline lsm_status *tu_wfile_close(lsm_wfile *f)
{
    free(f);
    return NULL;
}

static inline tu_wfile *tu_wfile_new(buf *out)
{
    static const struct lsm_wfile_ops ops = {tu_wfile_append, tu_wfile_flush, tu_wfile_sync,
                                             tu_wfile_preallocate, tu_wfile_close, NULL, NULL};
    tu_wfile *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    w->base.ops = &ops;
    w->out = out;
    w->fail_after = -1;
    w->fail_errno = EIO;
    return w;
}

/* A private, exactly sized copy of some bytes (a test may damage its own
 * copy; any read past the end is caught by the address sanitizer). */
static inline char *tu_exact_copy(const char *data, size_t n)
{
    char *c = malloc(n ? n : 1);
    assert_non_null(c);
    if (n)
        memcpy(c, data, n);
    return c;
}

/* An sfile reading a copy of some bytes front to back. The read numbered
 * `fail_at_read` (counting from 0; < 0: none) fails, and so does every
 * read after it. */
typedef struct tu_sfile {
    lsm_sfile base;
    char *data;
    size_t len, pos;
    int fail_at_read;
} tu_sfile;

static inline lsm_status *tu_sfile_read(lsm_sfile *f, void *b, size_t n, size_t *got)
{
    tu_sfile *s = (tu_sfile *)f;
    if (s->fail_at_read == 0) {
        *got = 0;
        return status_from_errno(EIO, "read (injected)");
    }
    if (s->fail_at_read > 0)
        s->fail_at_read--;
    size_t k = s->len - s->pos < n ? s->len - s->pos : n;
    memcpy(b, s->data + s->pos, k);
    s->pos += k;
    *got = k;
    return NULL;
}

static inline lsm_status *tu_sfile_skip(lsm_sfile *f, uint64_t n)
{
    tu_sfile *s = (tu_sfile *)f;
    s->pos = n > s->len - s->pos ? s->len : s->pos + (size_t)n;
    return NULL;
}

static inline void tu_sfile_close(lsm_sfile *f)
{
    tu_sfile *s = (tu_sfile *)f;
    free(s->data);
    free(s);
}

static inline tu_sfile *tu_sfile_new(const char *data, size_t len)
{
    static const struct lsm_sfile_ops ops = {tu_sfile_read, tu_sfile_skip, tu_sfile_close};
    tu_sfile *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->base.ops = &ops;
    s->data = tu_exact_copy(data, len);
    s->len = len;
    s->fail_at_read = -1;
    return s;
}

/* An rfile over a copy of some bytes. With `fail_reads` every pread fails
 * with EIO; lowering `len` under an open reader truncates the file. */
typedef struct tu_rfile {
    lsm_rfile base;
    char *data;
    size_t len;
    bool fail_reads;
    _Atomic size_t reads; /* preads asked of it (reader threads may race) */
} tu_rfile;

static inline lsm_status *tu_rfile_pread(lsm_rfile *f, uint64_t off, void *dst, size_t n,
                                         size_t *got)
{
    tu_rfile *r = (tu_rfile *)f;
    r->reads++;
    if (r->fail_reads)
        return status_from_errno(EIO, "pread (injected)");
    *got = 0;
    if (off >= r->len)
        return NULL;
    size_t k = r->len - off < n ? r->len - off : n;
    memcpy(dst, r->data + off, k);
    *got = k;
    return NULL;
}

static inline void tu_rfile_close(lsm_rfile *f)
{
    tu_rfile *r = (tu_rfile *)f;
    free(r->data);
    free(r);
}

static inline tu_rfile *tu_rfile_new(const char *data, size_t len)
{
    static const struct lsm_rfile_ops ops = {.pread = tu_rfile_pread, .close = tu_rfile_close};
    tu_rfile *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->base.ops = &ops;
    r->data = tu_exact_copy(data, len);
    r->len = len;
    return r;
}

/* A key/value entry of the table- and iterator-level tests (child: which
 * child of a merge holds it, where that matters). */
typedef struct tu_kv {
    char *key, *val;
    size_t klen, vlen;
    int child;
} tu_kv;

/* Index of the first of the sorted entries e[0..n) whose key is >= t. */
static inline size_t tu_kv_lower_bound(const tu_kv *e, size_t n, const char *t, size_t tlen)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bytes_compare(e[mid].key, e[mid].klen, t, tlen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
