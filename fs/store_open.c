/*
 * store_open.c — store_open: check the directory, the format (read-only),
 * then open with the filesystem's settings; and who holds a store in use.
 */
#include "store_open.h"

#include "store_uri.h"
#include "super.h"

#include <errno.h>
#include <limits.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Recovery's report of what it dropped: one line on stderr (the mount's
 * log, or the tool's), prefixed by the tool's name. */
static void report_stderr(void *ctx, const char *msg)
{
    fprintf(stderr, "%s: %s\n", ctx != NULL ? (const char *)ctx : "lsmfs", msg);
}

/* The format check's open: its reports come again from the real open. */
static void report_nothing(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
}

/* The pid holding a lock on dir/LOCK according to /proc/locks, or 0. */
static pid_t lock_holder(const char *dir)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    struct stat st;
    FILE *f = stat(path, &st) == 0 ? fopen("/proc/locks", "re") : NULL;
    if (f == NULL)
        return 0;
    char line[256];
    pid_t found = 0;
    while (found == 0 && fgets(line, sizeof line, f) != NULL) {
        int pid;
        unsigned maj, min;
        unsigned long ino;
        /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
        if (sscanf(line, "%*d: FLOCK %*s %*s %d %x:%x:%lu", &pid, &maj, &min, &ino) == 4 &&
            ino == st.st_ino && makedev(maj, min) == st.st_dev && pid > 0)
            found = pid;
    }
    fclose(f);
    return found;
}

bool store_mounted_at(const char *dir, char *mnt, size_t mntlen, pid_t *pid)
{
    *pid = 0;
    char real[PATH_MAX];
    FILE *f = realpath(dir, real) != NULL ? setmntent("/proc/self/mounts", "r") : NULL;
    bool found = false;
    struct mntent *e;
    while (f != NULL && !found && (e = getmntent(f)) != NULL)
        if (strcmp(e->mnt_type, "fuse.lsmfs") == 0 && strcmp(e->mnt_fsname, real) == 0) {
            snprintf(mnt, mntlen, "%s", e->mnt_dir);
            found = true;
        }
    if (f != NULL)
        endmntent(f);
    if (found)
        *pid = lock_holder(real);
    return found;
}

/* The one line for a store whose lock someone else holds. */
static int in_use(const char *dir, char *err, size_t errlen)
{
    char mnt[PATH_MAX];
    pid_t pid;
    bool mounted = store_mounted_at(dir, mnt, sizeof mnt, &pid);
    if (!mounted)
        pid = lock_holder(dir);
    if (mounted && pid > 0)
        snprintf(err, errlen, "%s: the store is mounted at %s (pid %d)", dir, mnt, (int)pid);
    else if (mounted)
        snprintf(err, errlen, "%s: the store is mounted at %s", dir, mnt);
    else if (pid > 0)
        snprintf(err, errlen, "%s: the store is in use by process %d", dir, (int)pid);
    else
        snprintf(err, errlen, "%s: the store is mounted or in use by another process", dir);
    return EBUSY;
}

/* Where the store is: the caller's location (r->dir: a directory or
 * rados:POOL/NAME, what messages name), and the env and path in it. */
typedef struct where {
    const store_open_req *r;
    lsm_env *env;
    const char *path;
    bool rados;
} where;

/* The message for a failed lsm_open. Returns the errno. */
static int open_failed(const where *w, const lsm_status *s, char *err, size_t errlen)
{
    const char *dir = w->r->dir;
    switch (lsm_status_code(s)) {
    case LSM_BUSY:
        if (w->rados) { /* the env's message names the lease's holder */
            snprintf(err, errlen, "%s: %s", dir, lsm_status_message(s));
            return EBUSY;
        }
        return in_use(dir, err, errlen);
    case LSM_INVALID_ARGUMENT:
    case LSM_NOT_FOUND:
        snprintf(err, errlen, "%s: not an lsmfs filesystem (no store: %s)", dir,
                 lsm_status_message(s));
        return EINVAL;
    case LSM_NO_SPACE:
        snprintf(err, errlen,
                 "%s: cannot open the store: %s (opening for writing needs free space: free "
                 "some on that filesystem, or mount with -o ro)",
                 dir, lsm_status_message(s));
        return ENOSPC;
    case LSM_CORRUPTION:
        snprintf(err, errlen,
                 "%s: cannot open the store: %s; run fsck.lsmfs -y to keep what precedes the "
                 "damage, or mount with -o ro to see it read-only",
                 dir, lsm_status_message(s));
        return EIO;
    default:
        snprintf(err, errlen, "%s: cannot open the store: %s", dir, lsm_status_message(s));
        return EIO;
    }
}

