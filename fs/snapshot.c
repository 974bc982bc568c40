/*
 * snapshot.c — the daemon's side of snapshots (see snapshot.h): where they
 * live, taking one (lsm_checkpoint into STORE/snapshots/NAME) and deleting
 * one without ever leaving half of it under its name.
 */
#include "snapshot.h"

#include "super.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int say(char *err, size_t errlen, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *err, size_t errlen, int e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return e;
}

/* fsync of a directory: its entries made durable. 0 or an errno. */
static int sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return e;
}

/* STORE/snapshots, made (durably) if missing. 0 or an errno. */
static int snapshot_dir(const struct lsmfs *fs, char *out, size_t cap)
{
    if (snprintf(out, cap, "%s/" LSMFS_SNAPSHOT_DIR, fs->dir) >= (int)cap)
        return ENAMETOOLONG;
    if (mkdir(out, 0700) == 0)
        return sync_dir(fs->dir);
    return errno == EEXIST ? 0 : errno;
}

int snapshot_create(struct lsmfs *fs, struct lsmfs_snap_create *c, char *err, size_t errlen)
{
    char dir[4096], path[4096 + LSMFS_SNAPSHOT_NAME_MAX + 2];
    if (!snapshot_name_ok(c->name))
        return say(err, errlen, EINVAL, "snapshot name \"%s\" refused", c->name);
    if (fs->cfg.read_only)
        return say(err, errlen, EROFS, "snapshot %s: the mount is read-only", c->name);
    int e = snapshot_dir(fs, dir, sizeof dir);
    if (e != 0)
        return say(err, errlen, e, "snapshot directory %s: %s", dir, strerror(e));
    snprintf(path, sizeof path, "%s/%s", dir, c->name);
    struct stat st;
    if (lstat(path, &st) == 0)
        return say(err, errlen, EEXIST, "snapshot %s exists", path);
    lsm_checkpoint_info info;
    lsm_status *s = lsm_checkpoint_ex(fs->db, path, NULL, &info);
    if (s != NULL) {
        e = lsm_status_errno(s);
        say(err, errlen, e, "snapshot %s: %s", path, lsm_status_message(s));
        lsm_status_free(s);
        return e;
    }
    c->seq = info.seq;
    c->tables = info.tables;
    c->linked_bytes = info.linked_bytes;
    c->copied_bytes = info.copied_bytes;
    c->micros = info.total_micros;
    return 0;
}

/* Removes every file in dir (a snapshot holds files only), then dir.
 * 0 or an errno. */
static int remove_snapshot_files(const char *dir, int lock_fd)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno;
    int e = 0;
    struct dirent *ent;
    while (e == 0 && (ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0 ||
            strcmp(ent->d_name, "LOCK") == 0)
            continue;
        if (unlinkat(dirfd(d), ent->d_name, 0) != 0)
            e = errno;
    }
    /* LOCK last: a mount that comes now finds no store (no CURRENT). */
    if (e == 0 && unlinkat(dirfd(d), "LOCK", 0) != 0 && errno != ENOENT)
        e = errno;
    closedir(d);
    if (lock_fd >= 0)
        close(lock_fd);
    if (e == 0 && rmdir(dir) != 0)
        e = errno;
    return e;
}

int snapshot_delete(struct lsmfs *fs, const char *name, char *err, size_t errlen)
{
    static atomic_uint counter;
    char dir[4096], path[4096 + LSMFS_SNAPSHOT_NAME_MAX + 2];
    char hidden[sizeof path + 64], lock[sizeof path + 8];
    if (!snapshot_name_ok(name))
        return say(err, errlen, EINVAL, "snapshot name \"%s\" refused", name);
    int e = snapshot_dir(fs, dir, sizeof dir);
    if (e != 0)
        return say(err, errlen, e, "snapshot directory %s: %s", dir, strerror(e));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(lock, sizeof lock, "%s/LOCK", path);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return say(err, errlen, ENOENT, "no snapshot %s", path);
    /* Held until the LOCK file is gone: no mount can start meanwhile. */
    int fd = open(lock, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        e = errno == EWOULDBLOCK ? EBUSY : errno;
        close(fd);
        return say(err, errlen, e, "snapshot %s is in use (mounted?)", path);
    }
    snprintf(hidden, sizeof hidden, "%s/.%s.del-%ld-%u", dir, name, (long)getpid(),
             atomic_fetch_add(&counter, 1));
    if (rename(path, hidden) != 0 || (e = sync_dir(dir)) != 0) {
        e = e ? e : errno;
        if (fd >= 0)
            close(fd);
        return say(err, errlen, e, "snapshot %s: %s", path, strerror(e));
    }
    e = remove_snapshot_files(hidden, fd);
    if (e == 0)
        e = sync_dir(dir);
    if (e != 0)
        return say(err, errlen, e, "snapshot %s: removed from view, but its files in %s: %s",
                   path, hidden, strerror(e));
    return 0;
}

/* ".NAME.tmp-..." or ".NAME.del-...": a snapshot built or deleted halfway. */
static bool leftover_name(const char *name)
{
    return name[0] == '.' && (strstr(name, ".tmp-") != NULL || strstr(name, ".del-") != NULL);
}

void snapshot_sweep_leftovers(const struct lsmfs *fs)
{
    char dir[4096], path[4096 + 256];
    if (snprintf(dir, sizeof dir, "%s/" LSMFS_SNAPSHOT_DIR, fs->dir) >= (int)sizeof dir)
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return; /* none taken yet */
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (!leftover_name(ent->d_name) ||
            snprintf(path, sizeof path, "%s/%s", dir, ent->d_name) >= (int)sizeof path)
            continue;
        int e = remove_snapshot_files(path, -1);
        if (e != 0)
            fprintf(stderr, "lsmfs: removing %s, left by a killed snapshot: %s\n", path,
                    strerror(e));
    }
    closedir(d);
    sync_dir(dir);
}
