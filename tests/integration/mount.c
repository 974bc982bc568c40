/*
 * Integration-test harness (see mount.h).
 *
 * Two ways out must never leave a mount behind: the orderly one (tm_free,
 * atexit) unmounts with fusermount3 and checks the daemon's exit status; the
 * emergency one (watchdog expiry, termination signal, abort) kills every
 * daemon first -- which aborts any FUSE request the test is stuck in -- then
 * unmounts lazily, using only async-signal-safe calls.
 */
#include "mount.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TM_MAX_MOUNTS 8
/* A daemon built with ThreadSanitizer runs several times slower (one on
 * RADOS took over 10 s to mount at load 12). */
#ifdef __SANITIZE_THREAD__
#define TM_MOUNT_WAIT_S 60
#else
#define TM_MOUNT_WAIT_S 10
#endif
#define TM_EXIT_WAIT_S 30
#define TM_CMD_WAIT_S 60

/*
 * Harness state, shared with the watchdog thread and the SIGABRT handler.
 * `mounts`, `deadline` and `what` are guarded by `mu`; the emergency paths
 * read `mounts` without it because the process is about to die and a thread
 * stuck in a FUSE request may hold nothing we could wait for anyway.
 * `fusermount`, `rm`, `sigs` and `inited` are written once by tm_init().
 */
