/*
 * env_rados.c — files and directories of the RADOS env; see env_rados.h.
 * The lease and the fence are in env_rados_lease.c.
 *
 * A file's size is its object's size (rados_stat): appends need no second
 * write to keep it. An object a crash left without a name (created, not
 * yet entered in its directory) is never data: the next holder of the
 * store's lease removes it (env_rados_intent.c).
 */
#include "env_rados_impl.h"
#include "filename.h"

#include "lsm_malloc.h"
#include "status.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define LIST_PAGE 1000

lsm_status *rados_error(int r, const char *what, const char *path)
{
    char msg[600];
    snprintf(msg, sizeof msg, "rados %s %s", what, path);
    return status_from_errno(r < 0 ? -r : r, msg);
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ----------------------------------------------------- guard and operate */

/* path without leading "/" and "./". */
static const char *plain_path(const char *path)
{
    for (;;) {
        if (path[0] == '/')
            path++;
        else if (path[0] == '.' && path[1] == '/')
            path += 2;
        else
            return path;
    }
}

/* Whether the object for path (a file, or a directory entry's directory)
 * is in the fenced tree: path's directory is the store's or below it. */
static bool in_fenced_tree(const struct rados_env *re, const char *path)
{
    const char *p = plain_path(path);
    const char *slash = strrchr(p, '/');
    size_t dirlen = slash ? (size_t)(slash - p) : 0;
    size_t n = strlen(re->store_path);
    return dirlen >= n && strncmp(p, re->store_path, n) == 0 && (dirlen == n || p[n] == '/');
}

/* Whether a write to path must be refused: a lease is held, path is in
 * its tree, and the lease is lost or may lapse before the write lands
 * (then it is lost for good). Writes outside the tree never are. */
static bool lease_refuses(struct rados_env *re, const char *path)
{
    if (atomic_load(&re->epoch) == 0 || !in_fenced_tree(re, path))
        return false;
    uint64_t until = atomic_load(&re->lease_valid_until);
    if (until != 0 && mono_us() >= until)
        atomic_store(&re->lease_lost, true);
    return atomic_load(&re->lease_lost);
}

lsm_status *rados_guard(struct rados_env *re, rados_write_op_t op, const char *what,
                        const char *path)
{
    if (rados_dead(re))
        return status_new(LSM_IO_ERROR, "rados %s %s: the env died at a crash point", what, path);
    uint64_t epoch = atomic_load(&re->epoch);
    if (epoch == 0 || !in_fenced_tree(re, path))
        return NULL;
    if (lease_refuses(re, path))
        return status_new(LSM_IO_ERROR, "rados %s %s: the writer's lease is lost, writes refused",
                          what, path);
    char v[24];
    snprintf(v, sizeof v, "%" PRIu64, epoch);
    rados_write_op_cmpxattr(op, RADOS_XATTR_EPOCH, LIBRADOS_CMPXATTR_OP_EQ, v, strlen(v));
    return NULL;
}

void rados_set_store_path(struct rados_env *re, const char *dir)
{
    snprintf(re->store_path, sizeof re->store_path, "%s", plain_path(dir));
    size_t n = strlen(re->store_path);
    while (n > 0 && re->store_path[n - 1] == '/')
        re->store_path[--n] = '\0';
}

lsm_status *rados_fenced_error(const char *what, const char *path)
{
    return status_new(LSM_IO_ERROR,
                      "rados %s %s: refused, another writer has taken the store over (fence)",
                      what, path);
}

lsm_status *rados_operate(struct rados_env *re, rados_write_op_t op, const char *oid,
                          const char *what, const char *path)
{
    lsm_status *s = rados_guard(re, op, what, path);
    if (s == NULL) {
        int r = rados_write_op_operate(op, re->io, oid, NULL, 0);
        if (r == -ECANCELED)
            s = rados_fenced_error(what, path);
        else if (r < 0)
            s = rados_error(r, what, path);
    }
    rados_release_write_op(op);
    return s;
}

/* ------------------------------------------------------------ directories */

lsm_status *rados_dir_lookup(struct rados_env *re, const char *dir, const char *name,
                              bool *found, char *val, size_t cap)
{
    rados_read_op_t op = rados_create_read_op();
    rados_omap_iter_t it = NULL;
    int prval = 0;
    const char *keys[1] = {name};
    rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
    int r = rados_read_op_operate(op, re->io, dir, 0);
    rados_release_read_op(op);
    *found = false;
    if (r == -ENOENT) {
        if (it)
            rados_omap_get_end(it);
        return NULL; /* a directory with no entries may have no object yet */
    }
    if (r < 0 || prval < 0) {
        if (it)
            rados_omap_get_end(it);
        return rados_error(r < 0 ? r : prval, "lookup in", dir);
    }
    char *k, *v;
    size_t vlen;
    if (rados_omap_get_next(it, &k, &v, &vlen) == 0 && k != NULL) {
        *found = true;
        size_t n = vlen < cap - 1 ? vlen : cap - 1;
        memcpy(val, v, n);
        val[n] = '\0';
    }
    rados_omap_get_end(it);
    return NULL;
}

/* Splits a value "f:OID" / "d:ID" into e. */
void rados_entry_from_value(struct rados_entry *e, const char *val)
{
    e->is_dir = val[0] == 'd';
    size_t n = strnlen(val + 2, 40);
    size_t at = e->is_dir ? strlen(RADOS_DIR_PREFIX) : 0;
    memcpy(e->oid, RADOS_DIR_PREFIX, at);
    memcpy(e->oid + at, val + 2, n);
    e->oid[at + n] = '\0';
}

void rados_entry_value(const struct rados_entry *e, char *val, size_t cap)
{
    if (!e->found)
        val[0] = '\0';
    else
        snprintf(val, cap, "%c:%s", e->is_dir ? 'd' : 'f',
                 e->is_dir ? e->oid + strlen(RADOS_DIR_PREFIX) : e->oid);
}

void rados_name_unchanged(rados_write_op_t op, const struct rados_entry *e, int *prval)
{
    char val[RADOS_OID_MAX + 4];
    rados_entry_value(e, val, sizeof val);
    /* A missing key compares as empty. */
    rados_write_op_omap_cmp(op, e->name, LIBRADOS_CMPXATTR_OP_EQ, val, strlen(val), prval);
}

/* Next component of *p (skipping slashes and "."), into comp; false at end. */
static bool next_component(const char **p, char *comp, size_t cap)
{
    for (;;) {
        while (**p == '/')
            (*p)++;
        if (**p == '\0')
            return false;
        size_t n = strcspn(*p, "/");
        if (n >= cap)
            n = cap - 1;
        memcpy(comp, *p, n);
        comp[n] = '\0';
        *p += strcspn(*p, "/");
        if (strcmp(comp, ".") != 0)
            return true;
    }
}

lsm_status *rados_resolve(struct rados_env *re, const char *path, struct rados_entry *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir_oid, sizeof e->dir_oid, "%s", RADOS_ROOT_OBJ);
    snprintf(e->oid, sizeof e->oid, "%s", RADOS_ROOT_OBJ);
    e->found = e->is_dir = true; /* "" is the root */
    const char *p = path;
    char comp[256];
    bool have = next_component(&p, comp, sizeof comp);
    while (have) {
        if (!e->found)
            return rados_error(-ENOENT, "resolve", path);
        if (!e->is_dir)
            return rados_error(-ENOTDIR, "resolve", path);
        snprintf(e->dir_oid, sizeof e->dir_oid, "%s", e->oid);
        snprintf(e->name, sizeof e->name, "%s", comp);
        char val[RADOS_OID_MAX + 4];
        lsm_status *s = rados_dir_lookup(re, e->dir_oid, comp, &e->found, val, sizeof val);
        if (s)
            return s;
        if (e->found)
            rados_entry_from_value(e, val);
        else
            e->oid[0] = e->is_dir = 0;
        have = next_component(&p, comp, sizeof comp);
    }
    return NULL;
}

