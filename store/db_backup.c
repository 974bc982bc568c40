/*
 * db_backup.c — lsm_backup, lsm_backup_store: one incremental backup (the
 * directory's layout and list format in backup_meta.h).
 *
 * The source is a store no one writes while it is read: a read_only
 * handle (its shared LOCK keeps writers out), for a writable store a
 * checkpoint of it in a hidden directory of its own (".backup-PID-N",
 * hard links, removed afterwards; one a crash left is removed by the next
 * backup of another process). Its live files are read once to checksum
 * them (the whole file, and each 64 KiB); a table whose name (number,
 * CRC, size) is in shared/ already is not copied, a new one is copied to
 * a hidden name in shared/, synced and renamed; the MANIFEST, CURRENT and
 * logs are copied to private/ID/. Each copy is checked against the
 * checksum taken before (a file that changed fails the backup). The list,
 * meta/ID, is written last: hidden, synced, renamed, the directory synced.
 * On an error the backup removes what it added (best effort); the next
 * purge removes what a crash left.
 */
#include "backup_meta.h"
#include "db_impl.h"
#include "filename.h"
#include "lsm_malloc.h"
#include "status.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CKPT_PREFIX ".backup-"

void lsm_backup_options_init(lsm_backup_options *o)
{
    memset(o, 0, sizeof(*o));
}

/* One backup being taken. */
struct run {
    lsm_env *env;     /* of the backup directory */
    lsm_env *src_env; /* of the store backed up */
    const char *dir; /* the backup directory */
    const lsm_backup_options *o;
    backup_meta m;
    char **src;     /* per file of m: its path in the store */
    char **created; /* shared files this run created (removed on an error) */
    size_t ncreated;
    uint64_t total, done; /* bytes to copy, copied */
    bool made_private;    /* private/ID is this run's */
    bool listed;          /* meta/ID is in place (the backup exists) */
};

static void run_free(struct run *r)
{
    for (size_t i = 0; i < r->m.nfiles; i++)
        free(r->src[i]);
    for (size_t i = 0; i < r->ncreated; i++)
        free(r->created[i]);
    free(r->src);
    free(r->created);
    backup_meta_free(&r->m);
}

/* ------------------------------------------------------------- sources */

/* Checksums src (size bytes) and adds it to the list as name. */
static lsm_status *add_source(struct run *r, char *src, const char *name, bool shared,
                              uint64_t size)
{
    uint32_t crc, *chunk;
    size_t n;
    lsm_status *s = src ? backup_hash_file(r->src_env, src, size, &crc, &chunk, &n) : status_no_memory();
    char **p = s ? NULL : lsm_realloc(r->src, (r->m.nfiles + 1) * sizeof(*p));
    if (s == NULL && p == NULL) {
        free(chunk);
        s = status_no_memory();
    }
    if (s == NULL) {
        r->src = p;
        if (!backup_meta_add(&r->m, name, shared, size, crc, chunk, n))
            s = status_no_memory();
    }
    if (s != NULL) {
        free(src);
        return s;
    }
    r->src[r->m.nfiles - 1] = src;
    return NULL;
}

/* A file of the store other than a table, at its size now. */
static lsm_status *add_other(struct run *r, const char *store, const char *name)
{
    char *src = backup_path(store, name, NULL);
    uint64_t size = 0;
    lsm_status *s = src ? r->src_env->file_size(r->src_env, src, &size) : status_no_memory();
    if (s != NULL) {
        free(src);
        return s;
    }
    return add_source(r, src, name, false, size);
}

/* The tables of v. */
static lsm_status *add_tables(struct run *r, const char *store, const version *v)
{
    lsm_status *s = NULL;
    for (int l = 0; s == NULL && l < NUM_LEVELS; l++)
        for (int i = 0; s == NULL && i < v->nfiles[l]; i++) {
            const file_meta *f = v->files[l][i];
            char name[32];
            snprintf(name, sizeof name, "%06" PRIu64 ".ldb", f->number);
            s = add_source(r, table_file_name(store, f->number), name, true, f->size);
        }
    return s;
}