static struct {
    pthread_mutex_t mu;
    struct tmount *mounts[TM_MAX_MOUNTS];
    double deadline; /* 0: watchdog disarmed */
    char what[256];
    char fusermount[PATH_MAX];
    char rm[PATH_MAX];
    sigset_t sigs; /* termination signals, received by the watchdog */
    bool inited;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Set when an emergency cleanup starts.  Killing the daemon unblocks the
 * test, which must not then go on to unmount twice or exit with success:
 * every harness entry point stops dead instead, until the emergency path
 * ends the process with a failure status. */
static atomic_bool dying;

static void stop_if_dying(void)
{
    while (atomic_load(&dying))
        pause();
}

/* ---------------------------------------------------------------- misc */

double tm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void tm_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

const char *tm_errname(int err)
{
    static _Thread_local char buf[32];
    const char *name = err ? strerrorname_np(err) : "0";
    if (name)
        return name;
    snprintf(buf, sizeof buf, "errno %d", err);
    return buf;
}

bool tm_plain(void)
{
    const char *d = getenv("LSMFS_TEST_DIR");
    return d && *d;
}

static bool keep_dirs(void)
{
    const char *k = getenv("LSMFS_TEST_KEEP");
    return k && *k && strcmp(k, "0") != 0;
}

static uint64_t seed_value;
static void seed_once(void)
{
    const char *s = getenv("LSMFS_TEST_SEED");
    if (s && *s) {
        seed_value = strtoull(s, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed_value =
            ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }
    fprintf(stderr, "[harness] seed %llu (LSMFS_TEST_SEED=%llu repeats it)\n",
            (unsigned long long)seed_value, (unsigned long long)seed_value);
}

uint64_t tm_seed(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, seed_once);
    return seed_value;
}

/* Runs the shell command line `line`, its output into out (as tm_sh). */
static int run_sh(char *out, size_t cap, const char *line)
{
    FILE *p = popen(line, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

long tm_proc_status(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *fp = fopen(path, "re");
    if (fp == NULL)
        return -1;
    long v = -1;
    size_t len = strlen(key);
    while (v < 0 && fgets(line, sizeof line, fp))
        if (strncmp(line, key, len) == 0 && line[len] == ':')
            v = strtol(line + len + 1, NULL, 10);
    fclose(fp);
    return v;
}

int tm_sh(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[5 * PATH_MAX];
    int n = snprintf(cmd, sizeof cmd, "exec 2>&1; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    return run_sh(out, cap, cmd);
}

int tm_lsmctl(char *out, size_t cap, const char *fmt, ...)
{
    char args[4 * PATH_MAX], cmd[5 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout -s KILL 120 %s %s 2>&1", tm_bin("lsmctl"), args);
    return run_sh(out, cap, cmd);
}

const char *tm_bin(const char *prog)
{
    static char buf[PATH_MAX + 64];
    const char *dir = getenv("LSMFS_BIN");
    if (!dir || !*dir)
        dir = "bin";
    char real[PATH_MAX];
    if (!realpath(dir, real))
        snprintf(real, sizeof real, "%s", dir);
    snprintf(buf, sizeof buf, "%s/%s", real, prog);
    return buf;
}

const char *tm_path(const struct tmount *m, const char *fmt, ...)
{
    static _Thread_local char ring[8][PATH_MAX];
    static _Thread_local unsigned next;
    char *buf = ring[next++ % 8];
    int n = snprintf(buf, PATH_MAX, "%s/", m->mnt);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, PATH_MAX - (size_t)n, fmt, ap);
    va_end(ap);
    return buf;
}

/* ------------------------------------------------------------- data */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void tm_fill(void *buf, size_t n, uint64_t seed, uint64_t off)
{
    unsigned char *p = buf;
    size_t i = 0;
    while (i < n) {
        uint64_t pos = off + i;
        uint64_t word = mix64(seed ^ mix64(pos >> 3));
        for (unsigned b = (unsigned)(pos & 7); b < 8 && i < n; b++, i++)
            p[i] = (unsigned char)(word >> (8 * b));
    }
}

uint64_t tm_hash(const void *buf, size_t n, uint64_t h)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int tm_pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

ssize_t tm_pread_all(int fd, void *buf, size_t n, off_t off)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, p + got, n - got, off + (off_t)got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int tm_write_file(const char *path, const void *buf, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -errno;
    int rc = tm_pwrite_all(fd, buf, n, 0);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

ssize_t tm_read_file(const char *path, void *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -errno;
    ssize_t r = tm_pread_all(fd, buf, cap, 0);
    close(fd);
    return r;
}

/* --------------------------------------------------------- processes */

/* In a forked child: undo the harness's signal set-up, send output to
 * `logfd` (if >= 0), drop every other descriptor, exec.  Async-signal-safe
 * calls only: the parent has threads. */
static void child_exec(const char *path, char *const argv[], int logfd, pid_t parent)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGABRT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    /* Its own process group: a signal for the test's group (Ctrl-C,
     * timeout(1)) must not kill the daemon behind the harness's back. */
    setpgid(0, 0);
    /* If the test dies without cleaning up, take the daemon along. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        dup2(devnull, 0);
    if (logfd >= 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
    }
    close_range(3, ~0U, 0);
    execve(path, argv, environ);
    _exit(127);
}

/* Start argv with output appended to log (NULL: inherited).  pid or -1. */
static pid_t spawn(char *const argv[], const char *log)
{
    int logfd = -1;
    if (log) {
        logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (logfd < 0) {
            fprintf(stderr, "[harness] open %s: %s\n", log, strerror(errno));
            return -1;
        }
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec(argv[0], argv, logfd, parent);
    if (pid < 0)
        fprintf(stderr, "[harness] fork: %s\n", strerror(errno));
    if (logfd >= 0)
        close(logfd);
    return pid;
}

/* waitpid(pid, status, 0), resumed after signals.  Async-signal-safe. */
static pid_t reap(pid_t pid, int *status)
{
    pid_t r;
    while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
        ;
    return r;
}

/* SIGKILL pid and reap it; *status as from waitpid, -1 if it could not be
 * reaped.  Async-signal-safe. */
static void kill_and_reap(pid_t pid, int *status)
{
    kill(pid, SIGKILL);
    if (reap(pid, status) != pid)
        *status = -1;
}

/* Wait up to timeout_s for pid; on timeout SIGKILL it.  Fills *status and
 * returns 0 if it exited in time, -1 if it had to be killed. */
static int wait_pid(pid_t pid, unsigned timeout_s, int *status)
{
    double end = tm_now() + timeout_s;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR) {
            *status = -1;
            return 0;
        }
        if (tm_now() > end)
            break;
        tm_sleep_ms(5);
    }
    kill_and_reap(pid, status);
    return -1;
}

int tm_run(char *const argv[], const char *log, unsigned timeout_s)
{
    pid_t pid = spawn(argv, log);
    if (pid < 0)
        return -1;
    int status;
    if (wait_pid(pid, timeout_s, &status) != 0) {
        fprintf(stderr, "[harness] %s did not finish in %u s: killed\n", argv[0], timeout_s);
        return -1;
    }
    if (status != -1 && WIFEXITED(status))
        return WEXITSTATUS(status);
    if (status != -1 && WIFSIGNALED(status))
        fprintf(stderr, "[harness] %s killed by signal %d\n", argv[0], WTERMSIG(status));
    return -1;
}

static void describe_status(const char *who, int status)
{
    if (status == -1)
        fprintf(stderr, "[harness] %s: lost track of the process\n", who);
    else if (WIFEXITED(status))
        fprintf(stderr, "[harness] %s exited with status %d\n", who, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        fprintf(stderr, "[harness] %s killed by signal %d (%s)\n", who, WTERMSIG(status),
                strsignal(WTERMSIG(status)));
}

/* ------------------------------------------------------------ mounts */

/* Whether m has a daemon to `op` (unmount, stop, kill); says so if not. */
static bool has_daemon(const struct tmount *m, const char *op)
{
    if (m->daemon > 0)
        return true;
    fprintf(stderr, "[harness] %s: %s has no daemon\n", op, m->mnt);
    return false;
}

/* Is path a fuse mount point in /proc/mounts? */
static bool is_mounted(const char *path)
{
    FILE *f = fopen("/proc/mounts", "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char dev[1024], dir[PATH_MAX], type[256];
        if (sscanf(line, "%1023s %4095s %255s", dev, dir, type) == 3 && strcmp(dir, path) == 0 &&
            strncmp(type, "fuse", 4) == 0)
            found = true;
    }
    fclose(f);
    return found;
}

static int fusermount(const char *mnt, bool lazy)
{
    char *argv[] = {H.fusermount, lazy ? "-uz" : "-u", (char *)mnt, NULL};
    return tm_run(argv, NULL, TM_CMD_WAIT_S);
}

void tm_dump_log(const struct tmount *m)
{
    int fd = open(m->log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > 4096 ? size - 4096 : 0;
    char buf[4097];
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    fprintf(stderr, "[harness] ---- tail of %s ----\n%s%s[harness] ----\n", m->log, buf,
            buf[n - 1] == '\n' ? "" : "\n");
}

bool tm_daemon_alive(struct tmount *m)
{
    if (m->plain)
        return true;
    if (m->daemon <= 0)
        return false;
    int status;
    pid_t r = waitpid(m->daemon, &status, WNOHANG);
    if (r == 0)
        return true;
    if (r == m->daemon) {
        describe_status("lsmfs", status);
        m->daemon = 0;
    }
    return false;
}

/* The path of `lib` next to this program, or NULL (after saying why). */
static const char *shim_path(const char *lib, char *path, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "[harness] readlink /proc/self/exe: %s\n", strerror(errno));
        return NULL;
    }
    exe[n] = '\0';
    snprintf(path, len, "%s/%s", dirname(exe), lib);
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "[harness] %s is missing (make builds it with the tests)\n", path);
        return NULL;
    }
    return path;
}

const char *tm_preload_asan_options(void)
{
    static char opts[512];
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    return opts;
}

int tm_mount_with_shim(struct tmount *m, const char *lib, const char *name, const char *value)
{
    char path[PATH_MAX];
    if (shim_path(lib, path, sizeof path) == NULL)
        return -1;
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    setenv("ASAN_OPTIONS", tm_preload_asan_options(), 1);
    setenv("LD_PRELOAD", path, 1);
    setenv(name, value, 1);
    int r = tm_mount(m);
    unsetenv("LD_PRELOAD");
    unsetenv(name);
    if (saved) {
        setenv("ASAN_OPTIONS", saved, 1);
        free(saved);
    } else {
        unsetenv("ASAN_OPTIONS");
    }
    return r;
}

int tm_mount(struct tmount *m)
{
    stop_if_dying();
    if (m->plain)
        return 0;
    if (m->daemon > 0 || is_mounted(m->mnt)) {
        fprintf(stderr, "[harness] %s is already mounted\n", m->mnt);
        return -1;
    }
    char lsmfs[PATH_MAX];
    snprintf(lsmfs, sizeof lsmfs, "%s", tm_bin("lsmfs"));
    char *argv[] = {lsmfs, m->store, m->mnt, "-f", "-o", m->opts, NULL};
    if (!m->opts[0])
        argv[4] = NULL;
    pid_t pid = spawn(argv, m->log);
    if (pid < 0)
        return -1;
    m->daemon = pid;
    double end = tm_now() + TM_MOUNT_WAIT_S;
    while (!is_mounted(m->mnt)) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            m->daemon = 0;
            describe_status("lsmfs exited before mounting:", status);
            tm_dump_log(m);
            return -1;
        }
        if (tm_now() > end) {
            fprintf(stderr, "[harness] %s not mounted after %d s\n", m->mnt, TM_MOUNT_WAIT_S);
            tm_crash(m);
            tm_dump_log(m);
            return -1;
        }
        tm_sleep_ms(2);
    }
    /* The mount is listed before the daemon answers INIT; the first stat
     * waits for it, so the test starts on a working file system. */
    struct stat st;
    if (stat(m->mnt, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "[harness] stat %s after mounting: %s\n", m->mnt, strerror(errno));
        tm_dump_log(m);
        return -1;
    }
    return 0;
}