lsm_status *rados_dir_oid(struct rados_env *re, const char *path, char *oid)
{
    struct rados_entry e;
    lsm_status *s = rados_resolve(re, path, &e);
    if (s == NULL && !e.found)
        s = rados_error(-ENOENT, "directory", path);
    else if (s == NULL && !e.is_dir)
        s = rados_error(-ENOTDIR, "directory", path);
    if (s == NULL)
        snprintf(oid, RADOS_OID_MAX, "%s", e.oid);
    return s;
}

/* A fresh id, 16 hex digits from the kernel's random source. */
void rados_new_id(char *out, size_t cap)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = mono_us() ^ ((uint64_t)getpid() << 32);
    snprintf(out, cap, "%016" PRIx64, r);
}

lsm_status *rados_dir_set(struct rados_env *re, const char *dir, const char *name,
                          const char *val, const char *path)
{
    rados_write_op_t op = rados_create_write_op();
    if (val != NULL) {
        const char *keys[1] = {name}, *vals[1] = {val};
        size_t lens[1] = {strlen(val)};
        rados_write_op_omap_set(op, keys, vals, lens, 1);
    } else {
        const char *keys[1] = {name};
        rados_write_op_omap_rm_keys(op, keys, 1);
    }
    return rados_operate(re, op, dir, val ? "enter" : "remove entry", path);
}

lsm_status *rados_dir_list(struct rados_env *re, const char *dir, const char *path,
                           const char *prefix,
                           lsm_status *(*fn)(void *ctx, const char *key, const char *val),
                           void *ctx)
{
    bool intents = prefix[0] == '/';
    char after[256] = "";
    for (;;) {
        rados_read_op_t op = rados_create_read_op();
        rados_omap_iter_t it = NULL;
        unsigned char more = 0;
        int prval = 0;
        rados_read_op_omap_get_vals2(op, after, prefix, LIST_PAGE, &it, &more, &prval);
        int r = rados_fault(re, intents ? "list intents" : "list", dir);
        if (r == 0)
            r = rados_read_op_operate(op, re->io, dir, 0);
        rados_release_read_op(op);
        if (r == -ENOENT) {
            if (it)
                rados_omap_get_end(it);
            return NULL;
        }
        if (r < 0 || prval < 0) {
            if (it)
                rados_omap_get_end(it);
            return rados_error(r < 0 ? r : prval, "list", path);
        }
        char *k, *v;
        size_t vlen;
        lsm_status *s = NULL;
        while (s == NULL && rados_omap_get_next(it, &k, &v, &vlen) == 0 && k != NULL) {
            char val[RADOS_VALUE_MAX]; /* a name, or a record's value */
            size_t n = vlen < sizeof val - 1 ? vlen : sizeof val - 1;
            memcpy(val, v, n);
            val[n] = '\0';
            snprintf(after, sizeof after, "%s", k);
            if (intents || k[0] != '/')
                s = fn(ctx, k, val);
        }
        rados_omap_get_end(it);
        if (s != NULL || !more)
            return s;
    }
}

/* ------------------------------------------------------- name counts */

/* Reads an object's name count (lsmfs.refs); LSM_NOT_FOUND: it is gone. */
static lsm_status *refs_get(struct rados_env *re, const char *oid, uint64_t *refs)
{
    char v[24];
    int r = rados_getxattr(re->io, oid, RADOS_XATTR_REFS, v, sizeof v - 1);
    if (r == -ENOENT)
        return status_new(LSM_NOT_FOUND, "rados read name count of %s: no such object", oid);
    if (r < 0)
        return rados_error(r, "read name count of", oid);
    v[r] = '\0';
    *refs = strtoull(v, NULL, 10);
    return NULL;
}

mutex *rados_obj_mu(struct rados_env *re, const char *oid)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = oid; *p != '\0'; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &re->obj_mu[h % RADOS_OBJ_LOCKS];
}

void rados_obj_lock2(struct rados_env *re, const char *a, const char *b)
{
    mutex *x = rados_obj_mu(re, a), *y = b != NULL ? rados_obj_mu(re, b) : x;
    mutex *first = x < y ? x : y, *second = x < y ? y : x;
    mutex_lock(first);
    if (second != first)
        mutex_lock(second);
}

