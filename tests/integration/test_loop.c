/*
 * test_loop — the request loop (fs/transport/loop.c) serving a real mount.
 *
 * The test program is also its own FUSE daemon: run as
 * `test_loop --serve MOUNTPOINT`, it mounts a tiny file system (a root
 * directory holding one empty file "f") and serves it with loop_run, as
 * lsmfs does. Its fsync blocks until the test releases it, so a test can
 * hold a request that may wait in the daemon for as long as it likes; its
 * fdatasync blocks the same way but is not called one that may wait (as a
 * small write that meets a store stall lsm_write_may_wait did not foresee),
 * so the reader runs it itself. Entry
 * and attribute timeouts are 0: every stat(2) reaches the daemon.
 *
 * With LSMFS_TEST_URING=on (tests/run_transports.sh's io_uring pass) the
 * daemon also installs the io_uring transport (fs/transport/uring.h) as lsmfs does,
 * and the tests check the ring: there a request a queue thread serves
 * itself that waits holds up its CPU's queue (nobody else may serve it),
 * so the stall watch logs it and hands that opcode to workers after.
 *
 * Each test forks and execs such a daemon on a fresh mount point of the
 * harness (tm_new_external), so every way out — teardown, a failed
 * assertion, the watchdog, a signal — kills it and undoes the mount. Its
 * stdout and stderr go to the mount's log (m->log).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* ThreadSanitizer runs a background thread of its own in the daemon. */
#ifdef __SANITIZE_THREAD__
#define SANITIZER_THREADS 1
#else
#define SANITIZER_THREADS 0
#endif

#include "fuse_api.h"
#include "transport/loop.h"
#include "transport/uring.h"

#include <linux/fuse.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60
#define MOUNT_WAIT_S 10
/* How long the daemon's fsync waits for the release before it gives up
 * (and fails the fsync): far longer than the stats test 1 makes meanwhile. */
#define FSYNC_HOLD_MS 5000
/* How long a daemon may take to leave loop_run and exit once told to. */
#define EXIT_WAIT_MS 2000

/* The daemon's descriptors (set up by the test before the exec). */
#define ENTERED_FD 3 /* the daemon writes a byte here when an fsync starts */
#define RELEASE_FD 4 /* ... and replies to it once a byte arrives here */

#define ROOT_INO FUSE_ROOT_ID
#define FILE_INO 2
#define FILE_NAME "f"

/* ------------------------------------------------------------ the daemon */

static bool stat_of(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    if (ino == ROOT_INO) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
    } else if (ino == FILE_INO) {
        st->st_mode = S_IFREG | 0644;
        st->st_nlink = 1;
    } else {
        return false;
    }
    return true;
}

static void d_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e = {.ino = FILE_INO}; /* timeouts 0: never cached */
    if (parent != ROOT_INO || strcmp(name, FILE_NAME) != 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    stat_of(FILE_INO, &e.attr);
    fuse_reply_entry(req, &e);
}

static void d_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    if (stat_of(ino, &st))
        fuse_reply_attr(req, &st, 0);
    else
        fuse_reply_err(req, ENOENT);
}

static void d_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (ino == FILE_INO)
        fuse_reply_open(req, fi);
    else
        fuse_reply_err(req, EISDIR);
}

/* Tells the test it started, then waits for its release: 0 then, EIO if
 * none comes in FSYNC_HOLD_MS (or the test went away). */
static void d_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    char c = 'e';
    int err = write(ENTERED_FD, &c, 1) == 1 ? 0 : EIO;
    struct pollfd p = {.fd = RELEASE_FD, .events = POLLIN};
    if (err == 0 && (poll(&p, 1, FSYNC_HOLD_MS) != 1 || read(RELEASE_FD, &c, 1) != 1))
        err = EIO;
    fuse_reply_err(req, err);
}

static const struct fuse_lowlevel_ops daemon_ops = {
    .lookup = d_lookup,
    .getattr = d_getattr,
    .open = d_open,
    .fsync = d_fsync,
};

