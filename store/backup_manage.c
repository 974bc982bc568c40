/*
 * backup_manage.c — what is done with backups once taken: list, verify,
 * purge, restore (lsm.h; the layout in backup_meta.h).
 *
 * Purge removes the lists first and syncs meta/, then the files no
 * remaining list names: a crash in between leaves files no backup needs,
 * which the next purge removes, never a listed backup with a file gone.
 * Restore builds the store in a hidden sibling of dest, every file checked
 * against its checksum while it is copied, and renames it into place last.
 */
#include "backup_meta.h"
#include "filename.h"
#include "grow.h"
#include "lsm_malloc.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lsm_env *env_of(const lsm_backup_options *o)
{
    return o && o->env ? o->env : lsm_env_default();
}

/* NULL if dir is a backup directory (its LOCK, made by the first backup,
 * is there), else why not. */
static lsm_status *check_backup_dir(lsm_env *env, const char *dir)
{
    char *name = backup_path(dir, "LOCK", NULL);
    lsm_status *s = NULL;
    if (name == NULL)
        s = status_no_memory();
    else if (!env->file_exists(env, name))
        s = status_new(LSM_INVALID_ARGUMENT, "%s: not a backup directory", dir);
    free(name);
    return s;
}

/* Takes the backup directory's LOCK: exclusive for a purge (as a backup
 * does), shared for a verify or a restore, so no purge removes files under
 * them. LSM_BUSY while a holder of the other kind has it; *lock stays NULL
 * for a shared lock in an env without them. Release with unlock_dir. */
static lsm_status *lock_dir(lsm_env *env, const char *dir, bool shared, lsm_filelock **lock)
{
    *lock = NULL;
    if (shared && env->lock_file_shared == NULL)
        return NULL;
    lsm_status *s = check_backup_dir(env, dir);
    char *name = s == NULL ? backup_path(dir, "LOCK", NULL) : NULL;
    if (s == NULL && name == NULL)
        s = status_no_memory();
    else if (s == NULL)
        s = shared ? env->lock_file_shared(env, name, lock) : env->lock_file(env, name, lock);
    free(name);
    return s;
}

static void unlock_dir(lsm_env *env, lsm_filelock *lock)
{
    if (lock != NULL)
        lsm_status_free(env->unlock_file(env, lock)); /* the work is done either way */
}

/* --------------------------------------------------------------- list */

/* Whether backup id's list no longer exists (a purge took it). */
static bool list_gone(lsm_env *env, const char *dir, uint64_t id)
{
    char name[24];
    snprintf(name, sizeof name, "%" PRIu64, id);
    char *p = backup_path(dir, "meta", name);
    bool gone = p != NULL && !env->file_exists(env, p);
    free(p);
    return gone;
}

lsm_status *lsm_backup_list(const char *backup_dir, const lsm_backup_options *o,
                            lsm_backup_info **out, size_t *n)
{
    lsm_env *env = env_of(o);
    uint64_t *ids = NULL;
    size_t nid = 0;
    *out = NULL;
    *n = 0;
    lsm_status *s = check_backup_dir(env, backup_dir);
    if (s == NULL)
        s = backup_ids(env, backup_dir, "meta", &ids, &nid);
    if (s == NULL && nid > 0 && (*out = lsm_calloc(nid, sizeof(**out))) == NULL)
        s = status_no_memory();
    for (size_t i = 0; s == NULL && i < nid; i++) {
        backup_meta m;
        s = backup_meta_read(env, backup_dir, ids[i], &m);
        if (s != NULL && list_gone(env, backup_dir, ids[i])) {
            lsm_status_free(s); /* purged since the listing: not a backup any more */
            s = NULL;
            continue;
        }
        if (s != NULL)
            break;
        lsm_backup_info *b = &(*out)[(*n)++];
        *b = (lsm_backup_info){
            .id = m.id, .seq = m.seq, .time = m.time, .files = m.nfiles, .copied_bytes = m.copied};
        for (size_t k = 0; k < m.nfiles; k++)
            b->bytes += m.files[k].size;
        backup_meta_free(&m);
    }
    free(ids);
    if (s != NULL) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return s;
}

