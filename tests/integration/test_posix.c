/*
 * POSIX operations on a real lsmfs mount, each with its error cases and
 * errno checked.  Every test gets a fresh store and mount (setup/teardown);
 * the expectations are ext4's, which the issue sets as the bar.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <sys/fsuid.h>
#include <linux/capability.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "aschild.h"
#include "mount.h"

#define TEST_TIMEOUT_S 60
/* Long enough for the coarse kernel clock to move between two operations. */
#define TICK_MS 25
/* Timestamps taken by the kernel come from a coarse clock that may lag the
 * one we read by a tick: allow this much either way around "now". */
#define NOW_SLACK_NS 200000000LL

/* ------------------------------------------------------------ fixtures */

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_posix test", NULL);
}

static int setup_writeback(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_posix test", "writeback");
}

static int setup_allow_other(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_posix test", "allow_other");
}

/* ------------------------------------------------------------- helpers */

static void lst(const char *path, struct stat *st)
{
    if (lstat(path, st) != 0)
        fail_msg("lstat %s: %s", path, tm_errname(errno));
}

static long long ts_ns(struct timespec t)
{
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ts_ns(t);
}

static void tick(void)
{
    tm_sleep_ms(TICK_MS);
}

#define assert_ts_eq(a, b) assert_int_equal(ts_ns(a), ts_ns(b))
#define assert_ts_after(a, b)                                                                      \
    do {                                                                                           \
        if (!(ts_ns(a) > ts_ns(b)))                                                                \
            fail_msg("%s (%lld) not after %s (%lld)", #a, ts_ns(a), #b, ts_ns(b));                 \
    } while (0)
/* t within [lo - slack, hi + slack] (nanoseconds since the epoch). */
#define assert_ts_within(t, lo, hi)                                                                \
    do {                                                                                           \
        long long t_ = ts_ns(t);                                                                   \
        if (t_ < (lo)-NOW_SLACK_NS || t_ > (hi) + NOW_SLACK_NS)                                    \
            fail_msg("%s = %lld not within [%lld, %lld]", #t, t_, (long long)(lo),                 \
                     (long long)(hi));                                                             \
    } while (0)

/* Open, drop the cached pages, read: the bytes come from the daemon. */
static ssize_t reread(const char *path, void *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail_msg("open %s: %s", path, tm_errname(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ssize_t n = tm_pread_all(fd, buf, cap, 0);
    close(fd);
    if (n < 0)
        fail_msg("read %s: %s", path, tm_errname((int)-n));
    return n;
}

static void check_text(const char *path, const char *text)
{
    char buf[4096];
    ssize_t n = reread(path, buf, sizeof buf);
    if (n != (ssize_t)strlen(text) || memcmp(buf, text, (size_t)n) != 0)
        fail_msg("%s holds \"%.*s\", expected \"%s\"", path, (int)n, buf, text);
}

static long long bytes_used(const struct tmount *m)
{
    struct statvfs sv;
    if (statvfs(m->mnt, &sv) != 0)
        fail_msg("statvfs: %s", tm_errname(errno));
    return (long long)(sv.f_blocks - sv.f_bfree) * (long long)sv.f_frsize;
}

static int renameat2_(const char *from, const char *to, unsigned flags)
{
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

/* ------------------------------------------------------ create / open */

static void test_create_excl(void **state)
{
    struct tmount *m = *state;
    struct stat st;
    int fd = open(P("f"), O_CREAT | O_EXCL | O_WRONLY, 0640);
    TM_OK(fd);
    TM_OK(fstat(fd, &st));
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(st.st_gid, getegid());
    assert_true(st.st_blksize > 0);
    TM_OK(close(fd));

    TM_ERR(open(P("f"), O_CREAT | O_EXCL | O_WRONLY, 0640), EEXIST);
    TM_OK(symlink("f", P("link")));
    TM_ERR(open(P("link"), O_CREAT | O_EXCL | O_WRONLY, 0600), EEXIST);
    TM_OK(symlink("nowhere", P("dangling")));
    TM_ERR(open(P("dangling"), O_CREAT | O_EXCL | O_WRONLY, 0600), EEXIST);
    TM_OK(mkdir(P("dir"), 0755));
    TM_ERR(open(P("dir"), O_CREAT | O_EXCL | O_WRONLY, 0600), EEXIST);

    /* O_CREAT without O_EXCL through a dangling link creates the target. */
    fd = open(P("dangling"), O_CREAT | O_WRONLY, 0600);
    TM_OK(fd);
    close(fd);
    lst(P("nowhere"), &st);
    assert_true(S_ISREG(st.st_mode));

    /* The umask applies to the mode given to create and mkdir. */
    mode_t old = umask(027);
    fd = open(P("masked"), O_CREAT | O_EXCL | O_WRONLY, 0666);
    TM_OK(fd);
    close(fd);
    TM_OK(mkdir(P("maskeddir"), 0777));
    umask(old);
    lst(P("masked"), &st);
    assert_int_equal(st.st_mode & 07777, 0640);
    lst(P("maskeddir"), &st);
    assert_int_equal(st.st_mode & 07777, 0750);

    /* O_CREAT on an existing file opens it without truncating. */
    tm_make_file(P("g"), 5, 1);
    fd = open(P("g"), O_CREAT | O_WRONLY, 0600);
    TM_OK(fd);
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, 5);
    assert_int_equal(st.st_mode & 07777, 0644);
    close(fd);
}

static void test_open_errors(void **state)
{
    struct tmount *m = *state;
    tm_touch(P("f"));
    TM_OK(mkdir(P("dir"), 0755));
    TM_ERR(open(P("missing"), O_RDONLY), ENOENT);
    TM_ERR(open(P("nodir/x"), O_CREAT | O_WRONLY, 0600), ENOENT);
    TM_ERR(open(P("f/x"), O_CREAT | O_WRONLY, 0600), ENOTDIR);
    TM_ERR(open(P("f/x"), O_RDONLY), ENOTDIR);
    TM_ERR(open(P("dir"), O_WRONLY), EISDIR);
    TM_ERR(open(P("dir"), O_RDWR), EISDIR);
    TM_ERR(open(P("f"), O_RDONLY | O_DIRECTORY), ENOTDIR);
    int fd = open(P("dir"), O_RDONLY | O_DIRECTORY);
    TM_OK(fd);
    close(fd);
    fd = open(P("f"), O_RDONLY);
    TM_OK(fd);
    TM_ERR(write(fd, "x", 1), EBADF);
    close(fd);
    fd = open(P("f"), O_WRONLY);
    TM_OK(fd);
    char c;
    TM_ERR(read(fd, &c, 1), EBADF);
    close(fd);
}

static void test_open_trunc(void **state)
{
    struct tmount *m = *state;
    static const size_t sizes[] = {40, 100000, 3 * MiB + 17};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        tm_make_file(P("f"), sizes[i], i + 7);
        struct stat before, after;
        lst(P("f"), &before);
        tick();
        int fd = open(P("f"), O_WRONLY | O_TRUNC);
        TM_OK(fd);
        TM_OK(fstat(fd, &after));
        assert_int_equal(after.st_size, 0);
        assert_ts_after(after.st_mtim, before.st_mtim);
        assert_ts_after(after.st_ctim, before.st_ctim);
        /* Growing again must not bring the old bytes back. */
        TM_OK(ftruncate(fd, (off_t)sizes[i]));
        TM_OK(tm_pwrite_all(fd, "new", 3, 1));
        close(fd);
        char *buf = malloc(sizes[i] + 1);
        assert_int_equal(reread(P("f"), buf, sizes[i] + 1), sizes[i]);
        assert_memory_equal(buf + 1, "new", 3);
        buf[1] = buf[2] = buf[3] = 0;
        tm_check_zero(buf, sizes[i], "regrown after O_TRUNC", 0);
        free(buf);
    }
}

static void test_append(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("big"), 200 * KiB + 3, 5);
    int fd = open(P("big"), O_WRONLY | O_APPEND);
    TM_OK(fd);
    TM_OK(lseek(fd, 0, SEEK_SET));
    assert_int_equal(write(fd, "tail", 4), 4);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 200 * KiB + 7);
    close(fd);
    char *buf = malloc(300 * KiB), *want = malloc(300 * KiB);
    tm_fill(want, 200 * KiB + 3, 5, 0);
    memcpy(want + 200 * KiB + 3, "tail", 4);
    assert_int_equal(reread(P("big"), buf, 300 * KiB), 200 * KiB + 7);
    tm_check_bytes(buf, want, 200 * KiB + 7, "append", 0);
    free(buf);
    free(want);

    /* Two appenders interleave whole writes at the end of the file. */
    TM_OK(tm_write_file(P("f"), "abc", 3, 0644));
    int a = open(P("f"), O_WRONLY | O_APPEND);
    int b = open(P("f"), O_WRONLY | O_APPEND);
    TM_OK(a);
    TM_OK(b);
    assert_int_equal(write(a, "de", 2), 2);
    assert_int_equal(write(b, "fgh", 3), 3);
    assert_int_equal(write(a, "i", 1), 1);
    close(a);
    close(b);
    check_text(P("f"), "abcdefghi");
}

/* --------------------------------------------------------- read/write */

static void test_read_eof(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("f"), "hello", 5, 0644));
    int fd = open(P("f"), O_RDONLY);
    TM_OK(fd);
    char buf[16];
    assert_int_equal(pread(fd, buf, sizeof buf, 0), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(pread(fd, buf, sizeof buf, 3), 2);
    assert_int_equal(pread(fd, buf, sizeof buf, 5), 0);
    assert_int_equal(pread(fd, buf, sizeof buf, 1000000), 0);
    assert_int_equal(read(fd, buf, 2), 2);
    assert_int_equal(read(fd, buf, 16), 3);
    assert_int_equal(read(fd, buf, 16), 0);
    close(fd);
    tm_touch(P("empty"));
    fd = open(P("empty"), O_RDONLY);
    TM_OK(fd);
    assert_int_equal(read(fd, buf, 16), 0);
    close(fd);
}

/* Offsets near the boundaries of every plausible chunk size. */
static off_t interesting_offset(unsigned *r, off_t limit)
{
    static const off_t units[] = {512, 4096, 65536, 131072, 1 << 20};
    unsigned x = (unsigned)rand_r(r);
    if (x % 3 == 0)
        return (off_t)((unsigned)rand_r(r) % (unsigned)limit);
    off_t unit = units[x % 5];
    off_t k = (off_t)((unsigned)rand_r(r) % (unsigned)(limit / unit + 1));
    off_t off = k * unit + (off_t)((unsigned)rand_r(r) % 5) - 2;
    return off < 0 ? 0 : off > limit ? limit : off;
}

/* Random writes, truncates and reads checked against an in-memory model,
 * then the whole file re-read through the daemon. */
static void test_rw_random(void **state)
{
    struct tmount *m = *state;
    const off_t cap = 8 * MiB;
    unsigned char *model = calloc(1, (size_t)cap + 512 * KiB);
    unsigned char *buf = malloc((size_t)cap + 512 * KiB);
    assert_non_null(model);
    assert_non_null(buf);
    off_t size = 0;
    unsigned r = (unsigned)tm_seed();
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    for (int op = 0; op < 1500; op++) {
        unsigned kind = (unsigned)rand_r(&r) % 20;
        off_t off = interesting_offset(&r, cap);
        size_t len =
            kind < 2 ? 1 + (unsigned)rand_r(&r) % (256 * KiB) : 1 + (unsigned)rand_r(&r) % 9000;
        if (kind < 13) {
            tm_fill(model + off, len, (uint64_t)op, 0);
            int rc = tm_pwrite_all(fd, model + off, len, off);
            if (rc)
                fail_msg("op %d: pwrite %zu at %lld: %s", op, len, (long long)off, tm_errname(-rc));
            if (off + (off_t)len > size)
                size = off + (off_t)len;
        } else if (kind < 14) {
            TM_OK(ftruncate(fd, off));
            if (off < size)
                memset(model + off, 0, (size_t)(size - off));
            size = off;
        } else {
            ssize_t n = tm_pread_all(fd, buf, len, off);
            off_t want = off >= size ? 0 : off + (off_t)len > size ? size - off : (off_t)len;
            if (n != want)
                fail_msg("op %d: pread %zu at %lld = %zd, expected %lld", op, len, (long long)off,
                         n, (long long)want);
            tm_check_bytes(buf, model + off, (size_t)n, "random pread", off);
        }
    }
    struct stat st;
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, size);
    close(fd);
    assert_int_equal(reread(P("f"), buf, (size_t)cap + 512 * KiB), size);
    tm_check_bytes(buf, model, (size_t)size, "re-read", 0);
    free(model);
    free(buf);
}

static void test_sparse(void **state)
{
    struct tmount *m = *state;
    const off_t far = 10 * MiB + 123;
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    assert_int_equal(pwrite(fd, "X", 1, far), 1);
    assert_int_equal(pwrite(fd, "M", 1, 5 * MiB), 1);
    struct stat st;
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, far + 1);
    close(fd);
    char *buf = malloc((size_t)far + 2);
    assert_int_equal(reread(P("f"), buf, (size_t)far + 2), far + 1);
    assert_int_equal(buf[far], 'X');
    assert_int_equal(buf[5 * MiB], 'M');
    buf[far] = buf[5 * MiB] = 0;
    tm_check_zero(buf, (size_t)far + 1, "sparse file", 0);

    /* A file that is all hole. */
    TM_OK(truncate(P("f"), 0));
    TM_OK(truncate(P("f"), 3 * MiB + 5));
    assert_int_equal(reread(P("f"), buf, 4 * MiB), 3 * MiB + 5);
    tm_check_zero(buf, 3 * MiB + 5, "truncated-up file", 0);
    free(buf);
}

/* st_blocks of path, in 512-byte units. */
static long long blocks_of(const char *path)
{
    struct stat st;
    TM_OK(stat(path, &st));
    return (long long)st.st_blocks;
}

/* st_blocks of fd's file at path once what fd wrote is stored. With -o
 * writeback a write stays in the kernel's cache (a truncate may drop it
 * there) and reaches the daemon only at write-back: st_blocks, what the
 * daemon stores, cannot count it before, so fsync writes it back first;
 * and the kernel keeps serving the st_blocks it cached (a write-back does
 * not invalidate it) until the attribute timeout, so statx forces a
 * GETATTR. */
