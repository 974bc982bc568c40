/*
 * lsmctl_backup.c — `lsmctl backup` (see lsmctl_backup.h). A mounted
 * lsmfs is backed up from a snapshot its daemon takes under a name of our
 * own, read by a child process (deleted afterwards, also on failure and on
 * SIGINT/SIGTERM/SIGHUP, which kill the child first: its shared lock on
 * the snapshot must go before the daemon may delete it; one a killed
 * lsmctl left is deleted by the next backup); a store directory is opened
 * read-only for the length of the backup (refused while it is in use).
 * A store (source of a backup, destination of a restore) may be
 * rados:POOL/NAME; the backup directory is always local.
 * On a terminal, stderr shows the bytes copied and an estimate of the time
 * left; elsewhere (cron) nothing but errors.
 */
#include "lsmctl_backup.h"

#include "lsm.h"
#include "lsmctl_snapshot.h"
#include "lsmctl_store.h"
#include "store_uri.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static int usage(void)
{
    fprintf(stderr, "usage: lsmctl backup MNT|STORE DIR\n"
                    "       lsmctl backup list DIR\n"
                    "       lsmctl backup verify DIR [ID]\n"
                    "       lsmctl backup purge DIR --keep N\n"
                    "       lsmctl backup restore DIR ID DEST\n");
    return LSMCTL_USAGE;
}

/* Prints s; the exit status it calls for (damage: LSMCTL_DAMAGED). */
static int failed(lsm_status *s)
{
    int code = lsm_status_code(s) == LSM_CORRUPTION ? LSMCTL_DAMAGED : LSMCTL_FAILED;
    fprintf(stderr, "lsmctl: %s\n", lsm_status_message(s));
    lsm_status_free(s);
    return code;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct progress {
    double start, shown;
    int drawn;
};

static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct progress *p = ctx;
    double t = now_s();
    if (done < total && t - p->shown < 0.25)
        return;
    p->shown = t;
    double rate = done / (t - p->start + 1e-9);
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "\r%.1f of %.1f MiB copied, %.0f s left   ", done / 1048576.0,
            total / 1048576.0, eta);
    p->drawn = 1;
}

static void print_taken(const lsm_backup_info *i, double secs)
{
    printf("backup %" PRIu64 ": %" PRIu64 " files, %" PRIu64 " bytes, %" PRIu64
           " copied, %.3f s\n",
           i->id, i->files, i->bytes, i->copied_bytes, secs);
}

#define SNAP_PREFIX "lsmctl-backup-"

static int from_store(const char *src, const char *dir);

/* lsmctl-backup-PID-TIME of a process that is gone: left by a crash. */
static bool stale_snapshot(const char *name)
{
    long pid = strtol(name + strlen(SNAP_PREFIX), NULL, 10);
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Deletes snapshot name of mnt, saying so if it cannot. */
static void delete_snapshot(const char *mnt, const char *name)
{
    if (lsmctl_snapshot_delete(mnt, name) != 0)
        fprintf(stderr, "lsmctl: snapshot %s of %s is left behind (lsmctl snapshot %s --delete %s)\n",
                name, mnt, mnt, name);
}

/* Waits for the backup child; a termination signal first kills it (so its
 * shared lock on the snapshot goes) and is returned as 128+signal. The
 * child's exit status otherwise (1 if it died). REQUIRES: set (SIGCHLD
 * among them) blocked. */
static int wait_backup(pid_t pid, const sigset_t *set)
{
    int st, sig = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        struct timespec tick = {1, 0};
        sig = sigtimedwait(set, NULL, &tick);
        if (sig > 0 && sig != SIGCHLD) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fprintf(stderr, "\nlsmctl: interrupted (%s): the snapshot is removed\n",
                    strsignal(sig));
            return 128 + sig;
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : LSMCTL_FAILED;
}

/* A mounted lsmfs: from a snapshot of our own, read by a child process and
 * deleted afterwards, also on SIGINT/SIGTERM/SIGHUP (lsmctl then exits
 * 128+signal); ones a killed lsmctl left are deleted first. */
static int from_mount(const char *mnt, const char *dir)
{
    char name[64], snapdir[4300];
    snprintf(name, sizeof name, SNAP_PREFIX "%ld-%ld", (long)getpid(), (long)time(NULL));
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, NULL); /* the child too, till it is killed */
    lsmctl_snapshot_sweep(mnt, SNAP_PREFIX, stale_snapshot);
    if (lsmctl_snapshot_take(mnt, name, snapdir, sizeof snapdir) != 0)
        return LSMCTL_FAILED;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int code = from_store(snapdir, dir);
        fflush(NULL); /* _exit flushes no stdio */
        _exit(code);
    }
    int rc = pid < 0 ? LSMCTL_FAILED : wait_backup(pid, &set);
    if (pid < 0)
        fprintf(stderr, "lsmctl: fork: %s\n", strerror(errno));
    delete_snapshot(mnt, name);
    return rc;
}

/* Options that show progress on a terminal (stderr), nothing elsewhere. */
static void progress_options(lsm_backup_options *o, struct progress *p)
{
    *p = (struct progress){now_s(), 0, 0};
    lsm_backup_options_init(o);
    if (isatty(STDERR_FILENO)) {
        o->progress = show_progress;
        o->progress_ctx = p;
    }
}

/* A store directory as the source: whether lsmctl may read it (a newer
 * format, a store in use are refused, said on stderr). */
static bool store_readable(const char *src)
{
    lsm_db *db = lsmctl_open_store(src, false, NULL, NULL,
                                   "give the mount point: lsmctl backup %s DIR");
    lsm_status_free(lsm_close(db));
    return db != NULL;
}