/* Wait for the daemon after its mount went away; 0 if it exited with 0. */
static int reap_daemon(struct tmount *m)
{
    int status;
    int rc = 0;
    if (wait_pid(m->daemon, TM_EXIT_WAIT_S, &status) != 0) {
        fprintf(stderr,
                "[harness] lsmfs did not exit within %d s of the "
                "unmount: killed\n",
                TM_EXIT_WAIT_S);
        rc = -1;
    } else if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        describe_status("lsmfs (after unmount)", status);
        rc = -1;
    }
    m->daemon = 0;
    if (rc != 0)
        tm_dump_log(m);
    return rc;
}

int tm_unmount(struct tmount *m)
{
    stop_if_dying();
    if (m->plain)
        return 0;
    if (!has_daemon(m, "unmount")) {
        if (is_mounted(m->mnt))
            fusermount(m->mnt, true);
        return -1;
    }
    if (fusermount(m->mnt, false) != 0) {
        fprintf(stderr,
                "[harness] fusermount3 -u %s failed (a file left "
                "open on it?)\n",
                m->mnt);
        return -1;
    }
    int rc = reap_daemon(m);
    if (is_mounted(m->mnt)) {
        fprintf(stderr, "[harness] %s still in /proc/mounts\n", m->mnt);
        rc = -1;
    }
    return rc;
}