static long long blocks_stored(struct tmount *m, int fd, const char *path)
{
    if (!tm_has_opt(m, "writeback"))
        return blocks_of(path);
    TM_OK(fsync(fd));
    struct statx stx;
    TM_OK(statx(AT_FDCWD, path, AT_STATX_FORCE_SYNC, STATX_BLOCKS, &stx));
    assert_true(stx.stx_mask & STATX_BLOCKS);
    return (long long)stx.stx_blocks;
}

/* st_blocks counts what is stored (whole chunks, in 512-byte units), not
 * the size: holes cost nothing, as on ext4, so du is right and cp
 * --sparse=auto sees a sparse file. The count follows writes into holes
 * and over data, punched holes, truncation, and survives a remount. */
static void test_blocks_count_what_is_stored(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *f = P("sparse");
    int fd = open(f, O_CREAT | O_RDWR, 0644);
    TM_OK(fd);
    struct stat st;
    TM_OK(fstat(fd, &st));
    const long long cb = st.st_blksize / 512; /* blocks of one chunk */
    TM_OK(ftruncate(fd, 1LL << 30)); /* inline still: counted as one chunk at most */
    assert_in_range(blocks_stored(m, fd, f), 0, cb);
    assert_int_equal(pwrite(fd, "x", 1, 2 * st.st_blksize), 1);
    assert_int_equal(blocks_stored(m, fd, f), cb); /* chunked now */
    TM_OK(ftruncate(fd, 1));
    TM_OK(ftruncate(fd, 1LL << 30));
    assert_int_equal(blocks_stored(m, fd, f), 0);
    char *buf = calloc(1, 4 * (size_t)st.st_blksize);
    assert_non_null(buf);
    memset(buf, 'x', 4 * (size_t)st.st_blksize);
    const off_t mid = 512LL << 20, cs = st.st_blksize;
    assert_int_equal(pwrite(fd, buf, (size_t)cs, mid), cs); /* a whole chunk in a hole */
    assert_int_equal(blocks_stored(m, fd, f), cb);
    assert_int_equal(pwrite(fd, buf, (size_t)cs, mid), cs); /* over it again */
    assert_int_equal(blocks_stored(m, fd, f), cb);
    assert_int_equal(pwrite(fd, buf, 10, mid + 3 * cs + 7), 10); /* part of a chunk */
    assert_int_equal(blocks_stored(m, fd, f), 2 * cb);
    assert_int_equal(pwrite(fd, buf, 4 * (size_t)cs, mid), 4 * cs); /* two new, two old */
    assert_int_equal(blocks_stored(m, fd, f), 4 * cb);
    TM_OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, mid + cs, cs));
    assert_int_equal(blocks_stored(m, fd, f), 3 * cb);
    TM_OK(ftruncate(fd, mid + 2 * cs + 1)); /* drops the last one, keeps part of one */
    assert_int_equal(blocks_stored(m, fd, f), 2 * cb);
    TM_OK(close(fd));
    tm_make_file(P("dense"), 1 << 20, 1);
    assert_int_equal(blocks_of(P("dense")), (1 << 20) / 512);
    tm_remount_checked(m);
    assert_int_equal(blocks_of(f), 2 * cb);
    assert_int_equal(blocks_of(P("dense")), (1 << 20) / 512);
    fd = open(f, O_RDWR);
    TM_OK(fd);
    TM_OK(ftruncate(fd, 0));
    assert_int_equal(blocks_of(f), 0);
    TM_OK(close(fd));
    free(buf);
}

static void test_truncate(void **state)
{
    struct tmount *m = *state;
    static const off_t shapes[][2] = {/* initial size, shrink to */
                                      {50, 10},
                                      {300000, 100000},
                                      {2 * MiB + 7, MiB - 1},
                                      {1 * MiB, 0}};
    char *buf = malloc(3 * MiB), *want = malloc(3 * MiB);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        off_t full = shapes[i][0], cut = shapes[i][1];
        tm_make_file(P("f"), (size_t)full, i);
        struct stat before, after;
        lst(P("f"), &before);
        tick();
        int fd = open(P("f"), O_RDWR);
        TM_OK(fd);
        TM_OK(ftruncate(fd, cut));
        TM_OK(fstat(fd, &after));
        assert_int_equal(after.st_size, cut);
        assert_ts_after(after.st_mtim, before.st_mtim);
        assert_ts_after(after.st_ctim, before.st_ctim);
        /* Grow back: the cut-off bytes must read as zeros. */
        TM_OK(ftruncate(fd, full));
        close(fd);
        assert_int_equal(reread(P("f"), buf, 3 * MiB), full);
        tm_fill(want, (size_t)cut, i, 0);
        tm_check_bytes(buf, want, (size_t)cut, "kept by truncate", 0);
        tm_check_zero(buf + cut, (size_t)(full - cut), "regrown by truncate", cut);
    }
    free(buf);
    free(want);

    /* By path, and the error cases. */
    tm_make_file(P("g"), 1000, 9);
    TM_OK(truncate(P("g"), 10));
    struct stat st;
    lst(P("g"), &st);
    assert_int_equal(st.st_size, 10);
    TM_OK(mkdir(P("dir"), 0755));
    TM_ERR(truncate(P("dir"), 0), EISDIR);
    TM_ERR(truncate(P("missing"), 0), ENOENT);
    TM_ERR(truncate(P("g"), -1), EINVAL);
    int fd = open(P("g"), O_RDONLY);
    TM_ERR2(ftruncate(fd, 0), EINVAL, EBADF);
    close(fd);
}

/* -o writeback: the kernel takes write(2) into its cache up to its own
 * limit (INT64_MAX), which no write can cross: the VFS refuses one ending
 * past INT64_MAX with EINVAL before any filesystem sees it. So lsmfs's 2^62
 * is no limit there: the daemon stores whatever the kernel took, else close
 * fails with EIO when the pages come back (as it did at 2^62). */
static void max_size_writeback(struct tmount *m, const char *data)
{
    enum { FITS = 40000 };
    const off_t d = 1LL << 62, k = INT64_MAX;
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    assert_int_equal(pwrite(fd, data, MiB, d - FITS), MiB);
    assert_int_equal(pwrite(fd, data, FITS, k - FITS), FITS);
    struct stat st;
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, k);
    TM_ERR(pwrite(fd, "x", 1, k), EINVAL);
    TM_OK(close(fd));
    tm_remount_checked(m);
    char *buf = malloc(MiB);
    assert_non_null(buf);
    fd = open(P("f"), O_RDONLY);
    TM_OK(fd);
    assert_int_equal(tm_pread_all(fd, buf, MiB, d - FITS), MiB);
    tm_check_bytes(buf, data, MiB, "across 2^62", d - FITS);
    assert_int_equal(tm_pread_all(fd, buf, FITS, k - FITS), FITS);
    tm_check_bytes(buf, data, FITS, "up to INT64_MAX", k - FITS);
    TM_OK(close(fd));
    free(buf);
}

/* A write crossing the largest file size (2^62) writes what fits and
 * returns that count, as ext4 does at its limit; one starting there fails
 * with EFBIG. With -o writeback the kernel owns the limit:
 * max_size_writeback. */
static void test_write_crossing_max_size(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip(); /* other filesystems have other limits */
    const off_t max = 1LL << 62;
    enum { FITS = 40000 }; /* the kernel sends it in pieces: the last crosses */
    char *data = malloc(MiB), *buf = malloc(MiB);
    assert_true(data != NULL && buf != NULL);
    tm_fill(data, MiB, 62, 0);
    if (tm_has_opt(m, "writeback")) {
        max_size_writeback(m, data);
        free(data);
        free(buf);
        TM_OK(unlink(P("f")));
        return;
    }
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    ssize_t n = pwrite(fd, data, MiB, max - FITS);
    struct stat st;
    TM_OK(fstat(fd, &st));
    errno = 0;
    ssize_t at_max = pwrite(fd, "x", 1, max);
    int at_max_err = errno;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ssize_t back = pread(fd, buf, MiB, max - FITS);
    bool same = back == FITS && memcmp(buf, data, FITS) == 0;
    TM_OK(close(fd));
    free(data);
    free(buf);
    assert_int_equal(n, FITS);
    assert_int_equal(st.st_size, max);
    assert_int_equal(at_max, -1);
    assert_int_equal(at_max_err, EFBIG);
    assert_true(same);
    TM_OK(unlink(P("f")));
}

static void test_large_offsets(void **state)
{
    struct tmount *m = *state;
    const off_t t40 = 1LL << 40;
    char data[8192], buf[8192];
    tm_fill(data, sizeof data, 40, 0);
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    /* Straddle 2^40. */
    TM_OK(tm_pwrite_all(fd, data, sizeof data, t40 - 4096));
    struct stat st;
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, t40 + 4096);
    assert_int_equal(lseek(fd, 0, SEEK_END), t40 + 4096);
    close(fd);
    fd = open(P("f"), O_RDWR);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    assert_int_equal(tm_pread_all(fd, buf, sizeof buf, t40 - 4096), sizeof buf);
    tm_check_bytes(buf, data, sizeof buf, "at 2^40", t40 - 4096);
    assert_int_equal(tm_pread_all(fd, buf, 4096, t40 / 2), 4096);
    tm_check_zero(buf, 4096, "hole at 2^39", t40 / 2);
    assert_int_equal(tm_pread_all(fd, buf, 4096, 4096), 4096);
    tm_check_zero(buf, 4096, "hole at 4096", 4096);
    assert_int_equal(tm_pread_all(fd, buf, 100, t40 + 4096), 0);

    /* Truncating and deleting a 1 TiB sparse file must not walk every
     * chunk it could have had. */
    double t0 = tm_now();
    TM_OK(ftruncate(fd, t40 + 1));
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, t40 + 1);
    assert_int_equal(tm_pread_all(fd, buf, 10, t40 - 2), 3);
    tm_check_bytes(buf, data + 4094, 3, "below the cut", t40 - 2);
    TM_OK(ftruncate(fd, 4096));
    close(fd);
    TM_OK(truncate(P("f"), t40 * 2));
    TM_OK(unlink(P("f")));
    double took = tm_now() - t0;
    if (took > 5)
        fail_msg("truncating and unlinking a sparse 2 TiB file took %.1f s", took);
}

/* -------------------------------------------------------- directories */

static void test_mkdir_rmdir(void **state)
{
    struct tmount *m = *state;
    struct stat root0, root1, st;
    lst(m->mnt, &root0);
    tick();
    TM_OK(mkdir(P("d"), 0750));
    lst(P("d"), &st);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0750);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(st.st_gid, getegid());
    lst(m->mnt, &root1);
    assert_int_equal(root1.st_nlink, root0.st_nlink + 1);
    assert_ts_after(root1.st_mtim, root0.st_mtim);
    assert_ts_after(root1.st_ctim, root0.st_ctim);

    tm_touch(P("file"));
    TM_ERR(mkdir(P("d"), 0755), EEXIST);
    TM_ERR(mkdir(P("file"), 0755), EEXIST);
    TM_ERR(mkdir(P("missing/d"), 0755), ENOENT);
    TM_ERR(mkdir(P("file/d"), 0755), ENOTDIR);

    tm_touch(P("d/f"));
    TM_ERR(rmdir(P("d")), ENOTEMPTY);
    TM_ERR(rmdir(P("d/f")), ENOTDIR);
    TM_ERR(rmdir(P("missing")), ENOENT);
    TM_ERR(rmdir(P("d/.")), EINVAL);
    TM_OK(unlink(P("d/f")));
    TM_OK(mkdir(P("d/sub"), 0755));
    lst(P("d"), &st);
    assert_int_equal(st.st_nlink, 3);
    TM_ERR(rmdir(P("d")), ENOTEMPTY);
    TM_OK(rmdir(P("d/sub")));
    lst(P("d"), &st);
    assert_int_equal(st.st_nlink, 2);
    lst(m->mnt, &root0);
    tick();
    TM_OK(rmdir(P("d")));
    TM_ERR(lstat(P("d"), &st), ENOENT);
    lst(m->mnt, &root1);
    assert_int_equal(root1.st_nlink, root0.st_nlink - 1);
    assert_ts_after(root1.st_mtim, root0.st_mtim);

    /* A removed directory that is still open accepts no new entries. */
    TM_OK(mkdir(P("gone"), 0755));
    int dfd = open(P("gone"), O_RDONLY | O_DIRECTORY);
    TM_OK(dfd);
    TM_OK(rmdir(P("gone")));
    TM_ERR(openat(dfd, "x", O_CREAT | O_WRONLY, 0644), ENOENT);
    TM_OK(fstat(dfd, &st));
    assert_true(S_ISDIR(st.st_mode));
    close(dfd);

    /* Deep nesting. */
    char path[1024] = "";
    for (int i = 0; i < 20; i++) {
        strcat(path, i ? "/n" : "n");
        TM_OK(mkdir(P("%s", path), 0755));
    }
    tm_touch(P("%s/leaf", path));
    lst(P("%s/leaf", path), &st);
    assert_true(S_ISREG(st.st_mode));
    TM_ERR(rmdir(P("n")), ENOTEMPTY);
}

static void test_unlink(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("d"), 0755));
    tm_touch(P("d/f"));
    struct stat d0, d1, st;
    lst(P("d"), &d0);
    tick();
    TM_OK(unlink(P("d/f")));
    TM_ERR(lstat(P("d/f"), &st), ENOENT);
    lst(P("d"), &d1);
    assert_ts_after(d1.st_mtim, d0.st_mtim);
    assert_ts_after(d1.st_ctim, d0.st_ctim);
    TM_ERR(unlink(P("d/f")), ENOENT);
    TM_ERR(unlink(P("d")), EISDIR);
    TM_ERR(unlink(P("missing/f")), ENOENT);
    tm_touch(P("file"));
    TM_ERR(unlink(P("file/x")), ENOTDIR);
}

