/*
 * main.c — the lsmfs daemon: lsmfs STORE MOUNTPOINT [-f] [-d] [-s] [-o opt,...]
 *
 * Opens the store, mounts, and serves requests with our request loop
 * (loop.h; libfuse's single-threaded one with -s), and, when the kernel
 * offers it, over FUSE's io_uring queues (uring.h, -o uring=). Unless run in the
 * foreground it forks first; the parent waits until the child has opened
 * the store and mounted (or failed), so that errors are printed and
 * reflected in the exit status, and the child then detaches and logs where
 * -o log= says (log.h). SIGTERM/SIGINT/SIGHUP or an unmount end the loop; in-flight
 * requests finish (the loop joins its workers) and the store is closed.
 */
#include "transport/bdi.h"
#include "fuse_api.h"
#include "ishrink.h"
#include "killpriv.h"
#include "log.h"
#include "lsmfs.h"
#include "transport/loop.h"
#include "ops.h"
#include "store_uri.h"
#include "super.h"
#include "transport/uring.h"
#include "lsmfs_version.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

/* Request workers (-o max_threads): enough that many concurrent fsyncs all
 * reach the store's writer queue together and share a WAL sync. */
#define DEFAULT_THREADS 64
#define MAX_THREADS 4096
#define DEFAULT_SPIN_US 50
#define MAX_SPIN_US 100000
#define DEFAULT_READAHEAD_KB 4096
#define MAX_READAHEAD_KB (1024 * 1024)
/* Ring entries per CPU: each request that waits (an fsync) holds one until
 * it is answered, so this many may wait at once per CPU and still meet in
 * the store's writer queue. */
#define URING_DEPTH 16

struct options {
    char *store;
    int npos;       /* positional arguments seen */
    int max_threads; /* -o max_threads=N: request workers at most */
    int sync_all;   /* -o sync */
    int writeback;  /* -o writeback */
    int nonempty;   /* -o nonempty */
    double timeout; /* -o cache_timeout=SEC */
    int spin_us;    /* -o spin=USEC: the reader polls this long (loop.h) */
    int readahead_kb; /* -o readahead=KB: the mount's readahead window (bdi.h) */
    bool allow_root; /* -o allow_root: only root may enter besides the mounter */
    char atime[16];    /* -o atime, relatime or strictatime given (refused) */
    bool read_only;    /* -o ro */
    char *uring;       /* -o uring=auto|on|off */
    int max_inodes;    /* -o max_inodes=N: the inode budget (ishrink.h); 0 none */
    uring_mode umode;  /* o.uring parsed (options_valid) */
    char *log;         /* -o log=syslog|stderr|FILE (log.h) */
    long long reserve_pct, resuid, resgid; /* -o reserve=, resuid=, resgid= (-1: not given) */
};

enum {
    KEY_SYNC,
    KEY_WRITEBACK,
    KEY_NONEMPTY,
    KEY_DISCARD,
    KEY_ALLOW_ROOT,
    KEY_ATIME,
    KEY_RO,
    KEY_URI,
    KEY_TIMEOUT,
    KEY_SPIN,
    KEY_READAHEAD,
    KEY_THREADS,
};

