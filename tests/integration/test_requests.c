/*
 * test_requests — the store work a request costs (issue 6).
 *
 * Every FUSE request is a round trip the application waits for, and what
 * the daemon does inside one adds to it. These tests read the daemon's own
 * counters of store point reads ("fs store gets") and writes from the
 * root's user.lsmfs.stats attribute around a system call, and check that a
 * call costs no more than it must: the kernel's security.capability query
 * before a write, a write that replaces every stored byte it touches, ...
 * Each also checks the result (content read back from the daemon, after a
 * remount and a clean fsck), so a request made cheaper by doing less than
 * it must fails here too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_requests test", NULL);
}

static int setup_writeback(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_requests test", "writeback");
}

static uint64_t gets(const struct tmount *m)
{
    return tm_stats_counter(m, "fs store gets");
}

/* An inode without extended attributes answers getxattr and listxattr
 * (the kernel asks security.capability before every write) from the inode
 * cache; one with them still finds them in the store. */
static void test_xattr_queries_of_inode_without_any(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *f = P("f");
    tm_touch(f);
    char buf[64];
    uint64_t g0 = gets(m);
    TM_ERR(getxattr(f, "security.capability", buf, sizeof buf), ENODATA);
    TM_ERR(getxattr(f, "user.a", buf, sizeof buf), ENODATA);
    assert_int_equal(listxattr(f, buf, sizeof buf), 0);
    assert_int_equal(gets(m) - g0, 0);

    TM_OK(setxattr(f, "user.a", "v1", 2, 0));
    assert_int_equal(getxattr(f, "user.a", buf, sizeof buf), 2);
    assert_memory_equal(buf, "v1", 2);
    assert_int_equal(listxattr(f, buf, sizeof buf), (int)sizeof "user.a");
    TM_OK(removexattr(f, "user.a"));
    TM_ERR(getxattr(f, "user.a", buf, sizeof buf), ENODATA);
    assert_int_equal(listxattr(f, buf, sizeof buf), 0);

    TM_OK(setxattr(f, "user.b", "v2", 2, 0));
    tm_remount_checked(m);
    assert_int_equal(getxattr(f, "user.b", buf, sizeof buf), 2);
    assert_memory_equal(buf, "v2", 2);
    TM_ERR(getxattr(P("."), "user.b", buf, sizeof buf), ENODATA);
}

/* Creates f (O_EXCL, read-write); *cs: the chunk size (st_blksize). */
static int create_chunked(const char *f, size_t *cs)
{
    int fd = open(f, O_CREAT | O_EXCL | O_RDWR, 0644);
    TM_OK(fd);
    struct stat st;
    TM_OK(fstat(fd, &st));
    *cs = (size_t)st.st_blksize;
    return fd;
}

/* pwrite of n bytes of pattern `seed` at off, mirrored into `want`. */
static void put(int fd, char *want, size_t n, off_t off, uint64_t seed)
{
    tm_fill(want + off, n, seed, (uint64_t)off);
    TM_OK(tm_pwrite_all(fd, want + off, n, off));
}

/* The writes of test_write_reads_only_what_it_keeps, each with the store
 * reads it costs as a WRITE of its own. With -o writeback (wb) the counts
 * are the same for another reason: the kernel merges writes in its cache
 * and writes back whole pages (cropped at the size), so with chunks of one
 * page each WRITE replaces all of its chunk's stored bytes and none
 * merges, but one landing below the size of this sparse file (chunks 2
 * and 3 are holes) asks the store whether its chunk was there (the chunk
 * count). Written back after each write by sync_file_range: fsync would
 * also send the kernel's times when its clock ticked, a SETATTR that reads
 * an inline file's payload. */
static void write_counting(int fd, char *want, size_t cs, const struct tmount *m, bool wb)
{
    const struct {
        size_t n, off;
        uint64_t reads;
    } w[] = {{1 * KiB, 0, 0},                  /* new file, inline */
             {3 * KiB, 0, 0},                  /* rewrites all of it */
             {cs + 100, 0, 0},                 /* moves out of line, rewriting all */
             {3 * cs / 2, 4 * cs, 0},          /* chunks 4 and 5: past the end */
             {cs / 4, 4 * cs + 3 * cs / 2, 1}, /* append into chunk 5: keeps its bytes */
             {100, 50, 1}};                    /* inside chunk 0: keeps the rest */
    if (wb)
        assert_int_equal(cs, (size_t)sysconf(_SC_PAGESIZE));
    uint64_t g0 = gets(m), reads = 0;
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        put(fd, want, w[i].n, (off_t)w[i].off, i + 1);
        if (wb)
            TM_OK(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                                SYNC_FILE_RANGE_WAIT_AFTER));
        reads += w[i].reads;
        assert_int_equal(gets(m) - g0, reads);
    }
}

/* A write that replaces every stored byte of the inline payload or chunk
 * it lands in (a new file, an append starting a chunk, a rewrite from 0 to
 * the end) reads nothing first; one that keeps stored bytes reads them.
 * With -o writeback the kernel decides what the WRITEs cover:
 * write_counting. */