/* ------------------------------------------------------------- verify */

struct reporter {
    void (*report)(void *ctx, const char *msg);
    void *ctx;
    lsm_status *first;
    lsm_status *stop; /* out of memory: not a problem of the backup; the check stops there */
};

/* A problem found (reported), or out of memory (not reported: it stops
 * the check, incomplete). */
static void problem(struct reporter *r, lsm_status *s)
{
    if (status_is(s, LSM_NO_MEMORY)) {
        status_keep_first(&r->stop, s);
        return;
    }
    if (r->report)
        r->report(r->ctx, lsm_status_message(s));
    status_keep_first(&r->first, s);
}

/* The check's answer: its first problem (damage found is damage, even in a
 * check out of memory later), else out of memory if it stopped for it. */
static lsm_status *verdict(struct reporter *r)
{
    if (r->first == NULL)
        return r->stop;
    lsm_status_free(r->stop);
    return r->first;
}

/* The first chunk of path whose checksum is not f's (size checked before). */
static lsm_status *compare_file(lsm_env *env, const char *path, const backup_file *f)
{
    uint32_t crc, *chunk;
    size_t n;
    lsm_status *s = backup_hash_file(env, path, f->size, &crc, &chunk, &n);
    if (s != NULL)
        return s;
    for (size_t i = 0; i < n && s == NULL; i++) {
        uint64_t off = (uint64_t)i * BACKUP_CHUNK;
        uint64_t len = f->size - off < BACKUP_CHUNK ? f->size - off : BACKUP_CHUNK;
        if (chunk[i] != f->chunk[i])
            s = status_new(LSM_CORRUPTION,
                           "%s: damaged at offset %" PRIu64 " (the %" PRIu64
                           " bytes from there do not match their checksum)",
                           path, off, len);
    }
    if (s == NULL && crc != f->crc)
        s = status_new(LSM_CORRUPTION, "%s: damaged (its checksum does not match)", path);
    free(chunk);
    return s;
}

static lsm_status *verify_file(lsm_env *env, const char *dir, uint64_t id, const backup_file *f)
{
    char *rel = backup_file_rel(f, id), *path = rel ? path_join(dir, rel) : NULL;
    free(rel);
    if (path == NULL)
        return status_no_memory();
    uint64_t size = 0;
    lsm_status *s = NULL;
    if (!env->file_exists(env, path))
        s = status_new(LSM_CORRUPTION, "%s: missing (backup %" PRIu64 " lists it)", path, id);
    else if ((s = env->file_size(env, path, &size)) == NULL && size != f->size)
        s = status_new(LSM_CORRUPTION,
                       "%s: damaged at offset %" PRIu64 " (%" PRIu64 " bytes, %" PRIu64 " listed)",
                       path, size < f->size ? size : f->size, size, f->size);
    else if (s == NULL)
        s = compare_file(env, path, f);
    free(path);
    return s;
}

static void verify_one(lsm_env *env, const char *dir, uint64_t id, struct reporter *r)
{
    backup_meta m;
    lsm_status *s = backup_meta_read(env, dir, id, &m);
    if (s != NULL) {
        problem(r, s);
        return;
    }
    for (size_t i = 0; i < m.nfiles && r->stop == NULL; i++)
        if ((s = verify_file(env, dir, id, &m.files[i])) != NULL)
            problem(r, status_wrap(s, "backup %" PRIu64, id));
    backup_meta_free(&m);
}