static const struct fuse_opt option_spec[] = {
    FUSE_OPT_KEY("sync", KEY_SYNC),
    FUSE_OPT_KEY("writeback", KEY_WRITEBACK),
    FUSE_OPT_KEY("nonempty", KEY_NONEMPTY),
    FUSE_OPT_KEY("defaults", KEY_DISCARD),
    FUSE_OPT_KEY("allow_root", KEY_ALLOW_ROOT),
    FUSE_OPT_KEY("default_permissions", KEY_DISCARD), /* always on */
    FUSE_OPT_KEY("noatime", KEY_DISCARD),             /* what every mount is */
    FUSE_OPT_KEY("atime", KEY_ATIME),
    FUSE_OPT_KEY("relatime", KEY_ATIME),
    FUSE_OPT_KEY("strictatime", KEY_ATIME),
    FUSE_OPT_KEY("ro", KEY_RO),
    /* A store on RADOS (store_uri.h). */
    FUSE_OPT_KEY("ceph_conf=", KEY_URI),
    FUSE_OPT_KEY("ceph_id=", KEY_URI),
    FUSE_OPT_KEY("takeover", KEY_URI),
    FUSE_OPT_KEY("lease_ms=", KEY_URI),
    FUSE_OPT_KEY("cache_timeout=", KEY_TIMEOUT),
    FUSE_OPT_KEY("spin=", KEY_SPIN),
    FUSE_OPT_KEY("readahead=", KEY_READAHEAD),
    FUSE_OPT_KEY("max_threads=", KEY_THREADS), /* ours, not libfuse's (default 10) */
    {"uring=%s", offsetof(struct options, uring), 0},
    {"log=%s", offsetof(struct options, log), 0},
    {"max_inodes=%d", offsetof(struct options, max_inodes), 0},
    {"reserve=%lld", offsetof(struct options, reserve_pct), 0},
    {"resuid=%lld", offsetof(struct options, resuid), 0},
    {"resgid=%lld", offsetof(struct options, resgid), 0},
    FUSE_OPT_END,
};

/* The integer options: -o NAME=N with N in [lo, hi]. */
static const struct int_option {
    int key;
    int lo, hi;
    const char *unit;
    size_t offset; /* of the int in struct options */
} int_options[] = {
    {KEY_SPIN, 0, MAX_SPIN_US, "microseconds", offsetof(struct options, spin_us)},
    {KEY_READAHEAD, 0, MAX_READAHEAD_KB, "KiB", offsetof(struct options, readahead_kb)},
    {KEY_THREADS, 1, MAX_THREADS, "threads", offsetof(struct options, max_threads)},
};

/* -o NAME=VALUE (arg) of an int_option: the whole VALUE a decimal number
 * in range, else says so. */
static bool parse_int_option(const struct int_option *io, const char *arg, struct options *o)
{
    const char *v = strchr(arg, '=') + 1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < io->lo || n > io->hi) {
        fprintf(stderr, "lsmfs: -o %s: give %d to %d %s\n", arg, io->lo, io->hi, io->unit);
        return false;
    }
    *(int *)((char *)o + io->offset) = (int)n;
    return true;
}

/* -o cache_timeout=SEC (arg): seconds, 0 or more, else says so. */
static bool parse_timeout(const char *arg, struct options *o)
{
    const char *v = strchr(arg, '=') + 1;
    char *end;
    errno = 0;
    double t = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(t >= 0 && t <= 1e9)) {
        fprintf(stderr, "lsmfs: -o %s: give a number of seconds from 0 to 1e9\n", arg);
        return false;
    }
    o->timeout = t;
    return true;
}

/* Takes the first positional argument as the store; the second stays for
 * fuse_parse_cmdline as the mount point. fuse_opt_parse frees arg after
 * the call: keep copies. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    struct options *o = data;
    for (size_t i = 0; i < sizeof int_options / sizeof *int_options; i++)
        if (key == int_options[i].key)
            return parse_int_option(&int_options[i], arg, o) ? 0 : -1;
    switch (key) {
    case FUSE_OPT_KEY_NONOPT:
        if (o->npos++ == 0) {
            o->store = strdup(arg);
            return 0;
        }
        return 1;
    case KEY_TIMEOUT:
        return parse_timeout(arg, o) ? 0 : -1;
    case KEY_SYNC:
        o->sync_all = 1;
        return 0;
    case KEY_WRITEBACK:
        o->writeback = 1;
        return 0;
    case KEY_NONEMPTY:
        o->nonempty = 1;
        return 0;
    case KEY_DISCARD:
        return 0;
    case KEY_ALLOW_ROOT: /* noted, and kept for libfuse's mount */
        o->allow_root = true;
        return 1;
    case KEY_ATIME:
        snprintf(o->atime, sizeof o->atime, "%s", arg);
        return 0;
    case KEY_URI: {
        bool ours;
        lsm_status *s = store_uri_option(arg, &ours);
        if (s != NULL)
            fprintf(stderr, "lsmfs: %s\n", lsm_status_message(s));
        lsm_status_free(s);
        return s != NULL ? -1 : 0;
    }
    case KEY_RO: /* noted, and kept: the kernel refuses changes too */
        o->read_only = true;
        return 1;
    default:
        return 1;
    }
}

