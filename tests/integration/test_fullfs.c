/*
 * test_fullfs — a store on a full disk (issue 15, item 4): the store lives
 * on a 64 MiB tmpfs of the test's own, filled through lsmfs by several
 * writers (small fsynced files, MiB-sized fsynced files, appends with
 * fdatasync, unsynced files). Users get ENOSPC, never EIO, and nothing
 * hangs; deleting files while the disk is full works and frees space:
 * writes resume on the same mount; filled again (beside the store), once
 * the tmpfs grows they resume too; the unmount is clean; on a host filled
 * to the last byte the store still mounts (also after a crash), every
 * fsynced file is there and a delete still works.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 50
#define FILL_LIMIT_S 25.0
#define SETTLE_LIMIT_S 10.0
#define SMALL_SIZE (4 * KiB)
#define BIG_SIZE (2 * MiB)
#define APPEND_SIZE (64 * KiB)
#define MAX_FILES 4096

static char host[PATH_MAX]; /* the tmpfs mount point */
static bool host_mounted;
static struct tmount *the_mount; /* while the test runs */

/* Only once lsmfs is gone: it keeps the store open. */
static void host_umount(void)
{
    if (host_mounted && umount2(host, MNT_DETACH) == 0)
        host_mounted = false;
    if (host[0])
        rmdir(host);
}

enum kind { SMALL, BIG, APPEND, UNSYNCED, KINDS };

struct writer {
    struct tmount *m;
    enum kind kind;
    struct tm_errs *errs;
    pthread_t thread;
    int files;               /* files made (the last may be partial) */
    bool synced[MAX_FILES];  /* file i was fsynced whole */
    uint64_t append_synced;  /* APPEND: bytes made durable by fdatasync */
    _Atomic bool got_enospc; /* set by the writer, read by the main thread */
};

static atomic_bool fill_stop;

static const char *kind_dir(enum kind k)
{
    static const char *names[KINDS] = {"small", "big", "append", "unsynced"};
    return names[k];
}

static uint64_t seed_of(enum kind k, int i)
{
    return (uint64_t)k << 32 | (uint64_t)i;
}

/* An errno from the full disk: ENOSPC is right, anything else a failure. */
static void note_error(struct writer *w, const char *what, int err)
{
    if (err == ENOSPC)
        w->got_enospc = true;
    else
        tm_errs_add(w->errs, "%s writer: %s: %s", kind_dir(w->kind), what, strerror(err));
}

/* Writes file i of `size` bytes in `step`-byte pieces; fsyncs it if asked.
 * 0, or the errno that stopped it. */
static int write_file(struct writer *w, int i, long size, long step, bool sync)
{
    const char *path = tm_path(w->m, "%s/%d", kind_dir(w->kind), i);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0)
        return errno;
    char *buf = malloc((size_t)step);
    int err = buf ? 0 : ENOMEM;
    for (long off = 0; err == 0 && off < size; off += step) {
        tm_fill(buf, (size_t)step, seed_of(w->kind, i), (uint64_t)off);
        err = -tm_pwrite_all(fd, buf, (size_t)step, off);
    }
    free(buf);
    if (err == 0 && sync && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && err == 0)
        err = errno;
    return err;
}

/* APPEND: 64 KiB at a time, each made durable with fdatasync. */
static int append_more(struct writer *w)
{
    int fd = open(tm_path(w->m, "append/log"), O_CREAT | O_WRONLY, 0644);
    if (fd < 0)
        return errno;
    char buf[APPEND_SIZE];
    uint64_t off = w->append_synced;
    tm_fill(buf, sizeof buf, seed_of(APPEND, 0), off);
    int err = -tm_pwrite_all(fd, buf, sizeof buf, (off_t)off);
    if (err == 0 && fdatasync(fd) != 0)
        err = errno;
    if (err == 0)
        w->append_synced = off + sizeof buf;
    close(fd);
    return err;
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    double t0 = tm_now();
    while (!atomic_load(&fill_stop) && !w->got_enospc && w->files < MAX_FILES) {
        if (tm_now() - t0 > FILL_LIMIT_S) {
            tm_errs_add(w->errs, "%s writer: the disk never filled", kind_dir(w->kind));
            break;
        }
        int err, i = w->files;
        switch (w->kind) {
        case SMALL:
            err = write_file(w, i, SMALL_SIZE, SMALL_SIZE, true);
            break;
        case BIG:
            err = write_file(w, i, BIG_SIZE, 256 * KiB, true);
            break;
        case UNSYNCED:
            err = write_file(w, i, BIG_SIZE, 1 * MiB, false);
            break;
        default:
            err = append_more(w);
            break;
        }
        if (w->kind != APPEND) {
            w->files++;
            w->synced[i] = err == 0 && w->kind != UNSYNCED;
        }
        if (err != 0)
            note_error(w, "write", err);
    }
    return NULL;
}

