/*
 * Integration-test harness: a real lsmfs mounted in a temporary directory.
 *
 * tm_new() makes /tmp/lsmfs-test-<run>-XXXXXX/{store,mnt}, runs mkfs.lsmfs on
 * store/ and starts `lsmfs store mnt -f` as a child of the test, so a test
 * can SIGKILL it.  Every mount is unmounted and its directory removed on
 * every way out: tm_free(), exit (atexit), SIGINT/SIGTERM/SIGHUP/SIGQUIT,
 * SIGABRT, and the watchdog (tm_watchdog) that fails a test whose FUSE
 * request hangs -- a hung request cannot be interrupted by an ordinary
 * signal, so the watchdog thread kills the daemon to unblock it.
 *
 * Environment:
 *   LSMFS_BIN             directory holding lsmfs, mkfs.lsmfs, fsck.lsmfs
 *                         (default: ./bin)
 *   LSMFS_TEST_DIR=DIR    run the tests against a plain directory under DIR
 *                         instead of a mount (to check the tests themselves
 *                         on ext4/tmpfs): mount, unmount and crash do
 *                         nothing and fsck reports clean.
 *   LSMFS_TEST_OPTS=o,..  extra -o options for every mount (e.g. "sync")
 *   LSMFS_TEST_URING=M    the transport under test: -o uring=M (off, auto,
 *                         on) for every mount whose options name none
 *   LSMFS_TEST_KEEP=1     keep the temp directory (store and daemon.log)
 *                         of a test for inspection; mounts are still undone
 *   LSMFS_TEST_SEED=N     seed for tests that draw random numbers
 *
 * Call tm_init() first thing in main(), before any thread exists: it blocks
 * the termination signals in every thread so the watchdog thread receives
 * them, even when the main thread is stuck inside a FUSE request.
 * Mount, unmount, remount and crash from the main thread only.
 *
 * The last part of this header is for the cmocka test programs: a fixture
 * giving each test a fresh mount, and checks that fail the running test.
 * Those run on the main thread only (a cmocka failure longjmps); worker
 * threads report through a struct tm_errs instead.
 */
#ifndef LSMFS_TEST_MOUNT_H
#define LSMFS_TEST_MOUNT_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "lsm.h"

struct tmount {
    char root[PATH_MAX];  /* the temp dir holding the two below */
    char store[PATH_MAX]; /* the store directory given to mkfs and lsmfs */
    char mnt[PATH_MAX];   /* the mount point */
    char log[PATH_MAX];   /* daemon stdout+stderr, appended per mount */
    char opts[256];       /* -o options for every mount of this store */
    pid_t daemon;         /* the foreground daemon; 0 when not mounted */
    bool plain;           /* LSMFS_TEST_DIR mode: mnt is a plain dir */
};

/* Block termination signals, start the watchdog, register atexit cleanup. */
void tm_init(void);

/* A fresh store, mounted.  opts: extra -o options ("" or NULL for none).
 * NULL (after saying why on stderr) if anything failed. */
struct tmount *tm_new(const char *opts);

/* tm_new with the store in store_dir, an empty directory the test made (on
 * a filesystem of its own, say): m->store is a symlink to it. The test
 * removes store_dir after tm_free. NULL (after saying why) on failure. */
struct tmount *tm_new_in(const char *opts, const char *store_dir);

/* A mount of the store at `store` (a location such as rados:POOL/NAME;
 * m->store holds it), made by mkfs.lsmfs first if `make`, else an existing
 * one (a second daemon on a shared store). NULL (after saying why) on
 * failure. */
struct tmount *tm_new_at(const char *opts, const char *store, bool make);

/* A fresh temp dir with an empty mount point (m->mnt) for a FUSE daemon the
 * test starts itself: no store, no mkfs, no daemon yet.  Set m->daemon to
 * the daemon's pid (a child of the test) as soon as it runs: from then on
 * tm_free, exit, the termination signals and the watchdog undo its mount as
 * for tm_new's.  Never tm_mount it (that starts lsmfs).  NULL (after saying
 * why on stderr) if anything failed. */
struct tmount *tm_new_external(void);