int tm_stop(struct tmount *m, int sig)
{
    stop_if_dying();
    if (m->plain)
        return 0;
    if (!has_daemon(m, "stop"))
        return -1;
    kill(m->daemon, sig);
    int rc = reap_daemon(m);
    if (is_mounted(m->mnt)) {
        fprintf(stderr,
                "[harness] lsmfs exited on signal %d but left %s "
                "mounted\n",
                sig, m->mnt);
        tm_umount_path(m->mnt);
        rc = -1;
    }
    return rc;
}

bool tm_is_mounted(const char *path)
{
    return is_mounted(path);
}

int tm_umount_path(const char *path)
{
    if (is_mounted(path) && fusermount(path, false) != 0)
        fusermount(path, true);
    return is_mounted(path) ? -1 : 0;
}

int tm_remount(struct tmount *m)
{
    if (tm_unmount(m) != 0)
        return -1;
    return tm_mount(m);
}

int tm_kill(struct tmount *m)
{
    stop_if_dying();
    if (m->plain)
        return 0;
    if (!has_daemon(m, "kill"))
        return -1;
    int rc = 0;
    int status;
    kill_and_reap(m->daemon, &status);
    if (status == -1 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        describe_status("lsmfs died before it was killed:", status);
        tm_dump_log(m);
        rc = -1;
    }
    m->daemon = 0;
    return rc;
}

int tm_crash(struct tmount *m)
{
    stop_if_dying();
    if (m->plain)
        return 0;
    int rc = 0;
    if (m->daemon > 0)
        rc = tm_kill(m);
    if (is_mounted(m->mnt) && fusermount(m->mnt, false) != 0) {
        fprintf(stderr,
                "[harness] fusermount3 -u of the crashed %s failed; "
                "detaching lazily\n",
                m->mnt);
        fusermount(m->mnt, true);
        rc = -1;
    }
    if (is_mounted(m->mnt)) {
        fprintf(stderr, "[harness] %s still in /proc/mounts\n", m->mnt);
        rc = -1;
    }
    return rc;
}

int tm_fsck(struct tmount *m)
{
    stop_if_dying();
    if (m->plain)
        return 0;
    if (m->daemon > 0) {
        fprintf(stderr, "[harness] fsck: %s is still mounted\n", m->store);
        return -1;
    }
    char fsck[PATH_MAX], log[PATH_MAX + 16];
    snprintf(fsck, sizeof fsck, "%s", tm_bin("fsck.lsmfs"));
    snprintf(log, sizeof log, "%s/fsck.log", m->root);
    unlink(log);
    char *argv[] = {fsck, "-n", m->store, NULL};
    int rc = tm_run(argv, log, TM_CMD_WAIT_S);
    if (rc != 0) {
        fprintf(stderr, "[harness] fsck.lsmfs -n exited %d:\n", rc);
        char buf[8192];
        int fd = open(log, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0) {
            buf[n] = 0;
            fputs(buf, stderr);
        }
    }
    return rc;
}

/* ------------------------------------------------- create and destroy */

static void registry_set(struct tmount *old, struct tmount *new)
{
    pthread_mutex_lock(&H.mu);
    for (int i = 0; i < TM_MAX_MOUNTS; i++) {
        if (H.mounts[i] == old) {
            H.mounts[i] = new;
            break;
        }
    }
    pthread_mutex_unlock(&H.mu);
}

static bool have_binaries(void)
{
    static const char *const progs[] = {"lsmfs", "mkfs.lsmfs", "fsck.lsmfs"};
    for (size_t i = 0; i < sizeof progs / sizeof *progs; i++) {
        if (access(tm_bin(progs[i]), X_OK) != 0) {
            fprintf(stderr,
                    "[harness] %s: %s (set LSMFS_BIN to the "
                    "directory holding the lsmfs binaries)\n",
                    tm_bin(progs[i]), strerror(errno));
            return false;
        }
    }
    return true;
}

/* tests/run.sh sets LSMFS_TEST_RUN to its pid, so that its check for mounts
 * left behind sees only its own runs' directories, not a concurrent run's. */
static const char *run_tag(void)
{
    const char *t = getenv("LSMFS_TEST_RUN");
    return t && *t ? t : "0";
}

int tm_mkdtemp(char *out, const char *name)
{
    snprintf(out, PATH_MAX, "/tmp/lsmfs-test-%s-%s-XXXXXX", run_tag(), name);
    if (!mkdtemp(out)) {
        fprintf(stderr, "[harness] mkdtemp %s: %s\n", out, strerror(errno));
        return -1;
    }
    return 0;
}

