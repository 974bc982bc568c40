/*
 * snapshot_list.c — listing snapshots through the store's env
 * (snapshot_next in snapshot.h), so `lsmctl snapshot --list` reads a store
 * on RADOS as it reads a local one. A table is shared when a file of the
 * same name is in the live store or in another snapshot: table numbers are
 * never reused within a store, and snapshots link (never copy) tables of
 * the store they live in.
 */
#include "snapshot.h"

#include "super.h"

#include "env.h"
#include "filename.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One directory's names, sorted. */
struct names {
    char **v;
    int n;
};

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* 0 or an errno; a missing directory lists as empty. */
static int list(lsm_env *env, const char *dir, struct names *out)
{
    out->v = NULL;
    out->n = 0;
    if (!env->file_exists(env, dir))
        return 0;
    lsm_status *s = env->get_children(env, dir, &out->v, &out->n);
    if (s != NULL) {
        int e = lsm_status_errno(s);
        lsm_status_free(s);
        return e ? e : EIO;
    }
    if (out->n > 1)
        qsort(out->v, (size_t)out->n, sizeof(*out->v), cmp_names);
    return 0;
}

static bool has(const struct names *d, const char *name)
{
    return d->n > 0 && bsearch(&name, d->v, (size_t)d->n, sizeof(*d->v), cmp_names) != NULL;
}

static bool is_table(const char *name)
{
    uint64_t number;
    enum file_type type;
    return parse_file_name(name, &number, &type) && type == FILE_TABLE;
}

/* The names of the live store and of every visible snapshot of snaps but
 * self (below dir), sorted: a table in it is shared. One listing per
 * directory. 0 or an errno. */
static int others(lsm_env *env, const char *live_dir, const char *dir,
                  const struct names *snaps, const char *self, struct names *out)
{
    int err = list(env, live_dir, out);
    char path[4096 + LSMFS_SNAPSHOT_NAME_MAX + 2];
    for (int i = 0; err == 0 && i < snaps->n; i++) {
        if (snaps->v[i][0] == '.' || strcmp(snaps->v[i], self) == 0)
            continue;
        struct names more;
        snprintf(path, sizeof path, "%s/%s", dir, snaps->v[i]);
        if ((err = list(env, path, &more)) != 0)
            break;
        char **v = more.n > 0 ? lsm_realloc(out->v, (size_t)(out->n + more.n) * sizeof(*v)) : out->v;
        if (v == NULL) {
            env_free_children(more.v, more.n);
            err = ENOMEM;
            break;
        }
        memcpy(v + out->n, more.v, (size_t)more.n * sizeof(*v));
        out->v = v;
        out->n += more.n;
        free(more.v); /* the names now belong to out */
    }
    if (err == 0 && out->n > 1)
        qsort(out->v, (size_t)out->n, sizeof(*out->v), cmp_names);
    return err;
}

/* Fills e's sizes for snapshot e->name in dir. 0 or an errno. */
static int measure(const struct lsmfs *fs, const char *dir, const struct names *snaps,
                   struct lsmfs_snap_entry *e)
{
    lsm_env *env = fs->env;
    char snap[4096 + LSMFS_SNAPSHOT_NAME_MAX + 2], path[sizeof snap + 256];
    snprintf(snap, sizeof snap, "%s/%s", dir, e->name);
    struct names files, shared = {NULL, 0};
    int err = list(env, snap, &files);
    if (err == 0)
        err = others(env, fs->path, dir, snaps, e->name, &shared);
    for (int i = 0; err == 0 && i < files.n; i++) {
        uint64_t size = 0;
        snprintf(path, sizeof path, "%s/%s", snap, files.v[i]);
        lsm_status *s = env->file_size(env, path, &size);
        if (s != NULL) { /* removed meanwhile (a delete racing the listing) */
            lsm_status_free(s);
            continue;
        }
        e->bytes += size;
        if (!is_table(files.v[i]) || !has(&shared, files.v[i]))
            e->alone_bytes += size;
        e->complete |= strcmp(files.v[i], "CURRENT") == 0;
    }
    env_free_children(files.v, files.n);
    env_free_children(shared.v, shared.n);
    return err;
}

int snapshot_next(const struct lsmfs *fs, struct lsmfs_snap_entry *e, char *err, size_t errlen)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/" LSMFS_SNAPSHOT_DIR, fs->path) >= (int)sizeof dir)
        return ENAMETOOLONG;
    struct names snaps;
    int r = list(fs->env, dir, &snaps);
    if (r != 0) {
        snprintf(err, errlen, "listing %s: %s", dir, strerror(r));
        return r;
    }
    char after[sizeof e->name];
    memcpy(after, e->name, sizeof after);
    after[sizeof after - 1] = '\0';
    memset(e, 0, sizeof *e);
    r = ENOENT;
    for (int i = 0; i < snaps.n; i++) {
        if (snaps.v[i][0] == '.') {
            e->unfinished++;
        } else if (r == ENOENT && strcmp(snaps.v[i], after) > 0 &&
                   strlen(snaps.v[i]) < sizeof e->name) {
            strcpy(e->name, snaps.v[i]);
            r = 0;
        }
    }
    if (r == 0 && (r = measure(fs, dir, &snaps, e)) != 0)
        snprintf(err, errlen, "snapshot %s/%s: %s", dir, e->name, strerror(r));
    env_free_children(snaps.v, snaps.n);
    return r;
}