static void test_write_reads_only_what_it_keeps(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *f = P("f");
    size_t cs;
    int fd = create_chunked(f, &cs);
    assert_true(cs >= 4 * KiB);
    const size_t size = 16 * cs;
    char *want = calloc(1, size);
    assert_non_null(want);
    write_counting(fd, want, cs, m, tm_has_opt(m, "writeback"));
    TM_OK(close(fd));
    size_t len = 4 * cs + 3 * cs / 2 + cs / 4;
    assert_true(tm_hash_file(f) == tm_hash(want, len, TM_HASH_INIT));
    tm_remount_checked(m);
    struct stat st;
    TM_OK(stat(f, &st));
    assert_int_equal(st.st_size, (off_t)len);
    assert_true(tm_hash_file(f) == tm_hash(want, len, TM_HASH_INIT));
    free(want);
}

/* A file grown by truncate has a payload shorter than its size: a write
 * from 0 to past the old size still replaces all of it. */
static void test_write_after_truncate_up(void **state)
{
    struct tmount *m = *state;
    char want[6 * KiB];
    memset(want, 0, sizeof want);
    const char *f = P("f");
    int fd = open(f, O_CREAT | O_EXCL | O_RDWR, 0644);
    TM_OK(fd);
    put(fd, want, 500, 0, 7);
    TM_OK(ftruncate(fd, 2 * KiB));
    put(fd, want, 100, 1500, 8); /* into the zeros past the payload */
    put(fd, want, 3 * KiB, 3 * KiB, 9);
    TM_OK(close(fd));
    assert_true(tm_hash_file(f) == tm_hash(want, sizeof want, TM_HASH_INIT));
    tm_remount_checked(m);
    assert_true(tm_hash_file(f) == tm_hash(want, sizeof want, TM_HASH_INIT));
}

/* A large write below the size of a sparse file (one preallocated, as fio
 * and cp do) learns which of its chunks were stored, for the chunk count,
 * by one scan: it read each chunk by a point read (256 for a 1 MiB write
 * of 4 KiB chunks). The count and the content stay right. */
static void test_write_into_sparse_file_scans_once(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *f = P("f");
    size_t cs;
    int fd = create_chunked(f, &cs);
    const size_t n = 64 * cs, size = 4 * n;
    struct stat st;
    char *want = calloc(1, size);
    assert_non_null(want);
    TM_OK(ftruncate(fd, (off_t)size));
    put(fd, want, cs, (off_t)(3 * cs), 1); /* stored chunks inside the write below */
    put(fd, want, 10, (off_t)(40 * cs + 5), 2);
    uint64_t g0 = gets(m), s0 = tm_stats_counter(m, "fs store scans");
    put(fd, want, n, 0, 3); /* chunks 0..63: two of them were stored */
    assert_in_range(gets(m) - g0, 0, 4);
    assert_int_equal(tm_stats_counter(m, "fs store scans") - s0, 1);
    put(fd, want, n, (off_t)(2 * n), 4); /* chunks 128..191: none stored */
    TM_OK(fstat(fd, &st));
    assert_int_equal(st.st_blocks, (blkcnt_t)(2 * n / 512));
    TM_OK(close(fd));
    assert_true(tm_hash_file(f) == tm_hash(want, size, TM_HASH_INIT));
    tm_remount_checked(m);
    assert_true(tm_hash_file(f) == tm_hash(want, size, TM_HASH_INIT));
    TM_OK(stat(f, &st));
    assert_int_equal(st.st_blocks, (blkcnt_t)(2 * n / 512));
    free(want);
}

static uint64_t ino_of(const char *path)
{
    struct stat st;
    TM_OK(stat(path, &st));
    return (uint64_t)st.st_ino;
}

/* Waits (5 s at most) until the reclaimer has freed `n` orphans in all. */
static void wait_reclaimed(const struct tmount *m, uint64_t n)
{
    for (int i = 0; i < 500 && tm_stats_counter(m, "fs orphans reclaimed") < n; i++)
        tm_sleep_ms(10);
    assert_true(tm_stats_counter(m, "fs orphans reclaimed") >= n);
}

/* Lists `dir` (readdir of the whole directory). */
static void list_dir(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    while (readdir(d) != NULL) {
    }
    closedir(d);
}

/* unlink and rmdir read the entry once, under the directory's lock, when
 * the inode is numbered above its directory, and not at all once the
 * directory's entries are in memory (made by mkdir or a readdir); below
 * (a hard link into a newer directory, an older directory moved into it)
 * they still work. */