int tm_tmpfs_store(char *host, const char *name, const char *size, char *store)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s", size);
    if (tm_mkdtemp(host, name) != 0)
        return -1;
    if (mount("tmpfs", host, "tmpfs", 0, opts) != 0) {
        fprintf(stderr, "[harness] mount tmpfs on %s: %s\n", host, strerror(errno));
        return -1;
    }
    snprintf(store, PATH_MAX + 8, "%s/store", host);
    if (mkdir(store, 0755) != 0) {
        fprintf(stderr, "[harness] mkdir %s: %s\n", store, strerror(errno));
        return -1;
    }
    return 0;
}

static int make_dirs(struct tmount *m)
{
    const char *base = tm_plain() ? getenv("LSMFS_TEST_DIR") : "/tmp";
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/lsmfs-test-%s-XXXXXX", base, run_tag());
    if (!mkdtemp(tmpl) || !realpath(tmpl, m->root)) {
        fprintf(stderr, "[harness] mkdtemp %s: %s\n", tmpl, strerror(errno));
        return -1;
    }
    /* mkdtemp makes it 0700: other users' tests must reach the mount. */
    chmod(m->root, 0755);
    snprintf(m->store, sizeof m->store, "%.4000s/store", m->root);
    snprintf(m->mnt, sizeof m->mnt, "%.4000s/mnt", m->root);
    snprintf(m->log, sizeof m->log, "%.4000s/daemon.log", m->root);
    if (mkdir(m->store, 0755) != 0 || mkdir(m->mnt, 0755) != 0) {
        fprintf(stderr, "[harness] mkdir in %s: %s\n", m->root, strerror(errno));
        return -1;
    }
    return 0;
}

/* opts, then LSMFS_TEST_OPTS, then uring=LSMFS_TEST_URING (the transport
 * under test) unless opts name a transport themselves. */
static void set_opts(struct tmount *m, const char *opts)
{
    const char *extra = getenv("LSMFS_TEST_OPTS");
    const char *uring = getenv("LSMFS_TEST_URING");
    if (!opts)
        opts = "";
    if (!extra)
        extra = "";
    char transport[64] = "";
    if (uring != NULL && *uring && strstr(opts, "uring=") == NULL)
        snprintf(transport, sizeof transport, "uring=%.40s", uring);
    snprintf(m->opts, sizeof m->opts, "%s%s%s%s%s", opts, *opts && *extra ? "," : "", extra,
             (*opts || *extra) && *transport ? "," : "", transport);
}

bool tm_has_opt(const struct tmount *m, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = m->opts; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, opt, n) == 0)
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

static int mkfs(struct tmount *m)
{
    char prog[PATH_MAX];
    snprintf(prog, sizeof prog, "%s", tm_bin("mkfs.lsmfs"));
    char *argv[] = {prog, m->store, NULL};
    int rc = tm_run(argv, m->log, TM_CMD_WAIT_S);
    if (rc != 0) {
        fprintf(stderr, "[harness] mkfs.lsmfs %s exited %d\n", m->store, rc);
        tm_dump_log(m);
        return -1;
    }
    return 0;
}

/* A fresh temp dir, registered for cleanup; `plain` and `opts` as for
 * tm_new.  NULL (after saying why) if it could not be made. */
static struct tmount *new_registered(bool plain, const char *opts)
{
    if (!H.inited) {
        fprintf(stderr, "[harness] tm_init() was not called\n");
        abort();
    }
    struct tmount *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->plain = plain;
    set_opts(m, opts);
    if (make_dirs(m) != 0) {
        free(m);
        return NULL;
    }
    registry_set(NULL, m);
    return m;
}

struct tmount *tm_new(const char *opts)
{
    struct tmount *m = new_registered(tm_plain(), opts);
    if (!m || m->plain)
        return m;
    if (!have_binaries() || mkfs(m) != 0 || tm_mount(m) != 0) {
        tm_free(m);
        return NULL;
    }
    return m;
}

struct tmount *tm_new_in(const char *opts, const char *store_dir)
{
    struct tmount *m = new_registered(false, opts);
    if (!m)
        return NULL;
    if (rmdir(m->store) != 0 || symlink(store_dir, m->store) != 0) {
        fprintf(stderr, "[harness] store link %s -> %s: %s\n", m->store, store_dir,
                strerror(errno));
        tm_free(m);
        return NULL;
    }
    if (!have_binaries() || mkfs(m) != 0 || tm_mount(m) != 0) {
        tm_free(m);
        return NULL;
    }
    return m;
}

struct tmount *tm_new_at(const char *opts, const char *store, bool make)
{
    struct tmount *m = new_registered(false, opts);
    if (!m)
        return NULL;
    snprintf(m->store, sizeof m->store, "%s", store);
    if (!have_binaries() || (make && mkfs(m) != 0) || tm_mount(m) != 0) {
        tm_free(m);
        return NULL;
    }
    return m;
}