void rados_obj_unlock2(struct rados_env *re, const char *a, const char *b)
{
    mutex *x = rados_obj_mu(re, a), *y = b != NULL ? rados_obj_mu(re, b) : x;
    mutex_unlock(x);
    if (y != x)
        mutex_unlock(y);
}

/* Whether path names a store's space reserve (db_reserve.c's RESERVE, or
 * a larger one being made): removing it is the store giving up its
 * reserve to free space (rados_space_freed). */
static bool is_reserve(const char *path)
{
    const char *base = strrchr(path, '/');
    uint64_t number;
    enum file_type type;
    return parse_file_name(base != NULL ? base + 1 : path, &number, &type) &&
           type == FILE_RESERVE;
}

/* Adds delta (+1/-1) to oid's name count, which was refs; the object goes
 * with its last name. REQUIRES: oid's lock held. */
static lsm_status *refs_set(struct rados_env *re, const char *oid, uint64_t refs, int delta,
                            const char *path)
{
    assert(mutex_held(rados_obj_mu(re, oid)));
    rados_write_op_t op = rados_create_write_op();
    char old[24], now[24];
    snprintf(old, sizeof old, "%" PRIu64, refs);
    snprintf(now, sizeof now, "%" PRIu64, refs + (uint64_t)(int64_t)delta);
    rados_write_op_cmpxattr(op, RADOS_XATTR_REFS, LIBRADOS_CMPXATTR_OP_EQ, old, strlen(old));
    bool removes = delta < 0 && refs <= 1;
    uint64_t size = 0;
    time_t mtime;
    if (removes && rados_space_full(re) && rados_stat(re->io, oid, &size, &mtime) < 0)
        size = 0;
    if (removes)
        rados_write_op_remove(op);
    else
        rados_write_op_setxattr(op, RADOS_XATTR_REFS, now, strlen(now));
    lsm_status *s =
        rados_operate(re, op, oid, delta < 0 ? "drop a name of" : "add a name to", path);
    if (s == NULL && removes)
        rados_space_freed(re, size, 1, is_reserve(path));
    return s;
}

/* Adds delta (+1/-1) to oid's name count. REQUIRES: oid's lock held. */
static lsm_status *refs_add(struct rados_env *re, const char *oid, int delta, const char *path)
{
    uint64_t refs = 0;
    lsm_status *s = refs_get(re, oid, &refs);
    return s != NULL ? s : refs_set(re, oid, refs, delta, path);
}

lsm_status *rados_refs_get(struct rados_env *re, const char *oid, uint64_t *refs)
{
    return refs_get(re, oid, refs);
}

lsm_status *rados_refs_drop(struct rados_env *re, const char *oid, uint64_t had, const char *path)
{
    char v[24];
    int r = rados_getxattr(re->io, oid, RADOS_XATTR_REFS, v, sizeof v - 1);
    if (r == -ENOENT)
        return NULL; /* its last name was dropped */
    if (r < 0)
        return rados_error(r, "read name count of", oid);
    v[r] = '\0';
    uint64_t refs = strtoull(v, NULL, 10);
    return refs != had ? NULL : refs_set(re, oid, refs, -1, path);
}

lsm_status *rados_unref(struct rados_env *re, const char *oid, const char *path)
{
    rados_obj_lock2(re, oid, NULL);
    lsm_status *s = refs_add(re, oid, -1, path);
    rados_obj_unlock2(re, oid, NULL);
    return s;
}

/* One try at creating object oid with one name and the fence epoch. */
static int create_once(struct rados_env *re, const char *oid, int flags)
{
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
    rados_write_op_setxattr(op, RADOS_XATTR_REFS, "1", 1);
    uint64_t epoch = atomic_load(&re->epoch);
    if (epoch != 0) {
        char v[24];
        snprintf(v, sizeof v, "%" PRIu64, epoch);
        rados_write_op_setxattr(op, RADOS_XATTR_EPOCH, v, strlen(v));
    }
    int r = rados_write_op_operate(op, re->io, oid, NULL, flags);
    rados_release_write_op(op);
    rados_space_answered(re, r, flags);
    return r;
}

/* create_once, unless an objects quota's count refuses it (-EDQUOT,
 * *counted set). */
static int create_counted(struct rados_env *re, const char *oid, int flags, bool *counted)
{
    int r = rados_space_create_take(re, flags);
    *counted = r < 0;
    if (r == 0) {
        r = create_once(re, oid, flags);
        rados_space_created(re, r);
    }
    return r;
}

/* Creates object oid with one name (and the fence epoch, if any); a full
 * pool's refusal is tried again forced when space this env freed covers it. */
lsm_status *rados_object_create(struct rados_env *re, const char *oid, const char *path)
{
    if (lease_refuses(re, path) || rados_dead(re))
        return status_new(LSM_IO_ERROR, "rados create %s: the writer's lease is lost", path);
    int flags = rados_space_create_flags(re);
    bool counted = false;
    int r = create_counted(re, oid, flags, &counted);
    if (r == -EDQUOT && flags == 0 && (flags = rados_space_create_flags(re)) != 0)
        r = create_counted(re, oid, flags, &counted);
    if (r == -EDQUOT && counted)
        return status_new(LSM_NO_SPACE, "rados create %s: the pool is out of objects (its "
                          "max_objects quota, counted by this client)", path);
    return r < 0 ? rados_error(r, "create", path) : NULL;
}

/* ------------------------------------------------------- reading files */

struct rados_rfile {
    union {
        lsm_sfile s;
        lsm_rfile r;
    } base;
    struct rados_env *re;
    char oid[RADOS_OID_MAX];
    char *path;
    uint64_t pos; /* sfile only */
};

/* Reads up to n bytes at off; *got < n only at the object's end. */
static lsm_status *read_at(struct rados_rfile *f, uint64_t off, void *buf, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (64u << 20))
            want = 64u << 20;
        int r = rados_read(f->re->io, f->oid, (char *)buf + *got, want, off + *got);
        if (r < 0)
            return rados_error(r, "read", f->path);
        *got += (size_t)r;
        if ((size_t)r < want)
            break;
    }
    return NULL;
}