static void test_unlink_reads_entry_once(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("d"), 0755));
    tm_make_file(P("d/big"), 20 * KiB, 1); /* chunked: no payload to keep */
    tm_make_file(P("d/big2"), 20 * KiB, 1);
    tm_remount_checked(m); /* no directory listed in memory */
    /* Held open, so that the reclaimer (which reads it when the kernel lets
     * go of it) does not run while the gets are counted. */
    int fd = open(P("d/big"), O_RDONLY);
    TM_OK(fd);
    uint64_t g0 = gets(m);
    TM_OK(unlink(P("d/big")));
    assert_int_equal(gets(m) - g0, 1);
    TM_OK(close(fd));
    wait_reclaimed(m, 1); /* its reads done before the next count */
    TM_ERR(unlink(P("d/big")), ENOENT);
    list_dir(P("d"));
    fd = open(P("d/big2"), O_RDONLY);
    TM_OK(fd);
    g0 = gets(m);
    TM_OK(unlink(P("d/big2")));
    assert_int_equal(gets(m) - g0, 0);
    TM_OK(close(fd));

    TM_OK(mkdir(P("old"), 0755));
    tm_make_file(P("f"), 100, 2);
    TM_OK(mkdir(P("newer"), 0755));
    assert_true(ino_of(P("f")) < ino_of(P("newer")));
    TM_OK(link(P("f"), P("newer/g")));
    TM_OK(rename(P("old"), P("newer/old")));
    TM_OK(unlink(P("newer/g")));
    TM_OK(rmdir(P("newer/old")));
    TM_ERR(rmdir(P("newer/old")), ENOENT);
    struct stat st;
    TM_OK(stat(P("f"), &st));
    assert_int_equal(st.st_nlink, 1);
    tm_check_file(P("f"), 100, 2);
    tm_remount_checked(m);
    tm_check_file(P("f"), 100, 2);
    TM_OK(rmdir(P("newer")));
}

/* rename reads each name once, under the directories' locks, when both
 * inodes are numbered above both directories (a maildir delivery), and not
 * at all from directories whose entries are in memory; an inode numbered
 * below takes the general path. */
static void test_rename_reads_entries_once(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_make_file(P("early"), 20 * KiB, 3);
    TM_OK(mkdir(P("tmp"), 0755));
    TM_OK(mkdir(P("new"), 0755));
    tm_make_file(P("tmp/a"), 20 * KiB, 4);
    tm_make_file(P("tmp/b"), 20 * KiB, 5);
    tm_make_file(P("new/b"), 20 * KiB, 6);
    tm_make_file(P("tmp/c"), 20 * KiB, 7);
    tm_remount_checked(m); /* no directory listed in memory */
    int fd = open(P("new/b"), O_RDONLY); /* keeps the reclaimer away (above) */
    TM_OK(fd);
    TM_OK(stat(P("tmp/a"), &(struct stat){0}));
    TM_OK(stat(P("tmp/b"), &(struct stat){0}));
    uint64_t g0 = gets(m);
    /* The kernel looks the target name up before every rename (1 get). */
    TM_OK(rename(P("tmp/a"), P("new/a")));
    assert_int_equal(gets(m) - g0, 3);
    TM_OK(rename(P("tmp/b"), P("new/b"))); /* replaces new/b */
    assert_int_equal(gets(m) - g0, 6);
    TM_OK(close(fd));
    wait_reclaimed(m, 1);
    list_dir(P("tmp"));
    list_dir(P("new"));
    g0 = gets(m);
    TM_OK(rename(P("tmp/c"), P("new/c")));
    assert_int_equal(gets(m) - g0, 0);
    TM_OK(rename(P("early"), P("new/early"))); /* numbered below both */
    TM_OK(rename(P("new/a"), P("tmp/a2")));
    TM_ERR(stat(P("tmp/a"), &(struct stat){0}), ENOENT);
    tm_remount_checked(m);
    tm_check_file(P("tmp/a2"), 20 * KiB, 4);
    tm_check_file(P("new/b"), 20 * KiB, 5);
    tm_check_file(P("new/c"), 20 * KiB, 7);
    tm_check_file(P("new/early"), 20 * KiB, 3);
    TM_ERR(stat(P("early"), &(struct stat){0}), ENOENT);
}

/* A read of a few chunks gets them one by one (cheaper than a store
 * iterator); a long one scans. */
static void test_read_of_few_chunks_without_scan(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_make_file(P("f"), 4, 1); /* learn the chunk size */
    struct stat st;
    TM_OK(stat(P("f"), &st));
    const size_t cs = (size_t)st.st_blksize;
    tm_make_file(P("three"), 3 * cs - 100, 2);
    tm_make_file(P("many"), 64 * cs, 3);
    uint64_t g0 = gets(m), s0 = tm_stats_counter(m, "fs store scans");
    tm_check_file(P("three"), 3 * cs - 100, 2); /* one READ request */
    assert_int_equal(gets(m) - g0, 3);
    assert_int_equal(tm_stats_counter(m, "fs store scans") - s0, 0);
    tm_check_file(P("many"), 64 * cs, 3);
    assert_true(tm_stats_counter(m, "fs store scans") - s0 >= 1);
}

/* Reads the whole of path into buf (cap bytes); returns its length. */
static size_t read_all(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    TM_OK(fd);
    ssize_t n = read(fd, buf, cap);
    TM_OK(n);
    close(fd);
    return (size_t)n;
}

/* A small file's bytes are inline, under a key apart from its record
 * (format 4): a cold open and read of it cost one get of the entry, one of
 * the record and one of the bytes, and the record is not loaded again;
 * appends load the bytes once (a READ, under the inode's read lock, does
 * not keep them), then keep them; a chmod loads nothing. The content is
 * checked, also after a remount. */