static void usage(const char *prog)
{
    printf("usage: %s STORE MOUNTPOINT [options]\n\n"
           "Mounts the lsmfs filesystem kept in the store directory STORE (made by\n"
           "mkfs.lsmfs) at MOUNTPOINT. STORE may be rados:POOL/NAME, a store on Ceph.\n\n"
           "lsmfs options:\n"
           "    -o sync                every operation is durable before it returns\n"
           "    -o writeback           let the kernel cache writes (fsync stays exact)\n"
           "    -o nonempty            allow a non-empty mount point\n"
           "    -o ro                  read-only: the store is not changed (it may be on a\n"
           "                           read-only medium); a damaged log is served as of\n"
           "                           the records before the damage\n"
           "    -o cache_timeout=SEC   kernel entry/attribute cache timeout (default 3600)\n"
           "    -o ceph_conf=PATH      for rados:POOL/NAME: ceph.conf (default $CEPH_CONF\n"
           "                           or /etc/ceph/ceph.conf)\n"
           "    -o ceph_id=NAME        the Ceph client (default admin: client.admin)\n"
           "    -o takeover            take a RADOS store over from a live lease (its host\n"
           "                           is known to be gone)\n"
           "    -o lease_ms=MS         the writer's lease on RADOS (default 10000)\n"
           "    -o spin=USEC           after a request, the reader polls /dev/fuse this long\n"
           "                           before it sleeps (default %d; 0 never polls)\n"
           "    -o readahead=KB        the mount's readahead window (default %d; 0 keeps\n"
           "                           the kernel's 128)\n"
           "    -o uring=MODE          auto (default): serve requests over FUSE's io_uring\n"
           "                           queues when the kernel offers them (" URING_PARAM_PATH "\n"
           "                           is Y), else over /dev/fuse; on: refuse to mount\n"
           "                           without them; off: /dev/fuse only\n"
           "    -o max_inodes=N        past N inodes in memory, ask the kernel to drop the\n"
           "                           least recently used (default %u; 0: no bound)\n"
           "    -o reserve=PCT,resuid=UID,resgid=GID\n"
           "                           the root reserve for this mount (default: mkfs's)\n"
           "    -o log=WHERE           syslog, stderr or a file to append to (default:\n"
           "                           syslog, stderr when there is no /dev/log or with -f)\n"
           "    -o max_threads=N       request workers at most, 1 to %d (default %d: many\n"
           "                           concurrent fsyncs share a sync; libfuse's own\n"
           "                           default below does not apply)\n\n",
           prog, DEFAULT_SPIN_US, DEFAULT_READAHEAD_KB, ISHRINK_DEFAULT_MAX, MAX_THREADS,
           DEFAULT_THREADS);
}

/* Where startup errors go: stderr, or the pipe to the waiting parent. */
static int report_fd = -1;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (report_fd >= 0) {
        char status = 1;
        if (write(report_fd, &status, 1) == 1 && write(report_fd, msg, strlen(msg)) < 0)
            status = 2; /* nothing more to do: the parent reports what it got */
    } else {
        fprintf(stderr, "lsmfs: %s\n", msg);
    }
    exit(1);
}

