/*
 * snapshot.c — the daemon's side of snapshots (see snapshot.h): where they
 * live, taking one (lsm_checkpoint into STORE/snapshots/NAME) and deleting
 * one without ever leaving half of it under its name.
 */
#include "snapshot.h"

#include "super.h"

#include "env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The errno of s (EIO if it has none), s freed; 0 for success. */
static int status_errno(lsm_status *s)
{
    if (s == NULL)
        return 0;
    int e = lsm_status_errno(s);
    lsm_status_free(s);
    return e ? e : EIO;
}

/* STORE/snapshots, made (durably) if missing, through the store's env
 * (local or RADOS). 0 or an errno. */
static int snapshot_dir(const struct lsmfs *fs, char *out, size_t cap)
{
    if (snprintf(out, cap, "%s/" LSMFS_SNAPSHOT_DIR, fs->path) >= (int)cap)
        return ENAMETOOLONG;
    if (fs->env->file_exists(fs->env, out))
        return 0;
    int e = status_errno(fs->env->create_dir(fs->env, out));
    return e ? e : status_errno(fs->env->sync_dir(fs->env, fs->path));
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
    if (fs->env->file_exists(fs->env, path))
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

/* Removes the files `names` of dir (a snapshot holds files only), LOCK
 * last (a mount that comes meanwhile finds no store: no CURRENT), then lets
 * go of lock and removes dir. Allocates nothing (a delete past its rename
 * must not stop for memory). 0 or an errno. */
static int remove_listed_files(lsm_env *env, const char *dir, char **names, int n,
                               lsm_filelock *lock)
{
    char path[8192 + 512];
    int e = 0;
    for (int i = 0; e == 0 && i < n; i++) {
        if (strcmp(names[i], "LOCK") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        e = status_errno(env->remove_file(env, path));
    }
    snprintf(path, sizeof path, "%s/LOCK", dir);
    if (e == 0 && env->file_exists(env, path))
        e = status_errno(env->remove_file(env, path));
    if (lock != NULL)
        lsm_status_free(env->unlock_file(env, lock));
    return e ? e : status_errno(env->remove_dir(env, dir));
}

/* remove_listed_files of every file dir holds. 0 or an errno. */
static int remove_snapshot_files(lsm_env *env, const char *dir)
{
    char **names;
    int n, e = status_errno(env->get_children(env, dir, &names, &n));
    if (e != 0)
        return e;
    e = remove_listed_files(env, dir, names, n, NULL);
    env_free_children(names, n);
    return e;
}

int snapshot_delete(struct lsmfs *fs, const char *name, char *err, size_t errlen)
{
    static atomic_uint counter;
    lsm_env *env = fs->env;
    char dir[4096], path[4096 + LSMFS_SNAPSHOT_NAME_MAX + 2];
    char hidden[sizeof path + 64], lock[sizeof path + 8];
    if (!snapshot_name_ok(name))
        return say(err, errlen, EINVAL, "snapshot name \"%s\" refused", name);
    int e = snapshot_dir(fs, dir, sizeof dir);
    if (e != 0)
        return say(err, errlen, e, "snapshot directory %s: %s", dir, strerror(e));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(lock, sizeof lock, "%s/LOCK", path);
    if (!env->file_exists(env, path))
        return say(err, errlen, ENOENT, "no snapshot %s", path);
    /* Held until the LOCK file is gone: no mount can start meanwhile. */
    lsm_filelock *held = NULL;
    lsm_status *s = env->lock_file(env, lock, &held);
    if (s != NULL) {
        e = lsm_status_code(s) == LSM_BUSY ? EBUSY : lsm_status_errno(s);
        say(err, errlen, e ? e : EIO, "snapshot %s: %s", path,
            e == EBUSY ? "in use (mounted?)" : lsm_status_message(s));
        lsm_status_free(s);
        return e ? e : EIO;
    }
    /* Listed before the rename: once out of view, nothing may fail for memory. */
    char **names;
    int n;
    e = status_errno(env->get_children(env, path, &names, &n));
    if (e != 0) {
        lsm_status_free(env->unlock_file(env, held));
        return say(err, errlen, e, "snapshot %s: listing its files: %s", path, strerror(e));
    }
    snprintf(hidden, sizeof hidden, "%s/.%s.del-%ld-%u", dir, name, (long)getpid(),
             atomic_fetch_add(&counter, 1));
    e = status_errno(env->rename_file(env, path, hidden));
    if (e == 0)
        e = status_errno(env->sync_dir(env, dir));
    if (e != 0) {
        env_free_children(names, n);
        lsm_status_free(env->unlock_file(env, held));
        return say(err, errlen, e, "snapshot %s: %s", path, strerror(e));
    }
    e = remove_listed_files(env, hidden, names, n, held);
    env_free_children(names, n);
    if (e == 0)
        e = status_errno(env->sync_dir(env, dir));
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
    lsm_env *env = fs->env;
    char dir[4096], path[4096 + 256];
    if (snprintf(dir, sizeof dir, "%s/" LSMFS_SNAPSHOT_DIR, fs->path) >= (int)sizeof dir)
        return;
    if (!env->file_exists(env, dir))
        return; /* none taken yet */
    char **names;
    int n;
    lsm_status *s = env->get_children(env, dir, &names, &n);
    if (s != NULL) {
        fprintf(stderr, "lsmfs: listing %s for leftovers: %s\n", dir, lsm_status_message(s));
        lsm_status_free(s);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!leftover_name(names[i]) ||
            snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            continue;
        int e = remove_snapshot_files(env, path);
        if (e != 0)
            fprintf(stderr, "lsmfs: removing %s, left by a killed snapshot: %s\n", path,
                    strerror(e));
    }
    env_free_children(names, n);
    lsm_status_free(env->sync_dir(env, dir));
}