static void test_small_file_record_loaded_once(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    char want[3050], got[4096];
    for (size_t i = 0; i < sizeof want; i++)
        want[i] = (char)('a' + i % 23);
    int fd = open(P("small"), O_CREAT | O_WRONLY, 0644);
    TM_OK(fd);
    assert_int_equal(write(fd, want, 3000), 3000);
    close(fd);
    tm_remount_checked(m);
    uint64_t g0 = gets(m);
    assert_int_equal(read_all(P("small"), got, sizeof got), 3000); /* LOOKUP, READ */
    assert_int_equal(gets(m) - g0, 3);
    assert_memory_equal(got, want, 3000);
    fd = open(P("small"), O_WRONLY | O_APPEND);
    TM_OK(fd);
    g0 = gets(m);
    for (int i = 0; i < 5; i++)
        assert_int_equal(write(fd, want + 3000 + 10 * i, 10), 10);
    TM_OK(fchmod(fd, 0600));
    assert_int_equal(gets(m) - g0, 1);
    close(fd);
    for (int pass = 0; pass < 2; pass++) {
        memset(got, 0, sizeof got);
        assert_int_equal(read_all(P("small"), got, sizeof got), sizeof want);
        assert_memory_equal(got, want, sizeof want);
        tm_remount_checked(m);
    }
}

/* An unlinked file of a few chunks is freed in one batch, its chunks
 * deleted by name when the kernel lets go of it: no scan, no reclaimer. A
 * larger one goes to the reclaimer. Neither leaves a key behind (fsck). */
static void test_small_file_freed_without_reclaimer(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    long long base = tm_inodes_used(m);
    tm_make_file(P("small"), 10 * KiB, 1);
    tm_make_file(P("large"), 2 * MiB, 2);
    uint64_t s0 = tm_stats_counter(m, "fs store scans");
    uint64_t r0 = tm_stats_counter(m, "fs orphans reclaimed");
    TM_OK(unlink(P("small")));
    tm_wait_inodes(m, base + 1, 5);
    assert_int_equal(tm_stats_counter(m, "fs store scans") - s0, 0);
    assert_int_equal(tm_stats_counter(m, "fs orphans reclaimed") - r0, 0);
    TM_OK(unlink(P("large")));
    wait_reclaimed(m, r0 + 1);
    tm_wait_inodes(m, base, 5);
    tm_remount_checked(m);
    assert_int_equal(tm_inodes_used(m), base);
}

/* Files unlinked while open are freed when the kernel lets go of them
 * (closing them): not one store write each on the FUSE thread, but
 * together, in few batches, by the reclaimer (a crash amid them: test_crash's
 * test_orphan_batches_crash). */
static void test_small_orphans_freed_in_batches(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    enum { N = 100 };
    long long base = tm_inodes_used(m);
    int fd[N];
    for (int i = 0; i < N; i++) {
        tm_make_file(P("f%d", i), 1000, (uint64_t)i);
        fd[i] = open(P("f%d", i), O_RDONLY);
        TM_OK(fd[i]);
    }
    tm_make_file(P("kept"), 1000, 1000);
    for (int i = 0; i < N; i++)
        TM_OK(unlink(P("f%d", i)));
    uint64_t w0 = tm_stats_counter(m, "fs store writes");
    uint64_t f0 = tm_stats_counter(m, "fs orphans freed in batches");
    uint64_t b0 = tm_stats_counter(m, "fs orphan batches");
    for (int i = 0; i < N; i++) {
        char c;
        assert_int_equal(pread(fd[i], &c, 1, 999), 1);
        TM_OK(close(fd[i]));
    }
    tm_wait_inodes(m, base + 1, 5);
    uint64_t freed = tm_stats_counter(m, "fs orphans freed in batches") - f0;
    uint64_t batches = tm_stats_counter(m, "fs orphan batches") - b0;
    assert_int_equal(freed, N);
    if (batches > N / 2)
        fail_msg("%d orphans freed in %llu batches", N, (unsigned long long)batches);
    assert_int_equal(tm_stats_counter(m, "fs store writes") - w0, batches);
    for (int i = 0; i < N; i++)
        TM_ERR(lstat(P("f%d", i), &(struct stat){0}), ENOENT);
    tm_check_file(P("kept"), 1000, 1000);
    tm_remount_checked(m);
    assert_int_equal(tm_inodes_used(m), base + 1);
    tm_check_file(P("kept"), 1000, 1000);
}

/* Truncating a large file deletes its chunks in bounded batches, from the
 * end (each batch lowers the size: a crash between them leaves a file cut
 * at a chunk boundary between the two sizes, never a hole), as the
 * reclaimer frees an unlinked one: not one batch holding every delete. */