/* Forks; the parent waits for the child's verdict and exits with it. */
static void daemon_begin(void)
{
    int p[2];
    /* O_CLOEXEC: a helper the child execs (fusermount3, kept running by
     * -o auto_unmount) must not hold the parent's end open. */
    if (pipe2(p, O_CLOEXEC) != 0)
        fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid > 0) {
        close(p[1]);
        char buf[1100];
        size_t len = 0;
        ssize_t r;
        /* The status byte, then (on failure only) the message up to EOF. */
        while (len < sizeof buf - 1 && (len == 0 || buf[0] != 0) &&
               (r = read(p[0], buf + len, sizeof buf - 1 - len)) != 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                break;
            len += (size_t)r;
        }
        /* _exit: the parent only relays the child's verdict; the child owns
         * everything allocated so far (no exit handlers, no leak reports). */
        if (len >= 1 && buf[0] == 0)
            _exit(0);
        buf[len] = '\0';
        fprintf(stderr, "lsmfs: %s\n", len > 1 ? buf + 1 : "the daemon exited during startup");
        _exit(1);
    }
    close(p[0]);
    report_fd = p[1];
    setsid();
}

/* The child is mounted: release the parent, detach from the terminal. */
static void daemon_detach(void)
{
    char ok = 0;
    if (write(report_fd, &ok, 1) != 1)
        fuse_log(FUSE_LOG_WARNING, "could not notify the parent process\n");
    close(report_fd);
    report_fd = -1;
    if (chdir("/") != 0)
        fuse_log(FUSE_LOG_WARNING, "chdir /: %s\n", strerror(errno));
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, 0);
        dup2(fd, 1);
        if (!log_to_stderr()) /* else the log's own fd stays */
            dup2(fd, 2);
        if (fd > 2)
            close(fd);
    }
}

static void check_mountpoint(const char *mnt, bool nonempty)
{
    DIR *d = opendir(mnt);
    if (d == NULL && errno == ENOTCONN) /* its daemon died */
        fail("%s is a dead lsmfs mount: run `fusermount3 -u %s`", mnt, mnt);
    if (d == NULL)
        fail("mount point %s: %s", mnt, strerror(errno));
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = false;
    closedir(d);
    if (!empty && !nonempty)
        fail("mount point %s is not empty (use -o nonempty to mount over it)", mnt);
}

/* Refuses a mount point (absolute, resolved) where lsmfs would stack on a
 * live lsmfs mount, hiding it, or lie inside its own store directory,
 * where the daemon's new store files would go into its own mount. */
static void check_placement(const char *mnt, const char *store)
{
    size_t n = strlen(store);
    if (strncmp(mnt, store, n) == 0 && (mnt[n] == '/' || mnt[n] == '\0'))
        fail("mount point %s is inside the store directory %s: the store would be written "
             "through its own mount",
             mnt, store);
    FILE *f = setmntent("/proc/self/mounts", "r");
    if (f == NULL)
        return; /* no /proc: the kernel's own checks only */
    struct mntent *e;
    while ((e = getmntent(f)) != NULL)
        if (strcmp(e->mnt_dir, mnt) == 0 && strcmp(e->mnt_type, "fuse.lsmfs") == 0) {
            char from[PATH_MAX];
            snprintf(from, sizeof from, "%s", e->mnt_fsname);
            endmntent(f);
            fail("%s is already an lsmfs mount (of %s): unmount it first", mnt, from);
        }
    endmntent(f);
}

/* -o fsname=STORE,subtype=lsmfs,default_permissions for the kernel: the
 * kernel checks permissions on every mount, as for ext4 (POSIX ACLs need
 * it, and without it the kernel skips the checks of a setattr). */
static void add_mount_options(struct fuse_args *args, const char *store)
{
    char *opt = malloc(strlen(store) * 2 + 64);
    if (opt == NULL)
        fail("out of memory");
    char *p = opt + sprintf(opt, "-ofsname=");
    for (const char *s = store; *s; s++) { /* escape ',' and '\' for fuse_opt */
        if (*s == ',' || *s == '\\')
            *p++ = '\\';
        *p++ = *s;
    }
    strcpy(p, ",subtype=lsmfs,default_permissions");
    if (fuse_opt_add_arg(args, opt) != 0)
        fail("out of memory");
    free(opt);
}