/* Inode numbers are never reused, and distinct among live files. */
static void test_inode_numbers(void **state)
{
    struct tmount *m = *state;
    enum { N = 200 };
    ino_t seen[2 * N];
    struct stat st;
    for (int i = 0; i < N; i++) {
        tm_touch(P("keep%d", i));
        lst(P("keep%d", i), &st);
        seen[i] = st.st_ino;
        tm_touch(P("tmp"));
        lst(P("tmp"), &st);
        seen[N + i] = st.st_ino;
        TM_OK(unlink(P("tmp")));
    }
    lst(m->mnt, &st);
    for (int i = 0; i < 2 * N; i++) {
        if (seen[i] == st.st_ino)
            fail_msg("inode %llu is also the root's", (unsigned long long)seen[i]);
        for (int j = 0; j < i; j++)
            if (seen[i] == seen[j])
                fail_msg("inode %llu used twice (files %d and %d)", (unsigned long long)seen[i], j,
                         i);
    }
}

/* ----------------------------------------------------- links and names */

static void test_symlink(void **state)
{
    struct tmount *m = *state;
    const char *target = "some/relative/../target";
    TM_OK(symlink(target, P("l")));
    struct stat st;
    lst(P("l"), &st);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(st.st_size, strlen(target));
    assert_int_equal(st.st_uid, geteuid());
    char buf[PATH_MAX];
    assert_int_equal(readlink(P("l"), buf, sizeof buf), strlen(target));
    assert_memory_equal(buf, target, strlen(target));
    assert_int_equal(readlink(P("l"), buf, 4), 4);
    assert_memory_equal(buf, target, 4);

    /* The longest target Linux allows. */
    char longt[PATH_MAX];
    memset(longt, 'x', PATH_MAX - 1);
    for (int i = 100; i < PATH_MAX - 1; i += 100)
        longt[i] = '/';
    longt[PATH_MAX - 1] = 0;
    TM_OK(symlink(longt, P("long")));
    assert_int_equal(readlink(P("long"), buf, sizeof buf), PATH_MAX - 1);
    assert_memory_equal(buf, longt, PATH_MAX - 1);

    tm_make_file(P("f"), 3000, 3);
    TM_ERR(readlink(P("f"), buf, sizeof buf), EINVAL);
    TM_ERR(readlink(P("missing"), buf, sizeof buf), ENOENT);
    TM_ERR(symlink("x", P("f")), EEXIST);
    TM_ERR(symlink("x", P("l")), EEXIST);

    /* Following. */
    TM_OK(symlink("f", P("tof")));
    tm_check_file(P("tof"), 3000, 3);
    TM_OK(stat(P("tof"), &st));
    assert_true(S_ISREG(st.st_mode));
    TM_OK(mkdir(P("d"), 0755));
    TM_OK(symlink("../f", P("d/up")));
    tm_check_file(P("d/up"), 3000, 3);
    TM_OK(symlink("nowhere", P("dangling")));
    TM_ERR(open(P("dangling"), O_RDONLY), ENOENT);
    TM_OK(symlink("loop2", P("loop1")));
    TM_OK(symlink("loop1", P("loop2")));
    TM_ERR(open(P("loop1"), O_RDONLY), ELOOP);

    TM_OK(unlink(P("tof")));
    tm_check_file(P("f"), 3000, 3);
}

static void test_hardlinks(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("f"), 10000, 11);
    struct stat f0, f1, g;
    lst(P("f"), &f0);
    tick();
    TM_OK(link(P("f"), P("g")));
    lst(P("f"), &f1);
    lst(P("g"), &g);
    assert_int_equal(f1.st_ino, g.st_ino);
    assert_int_equal(f1.st_nlink, 2);
    assert_int_equal(g.st_nlink, 2);
    assert_ts_after(f1.st_ctim, f0.st_ctim);

    /* One inode, one content. */
    int fd = open(P("g"), O_WRONLY);
    TM_OK(fd);
    assert_int_equal(pwrite(fd, "LINK", 4, 100), 4);
    close(fd);
    char buf[10000];
    assert_int_equal(reread(P("f"), buf, sizeof buf), 10000);
    assert_memory_equal(buf + 100, "LINK", 4);

    TM_OK(mkdir(P("d"), 0755));
    TM_OK(link(P("f"), P("d/h")));
    lst(P("f"), &f1);
    assert_int_equal(f1.st_nlink, 3);
    TM_OK(unlink(P("f")));
    lst(P("g"), &g);
    assert_int_equal(g.st_nlink, 2);
    assert_int_equal(reread(P("d/h"), buf, sizeof buf), 10000);
    assert_memory_equal(buf + 100, "LINK", 4);

    TM_ERR(link(P("d"), P("dlink")), EPERM);
    TM_ERR(link(P("g"), P("d/h")), EEXIST);
    TM_ERR(link(P("missing"), P("x")), ENOENT);
    TM_ERR(link(P("g"), P("missing/x")), ENOENT);

    /* A link to a symlink itself (linkat without AT_SYMLINK_FOLLOW). */
    TM_OK(symlink("g", P("sl")));
    TM_OK(linkat(AT_FDCWD, P("sl"), AT_FDCWD, P("sl2"), 0));
    struct stat sl;
    lst(P("sl2"), &sl);
    assert_true(S_ISLNK(sl.st_mode));
    assert_int_equal(sl.st_nlink, 2);

    /* Many links, then back to one. */
    for (int i = 0; i < 50; i++)
        TM_OK(link(P("g"), P("many%d", i)));
    lst(P("g"), &g);
    assert_int_equal(g.st_nlink, 52);
    for (int i = 0; i < 50; i++)
        TM_OK(unlink(P("many%d", i)));
    TM_OK(unlink(P("d/h")));
    lst(P("g"), &g);
    assert_int_equal(g.st_nlink, 1);
}

static void test_name_max(void **state)
{
    struct tmount *m = *state;
    char n255[5][256], n256[257];
    for (int i = 0; i < 5; i++) {
        memset(n255[i], 'a' + i, 255);
        n255[i][255] = 0;
    }
    memset(n256, 'z', 256);
    n256[256] = 0;

    tm_touch(P("%s", n255[0]));
    TM_OK(mkdir(P("%s", n255[1]), 0755));
    TM_OK(symlink("target", P("%s", n255[2])));
    TM_OK(link(P("%s", n255[0]), P("%s", n255[3])));
    TM_OK(mknod(P("%s", n255[4]), S_IFIFO | 0644, 0));
    struct stat st;
    for (int i = 0; i < 5; i++)
        lst(P("%s", n255[i]), &st);
    TM_OK(rename(P("%s", n255[0]), P("%s/%s", n255[1], n255[0])));
    lst(P("%s/%s", n255[1], n255[0]), &st);

    /* 255 bytes of UTF-8: 127 two-byte characters and an 'x'. */
    char utf[256] = "";
    for (int i = 0; i < 127; i++)
        strcat(utf, "\xc3\xa9");
    strcat(utf, "x");
    assert_int_equal(strlen(utf), 255);
    tm_touch(P("%s", utf));
    lst(P("%s", utf), &st);

    TM_ERR(open(P("%s", n256), O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    TM_ERR(mkdir(P("%s", n256), 0755), ENAMETOOLONG);
    TM_ERR(symlink("t", P("%s", n256)), ENAMETOOLONG);
    TM_ERR(link(P("%s", n255[3]), P("%s", n256)), ENAMETOOLONG);
    TM_ERR(rename(P("%s", n255[3]), P("%s", n256)), ENAMETOOLONG);
    TM_ERR(mknod(P("%s", n256), S_IFIFO | 0644, 0), ENAMETOOLONG);
    TM_ERR(lstat(P("%s", n256), &st), ENAMETOOLONG);
    TM_ERR(unlink(P("%s", n256)), ENAMETOOLONG);
    TM_ERR(lstat(P("%s/x", n256), &st), ENAMETOOLONG);
}

/* -------------------------------------------------------------- rename */

static void test_rename_files(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("a"), 0755));
    TM_OK(mkdir(P("b"), 0755));
    tm_make_file(P("a/f"), 5000, 1);
    struct stat f0, f1, a0, a1, b0, b1;
    lst(P("a/f"), &f0);
    lst(P("a"), &a0);
    lst(P("b"), &b0);
    tick();
    TM_OK(rename(P("a/f"), P("b/g")));
    TM_ERR(lstat(P("a/f"), &f1), ENOENT);
    lst(P("b/g"), &f1);
    assert_int_equal(f1.st_ino, f0.st_ino);
    assert_int_equal(f1.st_nlink, 1);
    assert_ts_after(f1.st_ctim, f0.st_ctim);
    lst(P("a"), &a1);
    lst(P("b"), &b1);
    assert_ts_after(a1.st_mtim, a0.st_mtim);
    assert_ts_after(b1.st_mtim, b0.st_mtim);
    assert_int_equal(a1.st_nlink, 2);
    assert_int_equal(b1.st_nlink, 2);
    tm_check_file(P("b/g"), 5000, 1);

    /* Over an existing file, which stays readable through an open fd. */
    tm_make_file(P("b/victim"), 7000, 2);
    struct stat v;
    lst(P("b/victim"), &v);
    int vfd = open(P("b/victim"), O_RDONLY);
    TM_OK(vfd);
    TM_OK(rename(P("b/g"), P("b/victim")));
    TM_ERR(lstat(P("b/g"), &f1), ENOENT);
    lst(P("b/victim"), &f1);
    assert_int_equal(f1.st_ino, f0.st_ino);
    tm_check_file(P("b/victim"), 5000, 1);
    struct stat vst;
    TM_OK(fstat(vfd, &vst));
    assert_int_equal(vst.st_ino, v.st_ino);
    assert_int_equal(vst.st_nlink, 0);
    char buf[7000], want[7000];
    assert_int_equal(tm_pread_all(vfd, buf, sizeof buf, 0), 7000);
    tm_fill(want, sizeof want, 2, 0);
    tm_check_bytes(buf, want, sizeof buf, "replaced but open", 0);
    close(vfd);

    /* Renaming a name to itself, or to another link of the same inode,
     * does nothing. */
    TM_OK(rename(P("b/victim"), P("b/victim")));
    TM_OK(link(P("b/victim"), P("b/twin")));
    TM_OK(rename(P("b/victim"), P("b/twin")));
    lst(P("b/victim"), &f1);
    assert_int_equal(f1.st_nlink, 2);
    lst(P("b/twin"), &f1);

    TM_ERR(rename(P("missing"), P("x")), ENOENT);
    TM_ERR(rename(P("b/twin"), P("missing/x")), ENOENT);
    TM_OK(mkdir(P("dir"), 0755));
    TM_ERR(rename(P("b/twin"), P("dir")), EISDIR);
    TM_ERR(rename(P("dir"), P("b/twin")), ENOTDIR);
}

static void test_rename_dirs(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("p1"), 0755));
    TM_OK(mkdir(P("p2"), 0755));
    TM_OK(mkdir(P("p1/d"), 0755));
    tm_touch(P("p1/d/child"));
    struct stat st, d0;
    lst(P("p1/d"), &d0);

    /* Across parents: the link counts follow the directory. */
    TM_OK(rename(P("p1/d"), P("p2/d")));
    lst(P("p1"), &st);
    assert_int_equal(st.st_nlink, 2);
    lst(P("p2"), &st);
    assert_int_equal(st.st_nlink, 3);
    lst(P("p2/d"), &st);
    assert_int_equal(st.st_ino, d0.st_ino);
    lst(P("p2/d/child"), &st);

    /* Over an empty directory. */
    TM_OK(mkdir(P("p1/empty"), 0755));
    struct stat e;
    lst(P("p1/empty"), &e);
    TM_OK(rename(P("p2/d"), P("p1/empty")));
    lst(P("p1/empty"), &st);
    assert_int_equal(st.st_ino, d0.st_ino);
    lst(P("p1/empty/child"), &st);
    lst(P("p1"), &st);
    assert_int_equal(st.st_nlink, 3);
    lst(P("p2"), &st);
    assert_int_equal(st.st_nlink, 2);

    /* Over a non-empty directory, a file, into its own subtree. */
    TM_OK(mkdir(P("full"), 0755));
    tm_touch(P("full/x"));
    TM_ERR(rename(P("p1/empty"), P("full")), ENOTEMPTY);
    tm_touch(P("file"));
    TM_ERR(rename(P("p1/empty"), P("file")), ENOTDIR);
    TM_ERR(rename(P("file"), P("p1/empty")), EISDIR);
    TM_OK(mkdir(P("p1/empty/sub"), 0755));
    TM_ERR(rename(P("p1"), P("p1/empty/sub/p1")), EINVAL);
    TM_ERR(rename(P("p1"), P("p1/x")), EINVAL);
    TM_ERR(rename(P("p1/empty"), P("p1/empty/sub/x")), EINVAL);
    lst(P("p1/empty/sub"), &st);

    /* Up into an ancestor, and the listing of the old parent follows. */
    TM_OK(rename(P("p1/empty/sub"), P("sub")));
    lst(P("sub"), &st);
    lst(P("p1/empty"), &st);
    assert_int_equal(st.st_nlink, 2);
    DIR *d = opendir(P("p1/empty"));
    assert_non_null(d);
    struct dirent *de;
    int names = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            assert_string_equal(de->d_name, "child");
            names++;
        }
    }
    closedir(d);
    assert_int_equal(names, 1);
}

static void test_rename_noreplace(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("a"), "A", 1, 0644));
    TM_OK(tm_write_file(P("b"), "B", 1, 0644));
    TM_ERR(renameat2_(P("a"), P("b"), RENAME_NOREPLACE), EEXIST);
    check_text(P("a"), "A");
    check_text(P("b"), "B");
    TM_OK(mkdir(P("d"), 0755));
    TM_ERR(renameat2_(P("a"), P("d"), RENAME_NOREPLACE), EEXIST);
    TM_OK(renameat2_(P("a"), P("c"), RENAME_NOREPLACE));
    struct stat st;
    TM_ERR(lstat(P("a"), &st), ENOENT);
    check_text(P("c"), "A");
    TM_ERR(renameat2_(P("missing"), P("z"), RENAME_NOREPLACE), ENOENT);
    TM_ERR(renameat2_(P("c"), P("z"), RENAME_NOREPLACE | RENAME_EXCHANGE), EINVAL);
}