static void test_truncate_of_large_file_in_batches(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_make_file(P("big"), 32 * MiB, 5);
    struct stat st;
    TM_OK(stat(P("big"), &st));
    const uint64_t chunks = 32 * MiB / (uint64_t)st.st_blksize;
    uint64_t w0 = tm_stats_counter(m, "fs store writes");
    TM_OK(truncate(P("big"), 3 * MiB + 5));
    uint64_t writes = tm_stats_counter(m, "fs store writes") - w0;
    if (writes < chunks / 1024)
        fail_msg("deleting %llu chunks took %llu store writes", (unsigned long long)chunks,
                 (unsigned long long)writes);
    TM_OK(stat(P("big"), &st));
    assert_int_equal(st.st_size, 3 * MiB + 5);
    tm_check_file(P("big"), 3 * MiB + 5, 5);
    tm_remount_checked(m);
    tm_check_file(P("big"), 3 * MiB + 5, 5);
}

/* Requests of one kind the daemon served (0 before the first). */
static uint64_t requests(const struct tmount *m, const char *op)
{
    static char buf[16384];
    ssize_t n = getxattr(m->mnt, "user.lsmfs.stats", buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", op);
    const char *p = strstr(buf, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Once the kernel opens files without OPEN requests, new files are made by
 * MKNOD (CREATE is declined): a CREATE hands out a handle the kernel must
 * RELEASE at close, one more request per file. Creating still behaves:
 * mode and content as asked, O_EXCL holds. */
static void test_create_without_release(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_make_file(P("first"), 10, 1); /* the kernel learns both */
    tm_sleep_ms(50);                 /* its RELEASE, if any, is async */
    uint64_t r0 = requests(m, "release"), c0 = requests(m, "create");
    uint64_t k0 = requests(m, "mknod");
    char want[100];
    memset(want, 'q', sizeof want);
    for (int i = 0; i < 10; i++) {
        int fd = open(P("f%d", i), O_CREAT | O_EXCL | O_WRONLY, 0444);
        TM_OK(fd);
        assert_int_equal(write(fd, want, sizeof want), (ssize_t)sizeof want);
        TM_OK(close(fd));
    }
    TM_ERR(open(P("f0"), O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
    tm_sleep_ms(50);
    assert_int_equal(requests(m, "release") - r0, 0);
    assert_int_equal(requests(m, "create") - c0, 0);
    assert_int_equal(requests(m, "mknod") - k0, 10);
    tm_remount_checked(m);
    for (int i = 0; i < 10; i++) {
        struct stat st;
        TM_OK(stat(P("f%d", i), &st));
        assert_int_equal(st.st_mode, S_IFREG | 0444);
        assert_int_equal(st.st_size, (off_t)sizeof want);
        char got[sizeof want];
        int fd = open(P("f%d", i), O_RDONLY);
        TM_OK(fd);
        assert_int_equal(read(fd, got, sizeof got), (ssize_t)sizeof got);
        TM_OK(close(fd));
        assert_memory_equal(got, want, sizeof want);
    }
}

static uint64_t scans(const struct tmount *m)
{
    return tm_stats_counter(m, "fs store scans");
}

#define NAMES 64

/* What a directory must list: names (by index) and their inode numbers. */
typedef struct dir_model {
    uint64_t ino[NAMES]; /* 0: absent */
} dir_model;

/* readdir of path must list exactly the model's names, each once, with
 * its inode number. */
static void check_listing(const char *path, const dir_model *want)
{
    bool seen[NAMES] = {false};
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int i = -1;
        if (sscanf(e->d_name, "n%d", &i) != 1 || i < 0 || i >= NAMES || seen[i] ||
            want->ino[i] != (uint64_t)e->d_ino) {
            char msg[512]; /* e lives in d: describe it before closing d */
            snprintf(msg, sizeof msg, "%s: unexpected entry %s (ino %llu, want %llu, seen %d)",
                     path, e->d_name, (unsigned long long)e->d_ino,
                     (unsigned long long)(i >= 0 && i < NAMES ? want->ino[i] : 0),
                     i >= 0 && i < NAMES ? seen[i] : -1);
            closedir(d);
            fail_msg("%s", msg);
        }
        seen[i] = true;
        n++;
    }
    closedir(d);
    for (int i = 0; i < NAMES; i++)
        if (want->ino[i] != 0 && !seen[i])
            fail_msg("%s: n%d missing", path, i);
}

/* One random change among two directories, mirrored in the models:
 * create, unlink, rename (within or across, replacing or not), exchange,
 * hard link. */
static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void random_change(struct tmount *m, dir_model *dm, uint64_t *rng)
{
    static const char *const dirs[2] = {"a", "b"};
    int da = (int)(next_rand(rng) % 2), db = (int)(next_rand(rng) % 2);
    int i = (int)(next_rand(rng) % NAMES), j = (int)(next_rand(rng) % NAMES);
    const char *src = P("%s/n%d", dirs[da], i), *dst = P("%s/n%d", dirs[db], j);
    dir_model *ms = &dm[da], *md = &dm[db];
    switch (next_rand(rng) % 5) {
    case 0:
        if (ms->ino[i] == 0) {
            tm_touch(src);
            ms->ino[i] = ino_of(src);
        }
        break;
    case 1:
        if (ms->ino[i] != 0) {
            TM_OK(unlink(src));
            ms->ino[i] = 0;
        }
        break;
    case 2:
        if (ms->ino[i] != 0 && (ms != md || i != j)) {
            TM_OK(rename(src, dst));
            /* Onto another link of the same file, rename does nothing
             * (POSIX): both names stay. */
            if (md->ino[j] != ms->ino[i]) {
                md->ino[j] = ms->ino[i];
                ms->ino[i] = 0;
            }
        }
        break;
    case 3:
        if (ms->ino[i] != 0 && md->ino[j] != 0) {
            TM_OK(syscall(SYS_renameat2, AT_FDCWD, src, AT_FDCWD, dst, RENAME_EXCHANGE));
            uint64_t t = ms->ino[i];
            ms->ino[i] = md->ino[j];
            md->ino[j] = t;
        }
        break;
    default:
        if (ms->ino[i] != 0 && md->ino[j] == 0) {
            TM_OK(link(src, dst));
            md->ino[j] = ms->ino[i];
        }
    }
}

/* Directories made in this mount have their entries in memory from mkdir
 * on: listings and lookups in them read nothing from the store, and stay
 * exact through every kind of change; after a remount the first listing
 * reads the store once and the next ones do not. */
static void test_listings_in_memory(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("a"), 0755));
    TM_OK(mkdir(P("b"), 0755));
    dir_model dm[2];
    memset(dm, 0, sizeof dm);
    uint64_t rng = tm_seed() | 1;
    for (int round = 0; round < 8; round++) {
        for (int step = 0; step < 60; step++)
            random_change(m, dm, &rng);
        uint64_t s0 = scans(m), g0 = gets(m);
        check_listing(P("a"), &dm[0]);
        check_listing(P("b"), &dm[1]);
        TM_ERR(stat(P("a/none%d", round), &(struct stat){0}), ENOENT);
        assert_int_equal(scans(m) - s0, 0);
        assert_int_equal(gets(m) - g0, 0);
    }
    tm_remount_checked(m);
    uint64_t s0 = scans(m);
    check_listing(P("a"), &dm[0]);
    assert_int_equal(scans(m) - s0, 1);
    for (int step = 0; step < 60; step++) /* changes invalidate the kernel's copy */
        random_change(m, dm, &rng);
    s0 = scans(m);
    check_listing(P("a"), &dm[0]);
    assert_int_equal(scans(m) - s0, 0);
    check_listing(P("b"), &dm[1]); /* its first listing since the remount */
    assert_int_equal(scans(m) - s0, 1);
    tm_remount_checked(m);
    check_listing(P("a"), &dm[0]);
    check_listing(P("b"), &dm[1]);
}

/* Makes a chain of `depth` directories "d" below dir (an open fd) and
 * returns an open fd of the deepest. */
static int make_chain(int dir, int depth)
{
    int fd = dup(dir);
    TM_OK(fd);
    for (int i = 0; i < depth; i++) {
        TM_OK(mkdirat(fd, "d", 0755));
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
        TM_OK(next);
        TM_OK(close(fd));
        fd = next;
    }
    return fd;
}

/* Moving a directory to another one checks it is not moved below itself
 * by walking the new parent's ancestors: from the inode cache (the kernel
 * holds every ancestor of a directory it works in), not one store read
 * each. The moves are exact; moving a directory below itself fails. */
static void test_deep_directory_rename_reads_nothing(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    enum { DEPTH = 3000 };
    int top = open(m->mnt, O_RDONLY | O_DIRECTORY);
    TM_OK(top);
    int deep = make_chain(top, DEPTH);
    TM_OK(mkdirat(top, "x", 0755));
    TM_OK(mkdirat(top, "x/inner", 0700));
    uint64_t g0 = gets(m);
    TM_OK(renameat(top, "x", deep, "x"));
    TM_OK(renameat(deep, "x", top, "y"));
    TM_OK(renameat(top, "y", deep, "z"));
    uint64_t got = gets(m) - g0;
    if (got > 4 && close(deep) == 0 && close(top) == 0)
        fail_msg("3 renames at depth %d read %llu records", DEPTH, (unsigned long long)got);
    TM_ERR(renameat(top, "d", deep, "loop"), EINVAL);
    TM_OK(close(deep));
    TM_OK(close(top));
    tm_remount_checked(m);
    top = open(m->mnt, O_RDONLY | O_DIRECTORY);
    TM_OK(top);
    deep = openat(top, "d", O_RDONLY | O_DIRECTORY);
    TM_OK(deep);
    for (int i = 1; i < DEPTH; i++) {
        int next = openat(deep, "d", O_RDONLY | O_DIRECTORY);
        TM_OK(next);
        TM_OK(close(deep));
        deep = next;
    }
    struct stat st;
    TM_OK(fstatat(deep, "z/inner", &st, 0));
    assert_int_equal(st.st_mode, S_IFDIR | 0700);
    TM_OK(renameat(deep, "z", top, "x"));
    TM_OK(fstatat(top, "x/inner", &st, 0));
    TM_OK(close(deep));
    TM_OK(close(top));
}

/* Lists dir (expecting `want` names besides . and ..) and returns the
 * READDIR and READDIRPLUS requests the daemon served meanwhile. */
static uint64_t listing_requests(const struct tmount *m, const char *dir, int want)
{
    uint64_t r0 = tm_stats_requests(m, "readdir") + tm_stats_requests(m, "readdirplus");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    assert_int_equal(n, want);
    return tm_stats_requests(m, "readdir") + tm_stats_requests(m, "readdirplus") - r0;
}

/* Filling the kernel's listing cache costs a listing a third of its time,
 * so the kernel caches a directory only from its second listing without a
 * change in between: the first two listings reach the daemon, the later
 * ones do not, and any change starts over. */
static void test_listing_cached_from_second(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("d"), 0755));
    for (int i = 0; i < 300; i++)
        tm_touch(P("d/f%d", i));
    assert_true(listing_requests(m, P("d"), 300) > 0);
    assert_true(listing_requests(m, P("d"), 300) > 0); /* not cached by the first */
    assert_int_equal(listing_requests(m, P("d"), 300), 0);
    assert_int_equal(listing_requests(m, P("d"), 300), 0);
    tm_touch(P("d/new"));
    assert_true(listing_requests(m, P("d"), 301) > 0);
    assert_true(listing_requests(m, P("d"), 301) > 0);
    assert_int_equal(listing_requests(m, P("d"), 301), 0);
    TM_OK(unlink(P("d/f7")));
    assert_true(listing_requests(m, P("d"), 300) > 0);
}