/* REQUIRES: the directory's LOCK held (shared at least). */
static lsm_status *verify_locked(lsm_env *env, const char *backup_dir, uint64_t id,
                                 void (*report)(void *ctx, const char *msg), void *ctx)
{
    struct reporter r = {report, ctx, NULL, NULL};
    if (id != 0) {
        char name[40];
        snprintf(name, sizeof name, "meta/%" PRIu64, id);
        char *p = backup_path(backup_dir, name, NULL);
        bool there = p && env->file_exists(env, p);
        free(p);
        if (!there)
            return status_new(LSM_NOT_FOUND, "%s: no backup %" PRIu64, backup_dir, id);
        verify_one(env, backup_dir, id, &r);
        return verdict(&r);
    }
    uint64_t *ids = NULL;
    size_t n = 0;
    lsm_status *s = backup_ids(env, backup_dir, "meta", &ids, &n);
    if (s != NULL)
        return s;
    for (size_t i = 0; i < n && r.stop == NULL; i++)
        verify_one(env, backup_dir, ids[i], &r);
    free(ids);
    return verdict(&r);
}

lsm_status *lsm_backup_verify(const char *backup_dir, uint64_t id, const lsm_backup_options *o,
                              void (*report)(void *ctx, const char *msg), void *ctx)
{
    lsm_env *env = env_of(o);
    lsm_filelock *lock;
    lsm_status *s = lock_dir(env, backup_dir, true, &lock);
    if (s == NULL)
        s = verify_locked(env, backup_dir, id, report, ctx);
    unlock_dir(env, lock);
    return s;
}

/* -------------------------------------------------------------- purge */

/* The shared names the lists of ids name, sorted (malloc'd each). */
struct names {
    char **v;
    size_t n, cap;
};

static void names_free(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
}

static bool names_add(struct names *ns, char *name)
{
    if (name == NULL)
        return false;
    char **p = lsm_grow(ns->v, &ns->cap, ns->n + 1, sizeof(*p), 64);
    if (p == NULL) {
        free(name);
        return false;
    }
    ns->v = p;
    ns->v[ns->n++] = name;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every "shared/..." file the kept lists name; fails on a damaged one. */
static lsm_status *referenced(lsm_env *env, const char *dir, const uint64_t *ids, size_t n,
                              struct names *ns)
{
    lsm_status *s = NULL;
    for (size_t i = 0; s == NULL && i < n; i++) {
        backup_meta m;
        s = backup_meta_read(env, dir, ids[i], &m);
        for (size_t k = 0; s == NULL && k < m.nfiles; k++)
            if (m.files[k].shared && !names_add(ns, backup_file_rel(&m.files[k], ids[i])))
                s = status_no_memory();
        backup_meta_free(&m);
    }
    if (s == NULL && ns->n > 0)
        qsort(ns->v, ns->n, sizeof(*ns->v), cmp_str);
    return s;
}

/* Removes the files of dir/shared no kept list names. */
static lsm_status *sweep_shared(lsm_env *env, const char *dir, const struct names *keep)
{
    char *sdir = backup_path(dir, "shared", NULL);
    char **names = NULL;
    int n = 0;
    lsm_status *s = sdir ? env->get_children(env, sdir, &names, &n) : status_no_memory();
    for (int i = 0; s == NULL && i < n; i++) {
        char *rel = path_join("shared", names[i]);
        if (rel == NULL) {
            s = status_no_memory();
            break;
        }
        if (bsearch(&rel, keep->v, keep->n, sizeof(*keep->v), cmp_str) == NULL) {
            char *p = backup_path(dir, rel, NULL);
            s = p ? env->remove_file(env, p) : status_no_memory();
            free(p);
        }
        free(rel);
    }
    env_free_children(names, n);
    if (s == NULL)
        s = env->sync_dir(env, sdir);
    free(sdir);
    return s;
}

/* Removes meta/.tmp-ID, the list a crash cut off before its rename. */
static lsm_status *sweep_meta_tmp(lsm_env *env, const char *dir)
{
    char *mdir = backup_path(dir, "meta", NULL);
    char **names = NULL;
    int n = 0;
    lsm_status *s = mdir ? env->get_children(env, mdir, &names, &n) : status_no_memory();
    bool removed = false;
    for (int i = 0; s == NULL && i < n; i++) {
        if (strncmp(names[i], ".tmp-", 5) != 0)
            continue;
        char *p = backup_path(dir, "meta", names[i]);
        s = p ? env->remove_file(env, p) : status_no_memory();
        removed = true;
        free(p);
    }
    env_free_children(names, n);
    if (s == NULL && removed)
        s = env->sync_dir(env, mdir);
    free(mdir);
    return s;
}

/* Removes private/ID of every id without a list. */
static lsm_status *sweep_private(lsm_env *env, const char *dir, const uint64_t *kept, size_t nk)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    lsm_status *s = backup_ids(env, dir, "private", &ids, &n);
    for (size_t i = 0, k = 0; s == NULL && i < n; i++) {
        while (k < nk && kept[k] < ids[i])
            k++;
        if (k < nk && kept[k] == ids[i])
            continue;
        char name[40];
        snprintf(name, sizeof name, "private/%" PRIu64, ids[i]);
        char *p = backup_path(dir, name, NULL);
        if (p == NULL)
            s = status_no_memory();
        else
            env_remove_tree(env, p);
        free(p);
    }
    free(ids);
    char *pdir = backup_path(dir, "private", NULL);
    if (s == NULL)
        s = pdir ? env->sync_dir(env, pdir) : status_no_memory();
    free(pdir);
    return s;
}