/* Whether file i of kind k holds exactly its bytes. */
static bool file_is_whole(struct tmount *m, enum kind k, int i, long size)
{
    char *buf = malloc((size_t)size + 1), *want = malloc((size_t)size);
    assert_non_null(buf);
    assert_non_null(want);
    ssize_t n = tm_read_file(tm_path(m, "%s/%d", kind_dir(k), i), buf, (size_t)size + 1);
    tm_fill(want, (size_t)size, seed_of(k, i), 0);
    bool ok = n == size && memcmp(buf, want, (size_t)size) == 0;
    free(buf);
    free(want);
    return ok;
}

static void check_append(struct tmount *m, uint64_t synced)
{
    char *buf = malloc(synced + 1), *want = malloc(synced + 1);
    assert_non_null(buf);
    assert_non_null(want);
    int fd = open(tm_path(m, "append/log"), O_RDONLY);
    TM_OK(fd);
    ssize_t n = tm_pread_all(fd, buf, synced, 0);
    close(fd);
    tm_fill(want, synced, seed_of(APPEND, 0), 0);
    if (n != (ssize_t)synced || memcmp(buf, want, synced) != 0)
        fail_msg("append/log: %zd of %llu fdatasynced bytes read back right", n,
                 (unsigned long long)synced);
    free(buf);
    free(want);
}

/* Fills what is left of the host with a file beside the store. */
static void fill_host(void)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/filler", host);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    TM_OK(fd);
    static char buf[1 << 16];
    ssize_t n;
    while ((n = write(fd, buf, sizeof buf)) > 0) {
    }
    assert_int_equal(errno, ENOSPC);
    while (write(fd, buf, 512) > 0) { /* the last partial block */
    }
    close(fd);
}

/* A failure: the daemon's stats (its full-disk state) and its log. */
static void show_state(struct tmount *m)
{
    char stats[4096];
    ssize_t n = getxattr(P("."), "user.lsmfs.stats", stats, sizeof stats - 1);
    fprintf(stderr, "%.*s\n", n > 0 ? (int)n : 0, stats);
    tm_dump_log(m);
}