struct tmount *tm_new_external(void)
{
    return new_registered(false, NULL);
}

/* Close descriptors a failed test left open on the mount: they would make
 * the unmount fail with EBUSY. */
static int close_leaked_fds(const struct tmount *m)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    size_t len = strlen(m->mnt);
    int closed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        char link[64], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = 0;
        if (strncmp(target, m->mnt, len) == 0 && (target[len] == 0 || target[len] == '/')) {
            close(fd);
            closed++;
        }
    }
    closedir(d);
    return closed;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

int tm_rmtree(const char *path)
{
    /* FTW_MOUNT: never descend into a mount that failed to go away. */
    nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    return access(path, F_OK) == 0 ? -1 : 0;
}

static void remove_tree(const struct tmount *m)
{
    if (keep_dirs()) {
        fprintf(stderr, "[harness] kept %s\n", m->root);
        return;
    }
    tm_rmtree(m->root);
}

int tm_free(struct tmount *m)
{
    stop_if_dying();
    if (!m)
        return 0;
    int rc = 0;
    if (!m->plain) {
        int leaked = close_leaked_fds(m);
        if (leaked) {
            fprintf(stderr, "[harness] closed %d file(s) left open on %s\n", leaked, m->mnt);
            rc = -1;
        }
        if (m->daemon > 0 && tm_unmount(m) != 0)
            rc = -1;
        if (m->daemon > 0 || is_mounted(m->mnt))
            tm_crash(m);
        if (is_mounted(m->mnt)) {
            fusermount(m->mnt, true);
            rc = -1;
        }
        if (is_mounted(m->mnt))
            fprintf(stderr, "[harness] COULD NOT UNMOUNT %s\n", m->mnt);
    }
    remove_tree(m);
    registry_set(m, NULL);
    free(m);
    return rc;
}

/* ---------------------------------------------------------- emergency */

static void say(const char *s)
{
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

/* fork + execve + waitpid: async-signal-safe. */
static void run_as_safe(const char *path, char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(path, argv, environ);
        _exit(127);
    }
    int status;
    if (pid > 0)
        reap(pid, &status);
}

/* Kill every daemon (aborting any request a thread is stuck in), detach
 * every mount, remove the temp dirs.  Async-signal-safe. */
static void emergency_cleanup(void)
{
    atomic_store(&dying, true);
    for (int i = 0; i < TM_MAX_MOUNTS; i++) {
        struct tmount *m = H.mounts[i];
        if (!m || m->plain)
            continue;
        if (m->daemon > 0) {
            int status;
            kill_and_reap(m->daemon, &status);
            m->daemon = 0;
        }
        char *um[] = {H.fusermount, "-uz", m->mnt, NULL};
        run_as_safe(H.fusermount, um);
        if (!keep_dirs()) {
            char *rm[] = {H.rm, "-rf", "--one-file-system", m->root, NULL};
            run_as_safe(H.rm, rm);
        }
    }
}

static void on_abort(int sig)
{
    say("[harness] abort: unmounting everything\n");
    emergency_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The watchdog thread: receives the termination signals (blocked in every
 * other thread) and enforces the deadline set by tm_watchdog(). */
static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec tick = {0, 100 * 1000000L};
        int sig = sigtimedwait(&H.sigs, NULL, &tick);
        if (sig > 0) {
            say("[harness] terminated by a signal: unmounting everything\n");
            emergency_cleanup();
            _exit(128 + sig);
        }
        pthread_mutex_lock(&H.mu);
        bool expired = H.deadline > 0 && tm_now() > H.deadline;
        char what[sizeof H.what];
        memcpy(what, H.what, sizeof what);
        pthread_mutex_unlock(&H.mu);
        if (expired) {
            fprintf(stderr,
                    "[harness] TIMEOUT: %s did not finish in time "
                    "(a hung FUSE request?); killing the daemon\n",
                    what);
            emergency_cleanup();
            fprintf(stderr, "[harness] FAILED: %s timed out\n", what);
            _exit(1);
        }
    }
    return NULL;
}

void tm_watchdog(unsigned seconds, const char *what)
{
    pthread_mutex_lock(&H.mu);
    H.deadline = seconds ? tm_now() + seconds : 0;
    snprintf(H.what, sizeof H.what, "%s", what ? what : "test");
    pthread_mutex_unlock(&H.mu);
}

static void cleanup_at_exit(void)
{
    stop_if_dying();
    for (int i = 0; i < TM_MAX_MOUNTS; i++) {
        pthread_mutex_lock(&H.mu);
        struct tmount *m = H.mounts[i];
        pthread_mutex_unlock(&H.mu);
        if (m)
            tm_free(m);
    }
}

static void find_tool(char *out, const char *name)
{
    static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(out, PATH_MAX, "%s/%s", dirs[i], name);
        if (access(out, X_OK) == 0)
            return;
    }
    snprintf(out, PATH_MAX, "/usr/bin/%s", name);
}