static bool fsync_may_wait(void *ctx, const struct fuse_in_header *in, size_t len)
{
    (void)ctx;
    if (in->opcode != FUSE_FSYNC || len < sizeof *in + sizeof(struct fuse_fsync_in))
        return false;
    return !(((const struct fuse_fsync_in *)(in + 1))->fsync_flags & FUSE_FSYNC_FDATASYNC);
}

/* Whether the tests run over io_uring (the daemon's transport). */
static bool over_ring(void)
{
    const char *t = getenv("LSMFS_TEST_URING");
    return t != NULL && strcmp(t, "on") == 0;
}

/* The io_uring transport on se if the tests run over it, else NULL. */
static struct uring *attach_ring(struct fuse_session *se)
{
    if (!over_ring())
        return NULL;
    uring_config uc = {.mode = URING_ON, .depth = 4, .max_workers = 4,
                       .may_wait = fsync_may_wait};
    struct uring *u = NULL;
    int err = uring_attach(se, &uc, &u);
    if (err != 0)
        fprintf(stderr, "test_loop daemon: uring_attach: %s\n", strerror(-err));
    return u;
}

/* main() of `test_loop --serve MOUNTPOINT`: 0 if loop_run ended cleanly. */
static int serve(const char *mnt)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char *argv[] = {"test_loop", "-ofsname=test_loop", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(2, argv);
    struct fuse_session *se = fuse_session_new(&args, &daemon_ops, sizeof daemon_ops, NULL);
    fuse_opt_free_args(&args);
    if (se == NULL || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mnt) != 0) {
        fprintf(stderr, "test_loop daemon: cannot mount %s\n", mnt);
        return 2;
    }
    struct uring *ring = attach_ring(se);
    loop_config cfg = {.max_threads = 8, .spin_us = 50, .may_wait = fsync_may_wait, .ctx = NULL};
    int r = over_ring() && ring == NULL ? -EPROTO : loop_run(se, &cfg);
    if (r != 0)
        fprintf(stderr, "test_loop daemon: loop_run: %s\n", strerror(-r));
    uring_stop(ring); /* before the unmount closes the device */
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return r == 0 ? 0 : 1;
}

/* ------------------------------------------------------- the test side */

struct fixture {
    struct tmount *m;
    int entered;  /* read end of the daemon's ENTERED_FD */
    int release;  /* write end of the daemon's RELEASE_FD */
    bool stopped; /* the test ended the daemon itself */
    pthread_t fsyncer;
    bool fsyncer_started;
    bool datasync; /* the fsyncer calls fdatasync */
    atomic_bool fsync_returned;
    int fsync_rc;  /* written by the fsyncer before fsync_returned */
    int fsync_err; /* its errno */
};

/* In the forked child: give the daemon its pipe ends as ENTERED_FD and
 * RELEASE_FD and exec it. Async-signal-safe calls only (the test has
 * threads). */
static void exec_daemon(char *const argv[], int entered_w, int release_r, int log, pid_t parent)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0); /* signals for the test's group are the harness's */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    if (dup2(entered_w, ENTERED_FD) < 0 || dup2(release_r, RELEASE_FD) < 0 ||
        dup2(log, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0)
        _exit(127);
    close_range(RELEASE_FD + 1, ~0U, 0);
    execv(argv[0], argv);
    _exit(127);
}