static void test_rename_exchange(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("p1"), 0755));
    TM_OK(mkdir(P("p2"), 0755));
    TM_OK(tm_write_file(P("p1/file"), "FILE", 4, 0644));
    TM_OK(mkdir(P("p2/dir"), 0700));
    tm_touch(P("p2/dir/inside"));
    struct stat f0, d0, st;
    lst(P("p1/file"), &f0);
    lst(P("p2/dir"), &d0);

    TM_OK(renameat2_(P("p1/file"), P("p2/dir"), RENAME_EXCHANGE));
    lst(P("p1/file"), &st);
    assert_int_equal(st.st_ino, d0.st_ino);
    assert_true(S_ISDIR(st.st_mode));
    lst(P("p1/file/inside"), &st);
    lst(P("p2/dir"), &st);
    assert_int_equal(st.st_ino, f0.st_ino);
    assert_true(S_ISREG(st.st_mode));
    check_text(P("p2/dir"), "FILE");
    /* The directory moved from p2 to p1. */
    lst(P("p1"), &st);
    assert_int_equal(st.st_nlink, 3);
    lst(P("p2"), &st);
    assert_int_equal(st.st_nlink, 2);

    /* Two files in one directory. */
    TM_OK(tm_write_file(P("x"), "X", 1, 0644));
    TM_OK(tm_write_file(P("y"), "YY", 2, 0644));
    TM_OK(renameat2_(P("x"), P("y"), RENAME_EXCHANGE));
    check_text(P("x"), "YY");
    check_text(P("y"), "X");

    TM_ERR(renameat2_(P("x"), P("missing"), RENAME_EXCHANGE), ENOENT);
    TM_ERR(renameat2_(P("missing"), P("x"), RENAME_EXCHANGE), ENOENT);
    /* A directory exchanged into its own subtree. */
    TM_OK(mkdir(P("top"), 0755));
    TM_OK(mkdir(P("top/below"), 0755));
    TM_ERR(renameat2_(P("top"), P("top/below"), RENAME_EXCHANGE), EINVAL);
}

/* ------------------------------------------------- nodes and attributes */

/* RENAME_WHITEOUT (overlayfs's upper layer needs it) moves the file and
 * leaves a whiteout, a character device 0:0, under the old name, as ext4
 * does; both survive a remount and fsck. */
static void test_rename_whiteout(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("d"), 0755));
    tm_make_file(P("a"), 5000, 1);
    tm_make_file(P("d/old"), 10, 2);
    TM_OK(syscall(SYS_renameat2, AT_FDCWD, P("a"), AT_FDCWD, P("d/b"), RENAME_WHITEOUT));
    TM_OK(syscall(SYS_renameat2, AT_FDCWD, P("d/b"), AT_FDCWD, P("d/old"), RENAME_WHITEOUT));
    TM_ERR(syscall(SYS_renameat2, AT_FDCWD, P("d/old"), AT_FDCWD, P("a"),
                   RENAME_WHITEOUT | RENAME_EXCHANGE),
           EINVAL);
    tm_remount_checked(m);
    const char *const wo[] = {P("a"), P("d/b")};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        TM_OK(lstat(wo[i], &st));
        assert_true(S_ISCHR(st.st_mode));
        assert_int_equal(st.st_rdev, makedev(0, 0));
    }
    tm_check_file(P("d/old"), 5000, 1);
    TM_OK(unlink(P("a")));
    TM_OK(unlink(P("d/b")));
    tm_remount_checked(m);
}

static void test_mknod(void **state)
{
    struct tmount *m = *state;
    struct stat st;
    TM_OK(mkfifo(P("fifo"), 0640));
    lst(P("fifo"), &st);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0640);
    int fd = open(P("fifo"), O_RDWR | O_NONBLOCK);
    TM_OK(fd);
    assert_int_equal(write(fd, "pipe", 4), 4);
    char buf[8];
    assert_int_equal(read(fd, buf, sizeof buf), 4);
    assert_memory_equal(buf, "pipe", 4);
    close(fd);
    TM_ERR(mkfifo(P("fifo"), 0640), EEXIST);

    TM_OK(mknod(P("sock"), S_IFSOCK | 0600, 0));
    lst(P("sock"), &st);
    assert_true(S_ISSOCK(st.st_mode));
    TM_OK(mknod(P("chr"), S_IFCHR | 0600, makedev(1, 3)));
    lst(P("chr"), &st);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_rdev, makedev(1, 3));
    TM_OK(mknod(P("blk"), S_IFBLK | 0600, makedev(259, 70000)));
    lst(P("blk"), &st);
    assert_true(S_ISBLK(st.st_mode));
    assert_int_equal(major(st.st_rdev), 259);
    assert_int_equal(minor(st.st_rdev), 70000);
    TM_OK(mknod(P("reg"), S_IFREG | 0604, 0));
    lst(P("reg"), &st);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0604);
    assert_int_equal(st.st_size, 0);
    TM_ERR(mknod(P("missing/x"), S_IFIFO | 0600, 0), ENOENT);

    /* bind() creates its socket node through mknod. */
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    TM_OK(s);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(P("bound")) < sizeof sa.sun_path);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", P("bound"));
    TM_OK(bind(s, (struct sockaddr *)&sa, sizeof sa));
    lst(P("bound"), &st);
    assert_true(S_ISSOCK(st.st_mode));
    close(s);
}

static void test_chmod_chown(void **state)
{
    struct tmount *m = *state;
    tm_touch(P("f"));
    struct stat s0, s1;
    lst(P("f"), &s0);
    tick();
    TM_OK(chmod(P("f"), 0600));
    lst(P("f"), &s1);
    assert_int_equal(s1.st_mode & 07777, 0600);
    assert_true(S_ISREG(s1.st_mode));
    assert_ts_after(s1.st_ctim, s0.st_ctim);
    assert_ts_eq(s1.st_mtim, s0.st_mtim);
    TM_OK(chmod(P("f"), 07777));
    lst(P("f"), &s1);
    assert_int_equal(s1.st_mode & 07777, 07777);
    int fd = open(P("f"), O_RDONLY);
    TM_OK(fchmod(fd, 0444));
    TM_OK(fstat(fd, &s1));
    assert_int_equal(s1.st_mode & 07777, 0444);

    lst(P("f"), &s0);
    tick();
    TM_OK(chown(P("f"), 1234, 5678));
    lst(P("f"), &s1);
    assert_int_equal(s1.st_uid, 1234);
    assert_int_equal(s1.st_gid, 5678);
    assert_ts_after(s1.st_ctim, s0.st_ctim);
    TM_OK(chown(P("f"), (uid_t)-1, 42));
    lst(P("f"), &s1);
    assert_int_equal(s1.st_uid, 1234);
    assert_int_equal(s1.st_gid, 42);
    TM_OK(fchown(fd, 7, (gid_t)-1));
    TM_OK(fstat(fd, &s1));
    assert_int_equal(s1.st_uid, 7);
    assert_int_equal(s1.st_gid, 42);
    close(fd);

    /* lchown changes the link, not its target. */
    TM_OK(symlink("f", P("l")));
    TM_OK(lchown(P("l"), 99, 98));
    lst(P("l"), &s1);
    assert_int_equal(s1.st_uid, 99);
    assert_int_equal(s1.st_gid, 98);
    lst(P("f"), &s1);
    assert_int_equal(s1.st_uid, 7);

    /* chown clears set-user-ID, and set-group-ID with group execute, on
     * regular files even for root (as ext4 does); not on directories. */
    TM_OK(chmod(P("f"), 06755));
    TM_OK(chown(P("f"), 1, 1));
    lst(P("f"), &s1);
    assert_int_equal(s1.st_mode & 07777, 0755);
    TM_OK(mkdir(P("d"), 02755));
    TM_OK(chmod(P("d"), 02755));
    TM_OK(chown(P("d"), 1, 1));
    lst(P("d"), &s1);
    assert_int_equal(s1.st_mode & 07777, 02755);

    TM_ERR(chmod(P("missing"), 0644), ENOENT);
    TM_ERR(chown(P("missing"), 1, 1), ENOENT);
}

static void test_utimens(void **state)
{
    struct tmount *m = *state;
    tm_touch(P("f"));
    struct stat st, s0;
    long long t0 = now_ns();
    struct timespec set[2] = {{1000, 123456789}, {2000, 987654321}};
    TM_OK(utimensat(AT_FDCWD, P("f"), set, 0));
    long long t1 = now_ns();
    lst(P("f"), &st);
    assert_ts_eq(st.st_atim, set[0]);
    assert_ts_eq(st.st_mtim, set[1]);
    assert_ts_within(st.st_ctim, t0, t1);

    /* UTIME_OMIT keeps, UTIME_NOW takes the clock. */
    struct timespec omit_now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    t0 = now_ns();
    TM_OK(utimensat(AT_FDCWD, P("f"), omit_now, 0));
    t1 = now_ns();
    lst(P("f"), &st);
    assert_ts_eq(st.st_atim, set[0]);
    assert_ts_within(st.st_mtim, t0, t1);
    struct timespec set_omit[2] = {{3000, 5}, {0, UTIME_OMIT}};
    s0 = st;
    TM_OK(utimensat(AT_FDCWD, P("f"), set_omit, 0));
    lst(P("f"), &st);
    assert_int_equal(st.st_atim.tv_sec, 3000);
    assert_int_equal(st.st_atim.tv_nsec, 5);
    assert_ts_eq(st.st_mtim, s0.st_mtim);
    struct timespec now_omit[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    t0 = now_ns();
    TM_OK(utimensat(AT_FDCWD, P("f"), now_omit, 0));
    t1 = now_ns();
    lst(P("f"), &st);
    assert_ts_within(st.st_atim, t0, t1);
    assert_ts_eq(st.st_mtim, s0.st_mtim);

    /* NULL: both now. */
    tick();
    t0 = now_ns();
    TM_OK(utimensat(AT_FDCWD, P("f"), NULL, 0));
    t1 = now_ns();
    lst(P("f"), &st);
    assert_ts_within(st.st_atim, t0, t1);
    assert_ts_within(st.st_mtim, t0, t1);

    /* Before 1970 and after 2038. */
    struct timespec odd[2] = {{-86400, 500}, {(time_t)1 << 33, 999999999}};
    TM_OK(utimensat(AT_FDCWD, P("f"), odd, 0));
    lst(P("f"), &st);
    assert_ts_eq(st.st_atim, odd[0]);
    assert_ts_eq(st.st_mtim, odd[1]);

    /* futimens, and a symlink's own times. */
    int fd = open(P("f"), O_RDONLY);
    TM_OK(futimens(fd, set));
    TM_OK(fstat(fd, &st));
    assert_ts_eq(st.st_mtim, set[1]);
    close(fd);
    TM_OK(symlink("f", P("l")));
    struct timespec lt[2] = {{4000, 4}, {5000, 5}};
    TM_OK(utimensat(AT_FDCWD, P("l"), lt, AT_SYMLINK_NOFOLLOW));
    lst(P("l"), &st);
    assert_ts_eq(st.st_mtim, lt[1]);
    lst(P("f"), &st);
    assert_ts_eq(st.st_mtim, set[1]);

    TM_ERR(utimensat(AT_FDCWD, P("missing"), set, 0), ENOENT);
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    TM_ERR(utimensat(AT_FDCWD, P("f"), bad, 0), EINVAL);
}

/* Which operation updates which time stamp (ext4 behaviour). */
static void test_timestamps(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("d"), 0755));
    struct stat d0, d1, f0, f1;
    lst(P("d"), &d0);
    tick();
    long long t0 = now_ns();
    tm_touch(P("d/f"));
    long long t1 = now_ns();
    lst(P("d/f"), &f0);
    assert_ts_within(f0.st_atim, t0, t1);
    assert_ts_within(f0.st_mtim, t0, t1);
    assert_ts_within(f0.st_ctim, t0, t1);
    lst(P("d"), &d1);
    assert_ts_after(d1.st_mtim, d0.st_mtim);
    assert_ts_after(d1.st_ctim, d0.st_ctim);

    /* write: mtime and ctime, not atime. */
    tick();
    int fd = open(P("d/f"), O_WRONLY);
    assert_int_equal(write(fd, "data", 4), 4);
    TM_OK(fsync(fd));
    close(fd);
    lst(P("d/f"), &f1);
    assert_ts_after(f1.st_mtim, f0.st_mtim);
    assert_ts_after(f1.st_ctim, f0.st_ctim);
    assert_ts_eq(f1.st_atim, f0.st_atim);

    /* setxattr: ctime only. */
    f0 = f1;
    tick();
    TM_OK(setxattr(P("d/f"), "user.t", "v", 1, 0));
    lst(P("d/f"), &f1);
    assert_ts_after(f1.st_ctim, f0.st_ctim);
    assert_ts_eq(f1.st_mtim, f0.st_mtim);

    /* link and unlink: the file's ctime, the directory's mtime/ctime. */
    f0 = f1;
    d0 = d1;
    tick();
    TM_OK(link(P("d/f"), P("d/g")));
    lst(P("d/f"), &f1);
    lst(P("d"), &d1);
    assert_ts_after(f1.st_ctim, f0.st_ctim);
    assert_ts_eq(f1.st_mtim, f0.st_mtim);
    assert_ts_after(d1.st_mtim, d0.st_mtim);
    f0 = f1;
    d0 = d1;
    tick();
    TM_OK(unlink(P("d/g")));
    lst(P("d/f"), &f1);
    lst(P("d"), &d1);
    assert_ts_after(f1.st_ctim, f0.st_ctim);
    assert_ts_after(d1.st_mtim, d0.st_mtim);
    assert_ts_after(d1.st_ctim, d0.st_ctim);

    /* symlink, mkdir, mknod, rename: the parent's mtime. */
    const char *what[] = {"symlink", "mkdir", "mknod", "rename"};
    for (int i = 0; i < 4; i++) {
        d0 = d1;
        tick();
        if (i == 0)
            TM_OK(symlink("f", P("d/s")));
        else if (i == 1)
            TM_OK(mkdir(P("d/sub"), 0755));
        else if (i == 2)
            TM_OK(mknod(P("d/fifo"), S_IFIFO | 0644, 0));
        else
            TM_OK(rename(P("d/fifo"), P("d/fifo2")));
        lst(P("d"), &d1);
        if (ts_ns(d1.st_mtim) <= ts_ns(d0.st_mtim))
            fail_msg("%s did not update the directory's mtime", what[i]);
    }

    /* Listing a directory changes neither mtime nor ctime. */
    d0 = d1;
    tick();
    DIR *dir = opendir(P("d"));
    assert_non_null(dir);
    while (readdir(dir))
        ;
    closedir(dir);
    lst(P("d"), &d1);
    assert_ts_eq(d1.st_mtim, d0.st_mtim);
    assert_ts_eq(d1.st_ctim, d0.st_ctim);
}