void tm_init(void)
{
    if (H.inited)
        return;
    find_tool(H.fusermount, "fusermount3");
    find_tool(H.rm, "rm");
    sigemptyset(&H.sigs);
    sigaddset(&H.sigs, SIGINT);
    sigaddset(&H.sigs, SIGTERM);
    sigaddset(&H.sigs, SIGHUP);
    sigaddset(&H.sigs, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &H.sigs, NULL);
    signal(SIGABRT, on_abort);
    /* A closed output pipe must fail a write, not kill the test before it
     * has unmounted. */
    signal(SIGPIPE, SIG_IGN);
    pthread_t t;
    if (pthread_create(&t, NULL, watchdog, NULL) != 0) {
        fprintf(stderr, "[harness] cannot start the watchdog thread\n");
        abort();
    }
    pthread_detach(t);
    atexit(cleanup_at_exit);
    H.inited = true;
}

/* ------------------------------------------- cmocka fixture and checks */

int tm_setup(void **state, unsigned timeout_s, const char *what, const char *opts)
{
    tm_watchdog(timeout_s, what);
    struct tmount *m = tm_new(opts);
    if (!m) {
        tm_watchdog(0, NULL);
        return -1;
    }
    *state = m;
    return 0;
}

int tm_teardown(void **state)
{
    struct tmount *m = *state;
    bool alive = tm_daemon_alive(m);
    int rc = tm_free(m);
    tm_watchdog(0, NULL);
    if (!alive) {
        fprintf(stderr, "[harness] the daemon died during the test\n");
        return -1;
    }
    return rc;
}

/* fsck -n of the unmounted store must pass; then mount it again. */
static void fsck_and_mount(struct tmount *m, const char *when)
{
    int rc = tm_fsck(m);
    if (rc != 0)
        fail_msg("%s: fsck.lsmfs -n exited %d", when, rc);
    if (tm_mount(m) != 0)
        fail_msg("%s: mounting again failed", when);
}

void tm_remount_checked(struct tmount *m)
{
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    fsck_and_mount(m, "after a clean unmount");
}

void tm_crash_checked(struct tmount *m, const char *when)
{
    if (tm_crash(m) != 0)
        fail_msg("%s: the crash left a mount behind or the daemon had died", when);
    fsck_and_mount(m, when);
}

void tm_run_threads(int n, void *(*fn)(void *), void *args, size_t size)
{
    enum { MAX_THREADS = 64 };
    pthread_t t[MAX_THREADS];
    assert_true(n > 0 && n <= MAX_THREADS);
    for (int i = 0; i < n; i++) {
        int err = pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * size);
        if (err != 0)
            fail_msg("pthread_create: %s", tm_errname(err));
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

void tm_touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        fail_msg("create %s: %s", path, tm_errname(errno));
    close(fd);
}

void tm_make_file(const char *path, size_t size, uint64_t seed)
{
    char *buf = malloc(size + 1);
    assert_non_null(buf);
    tm_fill(buf, size, seed, 0);
    int rc = tm_write_file(path, buf, size, 0644);
    free(buf);
    if (rc != 0)
        fail_msg("writing %s: %s", path, tm_errname(-rc));
}

int tm_sync_path(const char *path, bool dir)
{
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

void tm_fsync_path(const char *path, bool dir)
{
    int rc = tm_sync_path(path, dir);
    if (rc != 0)
        fail_msg("fsync %s: %s", path, tm_errname(-rc));
}

/* Index of the first byte where a and b differ (n if none). */
static size_t first_difference(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

void tm_check_bytes(const void *got, const void *want, size_t n, const char *what, long long base)
{
    const unsigned char *g = got, *w = want;
    size_t i = first_difference(g, w, n);
    if (i < n)
        fail_msg("%s: byte %lld is 0x%02x, expected 0x%02x", what, base + (long long)i, g[i], w[i]);
}

void tm_check_zero(const void *got, size_t n, const char *what, long long base)
{
    const unsigned char *g = got;
    for (size_t i = 0; i < n; i++)
        if (g[i])
            fail_msg("%s: byte %lld is 0x%02x, expected 0 (a hole)", what, base + (long long)i,
                     g[i]);
}

/* What is wrong with the open file fd (path) against `size` bytes of
 * tm_fill(seed), in msg; false if nothing. */
static bool file_differs(int fd, const char *path, size_t size, uint64_t seed, char *msg,
                         size_t cap)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(msg, cap, "fstat %s: %s", path, tm_errname(errno));
        return true;
    }
    if (st.st_size != (off_t)size) {
        snprintf(msg, cap, "%s: size %lld, expected %zu", path, (long long)st.st_size, size);
        return true;
    }
    unsigned char *got = malloc(MiB), *want = malloc(MiB);
    bool differs = got == NULL || want == NULL;
    if (differs)
        snprintf(msg, cap, "%s: out of memory", path);
    for (size_t off = 0; !differs && off < size; off += MiB) {
        size_t n = size - off < (size_t)MiB ? size - off : (size_t)MiB;
        ssize_t r = tm_pread_all(fd, got, n, (off_t)off);
        if (r != (ssize_t)n) {
            snprintf(msg, cap, "%s: read %zd of %zu bytes at %zu", path, r, n, off);
            differs = true;
            break;
        }
        tm_fill(want, n, seed, off);
        size_t i = first_difference(got, want, n);
        if (i < n) {
            snprintf(msg, cap, "%s: byte %zu is 0x%02x, expected 0x%02x", path, off + i, got[i],
                     want[i]);
            differs = true;
        }
    }
    char c;
    if (!differs && tm_pread_all(fd, &c, 1, (off_t)size) != 0) {
        snprintf(msg, cap, "%s: data past its size %zu", path, size);
        differs = true;
    }
    free(got);
    free(want);
    return differs;
}