/* CURRENT, the MANIFEST it names, and the logs replay reads. */
static lsm_status *add_others(struct run *r, const char *store, uint64_t manifest,
                              uint64_t log_number)
{
    char **names = NULL;
    int n = 0;
    lsm_status *s = add_other(r, store, "CURRENT");
    if (s == NULL)
        s = r->src_env->get_children(r->src_env, store, &names, &n);
    for (int i = 0; s == NULL && i < n; i++) {
        uint64_t number;
        enum file_type type;
        if (!parse_file_name(names[i], &number, &type))
            continue;
        if ((type == FILE_MANIFEST && number == manifest) ||
            (type == FILE_LOG && number >= log_number))
            s = add_other(r, store, names[i]);
    }
    env_free_children(names, n);
    return s;
}

/* The live files of the read_only db, checksummed. */
static lsm_status *collect(struct run *r, lsm_db *db)
{
    mutex_lock(&db->mu);
    version *v = db->vs.current;
    version_ref(v);
    uint64_t manifest = db->vs.manifest_number, log_number = db->vs.log_number;
    r->m.seq = db->last_seq;
    mutex_unlock(&db->mu);
    lsm_status *s = add_tables(r, db->dir, v);
    if (s == NULL)
        s = add_others(r, db->dir, manifest, log_number);
    mutex_lock(&db->mu);
    version_unref(v);
    mutex_unlock(&db->mu);
    return s;
}

/* -------------------------------------------------------------- copies */

static void progress_step(void *ctx, uint64_t bytes)
{
    struct run *r = ctx;
    r->done += bytes;
    if (r->o->progress)
        r->o->progress(r->o->progress_ctx, r->done, r->total);
}

/* Copies file i to dst, checked against the checksum taken before. */
static lsm_status *copy_checked(struct run *r, size_t i, const char *dst)
{
    const backup_file *f = &r->m.files[i];
    env_copy_progress p = {progress_step, r};
    uint32_t crc = 0;
    lsm_status *s = env_copy_file(r->src_env, r->src[i], r->env, dst, f->size, &crc, &p);
    if (s == NULL && crc != f->crc)
        s = status_new(LSM_CORRUPTION, "%s changed while it was backed up", r->src[i]);
    if (s == NULL)
        r->m.copied += f->size;
    return s;
}

/* A new shared table: copied to a hidden name, renamed to dst. */
static lsm_status *copy_shared(struct run *r, size_t i, const char *dst)
{
    char **p = lsm_realloc(r->created, (r->ncreated + 1) * sizeof(*p));
    if (p == NULL)
        return status_no_memory();
    r->created = p;
    char *tmp = lsm_asprintf("%s/shared/.tmp-%s", r->dir, r->m.files[i].name);
    if (tmp == NULL)
        return status_no_memory();
    lsm_status *s = copy_checked(r, i, tmp);
    if (s == NULL)
        s = r->env->rename_file(r->env, tmp, dst);
    if (s != NULL)
        lsm_status_free(r->env->remove_file(r->env, tmp));
    free(tmp);
    if (s == NULL && (r->created[r->ncreated] = lsm_strdup(dst)) != NULL)
        r->ncreated++;
    return s;
}

/* The path of file i in the backup directory (malloc'd). */
static char *dest_of(struct run *r, size_t i)
{
    char *rel = backup_file_rel(&r->m.files[i], r->m.id);
    char *p = rel ? path_join(r->dir, rel) : NULL;
    free(rel);
    return p;
}

/* Whether file i needs a copy (a shared table not there yet, or private). */
static bool needs_copy(struct run *r, size_t i, const char *dst)
{
    return !r->m.files[i].shared || !r->env->file_exists(r->env, dst);
}

static lsm_status *copy_all(struct run *r)
{
    size_t n = r->m.nfiles;
    char **dst = lsm_calloc(n ? n : 1, sizeof(*dst));
    bool *copy = lsm_calloc(n ? n : 1, sizeof(*copy));
    lsm_status *s = dst && copy ? NULL : status_no_memory();
    for (size_t i = 0; s == NULL && i < n; i++) {
        if ((dst[i] = dest_of(r, i)) == NULL)
            s = status_no_memory();
        else if ((copy[i] = needs_copy(r, i, dst[i])))
            r->total += r->m.files[i].size;
    }
    for (size_t i = 0; s == NULL && i < n; i++) {
        if (copy[i])
            s = r->m.files[i].shared ? copy_shared(r, i, dst[i]) : copy_checked(r, i, dst[i]);
    }
    for (size_t i = 0; dst && i < n; i++)
        free(dst[i]);
    free(dst);
    free(copy);
    return s;
}