static lsm_status *sfile_read(lsm_sfile *base, void *buf, size_t n, size_t *got)
{
    struct rados_rfile *f = (struct rados_rfile *)base;
    lsm_status *s = read_at(f, f->pos, buf, n, got);
    f->pos += *got;
    return s;
}

static lsm_status *sfile_skip(lsm_sfile *base, uint64_t n)
{
    ((struct rados_rfile *)base)->pos += n;
    return NULL;
}

static lsm_status *rfile_pread(lsm_rfile *base, uint64_t off, void *buf, size_t n, size_t *got)
{
    return read_at((struct rados_rfile *)base, off, buf, n, got);
}

static void rfile_close_any(struct rados_rfile *f)
{
    free(f->path);
    free(f);
}

static void sfile_close(lsm_sfile *base)
{
    rfile_close_any((struct rados_rfile *)base);
}

static void rfile_close(lsm_rfile *base)
{
    rfile_close_any((struct rados_rfile *)base);
}

static const struct lsm_sfile_ops rados_sfile_ops = {
    .read = sfile_read, .skip = sfile_skip, .close = sfile_close};
static const struct lsm_rfile_ops rados_rfile_ops = {.pread = rfile_pread, .close = rfile_close};

/* The file at path, which must exist. */
static lsm_status *resolve_file(struct rados_env *re, const char *path, struct rados_entry *e)
{
    lsm_status *s = rados_resolve(re, path, e);
    if (s == NULL && !e->found)
        s = rados_error(-ENOENT, "open", path);
    else if (s == NULL && e->is_dir)
        s = rados_error(-EISDIR, "open", path);
    return s;
}

static lsm_status *open_reader(lsm_env *env, const char *path, struct rados_rfile **out)
{
    struct rados_env *re = rados_env_of(env);
    struct rados_entry e;
    *out = NULL;
    lsm_status *s = resolve_file(re, path, &e);
    if (s)
        return s;
    struct rados_rfile *f = lsm_calloc(1, sizeof *f);
    if (f == NULL || (f->path = lsm_strdup(path)) == NULL) {
        free(f);
        return status_new(LSM_NO_MEMORY, "open %s: out of memory", path);
    }
    f->re = re;
    snprintf(f->oid, sizeof f->oid, "%s", e.oid);
    *out = f;
    return NULL;
}

static lsm_status *rados_new_sfile(lsm_env *env, const char *path, lsm_sfile **out)
{
    struct rados_rfile *f;
    lsm_status *s = open_reader(env, path, &f);
    if (s == NULL) {
        f->base.s.ops = &rados_sfile_ops;
        *out = &f->base.s;
    }
    return s;
}

static lsm_status *rados_new_rfile(lsm_env *env, const char *path, lsm_rfile **out)
{
    struct rados_rfile *f;
    lsm_status *s = open_reader(env, path, &f);
    if (s == NULL) {
        f->base.r.ops = &rados_rfile_ops;
        *out = &f->base.r;
    }
    return s;
}

/* -------------------------------------------------- directory and files */

static bool rados_file_exists(lsm_env *env, const char *path)
{
    struct rados_entry e;
    lsm_status *s = rados_resolve(rados_env_of(env), path, &e);
    bool found = s == NULL && e.found;
    lsm_status_free(s);
    return found;
}

struct names {
    char **v;
    int n, cap;
};