/* Whether the caller may use dir as a store (as flags ask) before
 * lsm_open, which would leave a LOCK file behind in a directory that is no
 * store at all, and says "no CURRENT file" where it may not look. */
static int check_dir(const where *w, int flags, char *err, size_t errlen)
{
    const char *dir = w->r->dir;
    char current[PATH_MAX + 16];
    if (w->rados) { /* no modes or owners there: the store is there or not */
        snprintf(current, sizeof current, "%s/CURRENT", w->path);
        if (w->env->file_exists(w->env, current))
            return 0;
        snprintf(err, errlen, "%s: not an lsmfs filesystem (no store found)", dir);
        return EINVAL;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", dir, strerror(e));
        return e;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory", dir);
        return ENOTDIR;
    }
    snprintf(current, sizeof current, "%s/CURRENT", dir);
    if (access(dir, R_OK | X_OK) != 0 || (access(current, R_OK) != 0 && errno != ENOENT)) {
        snprintf(err, errlen, "%s: permission denied: this user may not read the store", dir);
        return EACCES;
    }
    if (access(current, F_OK) != 0) {
        snprintf(err, errlen, "%s: not an lsmfs filesystem (no store found)", dir);
        return EINVAL;
    }
    if ((flags & STORE_OPEN_RO) == 0 && access(dir, W_OK) != 0) {
        int e = errno;
        if (e == EROFS)
            snprintf(err, errlen,
                     "%s: the store is on a read-only filesystem: mount with -o ro (or check "
                     "with fsck.lsmfs -n)",
                     dir);
        else
            snprintf(err, errlen, "%s: permission denied: this user may not write the store",
                     dir);
        return e == EROFS ? EROFS : EACCES;
    }
    return 0;
}

/* EINVAL (said) when a mkfs of the store did not finish (STORE_MKFS_MARK). */
static int check_finished(const where *w, char *err, size_t errlen)
{
    char mark[PATH_MAX + 32];
    snprintf(mark, sizeof mark, "%s/%s", w->path, STORE_MKFS_MARK);
    if (!w->env->file_exists(w->env, mark))
        return 0;
    snprintf(err, errlen,
             "%s: not an lsmfs filesystem yet: its mkfs.lsmfs did not finish (run it again)",
             w->r->dir);
    return EINVAL;
}

/* lsm_open with the filesystem's settings. */
static int open_db(const where *w, int flags, void (*report)(void *, const char *), lsm_db **db,
                   char *err, size_t errlen)
{
    const store_open_req *r = w->r;
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = false;
    /* 16 KiB blocks: a small file's inode record (with its inline data)
     * shares a block with a dozen others, so the index, block trailers
     * and lz4 are paid per dozen files, not per three (docs/decisions.md).
     * Chunks are values of their own anyway. */
    o.block_size = 16u << 10;
    /* fsync-heavy work: WAL syncs that write only their data blocks. */
    o.wal_mode = LSM_WAL_ZERO_FILL;
    /* File chunks keep to tables of their own: a file written in order then
     * makes chunk tables that overlap no other and sink by moves, not
     * rewrites (docs/decisions.md, "Table partitions"). */
    o.table_partition = schema_table_partition;
    /* ... and each file's chunks to tables of their own once they are ~1 MiB
     * of a flush or compaction, however many files were written at once:
     * the tables of a deleted file are then dropped whole (fs/orphan.c). */
    o.table_segment = schema_table_segment;
    /* No gather before a sync: the store overlaps syncs instead, and an
     * fsyncdir waits holding the kernel's directory lock, so a sync that
     * waited for company would hold up every rename into the directory.
     * (Slow syncs, one at a time as on RADOS, gather anyway: db_sync.c.) */
    o.group_commit_delay_us = 0;
    /* The most the reserve may be: room to flush a memtable and write a
     * table of compaction after the deletes that empty a full disk. The
     * store sizes it to its tables within that (db_reserve_size) and caps
     * it at 1/8 of the disk. */
    o.reserve_bytes = o.write_buffer_size + o.target_file_size;
    o.read_only = (flags & STORE_OPEN_RO) != 0;
    o.salvage_log = (flags & STORE_OPEN_SALVAGE) != 0;
    o.report = report;
    o.report_dropped_key = r->dropped_key;
    o.report_ctx = r->ctx;
    o.env = w->env;
    lsm_status *s = lsm_open(&o, w->path, db);
    if (s == NULL)
        return 0;
    *db = NULL;
    int e = open_failed(w, s, err, errlen);
    lsm_status_free(s);
    return e;
}