/* --------------------------------------------------------------- xattrs */

static bool list_has(const char *list, ssize_t len, const char *name)
{
    for (ssize_t i = 0; i < len; i += (ssize_t)strlen(list + i) + 1)
        if (strcmp(list + i, name) == 0)
            return true;
    return false;
}

static int list_count(const char *list, ssize_t len)
{
    int n = 0;
    for (ssize_t i = 0; i < len; i += (ssize_t)strlen(list + i) + 1)
        n++;
    return n;
}

static void test_xattr(void **state)
{
    struct tmount *m = *state;
    tm_touch(P("f"));
    char buf[8192];
    TM_OK(setxattr(P("f"), "user.a", "v1", 2, 0));
    assert_int_equal(getxattr(P("f"), "user.a", NULL, 0), 2);
    assert_int_equal(getxattr(P("f"), "user.a", buf, sizeof buf), 2);
    assert_memory_equal(buf, "v1", 2);

    TM_ERR(setxattr(P("f"), "user.a", "x", 1, XATTR_CREATE), EEXIST);
    TM_ERR(setxattr(P("f"), "user.b", "x", 1, XATTR_REPLACE), ENODATA);
    TM_ERR(getxattr(P("f"), "user.b", buf, sizeof buf), ENODATA);
    TM_OK(setxattr(P("f"), "user.a", "value2", 6, XATTR_REPLACE));
    assert_int_equal(getxattr(P("f"), "user.a", buf, sizeof buf), 6);
    assert_memory_equal(buf, "value2", 6);
    TM_ERR(getxattr(P("f"), "user.a", buf, 3), ERANGE);
    TM_OK(setxattr(P("f"), "user.new", "n", 1, XATTR_CREATE));

    /* Empty, binary and large values. */
    TM_OK(setxattr(P("f"), "user.empty", "", 0, 0));
    assert_int_equal(getxattr(P("f"), "user.empty", buf, sizeof buf), 0);
    char bin[256];
    for (int i = 0; i < 256; i++)
        bin[i] = (char)i;
    TM_OK(setxattr(P("f"), "user.bin", bin, sizeof bin, 0));
    assert_int_equal(getxattr(P("f"), "user.bin", buf, sizeof buf), 256);
    assert_memory_equal(buf, bin, 256);
    char big[3000];
    tm_fill(big, sizeof big, 4, 0);
    TM_OK(setxattr(P("f"), "user.big", big, sizeof big, 0));
    assert_int_equal(getxattr(P("f"), "user.big", buf, sizeof buf), 3000);
    tm_check_bytes(buf, big, sizeof big, "xattr value", 0);

    /* listxattr: size query, exact contents, ERANGE. */
    ssize_t need = listxattr(P("f"), NULL, 0);
    TM_OK(need);
    ssize_t len = listxattr(P("f"), buf, sizeof buf);
    assert_int_equal(len, need);
    assert_int_equal(list_count(buf, len), 5);
    assert_true(list_has(buf, len, "user.a"));
    assert_true(list_has(buf, len, "user.new"));
    assert_true(list_has(buf, len, "user.empty"));
    assert_true(list_has(buf, len, "user.bin"));
    assert_true(list_has(buf, len, "user.big"));
    TM_ERR(listxattr(P("f"), buf, (size_t)len - 1), ERANGE);

    TM_OK(removexattr(P("f"), "user.a"));
    TM_ERR(removexattr(P("f"), "user.a"), ENODATA);
    TM_ERR(getxattr(P("f"), "user.a", buf, sizeof buf), ENODATA);
    len = listxattr(P("f"), buf, sizeof buf);
    assert_int_equal(list_count(buf, len), 4);
    assert_false(list_has(buf, len, "user.a"));

    /* Other namespaces root may use, and other kinds of inode. */
    TM_OK(setxattr(P("f"), "trusted.t", "T", 1, 0));
    assert_int_equal(getxattr(P("f"), "trusted.t", buf, sizeof buf), 1);
    TM_OK(setxattr(P("f"), "security.s", "S", 1, 0));
    assert_int_equal(getxattr(P("f"), "security.s", buf, sizeof buf), 1);
    TM_OK(mkdir(P("d"), 0755));
    TM_OK(setxattr(P("d"), "user.dir", "D", 1, 0));
    assert_int_equal(getxattr(P("d"), "user.dir", buf, sizeof buf), 1);
    TM_OK(symlink("f", P("l")));
    TM_OK(lsetxattr(P("l"), "trusted.link", "L", 1, 0));
    assert_int_equal(lgetxattr(P("l"), "trusted.link", buf, sizeof buf), 1);
    TM_ERR(getxattr(P("f"), "trusted.link", buf, sizeof buf), ENODATA);

    /* Many attributes. */
    tm_touch(P("many"));
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof name, "user.x%03d", i);
        TM_OK(setxattr(P("many"), name, name, strlen(name), 0));
    }
    len = listxattr(P("many"), buf, sizeof buf);
    assert_int_equal(list_count(buf, len), 100);
    assert_true(list_has(buf, len, "user.x000"));
    assert_true(list_has(buf, len, "user.x099"));

    TM_ERR(getxattr(P("missing"), "user.a", buf, sizeof buf), ENOENT);
    TM_ERR(setxattr(P("missing"), "user.a", "x", 1, 0), ENOENT);
}

/* ------------------------------------------------------ space and holes */

static void test_statfs(void **state)
{
    struct tmount *m = *state;
    struct statvfs sv;
    TM_OK(statvfs(m->mnt, &sv));
    assert_true(sv.f_bsize > 0);
    assert_true(sv.f_frsize > 0);
    assert_true(sv.f_blocks > 0);
    assert_true(sv.f_bfree <= sv.f_blocks);
    assert_true(sv.f_bavail <= sv.f_bfree);
    assert_true(sv.f_files >= sv.f_ffree);
    assert_true(sv.f_favail <= sv.f_ffree);
    assert_int_equal(sv.f_namemax, 255);

    /* The file count is real. */
    long long i0 = tm_inodes_used(m);
    assert_true(i0 >= 1);
    TM_OK(mkdir(P("d"), 0755));
    for (int i = 0; i < 99; i++)
        tm_touch(P("d/f%d", i));
    assert_int_equal(tm_inodes_used(m), i0 + 100);
    for (int i = 0; i < 99; i++)
        TM_OK(unlink(P("d/f%d", i)));
    TM_OK(rmdir(P("d")));
    tm_wait_inodes(m, i0, 5);

    /* So is the space: 16 MiB of incompressible data, synced, must be
     * somewhere.  (Not a difference: the store may preallocate.) */
    tm_make_file(P("big"), 16 * MiB, 16);
    int fd = open(P("big"), O_RDONLY);
    TM_OK(fsync(fd));
    close(fd);
    TM_OK(statvfs(m->mnt, &sv));
    long long used = bytes_used(m);
    if (used < 12 * MiB)
        fail_msg("statfs: %lld bytes used after writing 16 MiB", used);
    assert_true((long long)sv.f_blocks * (long long)sv.f_frsize >= used);
}

static void test_fallocate(void **state)
{
    struct tmount *m = *state;
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    struct stat st;
    TM_OK(fallocate(fd, 0, 0, MiB));
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, MiB);
    TM_OK(fallocate(fd, 0, 512 * KiB, 2 * MiB));
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, 2 * MiB + 512 * KiB);

    /* Allocating over data keeps it. */
    char data[4096], buf[4096];
    tm_fill(data, sizeof data, 77, 0);
    TM_OK(tm_pwrite_all(fd, data, sizeof data, 1000));
    TM_OK(fallocate(fd, 0, 0, 8192));
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, 2 * MiB + 512 * KiB);

    /* KEEP_SIZE allocates past the end without moving it. */
    TM_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 2 * MiB, 4 * MiB));
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, 2 * MiB + 512 * KiB);
    assert_int_equal(pread(fd, buf, sizeof buf, 2 * MiB + 512 * KiB), 0);
    TM_OK(ftruncate(fd, 5 * MiB));
    close(fd);

    char *all = malloc(6 * MiB);
    assert_int_equal(reread(P("f"), all, 6 * MiB), 5 * MiB);
    tm_check_bytes(all + 1000, data, sizeof data, "under fallocate", 1000);
    memset(all + 1000, 0, sizeof data);
    tm_check_zero(all, 5 * MiB, "fallocated", 0);
    free(all);

    /* Far out. */
    fd = open(P("f"), O_RDWR);
    TM_OK(fallocate(fd, 0, 1LL << 40, 4096));
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_size, (1LL << 40) + 4096);
    TM_ERR(fallocate(fd, 0, 0, 0), EINVAL);
    close(fd);
    fd = open(P("f"), O_RDONLY);
    TM_ERR(fallocate(fd, 0, 0, 4096), EBADF);
    close(fd);
}

/* -o writeback: what a file open for writing holds in the kernel's cache
 * is data to SEEK_DATA/SEEK_HOLE too (the kernel asks the daemon without
 * writing back first; cp, copying the holes it is told of as holes, copied
 * zeros for it). */
static void test_seek_sees_cached_writes(void **state)
{
    struct tmount *m = *state;
    char data[64 * 1024];
    tm_fill(data, sizeof data, 6, 0);
    int fd = open(P("f"), O_RDWR | O_CREAT | O_EXCL, 0644);
    TM_OK(fd);
    int e = tm_pwrite_all(fd, data, sizeof data, 0);
    off_t d = lseek(fd, 0, SEEK_DATA);
    int derr = errno;
    off_t h = lseek(fd, 0, SEEK_HOLE);
    close(fd);
    assert_int_equal(e, 0);
    if (d != 0 || h != (off_t)sizeof data)
        fail_msg("SEEK_DATA from 0 = %lld (%s), SEEK_HOLE from 0 = %lld; expected 0, %zu",
                 (long long)d, d < 0 ? tm_errname(derr) : "-", (long long)h, sizeof data);
}

/* An empty file has neither data nor a hole: ENXIO from 0 (any mount). */
static void seek_empty(struct tmount *m)
{
    tm_touch(P("empty"));
    int fd = open(P("empty"), O_RDONLY);
    TM_OK(fd);
    TM_ERR(lseek(fd, 0, SEEK_DATA), ENXIO);
    TM_ERR(lseek(fd, 0, SEEK_HOLE), ENXIO);
    close(fd);
}

/* -o writeback: lsmfs answers LSEEK with ENOSYS (only the kernel knows
 * what its cache holds: test_seek_sees_cached_writes), so the kernel
 * answers by itself: every byte below the size is data, the one hole is
 * at the end (as POSIX allows), past the end is ENXIO. Holes are not
 * reported on writeback mounts. fd: the file with data at [0, 4K) and
 * [far, size). */
static void seek_writeback(struct tmount *m, int fd, off_t far, off_t size)
{
    assert_int_equal(lseek(fd, 0, SEEK_DATA), 0);
    assert_int_equal(lseek(fd, 0, SEEK_HOLE), size);
    assert_int_equal(lseek(fd, 4096, SEEK_DATA), 4096);
    assert_int_equal(lseek(fd, far, SEEK_HOLE), size);
    assert_int_equal(lseek(fd, size - 1, SEEK_DATA), size - 1);
    TM_ERR(lseek(fd, size, SEEK_DATA), ENXIO);
    TM_ERR(lseek(fd, size, SEEK_HOLE), ENXIO);
    close(fd);
    TM_OK(truncate(P("f"), 64 * MiB));
    fd = open(P("f"), O_RDONLY);
    TM_OK(fd);
    assert_int_equal(lseek(fd, far, SEEK_HOLE), 64 * MiB);
    assert_int_equal(lseek(fd, size, SEEK_DATA), size);
    TM_ERR(lseek(fd, 64 * MiB, SEEK_DATA), ENXIO);
    close(fd);
    seek_empty(m);
}

/* SEEK_DATA/SEEK_HOLE on a file with data at [0, 4K) and [32M, 32M + 4K).
 * Any granularity up to 16 MiB is fine, but the hole must be found; with
 * -o writeback the kernel answers instead: seek_writeback. */
static void test_seek_data_hole(void **state)
{
    struct tmount *m = *state;
    const off_t far = 32 * MiB, size = 32 * MiB + 4096;
    char data[4096];
    tm_fill(data, sizeof data, 5, 0);
    int fd = open(P("f"), O_RDWR | O_CREAT, 0644);
    TM_OK(fd);
    TM_OK(tm_pwrite_all(fd, data, sizeof data, 0));
    TM_OK(tm_pwrite_all(fd, data, sizeof data, far));
    close(fd);
    fd = open(P("f"), O_RDONLY);
    TM_OK(fd);
    if (tm_has_opt(m, "writeback")) {
        seek_writeback(m, fd, far, size);
        return;
    }
    TM_OK(fd);
    assert_int_equal(lseek(fd, 0, SEEK_DATA), 0);
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    if (hole < 4096 || hole >= far)
        fail_msg("SEEK_HOLE from 0 = %lld: no hole found before %lld", (long long)hole,
                 (long long)far);
    off_t next = lseek(fd, hole, SEEK_DATA);
    if (next <= hole || next > far)
        fail_msg("SEEK_DATA from %lld = %lld, expected in (%lld, %lld]", (long long)hole,
                 (long long)next, (long long)hole, (long long)far);
    char *zeros = malloc((size_t)(next - hole));
    assert_int_equal(tm_pread_all(fd, zeros, (size_t)(next - hole), hole), next - hole);
    tm_check_zero(zeros, (size_t)(next - hole), "between SEEK_HOLE and SEEK_DATA", hole);
    free(zeros);
    assert_int_equal(lseek(fd, far, SEEK_DATA), far);
    assert_int_equal(lseek(fd, far, SEEK_HOLE), size);
    assert_int_equal(lseek(fd, size - 1, SEEK_DATA), size - 1);
    TM_ERR(lseek(fd, size, SEEK_DATA), ENXIO);
    TM_ERR(lseek(fd, size, SEEK_HOLE), ENXIO);
    TM_ERR(lseek(fd, size + 100, SEEK_DATA), ENXIO);
    close(fd);

    /* A trailing hole: no data after it. */
    TM_OK(truncate(P("f"), 64 * MiB));
    fd = open(P("f"), O_RDONLY);
    hole = lseek(fd, far, SEEK_HOLE);
    if (hole < size || hole >= 64 * MiB)
        fail_msg("SEEK_HOLE in the trailing hole = %lld", (long long)hole);
    TM_ERR(lseek(fd, hole, SEEK_DATA), ENXIO);
    close(fd);

    /* Empty and fully written files. */
    seek_empty(m);
    tm_make_file(P("full"), 100 * KiB, 6);
    fd = open(P("full"), O_RDONLY);
    assert_int_equal(lseek(fd, 0, SEEK_DATA), 0);
    assert_int_equal(lseek(fd, 0, SEEK_HOLE), 100 * KiB);
    close(fd);
}

