/*
 * lsmctl_snapshot.c — `lsmctl snapshot` (see lsmctl_snapshot.h). Taking
 * and deleting are ioctls on the mount's root, answered by the daemon once
 * done (fs/snapshot.h); so is listing, one snapshot per ioctl, measured by
 * the daemon through the store's env (fs/snapshot_list.c), so a store on
 * RADOS lists as a local one does.
 */
#include "lsmctl_snapshot.h"

#include "snapshot.h"
#include "store_uri.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* The mount's root, open for ioctls; -1 after saying why. */
static int open_mount(const char *mnt)
{
    int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        fprintf(stderr, "lsmctl: %s: %s\n", mnt, strerror(errno));
    return fd;
}

static int ioctl_failed(const char *mnt, const char *what)
{
    int e = errno;
    if (e == ENOTTY || e == EINVAL || e == ENOSYS)
        fprintf(stderr, "lsmctl: %s: not the root of an lsmfs mount (%s)\n", mnt, strerror(e));
    else if (e == EPERM)
        fprintf(stderr, "lsmctl: %s: only root or the user who mounted it may %s\n", mnt, what);
    else
        fprintf(stderr, "lsmctl: %s: %s: %s\n", mnt, what, strerror(e));
    return 1;
}

static int name_ok(const char *name)
{
    if (snapshot_name_ok(name))
        return 1;
    fprintf(stderr,
            "lsmctl: \"%s\": a snapshot name has 1-%d bytes, no '/', no control characters, "
            "and does not begin with '.'\n",
            name, LSMFS_SNAPSHOT_NAME_MAX);
    return 0;
}

/* Sends one snapshot request to the mount's root: 0, or the exit status
 * after saying why (1). A snapshot holds what the daemon has, so taking
 * one first has the kernel write back what it caches (-o writeback: files
 * open for writing, mmap): syncfs(2), which on FUSE syncs no disk. */
static int snap_request(const char *mnt, unsigned long req, void *arg, const char *what)
{
    int fd = open_mount(mnt);
    if (fd < 0)
        return 1;
    if (req == LSMFS_IOC_SNAP_CREATE && syncfs(fd) != 0) {
        fprintf(stderr, "lsmctl: %s: writing cached data back to the daemon: %s\n", mnt,
                strerror(errno));
        close(fd);
        return 1;
    }
    int r = ioctl(fd, req, arg);
    int e = errno;
    close(fd);
    errno = e; /* ioctl's error, not close's */
    return r != 0 ? ioctl_failed(mnt, what) : 0;
}

static int snap_create(const char *mnt, const char *name)
{
    if (!name_ok(name))
        return 2;
    struct lsmfs_snap_create c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    int r = snap_request(mnt, LSMFS_IOC_SNAP_CREATE, &c, "take a snapshot");
    if (r != 0)
        return r;
    printf("snapshot %s: %llu tables, %llu bytes shared with the store, %llu copied, "
           "%.3f s\n",
           name, (unsigned long long)c.tables, (unsigned long long)c.linked_bytes,
           (unsigned long long)c.copied_bytes, (double)c.micros / 1e6);
    return 0;
}

static int snap_delete(const char *mnt, const char *name)
{
    if (!name_ok(name))
        return 2;
    struct lsmfs_snap_name n;
    memset(&n, 0, sizeof n);
    snprintf(n.name, sizeof n.name, "%s", name);
    return snap_request(mnt, LSMFS_IOC_SNAP_DELETE, &n, "delete a snapshot");
}

/* The snapshot after e->name (LSMFS_IOC_SNAP_NEXT) into e: 0, 1 after the
 * last, or -1 with errno set. */
static int snap_next(int fd, struct lsmfs_snap_entry *e)
{
    if (ioctl(fd, LSMFS_IOC_SNAP_NEXT, e) == 0)
        return 0;
    return errno == ENOENT ? 1 : -1;
}