/* Unmount (cleanly if possible, by force otherwise), remove the temp dir
 * (unless LSMFS_TEST_KEEP), free.  0 if the unmount was clean: no file left
 * open on the mount, and the daemon exited with status 0.  NULL is fine. */
int tm_free(struct tmount *m);

/* Start the daemon and wait (10 s at most) for the mount to appear.
 * 0 on success, -1 (after printing the daemon's log) on failure. */
int tm_mount(struct tmount *m);

/* ASAN_OPTIONS for a program run under an LD_PRELOAD shim: the caller's,
 * plus verify_asan_link_order=0, as an ASan program wants its runtime first
 * among the preloads (static buffer). */
const char *tm_preload_asan_options(void);
/* tm_mount with the LD_PRELOAD shim `lib` (a file next to the test
 * program, as make builds it: libfailsync.so, ...) in the daemon only, and
 * `name`=`value` in its environment. 0 or -1 (after saying why). */
int tm_mount_with_shim(struct tmount *m, const char *lib, const char *name, const char *value);

/* fusermount3 -u, then wait for the daemon to exit.  0 only if the mount is
 * gone from /proc/mounts and the daemon exited with status 0. */
int tm_unmount(struct tmount *m);

/* Send `sig` (e.g. SIGTERM) to the daemon and wait for it to exit.  0 only
 * if it exited with status 0 and took its mount away with it. */
int tm_stop(struct tmount *m, int sig);

/* Unmount whatever FUSE file system is mounted at `path` (one the test
 * mounted by hand): fusermount3 -u, then -uz.  0 if nothing is left. */
int tm_umount_path(const char *path);

/* Is a FUSE file system mounted at path? */
bool tm_is_mounted(const char *path);

/* tm_unmount + tm_mount. */
int tm_remount(struct tmount *m);

/* SIGKILL the daemon and reap it; the dead mount stays until tm_crash or
 * tm_umount_path.  Requests in flight fail (ENOTCONN), so threads using the
 * mount can be joined before unmounting.  0 if the daemon was alive. */
int tm_kill(struct tmount *m);

/* tm_kill (if the daemon still runs), then unmount the dead mount (lazily
 * as a last resort).  0 if the daemon had not died on its own and the mount
 * is gone.  Close every file on the mount first. */
int tm_crash(struct tmount *m);

/* Run `fsck.lsmfs -n store` on the unmounted store: its exit code (0 =
 * clean), or -1 if it could not be run or was killed.  Output goes to
 * stderr only when the code is non-zero. */
int tm_fsck(struct tmount *m);

/* Is the daemon still running (not exited or crashed)? */
bool tm_daemon_alive(struct tmount *m);

/* Print the last part of the daemon's log to stderr. */
void tm_dump_log(const struct tmount *m);

/* Arm the watchdog: if not re-armed or disarmed (seconds = 0) within
 * `seconds`, print `what`, kill every daemon, undo every mount, _exit(1). */
void tm_watchdog(unsigned seconds, const char *what);

/* mnt/<fmt...>: a path under the mount point in a thread-local ring of 8
 * buffers, so up to 8 results may be used in one expression. */