/* Starts the daemon on f->m->mnt and waits until it answers. 0 or -1. */
static int start_daemon(struct fixture *f)
{
    int ent[2], rel[2];
    if (pipe2(ent, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(rel, O_CLOEXEC) != 0) {
        close(ent[0]);
        close(ent[1]);
        return -1;
    }
    f->entered = ent[0];
    f->release = rel[1];
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char *argv[] = {self, "--serve", f->m->mnt, NULL};
    int log = open(f->m->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_daemon(argv, ent[1], rel[0], log, parent);
    close(ent[1]);
    close(rel[0]);
    close(log);
    if (pid < 0)
        return -1;
    f->m->daemon = pid;
    double end = tm_now() + MOUNT_WAIT_S;
    while (!tm_is_mounted(f->m->mnt)) {
        if (!tm_daemon_alive(f->m) || tm_now() > end) {
            fprintf(stderr, "[test_loop] the daemon did not mount %s\n", f->m->mnt);
            return -1;
        }
        tm_sleep_ms(2);
    }
    struct stat st; /* waits for INIT to be answered */
    if (stat(f->m->mnt, &st) != 0 || st.st_ino != ROOT_INO) {
        fprintf(stderr, "[test_loop] stat %s: %s\n", f->m->mnt, strerror(errno));
        return -1;
    }
    return 0;
}

static int setup(void **state)
{
    tm_watchdog(TEST_TIMEOUT_S, "a test_loop test");
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    f->entered = f->release = -1;
    *state = f;
    f->m = tm_new_external();
    return f->m != NULL && start_daemon(f) == 0 ? 0 : -1;
}

/* Releases and joins a held fsync, then unmounts: cleanly (the daemon must
 * leave loop_run on the unmount and exit 0) unless the test ended the
 * daemon itself; tm_free kills it and detaches the mount if that fails. */
static int teardown(void **state)
{
    struct fixture *f = *state;
    int rc = 0;
    if (f->fsyncer_started) {
        char c = 'r';
        if (write(f->release, &c, 1) != 1)
            rc = -1;
        pthread_join(f->fsyncer, NULL);
    }
    if (f->m != NULL) {
        bool alive = tm_daemon_alive(f->m);
        if (!alive && !f->stopped) {
            fprintf(stderr, "[test_loop] the daemon died during the test\n");
            rc = -1;
        }
        if (tm_free(f->m) != 0)
            rc = -1;
    }
    if (f->entered >= 0)
        close(f->entered);
    if (f->release >= 0)
        close(f->release);
    free(f);
    tm_watchdog(0, NULL);
    return rc;
}

static const char *file_path(const struct fixture *f)
{
    return tm_path(f->m, FILE_NAME);
}

/* stat of "f" through the daemon; false (errno set, or EBADE for wrong
 * attributes) unless it answered with f's. */
static bool stat_file(const struct fixture *f)
{
    struct stat st;
    if (stat(file_path(f), &st) != 0)
        return false;
    if (st.st_ino != FILE_INO || !S_ISREG(st.st_mode) || st.st_size != 0) {
        errno = EBADE;
        return false;
    }
    return true;
}

static void stat_file_n(const struct fixture *f, int n)
{
    for (int i = 0; i < n; i++)
        if (!stat_file(f))
            fail_msg("stat #%d of %s: %s", i, file_path(f), tm_errname(errno));
}

static void *fsyncer(void *arg)
{
    struct fixture *f = arg;
    int fd = open(file_path(f), O_RDONLY);
    f->fsync_rc = fd < 0 ? -1 : f->datasync ? fdatasync(fd) : fsync(fd);
    f->fsync_err = errno;
    if (fd >= 0)
        close(fd);
    atomic_store(&f->fsync_returned, true);
    return NULL;
}

/* Waits up to ms for a byte on fd. */
static bool byte_arrives(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 1;
}

/* Starts an fsync (fdatasync if f->datasync) and waits until the daemon
 * holds it. */
static void hold_fsync(struct fixture *f)
{
    atomic_store(&f->fsync_returned, false);
    int err = pthread_create(&f->fsyncer, NULL, fsyncer, f);
    if (err != 0)
        fail_msg("pthread_create: %s", tm_errname(err));
    f->fsyncer_started = true;
    if (!byte_arrives(f->entered, FSYNC_HOLD_MS))
        fail_msg("the daemon never started the fsync");
}

/* Holds an fsync in the daemon, makes 300 stats meanwhile, releases it. */
static void stats_beside_held_fsync(struct fixture *f)
{
    hold_fsync(f);
    stat_file_n(f, 300);
    /* All 300 were answered while the fsync still waited in the daemon. */
    assert_false(atomic_load(&f->fsync_returned));
    char c = 'r';
    assert_int_equal(write(f->release, &c, 1), 1);
    pthread_join(f->fsyncer, NULL);
    f->fsyncer_started = false;
    if (f->fsync_rc != 0)
        fail_msg("fsync: %s", tm_errname(f->fsync_err));
}

/* A request that may wait (an fsync held in the daemon) does not hold up
 * the others: the reader passes its turn on before processing it — the
 * first time to a worker it starts, the second time to that idle one. */
static void test_waiting_request_holds_up_no_other(void **state)
{
    struct fixture *f = *state;
    stats_beside_held_fsync(f);
    stats_beside_held_fsync(f);
}

/* The daemon's log holds needle within ms. */
static bool log_says(const struct fixture *f, const char *needle, int ms)
{
    double end = tm_now() + ms / 1000.0;
    static char buf[65536];
    do {
        int fd = open(f->m->log, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        if (strstr(buf, needle) != NULL)
            return true;
        tm_sleep_ms(5);
    } while (tm_now() < end);
    return false;
}

/* Over the ring (the test's threads on CPU 0, so on queue 0): an fdatasync
 * the queue thread serves itself and that then waits holds up queue 0; the
 * stall watch logs it (opcode 20, FUSE_FSYNC) while it waits, and the next
 * fdatasync goes to a worker: stats are answered while it waits. */
static void stall_logged_then_handed_off(struct fixture *f)
{
    if (!log_says(f, "serving requests over io_uring", 2000)) /* logged just after INIT */
        fail_msg("LSMFS_TEST_URING=on but the daemon does not serve over io_uring");
    cpu_set_t cpu0, old;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    assert_int_equal(sched_getaffinity(0, sizeof old, &old), 0);
    assert_int_equal(sched_setaffinity(0, sizeof cpu0, &cpu0), 0);
    hold_fsync(f);
    bool logged = log_says(f, "a request (opcode 20) its thread serves itself", 3000);
    char c = 'r';
    assert_int_equal(write(f->release, &c, 1), 1);
    pthread_join(f->fsyncer, NULL);
    f->fsyncer_started = false;
    if (!logged)
        fail_msg("the stall watch did not log the held fdatasync");
    if (f->fsync_rc != 0)
        fail_msg("fdatasync: %s", tm_errname(f->fsync_err));
    stats_beside_held_fsync(f);
    sched_setaffinity(0, sizeof old, &old);
}

/* A request the reader runs itself because it was not expected to wait
 * (an fdatasync here) but then does, does not stop the reading: another
 * worker takes the turn over, and the stats are answered while it waits.
 * Over the ring: stall_logged_then_handed_off. */
static void test_stalled_inline_request_holds_up_no_other(void **state)
{
    struct fixture *f = *state;
    f->datasync = true;
    printf("[test_loop] stalled inline request: checked over %s\n",
           over_ring() ? "io_uring" : "/dev/fuse");
    if (over_ring()) {
        stall_logged_then_handed_off(f);
        return;
    }
    stats_beside_held_fsync(f);
    stats_beside_held_fsync(f);
}

#define CALLERS 4
#define STATS_EACH 2000
#define FSYNCERS 2
#define FSYNCS_EACH 200

struct caller_args {
    const struct fixture *f;
    struct tm_errs *errs;
    bool fsyncs; /* fsyncs f instead of stat'ing it */
};

static void *caller(void *arg)
{
    struct caller_args *a = arg;
    int fd = a->fsyncs ? open(file_path(a->f), O_RDONLY) : -1;
    if (a->fsyncs && fd < 0) {
        tm_errs_add(a->errs, "open: %s", tm_errname(errno));
        return NULL;
    }
    for (int i = 0; i < (a->fsyncs ? FSYNCS_EACH : STATS_EACH); i++) {
        if (a->fsyncs ? fsync(fd) != 0 : !stat_file(a->f)) {
            tm_errs_add(a->errs, "%s #%d: %s", a->fsyncs ? "fsync" : "stat", i, tm_errname(errno));
            break;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Many concurrent callers are all served, by max_threads workers at most,
 * with fsyncs (released at once) passing the turn among the workers. */
static void test_concurrent_callers_all_served(void **state)
{
    struct fixture *f = *state;
    char release[FSYNCERS * FSYNCS_EACH];
    memset(release, 'r', sizeof release); /* fits in a pipe's buffer */
    assert_int_equal(write(f->release, release, sizeof release), (ssize_t)sizeof release);
    struct tm_errs errs;
    tm_errs_init(&errs);
    struct caller_args args[CALLERS + FSYNCERS];
    for (int i = 0; i < CALLERS + FSYNCERS; i++)
        args[i] = (struct caller_args){.f = f, .errs = &errs, .fsyncs = i >= CALLERS};
    tm_run_threads(CALLERS + FSYNCERS, caller, args, sizeof args[0]);
    tm_errs_check(&errs);
    long threads = tm_proc_status(f->m->daemon, "Threads") - SANITIZER_THREADS;
    /* Over the ring also a queue thread per CPU, its stall watch and up to
     * 4 workers. */
    long ring = over_ring() ? sysconf(_SC_NPROCESSORS_CONF) + 1 + 4 : 0;
    if (threads < 3 || threads > 2 + 8 + ring)
        fail_msg("the daemon runs %ld threads; expected its main thread, the stall watch and 1 "
                 "to 8 workers (and %ld for the ring)",
                 threads, ring);
}

/* CPU time (user + system, all threads) the process has used, in ticks. */
static long long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("open %s: %s", path, tm_errname(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        fail_msg("read %s: %s", path, tm_errname(errno));
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* after the command name */
    unsigned long long utime, stime;
    /* Fields 3 to 15: state ... utime stime. */
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                            &stime) != 2)
        fail_msg("cannot parse %s", path);
    return (long long)(utime + stime);
}

/* Once the requests stop, the reader stops polling the device after spin_us
 * and sleeps: an idle mount costs no CPU. */
static void test_idle_loop_costs_no_cpu(void **state)
{
    struct fixture *f = *state;
    stat_file_n(f, 2000);
    tm_sleep_ms(200);
    long long t0 = cpu_ticks(f->m->daemon);
    double s0 = tm_now();
    tm_sleep_ms(1000);
    long long used = cpu_ticks(f->m->daemon) - t0;
    double window = tm_now() - s0;
    double share = (double)used / (double)sysconf(_SC_CLK_TCK) / window;
    if (share >= 0.05)
        fail_msg("the idle daemon used %.0f%% of a CPU (%lld ticks in %.2f s)", share * 100, used,
                 window);
}

/* Waits up to EXIT_WAIT_MS for the daemon to exit: its exit status, or -1
 * if it had to be killed (or died by a signal). */
static int daemon_exit_status(struct fixture *f)
{
    pid_t pid = f->m->daemon;
    double end = tm_now() + EXIT_WAIT_MS / 1000.0;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && tm_now() < end)
        tm_sleep_ms(5);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fprintf(stderr, "[test_loop] the daemon did not exit in %d ms: killed\n", EXIT_WAIT_MS);
        status = -1;
    }
    f->m->daemon = 0;
    f->stopped = true;
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* SIGTERM ends loop_run (the handler only sets the session's exit flag,
 * so the reader must notice it while it sleeps): the daemon unmounts and
 * exits 0. */
static void test_sigterm_ends_loop(void **state)
{
    struct fixture *f = *state;
    stat_file_n(f, 100);
    tm_sleep_ms(300); /* the reader has stopped polling the device */
    assert_int_equal(kill(f->m->daemon, SIGTERM), 0);
    assert_int_equal(daemon_exit_status(f), 0);
    assert_false(tm_is_mounted(f->m->mnt));
}

/* An unmount from outside ends loop_run: the daemon exits 0. */
static void test_unmount_ends_loop(void **state)
{
    struct fixture *f = *state;
    stat_file_n(f, 100);
    char *argv[] = {"/usr/bin/fusermount3", "-u", f->m->mnt, NULL};
    assert_int_equal(tm_run(argv, NULL, 10), 0);
    assert_false(tm_is_mounted(f->m->mnt));
    assert_int_equal(daemon_exit_status(f), 0);
}

int main(int argc, char *argv[])
{
    if (argc == 3 && strcmp(argv[1], "--serve") == 0)
        return serve(argv[2]);
    tm_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_waiting_request_holds_up_no_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stalled_inline_request_holds_up_no_other, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_callers_all_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_loop_costs_no_cpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_ends_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unmount_ends_loop, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
