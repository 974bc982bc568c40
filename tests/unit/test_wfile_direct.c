/* test_wfile_direct.c — the POSIX env's write_through files (env.h,
 * store/wfile_direct.c): what was appended reads back whole, bit for bit,
 * at any size and across flushes; the bytes go around the page cache
 * where the filesystem has O_DIRECT; a direct write the filesystem refuses
 * or cuts short is finished through the page cache; a failed one fails the
 * file for good; and a store writes the tables of a long big write (a
 * bulk stream) this way. */
#include "fixture.h"

#include "bufpool.h"
#include "env.h"
#include "env_posix_hook.h"
#include "status.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1u << 20)

/* Byte i of the test data: no two megabytes alike. */
static char byte_at(size_t i)
{
    return (char)((i * 2654435761u) >> 13);
}

static void fill(char *p, size_t n, size_t from)
{
    for (size_t i = 0; i < n; i++)
        p[i] = byte_at(from + i);
}

static lsm_wfile *open_through(const char *name, char *path)
{
    tu_path(path, 256, name);
    lsm_env *env = lsm_env_default();
    lsm_wfile *f;
    ASSERT_OK(env->new_wfile(env, path, &f));
    assert_non_null(f->ops->write_through);
    f->ops->write_through(f);
    return f;
}

/* Appends `total` bytes of test data (from offset `from`) in pieces of
 * `piece` bytes. */
static lsm_status *append_data(lsm_wfile *f, size_t from, size_t total, size_t piece)
{
    char *p = malloc(piece);
    assert_non_null(p);
    lsm_status *s = NULL;
    for (size_t done = 0; done < total && s == NULL; done += piece) {
        size_t n = total - done < piece ? total - done : piece;
        fill(p, n, from + done);
        s = f->ops->append(f, p, n);
    }
    free(p);
    return s;
}

/* The file holds exactly `total` bytes of test data. */
static void assert_data(const char *path, size_t total)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal((size_t)st.st_size, total);
    char *p = malloc(total + 1);
    assert_non_null(p);
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, p + got, total + 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    assert_int_equal(got, total);
    for (size_t i = 0; i < total; i++)
        if (p[i] != byte_at(i))
            fail_msg("%s: byte %zu differs", path, i);
    free(p);
}

/* Whether the directory's filesystem takes O_DIRECT. */
static bool has_direct(const char *path)
{
    char probe[300];
    snprintf(probe, sizeof probe, "%s.probe", path);
    int fd = open(probe, O_CREAT | O_WRONLY | O_DIRECT, 0600);
    if (fd >= 0)
        close(fd);
    unlink(probe);
    return fd >= 0;
}

/* Pages of the file's first n bytes in the page cache. */
static size_t resident_pages(const char *path, size_t n)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    void *m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    size_t pages = (n + 4095) / 4096, in = 0;
    unsigned char *vec = malloc(pages);
    assert_non_null(vec);
    assert_int_equal(mincore(m, n, vec), 0);
    for (size_t i = 0; i < pages; i++)
        in += vec[i] & 1;
    free(vec);
    munmap(m, n);
    close(fd);
    return in;
}

/* Sizes around the buffer and the block, in pieces big and small: each
 * file reads back whole; where the filesystem has O_DIRECT the whole
 * megabytes never entered the page cache. */
static void test_round_trip(void **state)
{
    (void)state;
    static const size_t totals[] = {0, 1, 4095, 4096, MiB - 1, MiB, MiB + 4096 + 7, 5 * MiB + 12345};
    static const size_t pieces[] = {100, 4096, 3 * MiB};
    char path[256];
    for (size_t t = 0; t < sizeof totals / sizeof *totals; t++)
        for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++) {
            lsm_wfile *f = open_through("t", path);
            ASSERT_OK(append_data(f, 0, totals[t], pieces[p]));
            ASSERT_OK(f->ops->sync(f));
            ASSERT_OK(f->ops->close(f));
            if (totals[t] >= 2 * MiB && has_direct(path)) /* before any read */
                assert_int_equal(resident_pages(path, 2 * MiB), 0);
            assert_data(path, totals[t]);
            unlink(path);
        }
}

/* A flush writes everything (the rest of the file is buffered); appends
 * after it land where they belong. */
static void test_flush_then_more(void **state)
{
    (void)state;
    char path[256];
    lsm_wfile *f = open_through("t", path);
    ASSERT_OK(append_data(f, 0, 2 * MiB + 100, 4096));
    ASSERT_OK(f->ops->flush(f));
    assert_data(path, 2 * MiB + 100); /* handed to the OS: readable */
    ASSERT_OK(append_data(f, 2 * MiB + 100, MiB, 1000));
    ASSERT_OK(f->ops->close(f));
    assert_data(path, 3 * MiB + 100);
}

static int done_calls;
static ssize_t done_einval_first(ssize_t res)
{
    return done_calls++ == 0 ? -EINVAL : res;
}
static ssize_t done_short_first(ssize_t res)
{
    return done_calls++ == 0 && res > 4096 ? res / 2 + 1 : res;
}
static ssize_t done_eio_second(ssize_t res)
{
    return done_calls++ == 1 ? -EIO : res;
}

/* A direct write the filesystem refuses (EINVAL), or one it cuts short,
 * is finished through the page cache: the file reads back whole. */
static void test_refused_or_short_finished_buffered(void **state)
{
    (void)state;
    ssize_t (*hooks[])(ssize_t) = {done_einval_first, done_short_first};
    char path[256];
    for (int h = 0; h < 2; h++) {
        done_calls = 0;
        env_posix_direct_done = hooks[h];
        lsm_wfile *f = open_through("t", path);
        ASSERT_OK(append_data(f, 0, 4 * MiB + 99, 65536));
        ASSERT_OK(f->ops->sync(f));
        ASSERT_OK(f->ops->close(f));
        env_posix_direct_done = NULL;
        if (done_calls == 0 && has_direct(path))
            fail_msg("no direct write was made on a filesystem with O_DIRECT");
        assert_data(path, 4 * MiB + 99);
        unlink(path);
    }
}