struct mount_tuning {
    const char *mountpoint; /* absolute (fuse_parse_cmdline resolves it) */
    unsigned readahead_kb;  /* 0: leave the kernel's */
};

/* After INIT: the settings the kernel fixed at INIT. Failing is no error
 * (not root, no sysfs): the mount works with the kernel's defaults. */
static void tune_mount(void *arg)
{
    const struct mount_tuning *t = arg;
    int err = t->readahead_kb ? bdi_set_readahead(t->mountpoint, t->readahead_kb) : 0;
    /* Not root (EACCES, EPERM) is routine: every non-root mount would say it. */
    bool routine = err == EACCES || err == EPERM || err == EROFS;
    if (err != 0)
        fuse_log(routine ? FUSE_LOG_INFO : FUSE_LOG_WARNING,
                 "lsmfs: cannot set the readahead of %s to %u KiB: %s\n", t->mountpoint,
                 t->readahead_kb, strerror(err));
}

/* tuning: what the loop applies after INIT, or NULL (the ring does it). */
static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *co,
                 const struct options *o, ops_state *st, struct mount_tuning *tuning)
{
    if (co->singlethread)
        return fuse_session_loop(se);
    loop_config cfg = {
        .max_threads = (unsigned)o->max_threads,
        .spin_us = (unsigned)o->spin_us,
        .may_wait = lsmfs_request_may_wait,
        .ctx = st,
        .polls = &st->fs->stats.reader_polls,
        .poll_hits = &st->fs->stats.reader_poll_hits,
        .on_init = tuning != NULL ? tune_mount : NULL,
        .init_ctx = tuning,
    };
    return loop_run(se, &cfg);
}

/* Installs the io_uring transport on the mounted se (mode not off); it
 * applies tuning after INIT, before the ring serves a request. */
static struct uring *attach_uring(struct fuse_session *se, const struct options *o,
                                  ops_state *st, struct mount_tuning *tuning)
{
    uring_mode mode = o->umode;
    struct uring *u = NULL;
    uring_config uc = {
        .mode = mode,
        .depth = URING_DEPTH,
        .max_workers = (unsigned)o->max_threads,
        .may_wait = lsmfs_request_may_wait,
        .ctx = st,
        .served = &st->fs->stats.uring_requests,
        .active = &st->fs->stats.uring_active,
        .on_init = tune_mount,
        .init_ctx = tuning,
        .init_reply = killpriv_init_reply,
    };
    int err = uring_attach(se, &uc, &u);
    if (err != 0)
        fuse_log(mode == URING_ON ? FUSE_LOG_ERR : FUSE_LOG_NOTICE,
                 "lsmfs: cannot install the io_uring transport: %s%s\n", strerror(-err),
                 mode == URING_ON ? "" : ": serving /dev/fuse");
    return u;
}

/* --help or --version: prints what was asked. */
static void print_help_or_version(const char *argv0, const struct fuse_cmdline_opts *co)
{
    if (co->show_help) {
        usage(argv0);
        fuse_cmdline_help();
        fuse_lowlevel_help();
    } else {
        version_print(stdout, "lsmfs");
        fflush(stdout);
        fuse_lowlevel_version();
    }
}

/* Whether the command line names a store and a mount point and its -o
 * values are in range; else says why on stderr. */