/* A store directory or rados:POOL/NAME (or, in from_mount's child, a
 * snapshot of the mount's store), read for the backup. */
static int from_store(const char *src, const char *dir)
{
    if (!store_readable(src))
        return LSMCTL_FAILED;
    struct progress p;
    lsm_backup_options o;
    progress_options(&o, &p);
    lsm_backup_info info;
    char *path = NULL;
    lsm_status *s = store_uri_resolve(src, &o.store_env, &path);
    if (s == NULL)
        s = lsm_backup_store(path, dir, &o, &info);
    free(path);
    if (p.drawn)
        fputc('\n', stderr);
    /* The source was open to us: the backup directory is the one locked. */
    if (lsm_status_code(s) == LSM_BUSY) {
        fprintf(stderr, "lsmctl: %s: a backup or purge is running in it: try again when it is "
                        "done\n",
                dir);
        lsm_status_free(s);
        return LSMCTL_FAILED;
    }
    if (s != NULL)
        return failed(s);
    print_taken(&info, now_s() - p.start);
    return LSMCTL_OK;
}

static int take(const char *src, const char *dir)
{
    return lsmctl_is_lsmfs_mount(src) ? from_mount(src, dir) : from_store(src, dir);
}

static int list(const char *dir)
{
    lsm_backup_info *b;
    size_t n;
    lsm_status *s = lsm_backup_list(dir, NULL, &b, &n);
    if (s != NULL)
        return failed(s);
    printf("%-8s %-19s %14s %8s %14s %14s\n", "ID", "TAKEN", "SEQ", "FILES", "BYTES", "COPIED");
    for (size_t i = 0; i < n; i++) {
        char taken[32];
        time_t t = (time_t)b[i].time;
        strftime(taken, sizeof taken, "%Y-%m-%d %H:%M:%S", localtime(&t));
        printf("%-8" PRIu64 " %-19s %14" PRIu64 " %8" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n",
               b[i].id, taken, b[i].seq, b[i].files, b[i].bytes, b[i].copied_bytes);
    }
    free(b);
    return LSMCTL_OK;
}

/* A backup id: a decimal number from 1 on; 0 when it is not one. */
static uint64_t parse_id(const char *arg)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    return errno || *end || arg[0] == '-' || arg[0] == '\0' ? 0 : (uint64_t)v;
}

static void report(void *ctx, const char *msg)
{
    (*(int *)ctx)++;
    printf("problem: %s\n", msg);
}

static int verify(const char *dir, const char *id_arg)
{
    uint64_t id = id_arg ? parse_id(id_arg) : 0;
    if (id_arg && id == 0)
        return usage();
    int problems = 0;
    lsm_status *s = lsm_backup_verify(dir, id, NULL, report, &problems);
    if (s != NULL && problems == 0)
        return failed(s);
    int code = s == NULL ? LSMCTL_OK
               : lsm_status_code(s) == LSM_CORRUPTION ? LSMCTL_DAMAGED
                                                      : LSMCTL_FAILED;
    lsm_status_free(s);
    printf("%s: %s (%d problem%s)\n", dir, problems ? "DAMAGED" : "ok", problems,
           problems == 1 ? "" : "s");
    return code;
}

static int purge(const char *dir, const char *keep_arg)
{
    char *end;
    errno = 0;
    unsigned long long keep = strtoull(keep_arg, &end, 10);
    if (errno || *end || keep_arg[0] == '-' || keep_arg[0] == '\0')
        return usage();
    uint64_t removed = 0;
    lsm_status *s = lsm_backup_purge(dir, keep, NULL, &removed);
    if (s != NULL)
        return failed(s);
    printf("%s: %" PRIu64 " backup%s removed\n", dir, removed, removed == 1 ? "" : "s");
    return LSMCTL_OK;
}

static int restore(const char *dir, const char *id_arg, const char *dest)
{
    uint64_t id = parse_id(id_arg);
    if (id == 0)
        return usage();
    struct progress p;
    lsm_backup_options o;
    progress_options(&o, &p);
    char *path = NULL;
    lsm_status *s = store_uri_resolve(dest, &o.store_env, &path);
    if (s == NULL)
        s = lsm_backup_restore(dir, id, path, &o);
    free(path);
    if (p.drawn)
        fputc('\n', stderr);
    if (s != NULL)
        return failed(s);
    printf("backup %" PRIu64 " restored to %s\n", id, dest);
    return LSMCTL_OK;
}

/* Whether dir may be a backup directory: a local one, not on RADOS. */
static bool local_dir(const char *dir)
{
    if (!store_uri_is_rados(dir))
        return true;
    fprintf(stderr, "lsmctl: %s: a backup directory must be a local directory, not on RADOS\n",
            dir);
    return false;
}

int lsmctl_backup(int argc, char **argv)
{
    const char *w = argc > 0 ? argv[0] : "";
    if (argc >= 2 && !local_dir(argv[1])) /* DIR is the second word of every form */
        return LSMCTL_FAILED;
    if (!strcmp(w, "list") && argc == 2)
        return list(argv[1]);
    if (!strcmp(w, "verify") && (argc == 2 || argc == 3))
        return verify(argv[1], argc == 3 ? argv[2] : NULL);
    if (!strcmp(w, "purge") && argc == 4 && !strcmp(argv[2], "--keep"))
        return purge(argv[1], argv[3]);
    if (!strcmp(w, "restore") && argc == 4)
        return restore(argv[1], argv[2], argv[3]);
    if (argc == 2 && strcmp(w, "list") && strcmp(w, "verify") && strcmp(w, "purge") &&
        strcmp(w, "restore") && w[0] != '-')
        return take(argv[0], argv[1]);
    return usage();
}