/* A direct write that fails fails the file for good: the append or the
 * sync after it reports the error, and every later call too. */
static void test_failed_write_sticks(void **state)
{
    (void)state;
    char path[256];
    tu_path(path, sizeof path, "t");
    if (!has_direct(path))
        fail_msg("%s: no O_DIRECT here: the failure path cannot be reached", tu_dir);
    done_calls = 0;
    env_posix_direct_done = done_eio_second;
    lsm_wfile *f = open_through("t", path);
    lsm_status *s = append_data(f, 0, 4 * MiB, 65536);
    if (s == NULL)
        s = f->ops->sync(f);
    env_posix_direct_done = NULL;
    if (s == NULL)
        fail_msg("a failed direct write was reported as written");
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    lsm_status_free(s);
    s = f->ops->sync(f);
    assert_non_null(s);
    lsm_status_free(s);
    s = f->ops->append(f, "x", 1);
    assert_non_null(s);
    lsm_status_free(s);
    lsm_status_free(f->ops->close(f));
}

/* The path of the newest table of at least 32 KiB in tu_dir (the highest
 * number; the lowest if oldest), into path; false if there is none. */
static bool newest_table(char *path, size_t cap, bool oldest)
{
    DIR *d = opendir(tu_dir);
    assert_non_null(d);
    struct dirent *e;
    unsigned long best = 0;
    while ((e = readdir(d)) != NULL) {
        unsigned long n;
        char tail[8];
        struct stat st;
        char p[256];
        if (sscanf(e->d_name, "%lu.%7s", &n, tail) != 2 || strcmp(tail, "ldb") != 0 ||
            (best > 0 && (oldest ? n >= best : n <= best)))
            continue;
        tu_path(p, sizeof p, e->d_name);
        if (stat(p, &st) == 0 && st.st_size >= 32 << 10) {
            best = n;
            snprintf(path, cap, "%s", p);
        }
    }
    closedir(d);
    return best > 0;
}

/* Fills a store (64 KiB write buffers) with 10 MiB of 4 KiB values: as
 * deferred batches of 64 KiB (a big file's data: a bulk stream from 8 MiB
 * on), or as plain puts; then waits until the background is idle. */
static lsm_db *fill_store(bool direct_option, bool deferred)
{
    tu_dir_empty();
    lsm_options o;
    tu_db_options(&o, lsm_env_default(), 64 << 10);
    assert_true(o.direct_table_writes); /* the default */
    o.direct_table_writes = direct_option;
    o.compression = false;
    lsm_db *db = tu_open_with(&o);
    char k[32], v[4096];
    lsm_write_options wo = {.defer_log = deferred};
    lsm_batch *b = lsm_batch_new();
    assert_non_null(b);
    for (int i = 0; i < 2560; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        fill(v, sizeof v, (size_t)i);
        assert_true(lsm_batch_put(b, k, strlen(k), v, sizeof v));
        if (!deferred || i % 16 == 15) {
            ASSERT_OK(lsm_write(db, &wo, b));
            lsm_batch_clear(b);
        }
    }
    lsm_batch_free(b);
    for (int t = 0; t < 3000 && tu_prop(db, "lsm.background-busy") > 0; t++)
        usleep(1000);
    return db;
}

/* The rule (lsm.h direct_table_writes): in a bulk stream, a flush of a
 * memtable of big deferred writes goes around the page cache (the newest
 * table's blocks are not there after it); plain puts, or any with the
 * option off, go through it. The store reads every key back either way,
 * and leaves no buffer kept once closed. */
static void test_store_flush_direct_in_bulk_stream(void **state)
{
    (void)state;
    static const struct {
        bool option, deferred, direct;
    } cases[] = {{true, true, true}, {true, false, false}, {false, true, false}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        lsm_db *db = fill_store(cases[c].option, cases[c].deferred);
        assert_true(tu_prop(db, "lsm.bulk-run-bytes") >= (cases[c].deferred ? 8u << 20 : 0));
        char path[256];
        assert_true(newest_table(path, sizeof path, true)); /* before the stream */
        if (resident_pages(path, 32 << 10) == 0)
            fail_msg("case %zu: the first table, before a bulk stream, went around the cache", c);
        assert_true(newest_table(path, sizeof path, false));
        size_t in = resident_pages(path, 32 << 10);
        if (cases[c].direct && has_direct(path) && in != 0)
            fail_msg("case %zu: %zu pages of a direct table in the page cache", c, in);
        if (!cases[c].direct && in == 0)
            fail_msg("case %zu: a buffered table not in the page cache", c);
        char k[32], v[4096];
        for (int i = 0; i < 2560; i += 37) {
            snprintf(k, sizeof k, "k%06d", i);
            char *got;
            size_t gn;
            ASSERT_OK(lsm_get(db, NULL, k, strlen(k), &got, &gn));
            fill(v, sizeof v, (size_t)i);
            assert_int_equal(gn, sizeof v);
            assert_memory_equal(got, v, gn);
            free(got);
        }
        lsm_status_free(lsm_close(db));
    }
    assert_int_equal(bufpool_bytes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_round_trip),
        TU_TEST(test_flush_then_more),
        TU_TEST(test_refused_or_short_finished_buffered),
        TU_TEST(test_failed_write_sticks),
        TU_TEST(test_store_flush_direct_in_bulk_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