/* The superblock of an open store; a STORE_OPEN_ANY store may have none. */
static int read_super(lsm_db *db, const store_open_req *r, schema_super *sb, char *err,
                      size_t errlen)
{
    int e = super_read(db, r->dir, sb, err, errlen);
    if (e == EINVAL && (r->flags & STORE_OPEN_ANY) != 0) {
        memset(sb, 0, sizeof *sb);
        return 0;
    }
    return e;
}

/* A read-only open that reads the superblock and closes: what a
 * read-write open must pass first. Nothing is written. */
static int check_format(const where *w, char *err, size_t errlen)
{
    lsm_db *db;
    int e = open_db(w, STORE_OPEN_RO | STORE_OPEN_SALVAGE, report_nothing, &db, err, errlen);
    if (e != 0)
        return e;
    schema_super sb;
    e = read_super(db, w->r, &sb, err, errlen);
    lsm_status_free(lsm_close(db));
    return e;
}

/* The env and path of r->dir: r->env and r->dir as given, or what
 * store_uri_resolve says (a local directory or rados:POOL/NAME); *owned
 * is the path to free. 0 or an errno with its line in err. */
static int locate(const store_open_req *r, where *w, char **owned, char *err, size_t errlen)
{
    *w = (where){.r = r, .env = r->env, .path = r->dir};
    *owned = NULL;
    if (r->env != NULL)
        return 0;
    lsm_status *s = store_uri_resolve(r->dir, &w->env, owned);
    if (s != NULL) {
        snprintf(err, errlen, "%s: %s", r->dir, lsm_status_message(s));
        int e = lsm_status_code(s) == LSM_INVALID_ARGUMENT ? EINVAL : EIO;
        lsm_status_free(s);
        return e;
    }
    w->path = *owned;
    w->rados = store_uri_is_rados(r->dir);
    return 0;
}

int store_open(const store_open_req *r, lsm_db **db, schema_super *sb, char *err,
               size_t errlen)
{
    *db = NULL;
    where w;
    char *owned;
    int e = locate(r, &w, &owned, err, errlen);
    if (e == 0)
        e = check_dir(&w, r->flags, err, errlen);
    if (e == 0)
        e = check_finished(&w, err, errlen);
    if (e == 0 && (r->flags & STORE_OPEN_RO) == 0) {
        e = check_format(&w, err, errlen);
        /* On RADOS a live lease refuses even a read-only open: the
         * read-write open then decides (refused naming the holder, or a
         * -o takeover that fences it), unchecked by a read-only look. */
        if (e == EBUSY && w.rados)
            e = 0;
    }
    void (*report)(void *, const char *) = r->report != NULL ? r->report : report_stderr;
    if (e == 0)
        e = open_db(&w, r->flags, report, db, err, errlen);
    if (e == 0 && (e = read_super(*db, r, sb, err, errlen)) != 0) {
        lsm_status_free(lsm_close(*db));
        *db = NULL;
    }
    free(owned);
    return e;
}
