/* version_set.c — versions, the MANIFEST and CURRENT; see version_set.h. */
#include "version_set.h"
#include "lsm_malloc.h"
#include "filename.h"
#include "version.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static version *version_new(version_set *vs)
{
    version *v = lsm_calloc(1, sizeof(*v));
    if (v == NULL)
        return NULL;
    v->vset = vs;
    v->prev = v->next = v;
    return v;
}

static void version_free(version *v)
{
    v->prev->next = v->next; /* unlink from the live list (or itself) */
    v->next->prev = v->prev;
    for (int l = 0; l < NUM_LEVELS; l++) {
        for (int i = 0; i < v->nfiles[l]; i++)
            file_meta_unref(v->files[l][i]);
        free(v->files[l]);
    }
    free(v);
}

void version_ref(version *v)
{
    assert(mutex_held(v->vset->mu));
    v->refs++;
}

void version_unref(version *v)
{
    assert(mutex_held(v->vset->mu));
    assert(v->refs > 0);
    if (--v->refs == 0)
        version_free(v);
}

lsm_status *vset_init(version_set *vs, lsm_env *env, const char *dir, mutex *mu)
{
    memset(vs, 0, sizeof(*vs));
    vs->env = env;
    vs->dir = dir;
    vs->mu = mu;
    vs->next_file = 2;
    vs->live.prev = vs->live.next = &vs->live;
    vs->l0_compaction_trigger = 4;
    vs->l0_unit_bytes = 8u << 20;
    vs->level1_bytes = VERSION_LEVEL1_BYTES;
    if (pthread_cond_init(&vs->cv, NULL) != 0)
        return status_new(LSM_IO_ERROR, "pthread_cond_init failed");
    vs->current = version_new(vs);
    if (vs->current == NULL) {
        pthread_cond_destroy(&vs->cv);
        return status_new(LSM_NO_MEMORY, "out of memory");
    }
    vs->current->refs = 1;
    version *v = vs->current;
    v->next = &vs->live;
    v->prev = vs->live.prev;
    v->prev->next = v;
    vs->live.prev = v;
    return NULL;
}

bool vset_live_files(version_set *vs, uint64_t **numbers, int *n)
{
    assert(mutex_held(vs->mu));
    int total = 0;
    for (version *v = vs->live.next; v != &vs->live; v = v->next)
        for (int l = 0; l < NUM_LEVELS; l++)
            total += v->nfiles[l];
    *numbers = lsm_malloc((size_t)(total + 1) * sizeof(uint64_t));
    if (*numbers == NULL)
        return false;
    *n = 0;
    for (version *v = vs->live.next; v != &vs->live; v = v->next)
        for (int l = 0; l < NUM_LEVELS; l++)
            for (int i = 0; i < v->nfiles[l]; i++)
                (*numbers)[(*n)++] = v->files[l][i]->number;
    return true;
}

void vset_destroy(version_set *vs)
{
    if (vs->manifest)
        lsm_status_free(wal_writer_close(vs->manifest));
    vs->manifest = NULL;
    /* At close no iterator or reader is left: the last reference is ours. */
    if (vs->current && --vs->current->refs == 0)
        version_free(vs->current);
    vs->current = NULL;
    for (int l = 0; l < NUM_LEVELS; l++)
        buf_free(&vs->compact_pointer[l]);
    pthread_cond_destroy(&vs->cv);
}

void vset_mark_file_number_used(version_set *vs, uint64_t number)
{
    if (vs->next_file <= number)
        vs->next_file = number + 1;
}

/* ---------------------------------------------------------------- builder */

static bool is_deleted(const version_edit *e, int level, uint64_t number)
{
    for (int i = 0; i < e->ndeleted; i++)
        if (e->deleted[i].level == level && e->deleted[i].number == number)
            return true;
    return false;
}

static int cmp_by_smallest(const void *a, const void *b)
{
    const file_meta *fa = *(file_meta *const *)a, *fb = *(file_meta *const *)b;
    int r = ikey_compare(fa->smallest.data, fa->smallest.len, fb->smallest.data, fb->smallest.len);
    return r ? r : (fa->number > fb->number) - (fa->number < fb->number);
}

static int cmp_newest_first(const void *a, const void *b)
{
    const file_meta *fa = *(file_meta *const *)a, *fb = *(file_meta *const *)b;
    return (fa->number < fb->number) - (fa->number > fb->number);
}