/* --------------------------------------------------------- the backup */

/* The rule for a directory backups are written into (as ssh's for
 * ~/.ssh): owned by this process's user and writable by no one else, or
 * refused; then private to that user (ENV_DIR_MODE). "dir/." so that a
 * link to a directory is judged by the directory. */
static lsm_status *own_dir(lsm_env *env, const char *dir)
{
    char *self = backup_path(dir, ".", NULL);
    lsm_path_info pi;
    lsm_status *s = self ? env->path_info(env, self, &pi) : status_no_memory();
    if (s == NULL && pi.kind != LSM_PATH_DIR)
        s = status_new(LSM_INVALID_ARGUMENT, "%s: not a directory", dir);
    else if (s == NULL && !pi.mine)
        s = status_new(LSM_INVALID_ARGUMENT,
                       "%s is owned by uid %u, not by you: refused (backups go into a "
                       "directory of your own)",
                       dir, (unsigned)pi.uid);
    else if (s == NULL && (pi.perm & 022) != 0)
        s = status_new(LSM_INVALID_ARGUMENT,
                       "%s is writable by others (mode %03o): refused (chmod go-w %s)", dir,
                       (unsigned)pi.perm & 0777, dir);
    else if (s == NULL && (pi.perm & 077) != 0)
        s = env->make_private(env, self);
    free(self);
    return s;
}

/* dir (its own, see own_dir) and its three subdirectories exist, their
 * entries durable. */
static lsm_status *make_dirs(lsm_env *env, const char *dir)
{
    lsm_status *s = env_create_dir_durable(env, dir);
    if (s == NULL)
        s = own_dir(env, dir);
    const char *subs[] = {"shared", "private", "meta"};
    for (int i = 0; s == NULL && i < 3; i++) {
        char *p = backup_path(dir, subs[i], NULL);
        s = p ? env->create_dir(env, p) : status_no_memory();
        free(p);
    }
    return s ? s : env->sync_dir(env, dir);
}

/* One above every id in meta/ and private/ (a cut-off backup's too). */
static lsm_status *next_id(lsm_env *env, const char *dir, uint64_t *id)
{
    *id = 1;
    const char *subs[] = {"meta", "private"};
    lsm_status *s = NULL;
    for (int k = 0; s == NULL && k < 2; k++) {
        uint64_t *ids;
        size_t n;
        s = backup_ids(env, dir, subs[k], &ids, &n);
        if (s == NULL && n > 0 && ids[n - 1] >= *id)
            *id = ids[n - 1] + 1;
        free(ids);
    }
    return s;
}

static lsm_status *sync_sub(lsm_env *env, const char *dir, const char *sub)
{
    char *p = backup_path(dir, sub, NULL);
    lsm_status *s = p ? env->sync_dir(env, p) : status_no_memory();
    free(p);
    return s;
}

/* meta/ID: written hidden, synced, renamed, meta/ synced. Every name is
 * made first: once listed, nothing is left to allocate (but the env's). */
static lsm_status *write_meta(struct run *r)
{
    buf b;
    buf_init(&b);
    char *mdir = backup_path(r->dir, "meta", NULL);
    char *tmp = lsm_asprintf("%s/meta/.tmp-%" PRIu64, r->dir, r->m.id);
    char *dst = lsm_asprintf("%s/meta/%" PRIu64, r->dir, r->m.id);
    lsm_status *s = NULL;
    if (mdir == NULL || tmp == NULL || dst == NULL || !backup_meta_encode(&r->m, &b))
        s = status_no_memory();
    if (s == NULL)
        s = env_write_file_sync(r->env, tmp, b.data, b.len);
    if (s == NULL)
        s = r->env->rename_file(r->env, tmp, dst);
    if (s != NULL && tmp != NULL)
        lsm_status_free(r->env->remove_file(r->env, tmp));
    r->listed = s == NULL;
    /* Listed from here on, every file synced: a failed sync leaves it (as
     * it is, or unlisted again after a crash), and says so. */
    if (s == NULL && (s = r->env->sync_dir(r->env, mdir)) != NULL)
        s = status_wrap(s, "backup %" PRIu64 " complete and listed, but the list may not be durable",
                        r->m.id);
    buf_free(&b);
    free(mdir);
    free(tmp);
    free(dst);
    return s;
}