/* ------------------------------------------------------ open-file life */

static void test_unlink_while_open(void **state)
{
    struct tmount *m = *state;
    long long i0 = tm_inodes_used(m);
    tm_make_file(P("f"), MiB, 21);
    int fd = open(P("f"), O_RDWR);
    int fd2 = open(P("f"), O_RDONLY);
    TM_OK(fd);
    TM_OK(fd2);
    TM_OK(unlink(P("f")));
    struct stat st;
    TM_ERR(lstat(P("f"), &st), ENOENT);
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_nlink, 0);
    assert_int_equal(st.st_size, MiB);

    char *buf = malloc(2 * MiB), *want = malloc(2 * MiB);
    tm_fill(want, MiB, 21, 0);
    posix_fadvise(fd2, 0, 0, POSIX_FADV_DONTNEED);
    assert_int_equal(tm_pread_all(fd2, buf, 2 * MiB, 0), MiB);
    tm_check_bytes(buf, want, MiB, "unlinked but open", 0);

    /* Still writable, truncatable, syncable. */
    tm_fill(want + MiB, 4096, 22, 0);
    TM_OK(tm_pwrite_all(fd, want + MiB, 4096, MiB));
    TM_OK(fsync(fd));
    posix_fadvise(fd2, 0, 0, POSIX_FADV_DONTNEED);
    assert_int_equal(tm_pread_all(fd2, buf, 2 * MiB, 0), MiB + 4096);
    tm_check_bytes(buf, want, MiB + 4096, "written after unlink", 0);
    TM_OK(ftruncate(fd, 100));
    TM_OK(fstat(fd2, &st));
    assert_int_equal(st.st_size, 100);

    /* A new file by the same name is a different file. */
    tm_touch(P("f"));
    lst(P("f"), &st);
    assert_int_equal(st.st_size, 0);
    TM_OK(unlink(P("f")));
    close(fd);
    assert_int_equal(tm_pread_all(fd2, buf, 200, 0), 100);
    tm_check_bytes(buf, want, 100, "after the first close", 0);
    close(fd2);
    free(buf);
    free(want);
    /* The last close frees the inode. */
    tm_wait_inodes(m, i0, 5);
}

/* The same where the kernel sends OPEN and RELEASE (allow_root, ops.c
 * op_init): open files keep an unlinked file by the kernel's reference there
 * too (orphan_in_use), freed after the last close. */
static void test_unlink_while_open_with_open_requests(void **state)
{
    struct tmount *m = *state;
    test_unlink_while_open(state);
    assert_true(tm_stats_requests(m, "open") > 0);
    assert_true(tm_stats_requests(m, "release") > 0);
}

static void test_readdir_seek(void **state)
{
    struct tmount *m = *state;
    enum { NFILES = 300, NDIRS = 20 };
    TM_OK(mkdir(P("d"), 0755));
    for (int i = 0; i < NFILES; i++)
        tm_touch(P("d/file-%03d-with-a-longer-name", i));
    for (int i = 0; i < NDIRS; i++)
        TM_OK(mkdir(P("d/dir%d", i), 0755));
    TM_OK(symlink("file-000", P("d/link")));
    TM_OK(mkfifo(P("d/fifo"), 0644));
    const int total = NFILES + NDIRS + 2 + 2; /* + link, fifo, ".", ".." */

    DIR *d = opendir(P("d"));
    assert_non_null(d);
    char(*names)[NAME_MAX + 1] = calloc(total + 1, NAME_MAX + 1);
    long *pos = calloc(total + 1, sizeof *pos);
    int n = 0;
    struct dirent *e;
    for (;;) {
        long p = telldir(d);
        if ((e = readdir(d)) == NULL)
            break;
        if (n == total)
            fail_msg("readdir returned more than %d entries", total);
        pos[n] = p;
        snprintf(names[n], NAME_MAX + 1, "%s", e->d_name);
        for (int j = 0; j < n; j++)
            if (strcmp(names[j], e->d_name) == 0)
                fail_msg("readdir returned \"%s\" twice", e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            struct stat st;
            lst(P("d/%s", e->d_name), &st);
            if (e->d_ino != st.st_ino)
                fail_msg("%s: d_ino %llu, st_ino %llu", e->d_name, (unsigned long long)e->d_ino,
                         (unsigned long long)st.st_ino);
            unsigned char type = S_ISDIR(st.st_mode)    ? DT_DIR
                                 : S_ISLNK(st.st_mode)  ? DT_LNK
                                 : S_ISFIFO(st.st_mode) ? DT_FIFO
                                                        : DT_REG;
            if (e->d_type != type)
                fail_msg("%s: d_type %d, expected %d", e->d_name, e->d_type, type);
        }
        n++;
    }
    assert_int_equal(n, total);
    bool dot = false, dotdot = false;
    for (int i = 0; i < n; i++) {
        dot |= strcmp(names[i], ".") == 0;
        dotdot |= strcmp(names[i], "..") == 0;
    }
    assert_true(dot && dotdot);

    /* seekdir to any remembered position resumes there. */
    unsigned r = (unsigned)tm_seed();
    for (int k = 0; k < 60; k++) {
        int i = (int)((unsigned)rand_r(&r) % (unsigned)n);
        seekdir(d, pos[i]);
        e = readdir(d);
        if (!e || strcmp(e->d_name, names[i]) != 0)
            fail_msg("seekdir to entry %d (\"%s\") gave \"%s\"", i, names[i],
                     e ? e->d_name : "(end)");
        if (i + 1 < n) {
            e = readdir(d);
            if (!e || strcmp(e->d_name, names[i + 1]) != 0)
                fail_msg("after entry %d, readdir gave \"%s\", not \"%s\"", i,
                         e ? e->d_name : "(end)", names[i + 1]);
        }
    }
    rewinddir(d);
    int again = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, names[again]) != 0)
            fail_msg("after rewinddir, entry %d is \"%s\", was \"%s\"", again, e->d_name,
                     names[again]);
        again++;
    }
    assert_int_equal(again, n);
    closedir(d);

    /* An empty directory holds "." and ".." only. */
    TM_OK(mkdir(P("empty"), 0755));
    d = opendir(P("empty"));
    int count = 0;
    while ((e = readdir(d)) != NULL) {
        assert_true(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0);
        count++;
    }
    assert_int_equal(count, 2);
    closedir(d);
    free(names);
    free(pos);
}

static void test_fsync(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("f"), 100000, 1);
    int fd = open(P("f"), O_RDWR);
    TM_OK(fd);
    assert_int_equal(write(fd, "x", 1), 1);
    TM_OK(fsync(fd));
    TM_OK(fdatasync(fd));
    TM_OK(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER));
    TM_OK(syncfs(fd));
    close(fd);
    fd = open(P("f"), O_RDONLY);
    TM_OK(fsync(fd));
    close(fd);
    /* LevelDB refuses to run where fsync on a directory fails. */
    TM_OK(mkdir(P("d"), 0755));
    int dfd = open(P("d"), O_RDONLY | O_DIRECTORY);
    TM_OK(dfd);
    TM_OK(fsync(dfd));
    TM_OK(fdatasync(dfd));
    close(dfd);
    dfd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    TM_OK(fsync(dfd));
    close(dfd);
}

static void test_mmap(void **state)
{
    struct tmount *m = *state;
    const size_t size = 256 * KiB;
    tm_make_file(P("f"), size, 31);
    int fd = open(P("f"), O_RDONLY);
    unsigned char *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    char *want = malloc(size);
    tm_fill(want, size, 31, 0);
    tm_check_bytes(map, want, size, "mmap read", 0);
    munmap(map, size);
    close(fd);

    /* A shared writable mapping (SQLite's WAL index uses one). */
    fd = open(P("f"), O_RDWR);
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        fail_msg("shared writable mmap: %s", tm_errname(errno));
    memcpy(map + 5000, "MAPPED", 6);
    memcpy(want + 5000, "MAPPED", 6);
    TM_OK(msync(map, size, MS_SYNC));
    munmap(map, size);
    close(fd);
    char *got = malloc(size + 1);
    assert_int_equal(reread(P("f"), got, size + 1), size);
    tm_check_bytes(got, want, size, "after mmap write", 0);
    free(got);
    free(want);
}

static void test_copy_file_range(void **state)
{
    struct tmount *m = *state;
    const size_t size = MiB + 123;
    tm_make_file(P("src"), size, 41);
    int in = open(P("src"), O_RDONLY);
    int out = open(P("dst"), O_WRONLY | O_CREAT, 0644);
    TM_OK(in);
    TM_OK(out);
    size_t done = 0;
    while (done < size) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, size - done, 0);
        if (n <= 0)
            fail_msg("copy_file_range after %zu bytes: %zd, %s", done, n, tm_errname(errno));
        done += (size_t)n;
    }
    close(in);
    close(out);
    tm_check_file(P("dst"), size, 41);
}

/* ---------------------------------------------------------- permissions */

/* In a child: become uid/gid 65534. NULL, or why not. */
static const char *become_nobody(void)
{
    if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
        return "cannot become 65534";
    return NULL;
}

/* Run fn in a child after become() (NULL: as is); fails the test with the
 * message of either. */
struct child_ctx {
    const char *(*become)(void);
    const char *(*fn)(const struct tmount *);
    struct tmount *m;
};

static const char *child_run(void *ctx)
{
    const struct child_ctx *c = ctx;
    const char *err = c->become ? c->become() : NULL;
    return err != NULL ? err : c->fn(c->m);
}

static void in_child(struct tmount *m, const char *(*become)(void),
                     const char *(*fn)(const struct tmount *))
{
    struct child_ctx c = {become, fn, m};
    tm_in_child("in a child", child_run, &c);
}

/* For the child: a description of the first unexpected result. */
#define EXPECT TM_EXPECT
#define EXPECT_ERR TM_EXPECT_ERR
#define EXPECT_OK TM_EXPECT_OK

static const char *nobody_checks(const struct tmount *m)
{
    struct stat st;
    EXPECT_ERR(open(P("secret"), O_RDONLY), EACCES);
    EXPECT_ERR(access(P("secret"), R_OK), EACCES);
    EXPECT_OK(access(P("secret"), F_OK));
    int fd = open(P("pub"), O_RDONLY);
    EXPECT_OK(fd);
    close(fd);
    EXPECT_ERR(open(P("pub"), O_WRONLY), EACCES);
    EXPECT_ERR(access(P("pub"), W_OK), EACCES);
    EXPECT_ERR(open(P("dir755/new"), O_CREAT | O_WRONLY, 0644), EACCES);
    EXPECT_ERR(mkdir(P("dir755/new"), 0755), EACCES);
    EXPECT_ERR(unlink(P("dir755/inside")), EACCES);
    EXPECT_ERR(chmod(P("pub"), 0777), EPERM);
    EXPECT_ERR(chown(P("pub"), 65534, 65534), EPERM);
    EXPECT_ERR(utimensat(AT_FDCWD, P("pub"), NULL, 0), EACCES);
    EXPECT_ERR(setxattr(P("pub"), "user.x", "x", 1, 0), EACCES);

    /* New files belong to the caller. */
    fd = open(P("dir777/mine"), O_CREAT | O_WRONLY, 0644);
    EXPECT_OK(fd);
    EXPECT_OK(fstat(fd, &st));
    close(fd);
    EXPECT(st.st_uid == 65534 && st.st_gid == 65534, "new file owned by %d:%d", (int)st.st_uid,
           (int)st.st_gid);
    EXPECT_ERR(chown(P("dir777/mine"), 0, (gid_t)-1), EPERM);
    EXPECT_OK(chmod(P("dir777/mine"), 0600));
    EXPECT_OK(utimensat(AT_FDCWD, P("dir777/mine"), NULL, 0));
    /* The sticky bit protects root's file in a shared directory. */
    EXPECT_ERR(unlink(P("sticky/rootfile")), EPERM);
    EXPECT_ERR(rename(P("sticky/rootfile"), P("sticky/x")), EPERM);

    /* setgid directories pass their group on. */
    fd = open(P("sgid/f"), O_CREAT | O_WRONLY, 0644);
    EXPECT_OK(fd);
    EXPECT_OK(fstat(fd, &st));
    close(fd);
    EXPECT(st.st_gid == 4242, "file in setgid dir has gid %d", (int)st.st_gid);
    EXPECT_OK(mkdir(P("sgid/sub"), 0755));
    EXPECT_OK(lstat(P("sgid/sub"), &st));
    EXPECT(st.st_gid == 4242 && (st.st_mode & S_ISGID), "dir in setgid dir: gid %d mode %o",
           (int)st.st_gid, (unsigned)st.st_mode);

    /* A write by someone else clears set-user-ID and set-group-ID. */
    fd = open(P("suid"), O_WRONLY);
    EXPECT_OK(fd);
    EXPECT(write(fd, "x", 1) == 1, "write to suid file: %s", tm_errname(errno));
    close(fd);
    EXPECT_OK(lstat(P("suid"), &st));
    EXPECT((st.st_mode & 07777) == 0777, "suid file mode %o after a write by 65534",
           (unsigned)(st.st_mode & 07777));
    return NULL;
}

static void test_permissions(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("secret"), "s", 1, 0600));
    TM_OK(tm_write_file(P("pub"), "p", 1, 0644));
    TM_OK(chmod(P("secret"), 0600));
    TM_OK(chmod(P("pub"), 0644));
    TM_OK(mkdir(P("dir755"), 0755));
    tm_touch(P("dir755/inside"));
    TM_OK(mkdir(P("dir777"), 0777));
    TM_OK(mkdir(P("sticky"), 0777));
    TM_OK(chmod(P("sticky"), 01777));
    tm_touch(P("sticky/rootfile"));
    TM_OK(mkdir(P("sgid"), 0777));
    TM_OK(chown(P("sgid"), 0, 4242));
    TM_OK(chmod(P("sgid"), 02777));
    TM_OK(tm_write_file(P("suid"), "", 0, 0777));
    TM_OK(chmod(P("suid"), 06777));
    in_child(m, become_nobody, nobody_checks);

    /* Root needs an execute bit somewhere to execute. */
    TM_ERR(access(P("pub"), X_OK), EACCES);
    TM_OK(access(P("suid"), X_OK));
}