/* Removes the lists of ids, meta/ synced after. */
static lsm_status *remove_lists(lsm_env *env, const char *dir, const uint64_t *ids, size_t n)
{
    lsm_status *s = NULL;
    for (size_t i = 0; s == NULL && i < n; i++) {
        char name[40];
        snprintf(name, sizeof name, "meta/%" PRIu64, ids[i]);
        char *p = backup_path(dir, name, NULL);
        s = p ? env->remove_file(env, p) : status_no_memory();
        free(p);
    }
    char *mdir = backup_path(dir, "meta", NULL);
    if (s == NULL)
        s = mdir ? env->sync_dir(env, mdir) : status_no_memory();
    free(mdir);
    return s;
}

/* REQUIRES: the directory's LOCK held. */
static lsm_status *purge_locked(lsm_env *env, const char *dir, uint64_t keep, uint64_t *removed)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    struct names ns = {0};
    lsm_status *s = backup_ids(env, dir, "meta", &ids, &n);
    size_t drop = s == NULL && n > keep ? n - (size_t)keep : 0;
    if (s == NULL) /* every kept list readable before anything goes */
        s = referenced(env, dir, ids + drop, n - drop, &ns);
    if (s == NULL)
        s = remove_lists(env, dir, ids, drop);
    if (s == NULL)
        *removed = drop;
    if (s == NULL)
        s = sweep_shared(env, dir, &ns);
    if (s == NULL)
        s = sweep_private(env, dir, ids + drop, n - drop);
    if (s == NULL)
        s = sweep_meta_tmp(env, dir);
    names_free(&ns);
    free(ids);
    return s;
}

lsm_status *lsm_backup_purge(const char *backup_dir, uint64_t keep, const lsm_backup_options *o,
                             uint64_t *removed)
{
    lsm_env *env = env_of(o);
    uint64_t scratch;
    removed = removed ? removed : &scratch;
    *removed = 0;
    lsm_filelock *lock;
    lsm_status *s = lock_dir(env, backup_dir, false, &lock);
    if (s == NULL)
        s = purge_locked(env, backup_dir, keep, removed);
    unlock_dir(env, lock);
    return s ? status_wrap(s, "purge %s", backup_dir) : NULL;
}

/* ------------------------------------------------------------ restore */

/* One restore: bytes copied of all, for o's progress. */
struct restore {
    lsm_env *env;    /* of the backup directory */
    lsm_env *to;     /* of the store restored */
    const char *dir; /* the backup directory */
    const backup_meta *m;
    const lsm_backup_options *o;
    uint64_t done, total;
};