/* Stats every file in dir (n files f0..), returning the LOOKUPs served. */
static uint64_t stat_all_lookups(const struct tmount *m, const char *dir, int n)
{
    uint64_t l0 = tm_stats_requests(m, "lookup");
    for (int i = 0; i < n; i++)
        TM_OK(stat(P("%s/f%d", dir, i), &(struct stat){0}));
    return tm_stats_requests(m, "lookup") - l0;
}

/* A cold listing reads no file's inode record until someone has looked a
 * file up (op_dir.c's listing-attributes rule): `find` wants names, as
 * ext4 reads only the directory's blocks (before: the kernel's first
 * READDIRPLUS loaded every record it carried, 100 gets here). Once a file
 * was looked up, as `ls -l` does after its first listing, the next cold
 * listing carries attributes again and stats after it ask nothing. */
static void test_cold_listing_reads_no_inode(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("d"), 0755));
    TM_OK(mkdir(P("e"), 0755));
    for (int i = 0; i < 100; i++) {
        tm_touch(P("d/f%d", i));
        tm_touch(P("e/f%d", i));
    }
    tm_remount_checked(m);
    uint64_t g0 = gets(m);
    assert_true(listing_requests(m, P("d"), 100) > 0);
    uint64_t g = gets(m) - g0;
    if (g > 5)
        fail_msg("a cold listing of 100 files made %llu store gets", (unsigned long long)g);
    assert_int_equal(stat_all_lookups(m, "d", 100), 100); /* plain entries */
    g0 = gets(m);
    assert_true(listing_requests(m, P("e"), 100) > 0);
    if (gets(m) - g0 < 100)
        fail_msg("a listing after stats loaded %llu records of 100",
                 (unsigned long long)(gets(m) - g0));
    assert_int_equal(stat_all_lookups(m, "e", 100), 0);
}