/* Everything a failed run added, best effort: its private directory and
 * the shared tables it created (no list names them). */
static void undo(struct run *r)
{
    for (size_t i = 0; i < r->ncreated; i++)
        lsm_status_free(r->env->remove_file(r->env, r->created[i]));
    if (!r->made_private)
        return;
    char name[40];
    snprintf(name, sizeof name, "private/%" PRIu64, r->m.id);
    char *p = backup_path(r->dir, name, NULL);
    if (p != NULL)
        env_remove_tree(r->env, p);
    free(p);
}

/* Copies and lists the files; REQUIRES: the directory's LOCK held. */
static lsm_status *take(struct run *r, lsm_db *db)
{
    lsm_status *s = next_id(r->env, r->dir, &r->m.id);
    if (s == NULL)
        s = collect(r, db);
    char name[40];
    snprintf(name, sizeof name, "private/%" PRIu64, r->m.id);
    char *priv = s ? NULL : backup_path(r->dir, name, NULL);
    if (s == NULL && priv != NULL && r->env->file_exists(r->env, priv))
        s = status_new(LSM_IO_ERROR, "%s exists", priv); /* another writer of the directory */
    if (s == NULL)
        s = priv ? r->env->create_dir(r->env, priv) : status_no_memory();
    r->made_private = s == NULL;
    free(priv);
    if (s == NULL)
        s = copy_all(r);
    if (s == NULL)
        s = sync_sub(r->env, r->dir, name);
    if (s == NULL)
        s = sync_sub(r->env, r->dir, "private");
    if (s == NULL)
        s = sync_sub(r->env, r->dir, "shared");
    r->m.time = (int64_t)time(NULL);
    if (s == NULL)
        s = write_meta(r);
    if (s != NULL && !r->listed)
        undo(r);
    return s;
}

static void fill_info(const backup_meta *m, lsm_backup_info *info)
{
    memset(info, 0, sizeof(*info));
    info->id = m->id;
    info->seq = m->seq;
    info->time = m->time;
    info->files = m->nfiles;
    info->copied_bytes = m->copied;
    for (size_t i = 0; i < m->nfiles; i++)
        info->bytes += m->files[i].size;
}

/* A backup of the read_only db (read through its env) into dir, through env. */
static lsm_status *backup_read_only(lsm_db *db, lsm_env *env, const char *dir,
                                    const lsm_backup_options *o, lsm_backup_info *info)
{
    lsm_backup_options defaults;
    if (o == NULL) {
        lsm_backup_options_init(&defaults);
        o = &defaults;
    }
    struct run r = {.env = env, .src_env = db->env, .dir = dir, .o = o};
    lsm_filelock *lock = NULL;
    char *lockname = NULL;
    lsm_status *s = make_dirs(env, dir);
    if (s == NULL)
        s = (lockname = backup_path(dir, "LOCK", NULL)) ? env->lock_file(env, lockname, &lock)
                                                        : status_no_memory();
    if (s == NULL) /* LOCK's entry: verify and restore want it before any list */
        s = env->sync_dir(env, dir);
    if (s == NULL)
        s = take(&r, db);
    if (lock != NULL)
        lsm_status_free(env->unlock_file(env, lock)); /* the work is done either way */
    if (s == NULL && info != NULL)
        fill_info(&r.m, info);
    run_free(&r);
    free(lockname);
    return s ? status_wrap(s, "backup to %s", dir) : NULL;
}