/* When the snapshot was taken: its CURRENT's mtime, on a local store. */
static void taken(const char *dir, const struct lsmfs_snap_entry *e, char *out, size_t cap)
{
    char path[4096 + LSMFS_SNAPSHOT_NAME_MAX + 16];
    struct stat st;
    snprintf(out, cap, "%s", e->complete ? "-" : "(incomplete)");
    if (e->complete && !store_uri_is_rados(dir) &&
        snprintf(path, sizeof path, "%s/%s/CURRENT", dir, e->name) < (int)sizeof path &&
        lstat(path, &st) == 0)
        strftime(out, cap, "%Y-%m-%d %H:%M:%S", localtime(&st.st_mtime));
}

/* The directory the mount's snapshots are in, into sd; 0 or 1 after saying why. */
static int snap_dir(const char *mnt, struct lsmfs_snap_dir *sd, int quiet)
{
    memset(sd, 0, sizeof(*sd));
    int fd = quiet ? open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : open_mount(mnt);
    if (fd < 0)
        return 1;
    int r = ioctl(fd, LSMFS_IOC_SNAP_DIR, sd);
    int e = errno;
    close(fd);
    errno = e;
    if (r != 0)
        return quiet ? 1 : ioctl_failed(mnt, "list snapshots");
    sd->path[sizeof sd->path - 1] = '\0';
    return 0;
}

/* Lists the snapshots the daemon finds through the store's env (a store
 * on RADOS too): BYTES, and ALONE, the bytes only that snapshot holds. */
static int snap_list(const char *mnt)
{
    struct lsmfs_snap_dir sd;
    if (snap_dir(mnt, &sd, 0) != 0)
        return 1;
    int fd = open_mount(mnt);
    if (fd < 0)
        return 1;
    struct lsmfs_snap_entry e;
    memset(&e, 0, sizeof e);
    uint32_t unfinished = 0;
    int r;
    printf("%-24s %-19s %14s %14s\n", "NAME", "TAKEN", "BYTES", "ALONE");
    while ((r = snap_next(fd, &e)) == 0) {
        char when[32];
        taken(sd.path, &e, when, sizeof when);
        printf("%-24s %-19s %14llu %14llu\n", e.name, when, (unsigned long long)e.bytes,
               (unsigned long long)e.alone_bytes);
        unfinished = e.unfinished;
    }
    close(fd);
    if (r < 0)
        return ioctl_failed(mnt, "list snapshots");
    if (unfinished > 0)
        printf("(%u unfinished, left by a crash: hidden names, not snapshots)\n", unfinished);
    return 0;
}

int lsmctl_is_lsmfs_mount(const char *path)
{
    struct lsmfs_snap_dir sd;
    return snap_dir(path, &sd, 1) == 0;
}

/* The uid that mounted mnt (its FUSE mount's user_id=), from
 * /proc/self/mountinfo by the mount's device; -1 if not found. */
static long mount_user(const char *mnt)
{
    struct stat st;
    FILE *f = stat(mnt, &st) == 0 ? fopen("/proc/self/mountinfo", "re") : NULL;
    if (f == NULL)
        return -1;
    char line[8192];
    long uid = -1;
    while (uid < 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned maj, min;
        const char *opt = strstr(line, " - ") ? strstr(strstr(line, " - "), "user_id=") : NULL;
        if (sscanf(line, "%*u %*u %u:%u", &maj, &min) == 2 && opt != NULL &&
            makedev(maj, min) == st.st_dev)
            uid = strtol(opt + strlen("user_id="), NULL, 10);
    }
    fclose(f);
    return uid;
}

static int rados_refused(const char *mnt, const char *dir, long uid)
{
    fprintf(stderr, "lsmctl: %s: the daemon of %s (uid %ld, not root nor you) named it; refused\n",
            dir, mnt, uid);
    return 1;
}