static bool options_valid(const char *argv0, struct options *o,
                          const struct fuse_cmdline_opts *co)
{
    if (o->store == NULL || co->mountpoint == NULL) {
        fprintf(stderr, "usage: %s STORE MOUNTPOINT [options] (--help for more)\n", argv0);
        return false;
    }
    if (o->max_inodes != 0 && (o->max_inodes < (int)ISHRINK_MIN_MAX)) {
        fprintf(stderr, "lsmfs: max_inodes=%d: give 0 (no bound) or at least %u\n",
                o->max_inodes, ISHRINK_MIN_MAX);
        return false;
    }
    if (o->uring != NULL && uring_parse_mode(o->uring, &o->umode) != 0) {
        fprintf(stderr, "lsmfs: uring=%s: give auto, on or off\n", o->uring);
        return false;
    }
    if (o->umode == URING_ON && !uring_kernel_offers()) {
        fprintf(stderr, "lsmfs: -o uring=on: the kernel does not offer FUSE over io_uring: %s "
                        "is not Y (as root: echo Y > %s; lsmfs never changes it)\n",
                URING_PARAM_PATH, URING_PARAM_PATH);
        return false;
    }
    if (o->reserve_pct < -1 || o->reserve_pct > SCHEMA_MAX_RESERVE_PCT) {
        fprintf(stderr, "lsmfs: reserve=%lld: give 0 to %u percent\n", o->reserve_pct,
                SCHEMA_MAX_RESERVE_PCT);
        return false;
    }
    if (o->resuid < -1 || o->resuid >= UINT32_MAX || o->resgid < -1 || o->resgid >= UINT32_MAX) {
        fprintf(stderr, "lsmfs: resuid=%lld, resgid=%lld: give a user and a group id\n",
                o->resuid, o->resgid);
        return false;
    }
    if (o->atime[0] != '\0') {
        fprintf(stderr, "lsmfs: -o %s: reads do not update access times on lsmfs (every mount "
                        "is noatime)\n", o->atime);
        return false;
    }
    return true;
}

/* Checks the mount point against the store and adds the kernel's mount
 * options to args; returns the store's absolute path (the caller frees it).
 * Exits on failure. */
static char *prepare_mount(struct fuse_args *args, const struct options *o,
                           const struct fuse_cmdline_opts *co)
{
    check_mountpoint(co->mountpoint, o->nonempty);
    bool rados = store_uri_is_rados(o->store);
    char *store = rados ? strdup(o->store) : realpath(o->store, NULL);
    if (store == NULL)
        fail("%s: %s", o->store, strerror(errno));
    if (!rados)
        check_placement(co->mountpoint, store);
    add_mount_options(args, store);
    /* Reads never update access times: say so (the kernel's default,
     * relatime, would promise updates that never come). */
    if (fuse_opt_add_arg(args, "-onoatime") != 0)
        fail("out of memory");
    return store;
}

/* Opens the store at `store` as o says; exits on failure. */
static lsmfs *open_store(const struct options *o, const char *store)
{
    lsmfs_config cfg = {.store_dir = store,
                        .sync_all = o->sync_all,
                        .writeback = o->writeback,
                        .timeout = o->timeout,
                        .allow_root = o->allow_root,
                        .read_only = o->read_only,
                        .reserve_pct = o->reserve_pct,
                        .resuid = o->resuid,
                        .resgid = o->resgid};
    lsmfs *fs;
    char err[512];
    if (lsmfs_open(&cfg, &fs, err, sizeof err) != 0)
        fail("%s", err);
    return fs;
}

/* Makes the FUSE session serving st (st->fs set later, before the mount):
 * libfuse refuses an option it does not know here, before the store is
 * opened. Sets st->se; NULL (said by libfuse) on failure. */
static struct fuse_session *new_session(struct fuse_args *args, ops_state *st)
{
    st->se = fuse_session_new(args, lsmfs_ops(), sizeof(struct fuse_lowlevel_ops), st);
    return st->se;
}

/* Mounts se, serving st->fs; on failure closes the store and exits. */
static void mount_session(struct fuse_session *se, ops_state *st, const char *mountpoint)
{
    if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mountpoint) != 0) {
        lsmfs_close(st->fs);
        fail("cannot mount %s", mountpoint);
    }
}

/* Stops the ring (if any), unmounts and ends the session, then closes the store: returns
 * lsmfs_close's error (logged). */