static lsm_status *open_read_only(lsm_env *env, const char *dir, lsm_db **db)
{
    lsm_options opt;
    lsm_options_init(&opt);
    opt.read_only = true;
    opt.env = env;
    return lsm_open(&opt, dir, db);
}

lsm_status *lsm_backup_store(const char *store_dir, const char *backup_dir,
                             const lsm_backup_options *o, lsm_backup_info *info)
{
    lsm_env *env = o && o->env ? o->env : lsm_env_default();
    lsm_db *db = NULL;
    lsm_status *s = open_read_only(o && o->store_env ? o->store_env : env, store_dir, &db);
    if (s == NULL)
        s = backup_read_only(db, env, backup_dir, o, info);
    if (db != NULL)
        status_keep_first(&s, lsm_close(db));
    return s;
}

/* Whether name is a backup's checkpoint (or its hidden half) left behind:
 * of another process (cut off by a crash), or of this one numbered below
 * `below` (its removal failed, e.g. out of memory; below is 0 unless no
 * other backup of this store runs in this process: one_backup_begins). */
static bool stale_checkpoint(const char *name, unsigned below)
{
    const char *p = name;
    if (strncmp(p, "." CKPT_PREFIX, strlen(CKPT_PREFIX) + 1) == 0)
        p++;
    if (strncmp(p, CKPT_PREFIX, strlen(CKPT_PREFIX)) != 0)
        return false;
    char *end = NULL;
    long pid = strtol(p + strlen(CKPT_PREFIX), &end, 10);
    if (pid <= 0)
        return false;
    if (pid != (long)getpid())
        return true;
    return *end == '-' && strtoul(end + 1, NULL, 10) < below;
}

/* Best effort: removes the checkpoints of backups that could not remove
 * them (below: stale_checkpoint's). */
static void remove_stale(lsm_db *db, unsigned below)
{
    char **names = NULL;
    int n = 0;
    lsm_status *s = db->env->get_children(db->env, db->dir, &names, &n);
    for (int i = 0; s == NULL && i < n; i++) {
        char *p = stale_checkpoint(names[i], below) ? path_join(db->dir, names[i]) : NULL;
        if (p != NULL)
            env_remove_tree(db->env, p);
        free(p);
    }
    lsm_status_free(s);
    env_free_children(names, n);
}

/* A backup of db begins: its checkpoint's number (unique in the process:
 * a leftover of an earlier handle of the store never takes its name), and
 * in *below the number under which this process's checkpoints in the store
 * are leftovers: 0 while another backup of db runs (one begun later takes
 * its number later, under the same mutex, so a backup that began alone may
 * take every lower one). */
static unsigned one_backup_begins(lsm_db *db, unsigned *below)
{
    static atomic_uint counter;
    mutex_lock(&db->mu);
    unsigned number = atomic_fetch_add(&counter, 1);
    *below = db->backups_running++ == 0 ? number : 0;
    mutex_unlock(&db->mu);
    return number;
}

static void one_backup_ends(lsm_db *db)
{
    mutex_lock(&db->mu);
    db->backups_running--;
    mutex_unlock(&db->mu);
}

lsm_status *lsm_backup(lsm_db *db, const char *backup_dir, const lsm_backup_options *o,
                       lsm_backup_info *info)
{
    if (db->opt.read_only)
        return backup_read_only(db, db->env, backup_dir, o, info);
    unsigned below;
    unsigned number = one_backup_begins(db, &below);
    remove_stale(db, below);
    char *ckpt = lsm_asprintf("%s/" CKPT_PREFIX "%ld-%u", db->dir, (long)getpid(), number);
    lsm_status *s = ckpt ? lsm_checkpoint(db, ckpt) : status_no_memory();
    lsm_db *copy = NULL;
    if (s == NULL)
        s = open_read_only(db->env, ckpt, &copy);
    if (s == NULL)
        s = backup_read_only(copy, db->env, backup_dir, o, info);
    if (copy != NULL)
        status_keep_first(&s, lsm_close(copy));
    /* what it cannot remove the next backup does (remove_stale) */
    if (ckpt != NULL)
        env_remove_tree(db->env, ckpt);
    free(ckpt);
    one_backup_ends(db);
    return s;
}