/* The root is pinned for the life of the mount: the kernel never looks it
 * up, so nothing else keeps it (and its listing) in memory. After a remount
 * the first listing of the root reads the store once; the next ones, and a
 * lookup of a name that is not there, read nothing. */
static void test_root_listing_stays_in_memory(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    char path[PATH_MAX + 16];
    for (int i = 0; i < 50; i++) {
        snprintf(path, sizeof path, "%s/r%d", m->mnt, i);
        tm_touch(path);
    }
    tm_remount_checked(m);
    uint64_t s0 = scans(m);
    listing_requests(m, m->mnt, 50);
    assert_int_equal(scans(m) - s0, 1);
    for (int i = 0; i < 5; i++)
        listing_requests(m, m->mnt, 50);
    snprintf(path, sizeof path, "%s/none", m->mnt);
    uint64_t g0 = gets(m);
    TM_ERR(stat(path, &(struct stat){0}), ENOENT);
    assert_int_equal(gets(m) - g0, 0);
    assert_int_equal(scans(m) - s0, 1);
}

/* Reads path through the page cache (no fadvise, unlike tm_check_file),
 * checks it holds `size` bytes of tm_fill(seed), and returns the READ
 * requests the daemon served meanwhile. */
static uint64_t cached_read_requests(const struct tmount *m, const char *path, size_t size,
                                     uint64_t seed)
{
    char *got = malloc(size + 1), *want = malloc(size);
    assert_true(got != NULL && want != NULL);
    tm_fill(want, size, seed, 0);
    uint64_t r0 = tm_stats_requests(m, "read");
    ssize_t n = tm_read_file(path, got, size + 1);
    uint64_t reads = tm_stats_requests(m, "read") - r0;
    bool same = n == (ssize_t)size && memcmp(got, want, size) == 0;
    free(got);
    free(want);
    assert_true(same);
    return reads;
}

/* Every change passes through this mount, so the kernel keeps a file's
 * pages across changes: after appending 2 bytes to an 8 MiB file it has
 * read, reading it again asks the daemon for the new tail only. */