const char *tm_path(const struct tmount *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* LSMFS_BIN/<prog> (static storage, valid until the next call). */
const char *tm_bin(const char *prog);

/* Run argv (argv[0] a path), output appended to `log` (NULL: inherited),
 * waiting `timeout_s` seconds at most (then SIGKILL).  The exit code, or
 * -1 if it could not be started or died by a signal. */
int tm_run(char *const argv[], const char *log, unsigned timeout_s);

/* Runs `LSMFS_BIN/lsmctl ARGS` (ARGS a printf format, words split by the
 * shell) under a 120 s timeout, stdout and stderr into out (cap bytes,
 * NUL-terminated): its exit status, or -1. */
int tm_lsmctl(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Runs the shell command line FMT... (the test's watchdog bounds its time),
 * stdout and stderr into out (cap bytes, NUL-terminated): its exit status,
 * or -1. */
int tm_sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A numeric field of /proc/PID/status ("Threads"), or -1. */
long tm_proc_status(pid_t pid, const char *key);

/* Whether LSMFS_TEST_DIR mode is on. */
bool tm_plain(void);

/* LSMFS_TEST_SEED, or a seed from the clock; printed once. */
uint64_t tm_seed(void);

/* ---- data helpers ---- */

/* Deterministic bytes: buf[i] is a function of (seed, off + i) only, so any
 * range of a "virtual file" can be regenerated on its own. */
void tm_fill(void *buf, size_t n, uint64_t seed, uint64_t off);

/* 64-bit FNV-1a over buf, continuing from h (start with TM_HASH_INIT). */
#define TM_HASH_INIT 0xcbf29ce484222325ULL
uint64_t tm_hash(const void *buf, size_t n, uint64_t h);

/* pwrite/pread loops.  tm_pwrite_all: 0 or -errno.  tm_pread_all: bytes
 * read (short only at end of file) or -errno. */
int tm_pwrite_all(int fd, const void *buf, size_t n, off_t off);
ssize_t tm_pread_all(int fd, void *buf, size_t n, off_t off);

/* Whole-file helpers: 0 / bytes read, or -errno. */
int tm_write_file(const char *path, const void *buf, size_t n, mode_t mode);
ssize_t tm_read_file(const char *path, void *buf, size_t cap);

/* A fresh directory /tmp/lsmfs-test-<run>-<name>-XXXXXX (for tests that need no
 * mount); its path goes to out (PATH_MAX bytes).  0, or -1 after saying why
 * on stderr. */
int tm_mkdtemp(char *out, const char *name);

/* A disk of its own for a store: a tmpfs of `size` (mount's size=, e.g.
 * "64m") mounted on a fresh tm_mkdtemp directory `host` (PATH_MAX bytes),
 * with an empty directory host/store, whose path goes to store (PATH_MAX
 * + 8 bytes). 0, or -1 after saying why. Root only; the caller unmounts
 * host (umount2 MNT_DETACH) once lsmfs is gone. */
int tm_tmpfs_store(char *host, const char *name, const char *size, char *store);

/* Remove path and everything below it, never crossing into another file
 * system (a mount that failed to go away).  0 if everything went. */
int tm_rmtree(const char *path);

/* Monotonic seconds. */
double tm_now(void);

/* Sleep for ms milliseconds (nanosleep; restarted on EINTR). */
void tm_sleep_ms(unsigned ms);

/* ---- cmocka assertion helpers (include cmocka.h before using them) ---- */

/* expr must not return -1 (or a negative value); reports errno by name. */
#define TM_OK(expr)                                                                                \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long tm_r_ = (long)(expr);                                                                 \
        if (tm_r_ < 0)                                                                             \
            fail_msg("%s:%d: %s = %ld, errno %s", __FILE__, __LINE__, #expr, tm_r_,                \
                     tm_errname(errno));                                                           \
    } while (0)

/* expr must return -1 with errno == err. */
#define TM_ERR(expr, err)                                                                          \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long tm_r_ = (long)(expr);                                                                 \
        int tm_e_ = errno;                                                                         \
        if (tm_r_ != -1 || tm_e_ != (err))                                                         \
            fail_msg("%s:%d: %s = %ld, errno %s; expected -1, errno %s", __FILE__, __LINE__,       \
                     #expr, tm_r_, tm_r_ == -1 ? tm_errname(tm_e_) : "-", tm_errname(err));        \
    } while (0)

/* Like TM_ERR but either of two errnos is right (when POSIX allows both). */
#define TM_ERR2(expr, err1, err2)                                                                  \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long tm_r_ = (long)(expr);                                                                 \
        int tm_e_ = errno;                                                                         \
        if (tm_r_ != -1 || (tm_e_ != (err1) && tm_e_ != (err2)))                                   \
            fail_msg("%s:%d: %s = %ld, errno %s; expected -1, errno %s "                           \
                     "or %s",                                                                      \
                     __FILE__, __LINE__, #expr, tm_r_, tm_r_ == -1 ? tm_errname(tm_e_) : "-",      \
                     tm_errname(err1), tm_errname(err2));                                          \
    } while (0)

/* "ENOENT" for ENOENT (never NULL). */
const char *tm_errname(int err);

/* Whether m's mounts get -o opt (a whole option of m->opts, from the
 * test's fixture or LSMFS_TEST_OPTS): for tests whose expectation differs
 * there, e.g. "writeback", where the kernel owns some semantics. */
bool tm_has_opt(const struct tmount *m, const char *opt);

/* ---- cmocka fixture and checks (main thread only) ---- */

/* Shorthands for the tests: sizes, and a path under the mount `m` in scope. */
#define KiB 1024L
#define MiB (1024L * 1024L)
#define P(...) tm_path(m, __VA_ARGS__)

/* Fixture: arm the watchdog for the test (timeout_s; `what` names it in the
 * timeout message) and mount a fresh store with -o opts (NULL: none) as
 * *state.  Wrap it in a setup function of the usual cmocka type. */
int tm_setup(void **state, unsigned timeout_s, const char *what, const char *opts);

/* Fixture: unmount and free *state, disarm the watchdog.  Fails (non-zero)
 * if the daemon died during the test or the unmount was not clean. */
int tm_teardown(void **state);

/* A test run with a fixture: `setup` (calling tm_setup), then tm_teardown. */
#define TM_TEST(fn, setup) cmocka_unit_test_setup_teardown(fn, setup, tm_teardown)

/* The unmounted store of m, open read-write as the daemon opens it
 * (store_open); fails the test if it cannot be. */
lsm_db *tm_open_store(const struct tmount *m);

/* Unmount cleanly, require fsck.lsmfs -n to pass, mount again. */
void tm_remount_checked(struct tmount *m);

/* Crash (tm_crash), require fsck.lsmfs -n to pass, mount again; `when`
 * says which crash in failure messages. */
void tm_crash_checked(struct tmount *m, const char *when);

/* Run fn on n threads at once, the i-th on (char *)args + i * size (an
 * array of per-thread arguments), and wait for all of them. */
void tm_run_threads(int n, void *(*fn)(void *), void *args, size_t size);

/* Create path (it must not exist) as an empty file. */
void tm_touch(const char *path);

/* Write path as `size` bytes of tm_fill(seed). */
void tm_make_file(const char *path, size_t size, uint64_t seed);

/* fsync path (opened as a directory if dir): 0 or -errno (no cmocka: for
 * worker threads). tm_fsync_path fails the test on error instead. */
int tm_sync_path(const char *path, bool dir);
void tm_fsync_path(const char *path, bool dir);

/* path must hold exactly `size` bytes of tm_fill(seed), read back from the
 * daemon (cached pages are dropped first). */
void tm_check_file(const char *path, size_t size, uint64_t seed);

/* got must equal want; a failure names `what` and the first differing byte
 * at offset base + i. */
void tm_check_bytes(const void *got, const void *want, size_t n, const char *what, long long base);

/* got must be all zeros (a hole); as tm_check_bytes otherwise. */
void tm_check_zero(const void *got, size_t n, const char *what, long long base);

/* tm_hash of a whole file, read back from the daemon. */
uint64_t tm_hash_file(const char *path);

/* The number after `key` (e.g. "wal syncs", "fs store gets") in the root's
 * user.lsmfs.stats text; fails the test when there is none. */
uint64_t tm_stats_counter(const struct tmount *m, const char *key);

/* How many requests of FUSE operation `op` (as the stats name it:
 * "getattr", "access", ...) the daemon has served; 0 when the stats list
 * none. Fails the test when the stats cannot be read. */
uint64_t tm_stats_requests(const struct tmount *m, const char *op);

/* Inodes in use on the mount (statvfs: files - free files). */
long long tm_inodes_used(const struct tmount *m);
/* Polls (the kernel sends FORGET and RELEASE asynchronously, and orphans
 * are freed in the background) until tm_inodes_used is `want`, failing the
 * test after `seconds`. */
void tm_wait_inodes(const struct tmount *m, long long want, double seconds);

/* The first problem seen by worker threads, reported on the main thread. */
struct tm_errs {
    pthread_mutex_t mu;
    int count;       /* guarded by mu */
    char first[512]; /* guarded by mu */
};

void tm_errs_init(struct tm_errs *e);
/* Any thread. */
void tm_errs_add(struct tm_errs *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fail the test if anything was added. */
void tm_errs_check(struct tm_errs *e);

#endif