/* The host's free bytes. */
static uint64_t host_free(void)
{
    struct statvfs v;
    TM_OK(statvfs(host, &v));
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* Waits (at most SETTLE_LIMIT_S) until the deletes' space has all come
 * back: the host's free space unchanged for a second. The reclaimer drops
 * a deleted file's tables when it gets to that file, so space may still be
 * coming back after the first write resumed; filled beside the store
 * before that, the host would have room again later. */
static void wait_space_settled(void)
{
    uint64_t last = host_free();
    double t0 = tm_now(), since = tm_now();
    while (tm_now() - since < 1.0 && tm_now() - t0 < SETTLE_LIMIT_S) {
        tm_sleep_ms(100);
        uint64_t now = host_free();
        if (now != last)
            since = tm_now();
        last = now;
    }
}

/* Unlinks file i of writer w; the last one may never have been created
 * (its open met the full disk). */
static void remove_file(struct tmount *m, const struct writer *w, int i)
{
    if (unlink(P("%s/%d", kind_dir(w->kind), i)) == 0)
        return;
    int err = errno;
    if (err != ENOENT || i != w->files - 1) {
        show_state(m);
        fail_msg("unlink %s/%d on the full disk: %s", kind_dir(w->kind), i, strerror(err));
    }
}

/* A tmpfs of `size` (e.g. "64m") at host, and lsmfs mounted with its store
 * in it. */
static struct tmount *mount_on_host(const char *name, const char *size)
{
    char store[PATH_MAX + 8];
    if (the_mount) { /* an earlier test failed with it mounted */
        tm_free(the_mount);
        the_mount = NULL;
    }
    host_umount(); /* and its host: one tmpfs at a time */
    int made = tm_tmpfs_store(host, name, size, store);
    host_mounted = host[0] != 0 && made == 0;
    assert_int_equal(made, 0);
    struct tmount *m = the_mount = tm_new_in(NULL, store);
    assert_non_null(m);
    return m;
}

static void test_full_disk(void **state)
{
    (void)state;
    struct tmount *m = mount_on_host("fullfs-host", "64m");
    for (int k = 0; k < KINDS; k++)
        TM_OK(mkdir(P("%s", kind_dir(k)), 0755));

    /* Fill it. */
    struct tm_errs errs;
    tm_errs_init(&errs);
    static struct writer w[KINDS];
    for (int k = 0; k < KINDS; k++) {
        w[k] = (struct writer){.m = m, .kind = k, .errs = &errs};
        assert_int_equal(pthread_create(&w[k].thread, NULL, writer_main, &w[k]), 0);
    }
    /* Once one writer met the full disk, the others get a few seconds. */
    for (bool any = false; !any;) {
        tm_sleep_ms(50);
        for (int k = 0; k < KINDS; k++)
            any = any || w[k].got_enospc;
        bool all_done = true;
        for (int k = 0; k < KINDS; k++)
            all_done = all_done && (w[k].got_enospc || errs.count > 0);
        if (all_done || errs.count > 0)
            break;
    }
    double t_full = tm_now();
    while (tm_now() - t_full < 3.0) {
        bool all = true;
        for (int k = 0; k < KINDS; k++)
            all = all && w[k].got_enospc;
        if (all)
            break;
        tm_sleep_ms(50);
    }
    atomic_store(&fill_stop, true);
    for (int k = 0; k < KINDS; k++)
        pthread_join(w[k].thread, NULL);
    tm_errs_check(&errs);
    assert_true(w[SMALL].got_enospc || w[BIG].got_enospc || w[UNSYNCED].got_enospc);
    int fsynced = 0;
    for (int k = 0; k < KINDS; k++)
        for (int i = 0; i < w[k].files; i++)
            fsynced += w[k].synced[i];
    fprintf(stderr, "[fullfs] full after %d small, %d big, %d unsynced files, %llu appended "
                    "bytes (%d fsynced files)\n",
            w[SMALL].files, w[BIG].files, w[UNSYNCED].files,
            (unsigned long long)w[APPEND].append_synced, fsynced);

    /* Deleting works while the disk is full: every big and unsynced file,
     * every other small one. */
    for (int i = 0; i < w[BIG].files; i++)
        remove_file(m, &w[BIG], i);
    for (int i = 0; i < w[UNSYNCED].files; i++)
        remove_file(m, &w[UNSYNCED], i);
    for (int i = 0; i < w[SMALL].files; i += 2)
        remove_file(m, &w[SMALL], i);

    /* The deletes freed space: writes resume on the same mount. */
    int err = ENOSPC;
    double t0 = tm_now();
    int resumed = w[BIG].files;
    while ((err = write_file(&w[BIG], resumed, BIG_SIZE, 256 * KiB, true)) == ENOSPC &&
           tm_now() - t0 < 15.0)
        tm_sleep_ms(100);
    if (err != 0) {
        show_state(m);
        fail_msg("writing after the deletes: %s", strerror(err));
    }
    fprintf(stderr, "[fullfs] writes resumed %.2f s after the deletes\n", tm_now() - t0);
    for (t0 = tm_now(); (err = append_more(&w[APPEND])) == ENOSPC && tm_now() - t0 < 15.0;)
        tm_sleep_ms(100);
    assert_int_equal(err, 0);
    /* Fill it again, then grow the host: writes resume too. */
    wait_space_settled();
    fill_host();
    int extra = resumed + 2; /* the reserve may still take a file or two */
    while ((err = write_file(&w[BIG], extra, BIG_SIZE, 256 * KiB, true)) == 0 &&
           extra < resumed + 12)
        extra++;
    assert_int_equal(err, ENOSPC);
    TM_OK(mount(NULL, host, NULL, MS_REMOUNT, "size=128m"));
    for (t0 = tm_now(); (err = write_file(&w[BIG], extra, BIG_SIZE, 256 * KiB, true)) == ENOSPC &&
                        tm_now() - t0 < 15.0;)
        tm_sleep_ms(100);
    if (err != 0)
        fail_msg("writing after the host grew: %s", strerror(err));
    fprintf(stderr, "[fullfs] writes resumed %.2f s after the host grew\n", tm_now() - t0);
    char filler[PATH_MAX + 16];
    snprintf(filler, sizeof filler, "%s/filler", host);
    TM_OK(unlink(filler));
    assert_int_equal(tm_unmount(m), 0); /* exit 0: closing the store worked */

    /* A host full to the last byte: the store still mounts. */
    fill_host();
    assert_int_equal(tm_mount(m), 0);
    for (int i = 0; i < w[SMALL].files; i++) {
        if (i % 2 == 0) {
            TM_ERR(access(P("small/%d", i), F_OK), ENOENT);
        } else if (w[SMALL].synced[i] && !file_is_whole(m, SMALL, i, SMALL_SIZE)) {
            fail_msg("small/%d: fsynced, not read back whole", i);
        }
    }
    for (int i = 0; i < w[BIG].files; i++)
        TM_ERR(access(P("big/%d", i), F_OK), ENOENT);
    assert_true(file_is_whole(m, BIG, resumed, BIG_SIZE));
    for (int i = resumed + 2; i <= extra; i++)
        assert_true(file_is_whole(m, BIG, i, BIG_SIZE));
    check_append(m, w[APPEND].append_synced);
    TM_OK(unlink(P("small/1"))); /* deleting works on the full host too */
    TM_OK(unlink(filler));

    /* A crash, then a full host: recovery, which writes the log's records
     * into a table, still has room (the reserve's). */
    for (t0 = tm_now(); (err = write_file(&w[BIG], resumed + 1, BIG_SIZE, 256 * KiB, true)) ==
                            ENOSPC && tm_now() - t0 < 15.0;)
        tm_sleep_ms(100);
    assert_int_equal(err, 0);
    assert_int_equal(tm_crash(m), 0);
    fill_host();
    assert_int_equal(tm_mount(m), 0);
    assert_true(file_is_whole(m, BIG, resumed + 1, BIG_SIZE));
    TM_OK(unlink(filler));
    the_mount = NULL;
    assert_int_equal(tm_free(m), 0);
    host_umount();
}

/* An unmount on a full disk whose last table cannot be written: nothing
 * acknowledged is at risk (it is in the synced log), so lsmfs exits 0,
 * and the next mount has every change, fsynced or not. */
static void test_unmount_on_full_disk(void **state)
{
    (void)state;
    struct tmount *m = mount_on_host("fullfs-unmount", "48m");
    TM_OK(mkdir(P("%s", kind_dir(SMALL)), 0755));
    struct writer w = {.m = m, .kind = SMALL};
    assert_int_equal(write_file(&w, 0, 256 * KiB, 64 * KiB, true), 0);
    assert_int_equal(write_file(&w, 1, 512 * KiB, 64 * KiB, false), 0); /* logged, no table */
    fill_host();
    assert_int_equal(tm_unmount(m), 0);
    char filler[PATH_MAX + 16];
    snprintf(filler, sizeof filler, "%s/filler", host);
    TM_OK(unlink(filler));
    assert_int_equal(tm_mount(m), 0);
    assert_true(file_is_whole(m, SMALL, 0, 256 * KiB));
    assert_true(file_is_whole(m, SMALL, 1, 512 * KiB));
    the_mount = NULL;
    assert_int_equal(tm_free(m), 0);
    host_umount();
}

/* FULLFS_HOGS busy children (CPU load for the loop); killed by pid. */
static pid_t hogs[8];
static int nhogs;

static void hogs_start(void)
{
    const char *e = getenv("FULLFS_HOGS");
    int n = e ? atoi(e) : 0;
    for (nhogs = 0; nhogs < n && nhogs < 8; nhogs++) {
        hogs[nhogs] = fork();
        assert_true(hogs[nhogs] >= 0);
        if (hogs[nhogs] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
            for (volatile unsigned long x = 0;; x++) {
            }
        }
    }
}

static void hogs_stop(void)
{
    for (int i = 0; i < nhogs; i++) {
        kill(hogs[i], SIGKILL);
        waitpid(hogs[i], NULL, 0);
    }
    nhogs = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define LOOP_MAX_ROUNDS 200
#define LOOP_LIMIT_S 15.0

/* A round of the loop failed: the hogs go, the daemon's stats and log are
 * shown. */
static void loop_failed(struct tmount *m)
{
    hogs_stop();
    show_state(m);
}

/* Writes file i in 1 MiB pieces until the disk is full (ENOSPC). With
 * `logged` it is fsynced first, empty, so its writes are logged; else they
 * are deferred (in no log), as a plain dd's are, and the delete after them
 * must not need room to log them late. */
static void fill_with(struct writer *w, int i, bool logged)
{
    int fd = open(tm_path(w->m, "%s/%d", kind_dir(w->kind), i), O_CREAT | O_WRONLY | O_TRUNC,
                  0644);
    TM_OK(fd);
    if (logged)
        TM_OK(fsync(fd));
    static char buf[MiB];
    int err = 0;
    for (off_t off = 0; err == 0; off += MiB) {
        tm_fill(buf, sizeof buf, seed_of(w->kind, i), (uint64_t)off);
        err = -tm_pwrite_all(fd, buf, sizeof buf, off);
    }
    close(fd);
    if (err != ENOSPC)
        fail_msg("filling the disk: %s", strerror(err));
}

/* The full-disk loop (issue 29): fill the disk with one big file (its
 * writes deferred in even rounds, logged in odd ones), rm it (which must
 * work), then time until a fsynced 1 MiB write succeeds; every fifth round
 * with a remount between the rm and the write. FULLFS_ROUNDS
 * rounds (default 3; `make torture` runs 50 under two CPU hogs). */
static void test_full_disk_loop(void **state)
{
    (void)state;
    const char *e = getenv("FULLFS_ROUNDS");
    int rounds = e ? atoi(e) : 3;
    if (rounds < 1 || rounds > LOOP_MAX_ROUNDS)
        fail_msg("FULLFS_ROUNDS must be 1..%d", LOOP_MAX_ROUNDS);
    tm_watchdog((unsigned)(30 + 20 * rounds), "test_full_disk_loop");
    struct tmount *m = mount_on_host("fullfs-loop", "96m");
    TM_OK(mkdir(P("%s", kind_dir(BIG)), 0755));
    TM_OK(mkdir(P("%s", kind_dir(SMALL)), 0755));
    struct writer big = {.m = m, .kind = BIG}, small = {.m = m, .kind = SMALL};
    static double took[LOOP_MAX_ROUNDS];
    hogs_start();
    for (int r = 0; r < rounds; r++) {
        int err;
        fill_with(&big, 0, r % 2 == 1);
        if (unlink(P("big/0")) != 0) {
            err = errno;
            loop_failed(m);
            fail_msg("round %d: rm of the file that filled the disk: %s", r, strerror(err));
        }
        bool remount = r % 5 == 4;
        if (remount)
            assert_int_equal(tm_remount(m), 0);
        double t0 = tm_now();
        while ((err = write_file(&small, 0, MiB, MiB, true)) == ENOSPC &&
               tm_now() - t0 < LOOP_LIMIT_S)
            tm_sleep_ms(50);
        took[r] = tm_now() - t0;
        if (err != 0) {
            loop_failed(m);
            fail_msg("round %d%s: a 1 MiB write %.1f s after the rm: %s", r,
                     remount ? " (remounted)" : "", took[r], strerror(err));
        }
        TM_OK(unlink(P("small/0")));
    }
    hogs_stop();
    qsort(took, (size_t)rounds, sizeof took[0], cmp_double);
    fprintf(stderr, "[fullfs] loop: %d rounds, a 1 MiB write after the rm: median %.2f s, max %.2f s\n",
            rounds, took[rounds / 2], took[rounds - 1]);
    the_mount = NULL;
    assert_int_equal(tm_free(m), 0);
    host_umount();
    tm_watchdog(TEST_TIMEOUT_S, "test_fullfs");
}

int main(void)
{
    atexit(host_umount); /* registered first: runs after the harness's cleanup */
    tm_init();
    tm_watchdog(TEST_TIMEOUT_S, "test_fullfs");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_disk),
        cmocka_unit_test(test_unmount_on_full_disk),
        cmocka_unit_test(test_full_disk_loop),
    };
    int rc = cmocka_run_group_tests_name("fullfs", tests, NULL, NULL);
    tm_watchdog(0, NULL);
    if (the_mount) /* a failed test left it mounted */
        tm_free(the_mount);
    host_umount();
    return rc;
}