static int unmount_and_close(struct fuse_session *se, ops_state *st, struct uring *ring,
                             ishrink *shrink)
{
    ishrink_stop(shrink);
    op_notify_drain(st);
    uring_stop(ring); /* before the unmount closes the device its rings use */
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    int cerr = lsmfs_close(st->fs);
    if (cerr != 0)
        fuse_log(FUSE_LOG_ERR, "lsmfs: closing the store failed: %s\n", strerror(cerr));
    return cerr;
}

/* Opens the store, mounts it and serves requests until unmounted; returns
 * the exit status. */
static int run(struct fuse_args *args, const struct options *o, const struct fuse_cmdline_opts *co,
               const char *store)
{
    ops_state st = {0};
    struct fuse_session *se = new_session(args, &st);
    if (se == NULL)
        return 1;
    char err[512];
    if (log_open(o->log, co->foreground, co->debug, err, sizeof err) != 0)
        fail("%s", err);
    log_start();
    if (!co->foreground)
        daemon_begin();
    st.fs = open_store(o, store);
    mount_session(se, &st, co->mountpoint);
    struct mount_tuning tuning = {.mountpoint = co->mountpoint,
                                  .readahead_kb = (unsigned)o->readahead_kb};
    struct uring *ring = o->umode == URING_OFF ? NULL : attach_uring(se, o, &st, &tuning);
    if (o->umode == URING_ON && ring == NULL) {
        fuse_session_unmount(se);
        lsmfs_close(st.fs);
        fail("-o uring=on: cannot serve over io_uring");
    }
    int serr;
    ishrink *shrink = ishrink_start(st.fs->icache, se, (size_t)o->max_inodes, &serr);
    if (serr != 0)
        fuse_log(FUSE_LOG_ERR, "lsmfs: cannot start the inode budget's thread: %s\n",
                 strerror(serr));
    int kerr = ring == NULL ? killpriv_attach(se) : 0;
    if (kerr != 0)
        fuse_log(FUSE_LOG_WARNING,
                 "lsmfs: cannot install /dev/fuse I/O (%s): the kernel will ask "
                 "security.capability before every write\n",
                 strerror(-kerr));
    if (!co->foreground)
        daemon_detach();
    fuse_log(FUSE_LOG_NOTICE, "lsmfs: %s mounted at %s (log: %s)\n", store, co->mountpoint,
             log_where());
    int r = serve(se, co, o, &st, ring != NULL ? NULL : &tuning);
    /* libfuse's single-threaded loop returns the number of the signal that
     * ended it: a SIGTERM/SIGINT/SIGHUP is an orderly shutdown, not a
     * failure. */
    if (r > 0)
        r = 0;
    if (o->umode == URING_ON && !uring_active(ring)) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: -o uring=on: the ring could not be used; unmounting\n");
        r = 1;
    }
    int cerr = unmount_and_close(se, &st, ring, shrink);
    store_uri_shutdown();
    return (r != 0 || cerr != 0) ? 1 : 0;
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct options o = {.max_threads = DEFAULT_THREADS,
                        .timeout = 3600,
                        .spin_us = DEFAULT_SPIN_US,
                        .readahead_kb = DEFAULT_READAHEAD_KB,
                        .umode = URING_AUTO,
                        .max_inodes = ISHRINK_DEFAULT_MAX,
                        .reserve_pct = -1,
                        .resuid = -1,
                        .resgid = -1};
    struct fuse_cmdline_opts co = {0};
    int status = 1;
    if (fuse_opt_parse(&args, &o, option_spec, opt_proc) == 0 &&
        fuse_parse_cmdline(&args, &co) == 0) {
        if (co.show_help || co.show_version) {
            print_help_or_version(argv[0], &co);
            status = 0;
        } else if (options_valid(argv[0], &o, &co)) {
            char *store = prepare_mount(&args, &o, &co);
            status = run(&args, &o, &co, store);
            free(store);
        }
    }
    free(o.store);
    free(o.uring);
    free(o.log);
    free(co.mountpoint);
    fuse_opt_free_args(&args);
    return status;
}