static void restore_step(void *ctx, uint64_t bytes)
{
    struct restore *r = ctx;
    r->done += bytes;
    if (r->o && r->o->progress)
        r->o->progress(r->o->progress_ctx, r->done, r->total);
}

/* Copies f into tmp, checked against its checksum. */
static lsm_status *restore_file(struct restore *r, const backup_file *f, const char *tmp)
{
    char *rel = backup_file_rel(f, r->m->id);
    char *src = rel ? path_join(r->dir, rel) : NULL, *dst = path_join(tmp, f->name);
    lsm_status *s = src && dst ? NULL : status_no_memory();
    uint32_t crc = 0;
    env_copy_progress p = {restore_step, r};
    if (s == NULL)
        s = env_copy_file(r->env, src, r->to, dst, f->size, &crc, &p);
    if (s == NULL && crc != f->crc)
        s = status_new(LSM_CORRUPTION, "%s: damaged (its checksum does not match; see verify)",
                       src);
    free(rel);
    free(src);
    free(dst);
    return s;
}

/* The store of r->m in the new directory tmp, every entry synced. */
static lsm_status *restore_into(struct restore *r, const char *tmp)
{
    lsm_status *s = NULL;
    for (size_t i = 0; i < r->m->nfiles; i++)
        r->total += r->m->files[i].size;
    for (size_t i = 0; s == NULL && i < r->m->nfiles; i++)
        s = restore_file(r, &r->m->files[i], tmp);
    char *lock = s ? NULL : lock_file_name(tmp);
    if (s == NULL)
        s = lock ? env_write_file_sync(r->to, lock, "", 0) : status_no_memory();
    free(lock);
    return s ? s : r->to->sync_dir(r->to, tmp);
}

/* Removes what restore_into made in tmp by name first (env_remove_tree
 * lists tmp, which out of memory cannot), then the rest and tmp. */
static void unmake_restore(struct restore *r, const char *tmp)
{
    for (size_t i = 0; i < r->m->nfiles; i++)
        env_remove_in(r->to, tmp, r->m->files[i].name);
    env_remove_in(r->to, tmp, "LOCK");
    env_remove_tree(r->to, tmp);
}

static lsm_status *restore_meta(struct restore *r, const char *dest, const char *tmp,
                                const char *parent)
{
    lsm_env *env = r->to;
    lsm_status *s = env->create_dir_new(env, tmp);
    if (s != NULL)
        return s;
    s = env->sync_dir(env, parent);
    if (s == NULL)
        s = restore_into(r, tmp);
    if (s == NULL)
        return env_publish_dir(env, tmp, dest, parent);
    unmake_restore(r, tmp);
    return s;
}

lsm_status *lsm_backup_restore(const char *backup_dir, uint64_t id, const char *dest,
                               const lsm_backup_options *o)
{
    lsm_env *env = env_of(o), *to = o && o->store_env ? o->store_env : env;
    if (to->file_exists(to, dest))
        return status_new(LSM_INVALID_ARGUMENT, "restore to %s: it exists", dest);
    char *tmp = NULL, *parent = NULL;
    lsm_status *s = hidden_sibling_name(dest, &tmp, &parent);
    backup_meta m;
    memset(&m, 0, sizeof m);
    lsm_filelock *lock = NULL;
    if (s == NULL)
        s = lock_dir(env, backup_dir, true, &lock);
    if (s == NULL)
        s = backup_meta_read(env, backup_dir, id, &m);
    struct restore r = {env, to, backup_dir, &m, o, 0, 0};
    if (s == NULL)
        s = restore_meta(&r, dest, tmp, parent);
    unlock_dir(env, lock);
    backup_meta_free(&m);
    free(tmp);
    free(parent);
    return s ? status_wrap(s, "restore of backup %" PRIu64 " from %s", id, backup_dir) : NULL;
}