static void test_append_keeps_page_cache(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    enum { SIZE = 8 * MiB };
    char *buf = malloc(SIZE + 2);
    assert_non_null(buf);
    tm_fill(buf, SIZE + 2, 1, 0);
    int fd = open(P("f"), O_CREAT | O_WRONLY, 0644);
    TM_OK(fd);
    ssize_t wrote = write(fd, buf, SIZE);
    TM_OK(close(fd));
    /* Read until the kernel holds it all (a slow daemon's readahead may
     * still be in flight after the first read). */
    uint64_t reads = 1;
    for (int i = 0; i < 5 && reads > 0 && wrote == SIZE; i++)
        reads = cached_read_requests(m, P("f"), SIZE, 1);
    fd = open(P("f"), O_WRONLY | O_APPEND);
    TM_OK(fd);
    ssize_t appended = write(fd, buf + SIZE, 2);
    TM_OK(close(fd));
    free(buf);
    assert_int_equal(wrote, SIZE);
    assert_int_equal(reads, 0);
    assert_int_equal(appended, 2);
    struct stat st;
    TM_OK(stat(P("f"), &st)); /* the attributes the write made stale */
    assert_int_equal(st.st_size, SIZE + 2);
    reads = cached_read_requests(m, P("f"), SIZE + 2, 1);
    if (reads > 1)
        fail_msg("re-reading after a 2-byte append took %llu READs", (unsigned long long)reads);
}

/* The readahead window of the mount at mnt, in KiB (from its bdi). */
static long readahead_kb(const char *mnt)
{
    struct stat st;
    TM_OK(stat(mnt, &st));
    char path[128];
    snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
             minor(st.st_dev));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long kb = -1;
    assert_int_equal(fscanf(f, "%ld", &kb), 1);
    fclose(f);
    return kb;
}

/* The kernel gives a FUSE mount 128 KiB of readahead, so a sequential read
 * comes as 128 KiB READs one or two at a time; lsmfs sets its own window
 * once the kernel has its INIT reply (4 MiB, or -o readahead=KB; 0 keeps
 * the kernel's). */
static void test_readahead_window(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    assert_int_equal(readahead_kb(m->mnt), 4096);
    struct tmount *small = tm_new("readahead=256");
    assert_non_null(small);
    assert_int_equal(readahead_kb(small->mnt), 256);
    assert_int_equal(tm_free(small), 0);
    struct tmount *kernels = tm_new("readahead=0");
    assert_non_null(kernels);
    assert_int_equal(readahead_kb(kernels->mnt), 128);
    assert_int_equal(tm_free(kernels), 0);
}

/* GETATTRs the daemon serves while n files are created, written, closed
 * and unlinked in a fresh directory of m. */
static uint64_t getattrs_for_changes(struct tmount *m, int n)
{
    TM_OK(mkdir(P("d"), 0755));
    uint64_t g0 = tm_stats_requests(m, "getattr");
    for (int i = 0; i < n; i++) {
        int fd = open(P("d/f%d", i), O_CREAT | O_WRONLY | O_EXCL, 0644);
        TM_OK(fd);
        assert_int_equal(write(fd, "msg", 3), 3);
        TM_OK(close(fd));
    }
    for (int i = 0; i < n; i++)
        TM_OK(unlink(P("d/f%d", i)));
    uint64_t got = tm_stats_requests(m, "getattr") - g0;
    TM_OK(rmdir(P("d")));
    return got;
}

/* The kernel forgets a directory's attributes at every change in it and,
 * checking permissions itself (default_permissions, on every mount), asks
 * for them again before the next change: one GETATTR per create or unlink,
 * never more (README's figures count on it). */
static void test_changes_cost_one_directory_getattr(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    assert_in_range(getattrs_for_changes(m, 100), 150, 202); /* 199 */
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_xattr_queries_of_inode_without_any, setup),
        TM_TEST(test_write_reads_only_what_it_keeps, setup),
        TM_TEST(test_write_reads_only_what_it_keeps, setup_writeback),
        TM_TEST(test_write_after_truncate_up, setup),
        TM_TEST(test_write_into_sparse_file_scans_once, setup),
        TM_TEST(test_unlink_reads_entry_once, setup),
        TM_TEST(test_rename_reads_entries_once, setup),
        TM_TEST(test_deep_directory_rename_reads_nothing, setup),
        TM_TEST(test_listings_in_memory, setup),
        TM_TEST(test_listing_cached_from_second, setup),
        TM_TEST(test_cold_listing_reads_no_inode, setup),
        TM_TEST(test_root_listing_stays_in_memory, setup),
        TM_TEST(test_readahead_window, setup),
        TM_TEST(test_append_keeps_page_cache, setup),
        TM_TEST(test_small_file_freed_without_reclaimer, setup),
        TM_TEST(test_truncate_of_large_file_in_batches, setup),
        TM_TEST(test_small_orphans_freed_in_batches, setup),
        TM_TEST(test_create_without_release, setup),
        TM_TEST(test_read_of_few_chunks_without_scan, setup),
        TM_TEST(test_small_file_record_loaded_once, setup),
        TM_TEST(test_changes_cost_one_directory_getattr, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