/* Does the kernel list default_permissions among the mount's options? */
static bool kernel_checks(const char *path)
{
    FILE *f = fopen("/proc/mounts", "re");
    assert_non_null(f);
    char line[4096], dir[PATH_MAX], opts[4096];
    bool found = false, checks = false;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%*s %4095s %*s %4095s", dir, opts) == 2 && strcmp(dir, path) == 0) {
            found = true;
            checks = false;
            for (char *o = strtok(opts, ","); o != NULL; o = strtok(NULL, ","))
                checks |= strcmp(o, "default_permissions") == 0;
        }
    fclose(f);
    assert_true(found);
    return checks;
}

/* The kernel checks permissions (default_permissions) on every mount, as
 * for ext4, also where only root may enter. */
static void test_kernel_checks_on_every_mount(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    assert_true(kernel_checks(m->mnt));
    struct tmount *other = tm_new("allow_other");
    assert_non_null(other);
    assert_true(kernel_checks(other->mnt));
    assert_int_equal(tm_free(other), 0);
    struct tmount *asked = tm_new("default_permissions");
    assert_non_null(asked);
    assert_true(kernel_checks(asked->mnt));
    assert_int_equal(tm_free(asked), 0);
}

/* In a child, on a root-private mount: keep the uids (the kernel lets in
 * only processes whose uids and gids are all root's) but check files as
 * fsuid/fsgid 65534 with supplementary group 4242. */
static const char *become_fs_nobody(void)
{
    gid_t g = 4242;
    if (setgroups(1, &g) != 0)
        return "setgroups";
    setfsgid(65534);
    setfsuid(65534);
    if ((int)setfsuid((uid_t)-1) != 65534 || (int)setfsgid((gid_t)-1) != 65534)
        return "cannot take fsuid/fsgid 65534";
    return NULL;
}

/* Run from the mount's root: the answers for fsuid 65534. */
static const char *fs_nobody_checks(const struct tmount *m)
{
    (void)m;
    EXPECT_ERR(chdir("d0700"), EACCES);
    EXPECT_OK(chdir("d0710"));                /* supplementary group */
    EXPECT_OK(chdir("../d0701"));             /* other */
    EXPECT_OK(chdir(".."));
    EXPECT_ERR(chdir("d0760"), EACCES);       /* the group class decides */
    EXPECT_OK(faccessat(AT_FDCWD, "f0640", R_OK, AT_EACCESS));
    EXPECT_ERR(faccessat(AT_FDCWD, "f0640", W_OK, AT_EACCESS), EACCES);
    EXPECT_ERR(faccessat(AT_FDCWD, "f0660", R_OK, AT_EACCESS), EACCES); /* not group 0 */
    EXPECT_OK(faccessat(AT_FDCWD, "f0604", R_OK, AT_EACCESS));
    EXPECT_ERR(faccessat(AT_FDCWD, "f0604", W_OK, AT_EACCESS), EACCES);
    return NULL;
}

/* access(2), faccessat(2) and chdir(2) as on ext4: root reads and writes
 * anything, searches any directory, and executes only files with an
 * execute bit; anyone else by owner, group and supplementary groups. */
static void test_access_checks(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(tm_write_file(P("f0644"), "x", 1, 0644));
    TM_OK(tm_write_file(P("f0744"), "x", 1, 0744));
    TM_OK(tm_write_file(P("f0000"), "x", 1, 0000));
    TM_OK(mkdir(P("d0000"), 0000));
    TM_ERR(access(P("f0644"), X_OK), EACCES);
    TM_OK(access(P("f0744"), X_OK));
    TM_OK(access(P("f0000"), R_OK | W_OK));
    TM_ERR(access(P("f0000"), X_OK), EACCES);
    TM_OK(access(P("d0000"), R_OK | W_OK | X_OK));
    TM_ERR(access(P("none"), F_OK), ENOENT);

    TM_OK(mkdir(P("d0700"), 0700));
    TM_OK(mkdir(P("d0710"), 0710));
    TM_OK(chown(P("d0710"), 0, 4242));
    TM_OK(mkdir(P("d0701"), 0701));
    TM_OK(mkdir(P("d0760"), 0760));
    TM_OK(chown(P("d0760"), 0, 4242));
    TM_OK(tm_write_file(P("f0640"), "x", 1, 0640));
    TM_OK(chown(P("f0640"), 0, 4242));
    TM_OK(tm_write_file(P("f0660"), "x", 1, 0660));
    TM_OK(tm_write_file(P("f0604"), "x", 1, 0604));
    int cwd = open(".", O_RDONLY | O_DIRECTORY);
    TM_OK(cwd);
    TM_OK(chdir(m->mnt)); /* the child starts here; it may not walk /tmp */
    in_child(m, become_fs_nobody, fs_nobody_checks);
    TM_OK(fchdir(cwd));
    close(cwd);
}

/* ------------------------------------------- xattr namespaces and ACLs */

static int setup_allow_root(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_posix test", "allow_root");
}

/* An ACL in its xattr form from "tag:id:perm" entries, tag one of u g m o
 * (id -1: the owner/owning group/mask/other entry). Returns its size. */
struct acl_ent {
    char tag;
    int id;
    unsigned perm;
};

static size_t acl_make(char *buf, const struct acl_ent *e, size_t n)
{
    uint32_t v = 2;
    memcpy(buf, &v, 4);
    for (size_t i = 0; i < n; i++) {
        uint16_t tag = e[i].tag == 'u' ? (e[i].id < 0 ? 0x01 : 0x02)
                       : e[i].tag == 'g' ? (e[i].id < 0 ? 0x04 : 0x08)
                       : e[i].tag == 'm' ? 0x10
                                         : 0x20;
        uint16_t perm = (uint16_t)e[i].perm;
        uint32_t id = e[i].id < 0 ? UINT32_MAX : (uint32_t)e[i].id;
        memcpy(buf + 4 + 8 * i, &tag, 2);
        memcpy(buf + 6 + 8 * i, &perm, 2);
        memcpy(buf + 8 + 8 * i, &id, 4);
    }
    return 4 + 8 * n;
}

#define ACL_SET(path, ...)                                                                         \
    do {                                                                                           \
        const struct acl_ent e_[] = {__VA_ARGS__};                                                 \
        char b_[256];                                                                              \
        size_t n_ = acl_make(b_, e_, sizeof e_ / sizeof e_[0]);                                    \
        TM_OK(setxattr(path, "system.posix_acl_access", b_, n_, 0));                               \
    } while (0)

static mode_t mode_of(const char *path)
{
    struct stat st;
    lst(path, &st);
    return st.st_mode & 07777;
}

/* Only ext4's namespaces (user, trusted, security, the two POSIX ACL names
 * of system) are kept; any other name is refused with EOPNOTSUPP, for root
 * as for anyone. */
static const char *namespace_checks(const struct tmount *m)
{
    char big[3000];
    memset(big, 'x', sizeof big);
    EXPECT_ERR(setxattr(P("secret"), "system.evil", big, sizeof big, 0), EOPNOTSUPP);
    EXPECT_ERR(setxattr(P("mine"), "system.evil", "x", 1, 0), EOPNOTSUPP);
    EXPECT_ERR(setxattr(m->mnt, "system.evil", big, sizeof big, 0), EOPNOTSUPP);
    EXPECT_ERR(setxattr(P("mine"), "other.x", "x", 1, 0), EOPNOTSUPP);
    EXPECT_ERR(getxattr(P("mine"), "system.evil", big, sizeof big), EOPNOTSUPP);
    EXPECT_OK(setxattr(P("mine"), "user.ok", "x", 1, 0));
    return NULL;
}

static void test_xattr_namespaces(void **state)
{
    struct tmount *m = *state;
    char buf[64];
    TM_OK(tm_write_file(P("secret"), "s", 1, 0600));
    TM_OK(tm_write_file(P("mine"), "s", 1, 0666));
    TM_OK(chown(P("mine"), 65534, 65534));
    TM_ERR(setxattr(P("secret"), "system.evil", "x", 1, 0), EOPNOTSUPP);
    TM_ERR(setxattr(P("secret"), "system.posix_acl_evil", "x", 1, 0), EOPNOTSUPP);
    TM_ERR(setxattr(m->mnt, "lsmfs.x", "x", 1, 0), EOPNOTSUPP);
    TM_ERR(getxattr(P("secret"), "system.evil", buf, sizeof buf), EOPNOTSUPP);
    TM_ERR(removexattr(P("secret"), "system.evil"), EOPNOTSUPP);
    TM_OK(setxattr(P("secret"), "user.a", "1", 1, 0));
    TM_OK(setxattr(P("secret"), "trusted.a", "2", 1, 0));
    TM_OK(setxattr(P("secret"), "security.a", "3", 1, 0));
    assert_int_equal(getxattr(P("secret"), "trusted.a", buf, sizeof buf), 1);
    in_child(m, become_nobody, namespace_checks);
    assert_int_equal(listxattr(P("mine"), buf, sizeof buf), (ssize_t)sizeof "user.ok");
    /* user. only where ext4 has it: regular files and directories. */
    TM_OK(symlink("secret", P("link")));
    TM_ERR(lsetxattr(P("link"), "user.a", "1", 1, 0), EPERM);
    TM_OK(mkfifo(P("fifo"), 0666));
    TM_ERR(setxattr(P("fifo"), "user.a", "1", 1, 0), EPERM);
}

/* An inode's names must fit one listxattr (64 KiB): past that ENOSPC, as
 * ext4 when the inode's attribute space is full, and listing keeps working
 * (tar --xattrs). */
static void test_xattr_names_stay_listable(void **state)
{
    struct tmount *m = *state;
    tm_touch(P("f"));
    char name[300]; /* the names are 253 bytes */
    int i, err = 0;
    for (i = 0; i < 300 && err == 0; i++) {
        snprintf(name, sizeof name, "user.%03d%0245d", i, 0);
        err = setxattr(P("f"), name, "v", 1, 0) == 0 ? 0 : errno;
    }
    assert_int_equal(err, ENOSPC);
    assert_true(i > 200);
    ssize_t len = listxattr(P("f"), NULL, 0);
    TM_OK(len);
    assert_true(len <= 65536);
    char *list = malloc((size_t)len);
    assert_non_null(list);
    assert_int_equal(listxattr(P("f"), list, (size_t)len), len);
    free(list);
    snprintf(name, sizeof name, "user.%03d%0245d", 0, 0); /* existing names still change */
    TM_OK(setxattr(P("f"), name, "replaced", 8, XATTR_REPLACE));
}

/* become_nobody with supplementary group 4242. */
static const char *become_nobody_4242(void)
{
    gid_t g = 4242;
    if (setgroups(1, &g) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
        return "cannot become 65534 in group 4242";
    return NULL;
}

static const char *nobody_cannot_read(const struct tmount *m)
{
    EXPECT_ERR(open(P("f"), O_RDONLY), EACCES);
    return NULL;
}

static const char *nobody_can_read(const struct tmount *m)
{
    int fd = open(P("f"), O_RDONLY);
    EXPECT_OK(fd);
    close(fd);
    return NULL;
}

/* setfacl -m u:nobody:--- f: nobody may not read the 644 file (ext4:
 * EACCES); the mode keeps its bits (the mask is r--). */
static void test_acl_named_user_enforced(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("f"), "data", 4, 0644));
    in_child(m, become_nobody, nobody_can_read);
    ACL_SET(P("f"), {'u', -1, 6}, {'u', 65534, 0}, {'g', -1, 4}, {'m', -1, 4}, {'o', -1, 4});
    assert_int_equal(mode_of(P("f")), 0644);
    in_child(m, become_nobody, nobody_cannot_read);
    char buf[256];
    assert_int_equal(getxattr(P("f"), "system.posix_acl_access", buf, sizeof buf), 4 + 5 * 8);
}

/* setfacl -m m::--- takes the group's access away and clears the mode's
 * group bits; chmod g+r gives it back through the mask. */
static void test_acl_mask(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("f"), "data", 4, 0640));
    TM_OK(chown(P("f"), 0, 4242));
    in_child(m, become_nobody_4242, nobody_can_read);
    ACL_SET(P("f"), {'u', -1, 6}, {'u', 1000, 7}, {'g', -1, 4}, {'m', -1, 0}, {'o', -1, 0});
    assert_int_equal(mode_of(P("f")), 0600);
    in_child(m, become_nobody_4242, nobody_cannot_read);
    TM_OK(chmod(P("f"), 0640));
    in_child(m, become_nobody_4242, nobody_can_read);
    char buf[256];
    assert_int_equal(getxattr(P("f"), "system.posix_acl_access", buf, sizeof buf), 4 + 5 * 8);
    uint16_t mask_perm;
    memcpy(&mask_perm, buf + 4 + 3 * 8 + 2, 2);
    assert_int_equal(mask_perm, 4);
}

/* In a child: become uid 1000 with fsgid g and supplementary groups n of gs. */
static const char *become_1000_in(gid_t g, const gid_t *gs, size_t n)
{
    if (setgroups(n, gs) || setresgid(g, g, g) || setresuid(1000, 1000, 1000))
        return "cannot become 1000";
    return NULL;
}

static const char *become_1000(void)
{
    return become_1000_in(1000, NULL, 0);
}

static const char *become_1000_4242(void)
{
    const gid_t g = 4242;
    return become_1000_in(1000, &g, 1);
}

static const char *become_1000_fsgid_4242(void)
{
    return become_1000_in(4242, NULL, 0);
}

/* In a child: stay root with every capability but CAP_FSETID, as
 * setpriv --inh-caps=-fsetid --bounding-set=-fsetid. */
static const char *drop_fsetid(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return "capget";
    d[0].effective &= ~(1u << CAP_FSETID);
    d[0].permitted &= ~(1u << CAP_FSETID);
    d[0].inheritable &= ~(1u << CAP_FSETID);
    if (syscall(SYS_capset, &h, d) != 0)
        return "capset";
    return NULL;
}