static lsm_status *add_name(void *ctx, const char *name, const char *val)
{
    (void)val;
    struct names *nm = ctx;
    if (nm->n == nm->cap) {
        int cap = nm->cap ? nm->cap * 2 : 16;
        char **v = lsm_realloc(nm->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return status_new(LSM_NO_MEMORY, "list: out of memory");
        nm->v = v;
        nm->cap = cap;
    }
    if ((nm->v[nm->n] = lsm_strdup(name)) == NULL)
        return status_new(LSM_NO_MEMORY, "list: out of memory");
    nm->n++;
    return NULL;
}

static lsm_status *rados_get_children(lsm_env *env, const char *dir, char ***names, int *n)
{
    struct rados_env *re = rados_env_of(env);
    *names = NULL;
    *n = 0;
    char oid[RADOS_OID_MAX];
    lsm_status *s = rados_dir_oid(re, dir, oid);
    struct names nm = {0};
    if (s == NULL)
        s = rados_dir_list(re, oid, dir, "", add_name, &nm);
    if (s != NULL) {
        env_free_children(nm.v, nm.n);
        return s;
    }
    *names = nm.v;
    *n = nm.n;
    return NULL;
}

#define NAME_RACE_TRIES 16

/* Runs once(re, a, b, &raced) again while it found a name changed between
 * its lookup and its op (rados_name_unchanged): then it changed nothing. */
static lsm_status *retry_raced(struct rados_env *re, const char *a, const char *b,
                               lsm_status *(*once)(struct rados_env *, const char *, const char *,
                                                   bool *))
{
    for (int i = 0; i < NAME_RACE_TRIES; i++) {
        bool raced = false;
        lsm_status *s = once(re, a, b, &raced);
        if (!raced)
            return s;
        lsm_status_free(s);
    }
    return status_new(LSM_BUSY, "rados %s: its name kept changing under it", a);
}

/* The name goes by the one rule (rados_name_leaves): a crash before the
 * drop leaves no object a sweep cannot find. */
static lsm_status *remove_once(struct rados_env *re, const char *path, const char *unused,
                               bool *raced)
{
    (void)unused;
    struct rados_entry e;
    lsm_status *s = resolve_file(re, path, &e);
    if (s != NULL)
        return s;
    rados_seam(re, "resolved", e.oid);
    int prval = 0;
    rados_write_op_t op = rados_create_write_op();
    rados_name_unchanged(op, &e, &prval);
    const char *keys[1] = {e.name};
    rados_write_op_omap_rm_keys(op, keys, 1);
    rados_obj_lock2(re, e.oid, NULL);
    s = rados_name_leaves(re, op, e.dir_oid, e.oid, "remove entry", path);
    rados_obj_unlock2(re, e.oid, NULL);
    *raced = s != NULL && prval == -ECANCELED;
    return s;
}

static lsm_status *rados_remove_file(lsm_env *env, const char *path)
{
    return retry_raced(rados_env_of(env), path, NULL, remove_once);
}

/* The file b names, which a rename of a to b replaces; NULL if none. */
static const char *replaced_file(const struct rados_entry *a, const struct rados_entry *b)
{
    return b->found && !b->is_dir && strcmp(b->oid, a->oid) != 0 ? b->oid : NULL;
}

/* A rename in one directory: one write op (CURRENT's publish), in which
 * the name of the file it replaces leaves by the one rule. */
static lsm_status *rename_in_dir(struct rados_env *re, const struct rados_entry *a,
                                 const struct rados_entry *b, const char *val, const char *to,
                                 bool *raced)
{
    rados_write_op_t op = rados_create_write_op();
    const char *keys[1] = {b->name}, *vals[1] = {val}, *rm[1] = {a->name};
    size_t lens[1] = {strlen(val)};
    int prval[2] = {0, 0};
    rados_name_unchanged(op, a, &prval[0]);
    rados_name_unchanged(op, b, &prval[1]);
    rados_write_op_omap_rm_keys(op, rm, 1);
    rados_write_op_omap_set(op, keys, vals, lens, 1);
    const char *gone = replaced_file(a, b);
    if (gone != NULL)
        rados_obj_lock2(re, gone, NULL);
    lsm_status *s = rados_name_leaves(re, op, a->dir_oid, gone, "rename", to);
    if (gone != NULL)
        rados_obj_unlock2(re, gone, NULL);
    *raced = s != NULL && (prval[0] == -ECANCELED || prval[1] == -ECANCELED);
    return s;
}

/* Whether path to is below path from. */
static bool inside(const char *from, const char *to)
{
    const char *f = plain_path(from), *t = plain_path(to);
    size_t n = strlen(f);
    while (n > 0 && f[n - 1] == '/')
        n--;
    return strncmp(f, t, n) == 0 && t[n] == '/';
}

/* A link's steps: the record of the drop that would undo it, the count
 * raised from refs, the name with the record's removal (one op, in which
 * the name of a file b replaced leaves by the one rule). A crash between
 * them leaves the record: the sweep drops the raised count.
 * REQUIRES: the objects' locks held. */
static lsm_status *link_steps(struct rados_env *re, const struct rados_entry *a,
                              const struct rados_entry *b, uint64_t refs, const char *to,
                              bool *raced)
{
    rados_write_op_t op = rados_create_write_op();
    rados_drop_record(op, a->oid, refs + 1, true);
    lsm_status *s = rados_operate(re, op, b->dir_oid, "link to", to);
    if (s == NULL)
        s = rados_crash_point(re, "linking", a->oid);
    if (s == NULL)
        s = refs_set(re, a->oid, refs, +1, to);
    if (s == NULL)
        s = rados_crash_point(re, "linked", a->oid);
    if (s != NULL)
        return s;
    char val[RADOS_OID_MAX + 4];
    rados_entry_value(a, val, sizeof val);
    const char *keys[1] = {b->name}, *vals[1] = {val};
    size_t lens[1] = {strlen(val)};
    op = rados_create_write_op();
    int prval = 0;
    rados_name_unchanged(op, b, &prval);
    rados_write_op_omap_set(op, keys, vals, lens, 1);
    rados_drop_record(op, a->oid, refs + 1, false);
    s = rados_name_leaves(re, op, b->dir_oid, replaced_file(a, b), "link to", to);
    *raced = s != NULL && prval == -ECANCELED;
    return s;
}

/* Links a to b (b's file, if any, replaced); a's own name stays.
 * REQUIRES: the objects' locks held. */
static lsm_status *link_locked(struct rados_env *re, const struct rados_entry *a,
                               const struct rados_entry *b, const char *to, bool *raced)
{
    uint64_t refs = 0;
    *raced = false;
    struct rados_pending_drop *p = NULL;
    lsm_status *s = rados_drops_settle(re, a->oid);
    if (s == NULL && (p = rados_pending_new()) == NULL)
        s = status_new(LSM_NO_MEMORY, "rados link to %s: out of memory", to);
    if (s == NULL)
        s = refs_get(re, a->oid, &refs);
    if (s == NULL)
        s = link_steps(re, a, b, refs, to, raced);
    if (s == NULL || rados_dead(re) || p == NULL || refs == 0) {
        free(p);
        return s;
    }
    /* undone: the count as it was, no record (kept if that fails) */
    lsm_status_free(rados_drop_done(re, p, b->dir_oid, a->oid, refs + 1, to));
    return s;
}

/* A file's rename to another directory: a link to its new name (over the
 * file there, by the one rule), then its old name leaves by it too. A
 * crash between leaves both names, each counted; never a name uncounted
 * nor an object without a name. */
static lsm_status *move_file(struct rados_env *re, const struct rados_entry *a,
                             const struct rados_entry *b, const char *from, const char *to,
                             bool *raced)
{
    rados_obj_lock2(re, a->oid, replaced_file(a, b));
    lsm_status *s = link_locked(re, a, b, to, raced);
    int prval = 0;
    if (s == NULL) {
        rados_write_op_t op = rados_create_write_op();
        rados_name_unchanged(op, a, &prval);
        const char *keys[1] = {a->name};
        rados_write_op_omap_rm_keys(op, keys, 1);
        s = rados_name_leaves(re, op, a->dir_oid, a->oid, "rename", from);
    }
    rados_obj_unlock2(re, a->oid, replaced_file(a, b));
    if (s != NULL && prval == -ECANCELED) { /* the old name went meanwhile: moved */
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

static lsm_status *rename_once(struct rados_env *re, const char *from, const char *to,
                               bool *raced)
{
    struct rados_entry a, b;
    lsm_status *s = rados_resolve(re, from, &a);
    if (s == NULL && !a.found)
        s = rados_error(-ENOENT, "rename", from);
    if (s == NULL)
        s = rados_resolve(re, to, &b);
    if (s == NULL && b.found && b.is_dir != a.is_dir)
        s = rados_error(a.is_dir ? -ENOTDIR : -EISDIR, "rename to", to);
    if (s)
        return s;
    rados_seam(re, "resolved", a.oid);
    char val[RADOS_OID_MAX + 4];
    rados_entry_value(&a, val, sizeof val);
    if (b.found && strcmp(b.oid, a.oid) == 0)
        return NULL; /* two names of one file: nothing to do, as rename(2) */
    if (a.is_dir && inside(from, to))
        return status_new(LSM_INVALID_ARGUMENT, "rados rename %s to %s: a directory into itself",
                          from, to);
    if (a.is_dir)
        return rados_rename_dir(re, &a, &b, to, raced);
    if (strcmp(a.dir_oid, b.dir_oid) == 0)
        return rename_in_dir(re, &a, &b, val, to, raced);
    return move_file(re, &a, &b, from, to, raced);
}

/* One write op when both names are in one directory (CURRENT's publish). */
static lsm_status *rados_rename_file(lsm_env *env, const char *from, const char *to)
{
    return retry_raced(rados_env_of(env), from, to, rename_once);
}

static lsm_status *rados_link_file(lsm_env *env, const char *from, const char *to)
{
    struct rados_env *re = rados_env_of(env);
    struct rados_entry a, b;
    lsm_status *s = resolve_file(re, from, &a);
    if (s == NULL)
        s = rados_resolve(re, to, &b);
    if (s == NULL && b.found)
        s = rados_error(-EEXIST, "link to", to);
    if (s)
        return s;
    bool raced = false;
    rados_obj_lock2(re, a.oid, NULL); /* b is new: it replaces nothing */
    s = link_locked(re, &a, &b, to, &raced);
    rados_obj_unlock2(re, a.oid, NULL);
    if (raced) { /* b came meanwhile */
        lsm_status_free(s);
        s = rados_error(-EEXIST, "link to", to);
    }
    return s;
}

/* A directory at path: an existing one is fine unless must_be_new. */
static lsm_status *make_dir(lsm_env *env, const char *path, bool must_be_new)
{
    struct rados_env *re = rados_env_of(env);
    pthread_mutex_lock(&re->dir_mu);
    struct rados_entry e;
    lsm_status *s = rados_resolve(re, path, &e);
    if (s == NULL && e.found && must_be_new)
        s = status_new(LSM_INVALID_ARGUMENT, "mkdir %s: something is there already", path);
    if (s == NULL && e.found && !e.is_dir)
        s = rados_error(-ENOTDIR, "mkdir", path);
    if (s == NULL && !e.found)
        s = rados_sweep_name(re, e.dir_oid, path, e.name);
    if (s == NULL && !e.found) {
        char id[24], val[RADOS_OID_MAX + 4];
        struct rados_entry made = {.found = true, .is_dir = true};
        rados_new_id(id, sizeof id);
        snprintf(made.oid, sizeof made.oid, "%s%s", RADOS_DIR_PREFIX, id);
        rados_entry_value(&made, val, sizeof val);
        s = rados_create_named(re, &e, made.oid, val, path);
    }
    pthread_mutex_unlock(&re->dir_mu);
    return s;
}

static lsm_status *rados_create_dir(lsm_env *env, const char *path)
{
    return make_dir(env, path, false);
}

static lsm_status *rados_create_dir_new(lsm_env *env, const char *path)
{
    return make_dir(env, path, true);
}

/* RADOS has no links, owners or modes: a name is a file or a directory of
 * the store's client, private by the pool's caps (the env.h privacy rule
 * holds by construction). */
static lsm_status *rados_path_info(lsm_env *env, const char *path, lsm_path_info *out)
{
    struct rados_entry e;
    lsm_status *s = rados_resolve(rados_env_of(env), path, &e);
    if (s != NULL)
        return s;
    *out = (lsm_path_info){
        .kind = !e.found ? LSM_PATH_NONE : e.is_dir ? LSM_PATH_DIR : LSM_PATH_FILE,
        .perm = e.is_dir ? ENV_DIR_MODE : ENV_FILE_MODE,
        .uid = (uint32_t)geteuid(),
        .mine = true,
    };
    return NULL;
}

static lsm_status *rados_make_private(lsm_env *env, const char *path)
{
    (void)env;
    (void)path;
    return NULL; /* nothing to tighten: see rados_path_info */
}

static lsm_status *not_empty(void *ctx, const char *name, const char *val)
{
    (void)ctx;
    (void)val;
    return rados_error(-ENOTEMPTY, "rmdir: holds", name);
}

/* One try at rmdir: an empty directory's intents go first, with their
 * unnamed objects (no sweep would find them once the directory is gone),
 * then its name and object by the intent rule (rados_dir_leaves). */
static lsm_status *rmdir_once(struct rados_env *re, const char *path, const char *unused,
                              bool *raced)
{
    (void)unused;
    struct rados_entry e;
    lsm_status *s = rados_resolve(re, path, &e);
    if (s == NULL && !e.found)
        s = rados_error(-ENOENT, "rmdir", path);
    else if (s == NULL && !e.is_dir)
        s = rados_error(-ENOTDIR, "rmdir", path);
    else if (s == NULL && e.name[0] == '\0')
        s = rados_error(-EBUSY, "rmdir the pool's top", path);
    if (s == NULL)
        s = rados_dir_list(re, e.oid, path, "", not_empty, NULL);
    if (s == NULL)
        s = rados_sweep_tree(re, e.oid, plain_path(path));
    return s != NULL ? s : rados_dir_leaves(re, &e, path, raced);
}

static lsm_status *rados_remove_dir(lsm_env *env, const char *path)
{
    return retry_raced(rados_env_of(env), path, NULL, rmdir_once);
}

static lsm_status *rados_file_size(lsm_env *env, const char *path, uint64_t *size)
{
    struct rados_env *re = rados_env_of(env);
    struct rados_entry e;
    *size = 0;
    lsm_status *s = resolve_file(re, path, &e);
    time_t mtime;
    int r = s ? 0 : rados_stat(re->io, e.oid, size, &mtime);
    return s ? s : r < 0 ? rados_error(r, "stat", path) : NULL;
}

/* Every acknowledged append is on every replica: what is left is the
 * answers to the sends of the file's open writers. */
static lsm_status *rados_sync_file(lsm_env *env, const char *path)
{
    struct rados_env *re = rados_env_of(env);
    struct rados_entry e;
    lsm_status *s = resolve_file(re, path, &e);
    return s != NULL ? s : rados_settle_writers(re, e.oid, UINT64_MAX);
}

static lsm_status *rados_sync_dir(lsm_env *env, const char *path)
{
    char oid[RADOS_OID_MAX];
    return rados_dir_oid(rados_env_of(env), path, oid);
}

/* After the open writers' sends are answered: a send the full pool refused
 * is sent again from its answer, and must not land past the cut. */
static lsm_status *rados_truncate_file(lsm_env *env, const char *path, uint64_t len)
{
    struct rados_env *re = rados_env_of(env);
    struct rados_entry e;
    lsm_status *s = resolve_file(re, path, &e);
    if (s == NULL)
        s = rados_settle_writers(re, e.oid, len);
    uint64_t size = 0;
    time_t mtime;
    int r = s ? 0 : rados_stat(re->io, e.oid, &size, &mtime);
    if (s == NULL && r < 0)
        s = rados_error(r, "stat", path);
    if (s != NULL || size <= len)
        return s;
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_truncate(op, len);
    s = rados_operate(re, op, e.oid, "truncate", path);
    if (s == NULL)
        rados_space_freed(re, size - len, 0, false);
    return s;
}

static uint64_t rados_now_micros(lsm_env *env)
{
    (void)env;
    return mono_us();
}

static void rados_sleep_micros(lsm_env *env, uint64_t us)
{
    lsm_env *d = lsm_env_default();
    (void)env;
    d->sleep_micros(d, us);
}

/* ------------------------------------------------------------ the tree */

struct tree_ctx {
    struct rados_env *re;
    const char *name, *value;
};

/* Sets xattr name = value on object oid (gone: nothing to do), then
 * passes the "stamped" crash point. */
static lsm_status *stamp(struct rados_env *re, const char *oid, const char *name,
                         const char *value)
{
    if (rados_dead(re))
        return status_new(LSM_IO_ERROR, "rados set fence on %s: the env died", oid);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_assert_exists(op); /* a bare setxattr would make a gone object again */
    rados_write_op_setxattr(op, name, value, strlen(value));
    int r = rados_write_op_operate(op, re->io, oid, NULL, 0);
    rados_release_write_op(op);
    if (r < 0 && r != -ENOENT)
        return rados_error(r, "set fence on", oid);
    return rados_crash_point(re, "stamped", oid);
}

static lsm_status *set_one(void *ctx, const char *name, const char *val)
{
    (void)name;
    struct tree_ctx *t = ctx;
    struct rados_entry e;
    memset(&e, 0, sizeof e);
    rados_entry_from_value(&e, val);
    if (e.is_dir)
        return rados_set_xattr_tree(t->re, e.oid, t->name, t->value);
    return stamp(t->re, e.oid, t->name, t->value);
}

/* An object whose drop of a name a crash cut short: the sweep's drop is
 * guarded too. */
static lsm_status *set_dropped(void *ctx, const char *key, const char *val)
{
    (void)val;
    struct tree_ctx *t = ctx;
    return stamp(t->re, key + strlen(RADOS_DROP_PREFIX), t->name, t->value);
}

/* Files first (and objects a drop record names), the directory last: the directory's xattr is what the next
 * lease's holder reads, so a crash part-way leaves it as it was (no epoch
 * at a first stamping, the old holder at a takeover) and the next lock
 * stamps the whole tree again; never a stamped directory over unstamped
 * files, whose every guarded op would be refused as fenced. */
lsm_status *rados_set_xattr_tree(struct rados_env *re, const char *dir_oid, const char *name,
                                 const char *value)
{
    struct tree_ctx t = {re, name, value};
    lsm_status *s = rados_dir_list(re, dir_oid, dir_oid, "", set_one, &t);
    if (s == NULL)
        s = rados_dir_list(re, dir_oid, dir_oid, RADOS_DROP_PREFIX, set_dropped, &t);
    return s != NULL ? s : stamp(re, dir_oid, name, value);
}

lsm_status *rados_crash_point(struct rados_env *re, const char *point, const char *oid)
{
    if (!rados_dead(re) && (re->crash_fn == NULL || !re->crash_fn(re->crash_arg, point, oid)))
        return NULL;
    atomic_store(&re->dead, true);
    return status_new(LSM_IO_ERROR, "rados %s %s: the env died here (crash point)", point, oid);
}

void rados_seam(struct rados_env *re, const char *point, const char *oid)
{
    if (re->crash_fn != NULL)
        (void)re->crash_fn(re->crash_arg, point, oid);
}

int rados_fault(struct rados_env *re, const char *op, const char *oid)
{
    return re->fault_fn != NULL ? re->fault_fn(re->fault_arg, op, oid) : 0;
}

void env_rados_set_fault_hook(lsm_env *env, env_rados_fault_fn fn, void *arg)
{
    struct rados_env *re = rados_env_of(env);
    re->fault_fn = fn;
    re->fault_arg = arg;
}

void env_rados_set_crash_hook(lsm_env *env, env_rados_crash_fn fn, void *arg)
{
    struct rados_env *re = rados_env_of(env);
    re->crash_fn = fn;
    re->crash_arg = arg;
}

/* ---------------------------------------------------------- the env */

void env_rados_options_init(env_rados_options *o)
{
    memset(o, 0, sizeof *o);
}

static const lsm_env rados_env_table = {
    .new_wfile = rados_new_wfile,
    .new_sfile = rados_new_sfile,
    .new_rfile = rados_new_rfile,
    .file_exists = rados_file_exists,
    .get_children = rados_get_children,
    .remove_file = rados_remove_file,
    .rename_file = rados_rename_file,
    .link_file = rados_link_file,
    .create_dir = rados_create_dir,
    .create_dir_new = rados_create_dir_new,
    .path_info = rados_path_info,
    .make_private = rados_make_private,
    .remove_dir = rados_remove_dir,
    .file_size = rados_file_size,
    .sync_file = rados_sync_file,
    .truncate_file = rados_truncate_file,
    .sync_dir = rados_sync_dir,
    .lock_file = rados_lock_file,
    .unlock_file = rados_unlock_file,
    .lock_file_shared = rados_lock_file_shared,
    .disk_free = rados_disk_free,
    .now_micros = rados_now_micros,
    .sleep_micros = rados_sleep_micros,
};

bool env_is_rados(const lsm_env *env)
{
    return env != NULL && env->new_wfile == rados_new_wfile;
}

/* librados writes with plain write(2) to sockets and pipes whose far end may
 * be gone: its admin socket answers a client that hung up, and a new client
 * pings the socket path an older one left. With SIGPIPE at its default that
 * kills the process (a tool run by a script, a mount during start-up), so
 * SIGPIPE is blocked in the calling thread around the calls that start
 * librados' threads (they inherit the mask) and stop them: those writes get
 * EPIPE instead. The process's own disposition is left as it is.
 * sigpipe_hold returns the mask to give back to sigpipe_release, which drops
 * a SIGPIPE raised meanwhile before the old mask could deliver it. */
static sigset_t sigpipe_hold(void)
{
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    return old;
}

static void sigpipe_release(const sigset_t *old)
{
    if (!sigismember(old, SIGPIPE)) {
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        const struct timespec now = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &now) == SIGPIPE)
            ;
    }
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Reads the conf and connects; a one-line status naming what failed. */
static lsm_status *connect_cluster(struct rados_env *re, const env_rados_options *o)
{
    const char *id = o->ceph_id ? o->ceph_id : "admin";
    if (strncmp(id, "client.", 7) == 0)
        id += 7;
    const char *conf = o->ceph_conf ? o->ceph_conf : getenv("CEPH_CONF");
    if (conf == NULL)
        conf = "/etc/ceph/ceph.conf";
    int r = rados_create(&re->cluster, id);
    if (r < 0)
        return rados_error(r, "create client", id);
    if ((r = rados_conf_read_file(re->cluster, conf)) < 0)
        return status_new(LSM_IO_ERROR, "ceph: cannot read ceph.conf %s: %s", conf, strerror(-r));
    char t[16];
    snprintf(t, sizeof t, "%u", o->connect_timeout_s ? o->connect_timeout_s : 10);
    static const char *const timeouts[] = {"client_mount_timeout", "rados_mon_op_timeout"};
    for (size_t i = 0; i < sizeof timeouts / sizeof *timeouts; i++)
        if ((r = rados_conf_set(re->cluster, timeouts[i], t)) < 0)
            return status_new(LSM_IO_ERROR, "ceph: cannot set %s to %s s: %s", timeouts[i], t,
                              strerror(-r));
    if ((r = rados_connect(re->cluster)) < 0)
        return status_new(LSM_IO_ERROR,
                          "ceph: cannot connect as client.%s with %s: %s (cluster down, wrong "
                          "key or conf?)",
                          id, conf, strerror(-r));
    if ((r = rados_ioctx_create(re->cluster, o->pool, &re->io)) < 0)
        return status_new(r == -ENOENT ? LSM_INVALID_ARGUMENT : LSM_IO_ERROR,
                          "ceph: pool %s: %s", o->pool,
                          r == -ENOENT ? "no such pool" : strerror(-r));
    /* A pool over its quota answers EDQUOT (no space) to a write that would
     * grow it and takes one that frees space; without this librados would
     * hold every write, deletes too, until the pool had room. */
    rados_set_pool_full_try(re->io);
    if ((r = rados_ioctx_create(re->cluster, o->pool, &re->count_io)) < 0)
        return rados_error(r, "open the pool", o->pool);
    rados_ioctx_set_namespace(re->count_io, LIBRADOS_ALL_NSPACES);
    return NULL;
}

lsm_status *env_rados_open(const env_rados_options *o, lsm_env **out)
{
    *out = NULL;
    struct rados_env *re = lsm_calloc(1, sizeof *re);
    if (re == NULL)
        return status_new(LSM_NO_MEMORY, "ceph: out of memory");
    re->env = rados_env_table;
    re->lease_ms = o->lease_ms ? o->lease_ms : 10000;
    re->takeover = o->takeover;
    snprintf(re->pool, sizeof re->pool, "%s", o->pool);
    pthread_mutex_init(&re->mu, NULL);
    for (int i = 0; i < RADOS_OBJ_LOCKS; i++)
        mutex_init(&re->obj_mu[i]);
    pthread_mutex_init(&re->dir_mu, NULL);
    pthread_mutex_init(&re->space_mu, NULL);
    pthread_mutex_init(&re->count_mu, NULL);
    pthread_mutex_init(&re->open_mu, NULL);
    pthread_mutex_init(&re->drops_mu, NULL);
    sigset_t mask = sigpipe_hold();
    lsm_status *s = connect_cluster(re, o);
    sigpipe_release(&mask);
    if (s != NULL) {
        env_rados_close(&re->env);
        return s;
    }
    *out = &re->env;
    return NULL;
}

void env_rados_close(lsm_env *env)
{
    if (env == NULL)
        return;
    struct rados_env *re = rados_env_of(env);
    if (re->io)
        rados_ioctx_destroy(re->io);
    if (re->count_io)
        rados_ioctx_destroy(re->count_io);
    if (re->cluster) {
        sigset_t mask = sigpipe_hold();
        rados_shutdown(re->cluster);
        sigpipe_release(&mask);
    }
    pthread_mutex_destroy(&re->mu);
    for (int i = 0; i < RADOS_OBJ_LOCKS; i++)
        mutex_destroy(&re->obj_mu[i]);
    pthread_mutex_destroy(&re->dir_mu);
    pthread_mutex_destroy(&re->space_mu);
    pthread_mutex_destroy(&re->count_mu);
    pthread_mutex_destroy(&re->open_mu);
    rados_drops_forget(re);
    pthread_mutex_destroy(&re->drops_mu);
    free(re);
}

uint64_t env_rados_takeover_us(lsm_env *env)
{
    return atomic_load(&rados_env_of(env)->takeover_us);
}

uint64_t env_rados_epoch(lsm_env *env)
{
    return atomic_load(&rados_env_of(env)->epoch);
}