void tm_check_file(const char *path, size_t size, uint64_t seed)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail_msg("open %s: %s", path, tm_errname(errno));
    /* Drop the cached pages: the bytes must come from the daemon. */
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    char msg[PATH_MAX + 128];
    bool differs = file_differs(fd, path, size, seed, msg, sizeof msg);
    close(fd); /* before failing: a file left open would fail the unmount */
    if (differs)
        fail_msg("%s", msg);
}

uint64_t tm_hash_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail_msg("open %s: %s", path, tm_errname(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    char *buf = malloc(MiB);
    assert_non_null(buf);
    uint64_t h = TM_HASH_INIT;
    off_t off = 0;
    ssize_t n;
    while ((n = tm_pread_all(fd, buf, MiB, off)) > 0) {
        h = tm_hash(buf, (size_t)n, h);
        off += n;
    }
    close(fd);
    free(buf);
    if (n < 0)
        fail_msg("read %s at %lld: %s", path, (long long)off, tm_errname((int)-n));
    return h;
}

/* The root's user.lsmfs.stats text (static storage, until the next call). */
static const char *stats_text(const struct tmount *m)
{
    static char buf[16384];
    ssize_t n = getxattr(m->mnt, "user.lsmfs.stats", buf, sizeof buf - 1);
    if (n <= 0)
        fail_msg("getxattr user.lsmfs.stats: %s", tm_errname(errno));
    buf[n] = '\0';
    return buf;
}

uint64_t tm_stats_counter(const struct tmount *m, const char *key)
{
    const char *buf = stats_text(m);
    const char *p = strstr(buf, key);
    if (p == NULL)
        fail_msg("no \"%s\" in the stats:\n%s", key, buf);
    p += strlen(key);
    while (*p == ' ' || *p == ':')
        p++;
    if (*p < '0' || *p > '9')
        fail_msg("no number after \"%s\" in the stats", key);
    return strtoull(p, NULL, 10);
}

uint64_t tm_stats_requests(const struct tmount *m, const char *op)
{
    const char *buf = stats_text(m);
    const char *p = strstr(buf, "fs requests:\n");
    if (p == NULL)
        fail_msg("no request counts in the stats:\n%s", buf);
    /* Lines "  name count" follow, one per operation served at all. */
    for (p = strchr(p, '\n') + 1; p[0] == ' ' && p[1] == ' '; p = strchr(p, '\n') + 1) {
        char name[64];
        unsigned long long count;
        if (sscanf(p, "%63s %llu", name, &count) == 2 && strcmp(name, op) == 0)
            return count;
        if (strchr(p, '\n') == NULL)
            break;
    }
    return 0;
}

long long tm_inodes_used(const struct tmount *m)
{
    struct statvfs sv;
    if (statvfs(m->mnt, &sv) != 0)
        fail_msg("statvfs: %s", tm_errname(errno));
    return (long long)sv.f_files - (long long)sv.f_ffree;
}

void tm_wait_inodes(const struct tmount *m, long long want, double seconds)
{
    double end = tm_now() + seconds;
    long long got;
    while ((got = tm_inodes_used(m)) != want && tm_now() < end)
        tm_sleep_ms(20);
    if (got != want)
        fail_msg("statfs: %lld inodes in use, expected %lld", got, want);
}

void tm_errs_init(struct tm_errs *e)
{
    pthread_mutex_init(&e->mu, NULL);
    e->count = 0;
    e->first[0] = 0;
}

void tm_errs_add(struct tm_errs *e, const char *fmt, ...)
{
    pthread_mutex_lock(&e->mu);
    if (e->count++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->first, sizeof e->first, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&e->mu);
}

void tm_errs_check(struct tm_errs *e)
{
    pthread_mutex_lock(&e->mu);
    int count = e->count;
    pthread_mutex_unlock(&e->mu);
    if (count)
        fail_msg("%d problem(s) in worker threads; first: %s", count, e->first);
}