/* setfacl -m u:2000:r f (mode from the ACL: 0770 and any set-id bits). */
static const char *set_named_acl(const struct tmount *m)
{
    const struct acl_ent e[] = {{'u', -1, 7}, {'u', 2000, 4}, {'g', -1, 7}, {'m', -1, 7},
                                {'o', -1, 0}};
    char b[256];
    size_t n = acl_make(b, e, 5);
    EXPECT_OK(setxattr(P("f"), "system.posix_acl_access", b, n, 0));
    return NULL;
}

/* An ACL that says no more than the mode 0750 (stored as the mode alone). */
static const char *set_mode_acl(const struct tmount *m)
{
    const struct acl_ent e[] = {{'u', -1, 7}, {'g', -1, 5}, {'o', -1, 0}};
    char b[256];
    size_t n = acl_make(b, e, 3);
    EXPECT_OK(setxattr(P("f"), "system.posix_acl_access", b, n, 0));
    return NULL;
}

/* Setting an access ACL clears S_ISGID unless the caller is in the file's
 * group (fsgid or supplementary) or holds CAP_FSETID, as ext4 (the
 * kernel's posix_acl_update_mode); a root without CAP_FSETID loses it too. */
static void test_acl_set_clears_sgid(void **state)
{
    struct tmount *m = *state;
    static const struct {
        const char *(*become)(void);
        const char *(*set)(const struct tmount *);
        mode_t after;
    } cases[] = {
        {become_1000, set_named_acl, 0770},
        {become_1000, set_mode_acl, 0750},
        {become_1000_4242, set_named_acl, 02770},
        {become_1000_fsgid_4242, set_named_acl, 02770},
        {NULL, set_named_acl, 02770},
        {drop_fsetid, set_named_acl, 0770},
        {drop_fsetid, set_mode_acl, 0750},
    };
    TM_OK(tm_write_file(P("f"), "data", 4, 0600));
    TM_OK(chown(P("f"), 1000, 4242));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (removexattr(P("f"), "system.posix_acl_access") != 0 && errno != ENODATA)
            fail_msg("removexattr: %s", tm_errname(errno));
        TM_OK(chmod(P("f"), 02770));
        assert_int_equal(mode_of(P("f")), 02770);
        in_child(m, cases[i].become, cases[i].set);
        if (mode_of(P("f")) != cases[i].after)
            fail_msg("case %zu: mode %o, expected %o", i, mode_of(P("f")), cases[i].after);
    }
}

/* cp -p's way of setting a mode: an ACL equal to a mode is the mode alone;
 * malformed ACLs are refused with EINVAL; default ACLs only on directories. */
static void test_acl_as_mode(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("f"), "data", 4, 0600));
    ACL_SET(P("f"), {'u', -1, 7}, {'g', -1, 5}, {'o', -1, 4});
    assert_int_equal(mode_of(P("f")), 0754);
    char buf[256];
    TM_ERR(getxattr(P("f"), "system.posix_acl_access", buf, sizeof buf), ENODATA);

    /* ext4 keeps duplicate entries (the kernel's posix_acl_valid does not
     * look); lsmfs refuses them, as it does unsorted ones. */
    const struct acl_ent dup[] = {{'u', -1, 6}, {'u', 5, 6}, {'u', 5, 4}, {'g', -1, 4},
                                  {'m', -1, 6}, {'o', -1, 4}};
    size_t n = acl_make(buf, dup, 6);
    if (!m->plain)
        TM_ERR(setxattr(P("f"), "system.posix_acl_access", buf, n, 0), EINVAL);
    const struct acl_ent nomask[] = {{'u', -1, 6}, {'u', 5, 6}, {'g', -1, 4}, {'o', -1, 4}};
    n = acl_make(buf, nomask, 4);
    TM_ERR(setxattr(P("f"), "system.posix_acl_access", buf, n, 0), EINVAL);
    buf[0] = 1; /* version 1: the kernel's answer, as on ext4 */
    TM_ERR(setxattr(P("f"), "system.posix_acl_access", buf, n, 0), EOPNOTSUPP);
    TM_ERR(setxattr(P("f"), "system.posix_acl_access", "\2\0\0\0\1\0", 6, 0), EINVAL);
    const struct acl_ent ok[] = {{'u', -1, 7}, {'g', -1, 7}, {'o', -1, 7}};
    n = acl_make(buf, ok, 3);
    TM_ERR(setxattr(P("f"), "system.posix_acl_default", buf, n, 0), EACCES);
    assert_int_equal(mode_of(P("f")), 0754);
}

/* A directory's default ACL is inherited by new files and directories, and
 * replaces the umask there; elsewhere the umask applies. */
static void test_acl_inherited(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("d"), 0755));
    const struct acl_ent def[] = {{'u', -1, 7}, {'u', 65534, 7}, {'g', -1, 5}, {'m', -1, 7},
                                  {'o', -1, 0}};
    char acl[256], buf[256];
    size_t n = acl_make(acl, def, 5);
    TM_OK(setxattr(P("d"), "system.posix_acl_default", acl, n, 0));
    mode_t old = umask(077);
    int r1 = mkdir(P("d/sub"), 0777);
    int fd = open(P("d/file"), O_CREAT | O_WRONLY, 0666);
    int r2 = mkdir(P("plain"), 0777);
    umask(old);
    TM_OK(r1);
    TM_OK(fd);
    close(fd);
    TM_OK(r2);
    assert_int_equal(mode_of(P("d/sub")), 0770);
    assert_int_equal(mode_of(P("d/file")), 0660);
    assert_int_equal(mode_of(P("plain")), 0700);
    assert_int_equal(getxattr(P("d/sub"), "system.posix_acl_default", buf, sizeof buf), (ssize_t)n);
    assert_memory_equal(buf, acl, n);
    assert_int_equal(getxattr(P("d/file"), "system.posix_acl_access", buf, sizeof buf), (ssize_t)n);
    TM_ERR(getxattr(P("d/file"), "system.posix_acl_default", buf, sizeof buf), ENODATA);
    TM_ERR(getxattr(P("plain"), "system.posix_acl_access", buf, sizeof buf), ENODATA);
}

/* A tree with mixed modes, a setgid directory, access and default ACLs and
 * user xattrs, copied by cp -a, cp -p, rsync -aAX and tar --acls --xattrs
 * onto the mount and onto the local filesystem (ext4 here): the two copies
 * must read back the same (getfacl -R, stat, getfattr -d). */
static const char round_trip_script[] =
    "set -eu\n"
    "src=$1; mnt=$2; loc=$3\n"
    "mkdir -p $src/d755/d750 $src/sg\n"
    "for m in 644 755 750 600; do echo $m > $src/f$m; chmod $m $src/f$m; done\n"
    "echo x > $src/d755/d750/inner; chmod 640 $src/d755/d750/inner\n"
    "chmod 755 $src/d755; chmod 750 $src/d755/d750\n"
    "chown 0:4242 $src/sg; chmod 2775 $src/sg; echo y > $src/sg/g; chmod 664 $src/sg/g\n"
    "setfacl -m u:65534:r-- $src/f600\n"
    "setfacl -m g:4242:rwx,m::r-x $src/f755\n"
    "setfacl -d -m u:65534:rwx,g::r-x,o::--- $src/d755\n"
    "setfattr -n user.color -v blue $src/f644\n"
    "setfattr -n user.empty $src/d755/d750\n"
    "snap() { (cd $1 && find . -print0 | sort -z > ../list && xargs -0 getfacl -p < ../list "
    "&& xargs -0 stat -c '%n %a %u %g' < ../list && xargs -0 getfattr -d -m '^user\\.' < ../list); }\n"
    "copy() { dst=$1; rm -rf $dst/c; mkdir $dst/c; case $2 in\n"
    "  cpa) cp -a $src/. $dst/c/ ;;\n"
    "  cpp) cp -rp $src/. $dst/c/ ;;\n"
    "  rsync) rsync -aAX $src/ $dst/c/ ;;\n"
    "  tar) (cd $src && tar --acls --xattrs -cf - .) | (cd $dst/c && tar --acls --xattrs -xpf -) ;;\n"
    "  esac; }\n"
    "for how in cpa cpp rsync tar; do\n"
    "  copy $loc $how; copy $mnt $how\n"
    "  snap $loc/c > $loc/want; snap $mnt/c > $loc/got\n"
    "  if ! cmp -s $loc/want $loc/got; then echo \"round trip by $how differs:\"; "
    "diff $loc/want $loc/got || true; exit 1; fi\n"
    "done\n";

static void test_copy_round_trips(void **state)
{
    struct tmount *m = *state;
    char src[PATH_MAX], loc[PATH_MAX], script[PATH_MAX + 16];
    assert_int_equal(tm_mkdtemp(src, "acl-src"), 0);
    assert_int_equal(tm_mkdtemp(loc, "acl-local"), 0);
    snprintf(script, sizeof script, "%s/run.sh", loc);
    TM_OK(tm_write_file(script, round_trip_script, strlen(round_trip_script), 0755));
    char *argv[] = {"/bin/sh", script, src, m->mnt, loc, NULL};
    int rc = tm_run(argv, NULL, 60);
    tm_rmtree(src);
    tm_rmtree(loc);
    assert_int_equal(rc, 0);
}

/* -o allow_root: root works in d; another user must not read or append to
 * its files although the kernel has the dentries cached (no LOOKUP). */
static const char *others_kept_out(const struct tmount *m)
{
    EXPECT_ERR(open(P("d/f"), O_RDONLY), EACCES);
    EXPECT_ERR(open(P("d/g"), O_WRONLY | O_APPEND), EACCES);
    return NULL;
}

static void test_allow_root_keeps_others_out(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("d"), 0755));
    TM_OK(tm_write_file(P("d/f"), "root's\n", 7, 0644));
    TM_OK(tm_write_file(P("d/g"), "", 0, 0666));
    TM_OK(chmod(P("d/g"), 0666));
    DIR *d = opendir(P("d"));
    assert_non_null(d);
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL)
        TM_OK(fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW));
    closedir(d);
    in_child(m, become_nobody, others_kept_out);
    struct stat g;
    lst(P("d/g"), &g);
    assert_int_equal(g.st_size, 0);
}

/* In a child: stay uid 0 but drop every capability, as capsh --drop or a
 * container with --cap-drop=ALL. */
static const char *drop_caps(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) != 0)
        return "capset";
    return NULL;
}

static const char *capless_root_checks(const struct tmount *m)
{
    EXPECT_ERR(open(P("f"), O_RDONLY), EACCES);
    EXPECT_ERR(chown(P("f"), 0, 0), EPERM);
    EXPECT_ERR(chmod(P("f"), 04777), EPERM);
    struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    EXPECT_ERR(utimensat(AT_FDCWD, P("f"), t, 0), EPERM);
    return NULL;
}

/* A root that dropped CAP_DAC_OVERRIDE, CAP_CHOWN, CAP_FOWNER and
 * CAP_FSETID is refused on a mount only root can enter, as on ext4. */
static void test_capless_root_refused(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("f"), "uid 1000's\n", 11, 0600));
    TM_OK(chown(P("f"), 1000, 1000));
    in_child(m, drop_caps, capless_root_checks);
    struct stat st;
    lst(P("f"), &st);
    assert_int_equal(st.st_uid, 1000);
    assert_int_equal(st.st_mode & 07777, 0600);
}

int main(void)
{
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_create_excl, setup),
        TM_TEST(test_open_errors, setup),
        TM_TEST(test_open_trunc, setup),
        TM_TEST(test_append, setup),
        TM_TEST(test_read_eof, setup),
        TM_TEST(test_rw_random, setup),
        TM_TEST(test_sparse, setup),
        TM_TEST(test_blocks_count_what_is_stored, setup),
        TM_TEST(test_blocks_count_what_is_stored, setup_writeback),
        TM_TEST(test_truncate, setup),
        TM_TEST(test_large_offsets, setup),
        TM_TEST(test_write_crossing_max_size, setup),
        TM_TEST(test_write_crossing_max_size, setup_writeback),
        TM_TEST(test_mkdir_rmdir, setup),
        TM_TEST(test_unlink, setup),
        TM_TEST(test_inode_numbers, setup),
        TM_TEST(test_symlink, setup),
        TM_TEST(test_hardlinks, setup),
        TM_TEST(test_name_max, setup),
        TM_TEST(test_rename_files, setup),
        TM_TEST(test_rename_dirs, setup),
        TM_TEST(test_rename_noreplace, setup),
        TM_TEST(test_rename_exchange, setup),
        TM_TEST(test_rename_whiteout, setup),
        TM_TEST(test_mknod, setup),
        TM_TEST(test_chmod_chown, setup),
        TM_TEST(test_utimens, setup),
        TM_TEST(test_timestamps, setup),
        TM_TEST(test_xattr, setup),
        TM_TEST(test_statfs, setup),
        TM_TEST(test_fallocate, setup),
        TM_TEST(test_seek_data_hole, setup),
        TM_TEST(test_seek_data_hole, setup_writeback),
        TM_TEST(test_seek_sees_cached_writes, setup_writeback),
        TM_TEST(test_unlink_while_open, setup),
        TM_TEST(test_readdir_seek, setup),
        TM_TEST(test_fsync, setup),
        TM_TEST(test_mmap, setup),
        TM_TEST(test_copy_file_range, setup),
        TM_TEST(test_permissions, setup_allow_other),
        TM_TEST(test_kernel_checks_on_every_mount, setup),
        TM_TEST(test_access_checks, setup),
        TM_TEST(test_xattr_namespaces, setup_allow_other),
        TM_TEST(test_xattr_names_stay_listable, setup),
        TM_TEST(test_acl_named_user_enforced, setup_allow_other),
        TM_TEST(test_acl_mask, setup_allow_other),
        TM_TEST(test_acl_set_clears_sgid, setup_allow_other),
        TM_TEST(test_acl_as_mode, setup),
        TM_TEST(test_acl_inherited, setup),
        TM_TEST(test_copy_round_trips, setup),
        TM_TEST(test_allow_root_keeps_others_out, setup_allow_root),
        TM_TEST(test_unlink_while_open_with_open_requests, setup_allow_root),
        TM_TEST(test_capless_root_refused, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