/* A path the daemon reported is trusted only as far as its user could
 * make it: a directory (not a link) of the user who mounted mnt. Reads
 * from it then open only that user's files (the env's read rule), so a
 * daemon that lies (or a path swapped under it) cannot make a root lsmctl
 * read a file of someone else's. A store on RADOS (rados:POOL/NAME/...)
 * is trusted only from a daemon of root or of the caller: any other could
 * name a store of someone else's in a pool the caller may read. 0, or 1
 * after saying why. */
static int owned_by_mounter(const char *mnt, const char *dir)
{
    long uid = mount_user(mnt);
    struct stat st;
    if (uid < 0) {
        fprintf(stderr, "lsmctl: %s: who mounted it is not known; refused\n", mnt);
        return 1;
    }
    if (store_uri_is_rados(dir)) /* no local path to swap; the pool is whoever's it names */
        return uid == 0 || uid == (long)geteuid() ? 0 : rados_refused(mnt, dir, uid);
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || (long)st.st_uid != uid) {
        fprintf(stderr,
                "lsmctl: %s: the daemon of %s named it, but it is not a directory of uid %ld "
                "(who mounted it); refused\n",
                dir, mnt, uid);
        return 1;
    }
    return 0;
}

int lsmctl_snapshot_take(const char *mnt, const char *name, char *dir, size_t cap)
{
    struct lsmfs_snap_dir sd;
    struct lsmfs_snap_create c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    if (snap_dir(mnt, &sd, 0) != 0)
        return 1;
    if (snprintf(dir, cap, "%s/%s", sd.path, name) >= (int)cap) {
        fprintf(stderr, "lsmctl: %s: path too long\n", sd.path);
        return 1;
    }
    int r = snap_request(mnt, LSMFS_IOC_SNAP_CREATE, &c, "take a snapshot");
    if (r == 0 && owned_by_mounter(mnt, dir) != 0) {
        snap_delete(mnt, name);
        return 1;
    }
    return r;
}

void lsmctl_snapshot_sweep(const char *mnt, const char *prefix, bool (*stale)(const char *name))
{
    int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct lsmfs_snap_entry e;
    memset(&e, 0, sizeof e);
    while (snap_next(fd, &e) == 0) {
        if (strncmp(e.name, prefix, strlen(prefix)) == 0 && stale(e.name) &&
            snap_delete(mnt, e.name) == 0)
            fprintf(stderr, "lsmctl: removed snapshot %s, left by an interrupted run\n", e.name);
    }
    close(fd);
}

int lsmctl_snapshot_delete(const char *mnt, const char *name)
{
    return snap_delete(mnt, name);
}

/* `--list` and `--delete NAME` may come before or after MNT (as with most
 * tools); any other word starting with '-' is refused, never taken for a
 * mount point or a snapshot name. */
int lsmctl_snapshot(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *del = NULL;
    int npos = 0, list = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0)
            list++;
        else if (strcmp(argv[i], "--delete") == 0 && i + 1 < argc && !del)
            del = argv[++i];
        else if (argv[i][0] == '-' || npos == 2) {
            fprintf(stderr, "lsmctl snapshot: unexpected '%s'\n", argv[i]);
            npos = -1;
            break;
        } else
            pos[npos++] = argv[i];
    }
    if (npos == 1 && list == 1 && !del)
        return snap_list(pos[0]);
    if (npos == 1 && !list && del)
        return snap_delete(pos[0], del);
    if (npos == 2 && !list && !del)
        return snap_create(pos[0], pos[1]);
    fprintf(stderr, "usage: lsmctl snapshot MNT NAME | MNT --list | MNT --delete NAME\n");
    return 2;
}

int lsmctl_root_ioctl(const char *mnt, unsigned long req, void *arg, const char *what)
{
    return snap_request(mnt, req, arg, what);
}

int lsmctl_snapshot_dir(const char *mnt, char *dir, size_t cap)
{
    struct lsmfs_snap_dir sd;
    if (snap_dir(mnt, &sd, 0) != 0)
        return 1;
    snprintf(dir, cap, "%s", sd.path);
    return 0;
}