/* Level `level` of base with e applied, into v. false if out of memory. */
static bool build_level(version *v, const version *base, const version_edit *e, int level)
{
    int cap = base->nfiles[level] + e->nadded;
    if (cap == 0)
        return true;
    file_meta **files = lsm_malloc((size_t)cap * sizeof(*files));
    if (files == NULL)
        return false;
    int n = 0;
    for (int i = 0; i < base->nfiles[level]; i++)
        if (!is_deleted(e, level, base->files[level][i]->number))
            files[n++] = base->files[level][i];
    for (int i = 0; i < e->nadded; i++)
        if (e->added[i].level == level && !is_deleted(e, level, e->added[i].f->number))
            files[n++] = e->added[i].f;
    for (int i = 0; i < n; i++)
        files[i]->refs++;
    qsort(files, (size_t)n, sizeof(*files), level == 0 ? cmp_newest_first : cmp_by_smallest);
    v->files[level] = files;
    v->nfiles[level] = n;
    return true;
}

static lsm_status *apply_edit(version_set *vs, const version_edit *e, version **out)
{
    version *v = version_new(vs);
    if (v == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory building a version");
    for (int l = 0; l < NUM_LEVELS; l++) {
        if (!build_level(v, vs->current, e, l)) {
            version_free(v);
            return status_new(LSM_NO_MEMORY, "out of memory building a version");
        }
    }
    *out = v;
    return NULL;
}

static void install_version(version_set *vs, version *v)
{
    version_compute_score(v, vs->l0_compaction_trigger, vs->l0_unit_bytes, vs->level1_bytes);
    v->next = &vs->live; /* join the list of live versions */
    v->prev = vs->live.prev;
    v->prev->next = v;
    vs->live.prev = v;
    v->refs++;
    version_unref(vs->current);
    vs->current = v;
}

static void apply_counters(version_set *vs, const version_edit *e)
{
    if (e->has_log_number)
        vs->log_number = e->log_number;
    if (e->has_next_file)
        vset_mark_file_number_used(vs, e->next_file - (e->next_file > 0));
    if (e->has_last_seq)
        vs->last_seq = e->last_seq;
    for (int l = 0; l < NUM_LEVELS; l++) {
        if (e->has_compact_pointer[l]) {
            vs->compact_pointer[l].len = 0;
            buf_append(&vs->compact_pointer[l], e->compact_pointer[l].data,
                       e->compact_pointer[l].len);
        }
    }
}

/* --------------------------------------------------------------- manifest */

lsm_status *vset_snapshot_of(version_set *vs, const version *v, version_edit *e)
{
    assert(mutex_held(vs->mu));
    version_edit_init(e);
    version_edit_set_format(e);
    version_edit_set_log_number(e, vs->log_number);
    version_edit_set_next_file(e, vs->next_file);
    version_edit_set_last_seq(e, vs->last_seq);
    for (int l = 0; l < NUM_LEVELS; l++) {
        for (int i = 0; i < v->nfiles[l]; i++)
            if (!version_edit_add_file(e, l, v->files[l][i]))
                goto oom;
        if (vs->compact_pointer[l].len &&
            !version_edit_set_compact_pointer(e, l, vs->compact_pointer[l].data,
                                              vs->compact_pointer[l].len))
            goto oom;
    }
    return NULL;
oom:
    version_edit_destroy(e);
    return status_new(LSM_NO_MEMORY, "out of memory");
}

/* The whole current state as one edit (the first record of a new MANIFEST). */
static lsm_status *snapshot_edit(version_set *vs, version_edit *e)
{
    return vset_snapshot_of(vs, vs->current, e);
}

static lsm_status *write_edit(wal_writer *w, const version_edit *e)
{
    buf rec;
    buf_init(&rec);
    if (!version_edit_encode(e, &rec)) {
        buf_free(&rec);
        return status_new(LSM_NO_MEMORY, "out of memory encoding a version edit");
    }
    lsm_status *s = wal_add_record(w, rec.data, rec.len);
    buf_free(&rec);
    return s ? s : wal_sync(w);
}

/* Points CURRENT at MANIFEST-number, atomically and durably. *may_name says
 * whether the rename was tried: from then on CURRENT may name the new
 * MANIFEST (even if this fails; a failed rename may have happened too),
 * which must therefore never be removed. */
static lsm_status *set_current(lsm_env *env, const char *dir, uint64_t number, bool *may_name)
{
    char content[64];
    int n = snprintf(content, sizeof(content), "MANIFEST-%06" PRIu64 "\n", number);
    char *tmp = temp_file_name(dir, number);
    char *cur = current_file_name(dir);
    lsm_status *s = NULL;
    *may_name = false;
    if (tmp == NULL || cur == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    if (s == NULL)
        s = env_write_file_sync(env, tmp, content, (size_t)n);
    if (s == NULL) {
        *may_name = true;
        s = env->rename_file(env, tmp, cur);
    }
    if (s == NULL)
        s = env->sync_dir(env, dir);
    else if (tmp)
        lsm_status_free(env->remove_file(env, tmp));
    free(tmp);
    free(cur);
    return s;
}

/* Starts a new MANIFEST in dir holding snap, makes it durable and points
 * CURRENT at it. On failure *out is NULL and the new MANIFEST is removed
 * unless CURRENT may already name it (set_current); the disk state is then
 * unknown either way (vset_state_known). The caller holds no lock (for the
 * store's own dir it has exclusive use of the manifest via manifest_busy). */
static lsm_status *new_manifest(lsm_env *env, const char *dir, uint64_t number,
                                const version_edit *snap, wal_writer **out)
{
    char *name = manifest_file_name(dir, number);
    if (name == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_wfile *f = NULL;
    wal_writer *w = NULL;
    bool named = false; /* CURRENT may name it */
    lsm_status *s = env->new_wfile(env, name, &f);
    if (s == NULL && (w = wal_writer_new(f, 0)) == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    if (s == NULL)
        s = write_edit(w, snap);
    if (s == NULL)
        s = env->sync_dir(env, dir);
    if (s == NULL)
        s = set_current(env, dir, number, &named);
    if (s != NULL) {
        if (w)
            lsm_status_free(wal_writer_close(w));
        if (!named)
            lsm_status_free(env->remove_file(env, name));
        w = NULL;
    }
    free(name);
    *out = w;
    return s;
}

lsm_status *vset_write_copy(lsm_env *env, const char *dir, uint64_t number,
                            const version_edit *snap)
{
    wal_writer *w = NULL;
    lsm_status *s = new_manifest(env, dir, number, snap, &w);
    if (w != NULL)
        status_keep_first(&s, wal_writer_close(w));
    return s;
}

lsm_status *vset_create(version_set *vs)
{
    version_edit snap;
    lsm_status *s = snapshot_edit(vs, &snap);
    if (s)
        return s;
    vs->manifest_number = 1;
    s = new_manifest(vs->env, vs->dir, 1, &snap, &vs->manifest);
    version_edit_destroy(&snap);
    return s;
}

static void fill_counters(version_set *vs, version_edit *e, uint64_t last_seq)
{
    if (!e->has_log_number)
        version_edit_set_log_number(e, vs->log_number);
    version_edit_set_last_seq(e, last_seq);
    version_edit_set_next_file(e, vs->next_file);
}

lsm_status *vset_log_and_apply(version_set *vs, version_edit *e, uint64_t last_seq)
{
    assert(mutex_held(vs->mu));
    while (vs->manifest_busy)
        cond_wait(&vs->cv, vs->mu);
    fill_counters(vs, e, last_seq);
    version *v = NULL;
    lsm_status *s = apply_edit(vs, e, &v);
    if (s)
        return s;
    /* A MANIFEST is started afresh on the first edit after open, so it
     * holds one snapshot and the edits since — recovery stays short. */
    version_edit snap;
    bool fresh = (vs->manifest == NULL);
    uint64_t number = fresh ? vset_new_file_number(vs) : 0;
    if (fresh && (s = snapshot_edit(vs, &snap)) != NULL) {
        version_free(v);
        return s;
    }
    vs->manifest_busy = true;
    mutex_unlock(vs->mu);
    wal_writer *w = vs->manifest;
    if (fresh) {
        version_edit_set_next_file(&snap, number + 1);
        s = new_manifest(vs->env, vs->dir, number, &snap, &w);
    }
    if (s == NULL)
        s = write_edit(w, e);
    mutex_lock(vs->mu);
    if (fresh)
        version_edit_destroy(&snap); /* its file refs are counted under mu */
    vs->manifest_busy = false;
    pthread_cond_broadcast(&vs->cv);
    if (s != NULL) {
        /* The edit may be in the MANIFEST or not, and CURRENT may name a
         * new MANIFEST or the old one: vs->manifest is NULL now, so nothing
         * is swept (vset_state_known) until the next attempt has written a
         * new MANIFEST from the in-memory state, which settles it. */
        if (w && w != vs->manifest)
            lsm_status_free(wal_writer_close(w));
        else if (w) {
            lsm_status_free(wal_writer_close(w));
            vs->manifest = NULL;
        }
        version_free(v);
        return s;
    }
    if (fresh) {
        vs->manifest = w;
        vs->manifest_number = number;
    }
    apply_counters(vs, e);
    install_version(vs, v);
    return NULL;
}

/* --------------------------------------------------------------- recovery */

static lsm_status *read_current(version_set *vs, uint64_t *number)
{
    char *cur = current_file_name(vs->dir);
    char *data = NULL;
    size_t n = 0;
    if (cur == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    lsm_status *s = env_read_file(vs->env, cur, &data, &n);
    bool absent = s && !vs->env->file_exists(vs->env, cur);
    free(cur);
    if (absent) {
        lsm_status_free(s);
        return status_new(LSM_INVALID_ARGUMENT, "%s: not an lsmfs store (no CURRENT file)",
                          vs->dir);
    }
    if (s) /* a store whose CURRENT cannot be read now: say why */
        return status_wrap(s, "%s: reading CURRENT", vs->dir);
    enum file_type type;
    bool ok = n > 1 && n < 64 && data[n - 1] == '\n';
    if (ok) {
        data[n - 1] = '\0';
        ok = parse_file_name(data, number, &type) && type == FILE_MANIFEST;
    }
    free(data);
    if (!ok)
        return status_new(LSM_CORRUPTION, "%s/CURRENT: malformed contents", vs->dir);
    return NULL;
}

static lsm_status *check_format(const version_edit *e, bool first, const char *name)
{
    if (first && !e->has_format)
        return status_new(LSM_INVALID_ARGUMENT, "%s: not an lsmfs store (no format record)", name);
    if (e->has_format && strcmp(e->format, STORE_FORMAT) != 0)
        return status_new(LSM_NOT_SUPPORTED,
                          "%s: store format \"%s\" is not supported by this version (\"%s\")", name,
                          e->format, STORE_FORMAT);
    return NULL;
}

static lsm_status *replay_manifest(version_set *vs, wal_reader *r, const char *name)
{
    lsm_status *s = NULL;
    bool first = true;
    for (;;) {
        const char *rec;
        size_t n;
        bool eof;
        if ((s = wal_read_record(r, &rec, &n, &eof)) != NULL) {
            s = status_wrap(s, "expected a version edit"); /* the reader names file and byte */
            break;
        }
        if (eof)
            break;
        version_edit e;
        if ((s = version_edit_decode(&e, rec, n)) != NULL)
            break;
        version *v = NULL;
        if ((s = check_format(&e, first, name)) == NULL && (s = apply_edit(vs, &e, &v)) == NULL) {
            apply_counters(vs, &e);
            install_version(vs, v);
        }
        version_edit_destroy(&e);
        if (s)
            break;
        first = false;
    }
    const wal_reader_stats *st = wal_reader_stats_get(r);
    if (s == NULL && first && st->torn_tail)
        s = status_new(LSM_CORRUPTION,
                       "%s: damaged record at byte %llu (%s): expected the store's first "
                       "version edit (its format), found no readable record",
                       name, (unsigned long long)st->torn_tail_offset, st->torn_tail_why);
    else if (s == NULL && first)
        s = status_new(LSM_CORRUPTION, "%s: empty MANIFEST (expected a version edit at byte 0)",
                       name);
    return s;
}

lsm_status *vset_recover(version_set *vs)
{
    uint64_t number;
    lsm_status *s = read_current(vs, &number);
    if (s)
        return s;
    char *name = manifest_file_name(vs->dir, number);
    lsm_sfile *f = NULL;
    wal_reader *r = NULL;
    if (name == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    s = vs->env->new_sfile(vs->env, name, &f);
    if (s == NULL && (r = wal_reader_new(f, name, true)) == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    if (s == NULL)
        s = replay_manifest(vs, r, name);
    wal_reader_free(r);
    free(name);
    if (s == NULL) {
        vs->manifest_number = number;
        vset_mark_file_number_used(vs, number);
    }
    return s;
}
