/*
 * env_rados_intent.c — no orphan objects in a store's tree on RADOS.
 *
 * A file or directory object is made in three steps: its intent (omap key
 * "/new/OID" in the directory's object: no name has a '/') is written, the
 * object is created, and one op on the directory sets its name and drops
 * the intent. A writer that dies between them leaves an intent. The sweep,
 * run by each new holder of a store's lease, removes in the store's tree
 * every object with an intent and no name in its directory, then the
 * intent. A named object is never removed: an intent's object is checked
 * against every name of its directory, and a name only ever appears with
 * its intent's removal in the same op (a link adds a name to an object that
 * already has one).
 *
 * A name that leaves (a remove; a file's name that a rename, a link or a
 * create replaces) goes by one rule, rados_name_leaves: in one op with a
 * drop record ("/drop/OID" = the object's name count then); the count is
 * lowered if it still is that, then the record goes. A rename to another
 * directory is a link and a remove, so it keeps the rule too. A link writes the
 * record of the drop that would undo it (the count it will make) before
 * raising the count, and removes it with the op that enters the name. The
 * sweep finishes every record it finds, once: a count already lowered (or
 * never raised) differs from the record's. That holds while no other drop
 * of the object waits, so a live env keeps a drop whose finish failed and
 * finishes it before the object's next name change (rados_drops_settle).
 *
 * A directory's object leaves by the intent rule too (an rmdir, a rename
 * over it): the op that removes or replaces its name writes its intent, so
 * a crash or failure before the object's removal leaves it to the sweep.
 */
#include "env_rados_impl.h"

#include "lsm_malloc.h"
#include "status.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void intent_key(char *key, size_t cap, const char *oid)
{
    snprintf(key, cap, "%s%s", RADOS_INTENT_PREFIX, oid);
}

static void drop_key(char *key, size_t cap, const char *oid)
{
    snprintf(key, cap, "%s%s", RADOS_DROP_PREFIX, oid);
}

void rados_drop_record(rados_write_op_t op, const char *oid, uint64_t had, bool set)
{
    char key[RADOS_OID_MAX + 8], v[24];
    drop_key(key, sizeof key, oid);
    snprintf(v, sizeof v, "%" PRIu64, had);
    const char *keys[1] = {key}, *vals[1] = {v};
    size_t lens[1] = {strlen(v)};
    if (set)
        rados_write_op_omap_set(op, keys, vals, lens, 1);
    else
        rados_write_op_omap_rm_keys(op, keys, 1);
}

/* Adds to op the record of the drop of a name of oid, with the count it
 * has now (into *had). An object already gone needs none (*found false).
 * REQUIRES: oid's lock held. */
static lsm_status *drop_begin(struct rados_env *re, rados_write_op_t op, const char *oid,
                              uint64_t *had, bool *found)
{
    lsm_status *s = rados_refs_get(re, oid, had);
    *found = s == NULL;
    if (s == NULL) {
        rados_drop_record(op, oid, *had, true);
    } else if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

/* ------------------------------------------------------- kept drops */

struct rados_pending_drop {
    char dir_oid[RADOS_OID_MAX];
    char oid[RADOS_OID_MAX];
    char path[512];
    uint64_t had;
    struct rados_pending_drop *next;
};

struct rados_pending_drop *rados_pending_new(void)
{
    return lsm_calloc(1, sizeof(struct rados_pending_drop));
}

static void keep(struct rados_env *re, struct rados_pending_drop *p)
{
    pthread_mutex_lock(&re->drops_mu);
    p->next = re->pending_drops;
    re->pending_drops = p;
    pthread_mutex_unlock(&re->drops_mu);
}

lsm_status *rados_drop_done(struct rados_env *re, struct rados_pending_drop *p,
                            const char *dir_oid, const char *oid, uint64_t had, const char *path)
{
    lsm_status *s = rados_drop_finish(re, dir_oid, oid, had, path);
    if (s == NULL || rados_dead(re)) {
        free(p);
        return s;
    }
    lsm_status_free(s); /* the name went: finished before oid's next change */
    snprintf(p->dir_oid, sizeof p->dir_oid, "%s", dir_oid);
    snprintf(p->oid, sizeof p->oid, "%s", oid);
    snprintf(p->path, sizeof p->path, "%s", path);
    p->had = had;
    keep(re, p);
    return NULL;
}

/* Takes the kept drops of oid out of the list. */
static struct rados_pending_drop *take_kept(struct rados_env *re, const char *oid)
{
    struct rados_pending_drop *mine = NULL;
    pthread_mutex_lock(&re->drops_mu);
    for (struct rados_pending_drop **pp = &re->pending_drops; *pp != NULL;) {
        struct rados_pending_drop *p = *pp;
        if (strcmp(p->oid, oid) == 0) {
            *pp = p->next;
            p->next = mine;
            mine = p;
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&re->drops_mu);
    return mine;
}

lsm_status *rados_drops_settle(struct rados_env *re, const char *oid)
{
    assert(mutex_held(rados_obj_mu(re, oid)));
    lsm_status *s = NULL;
    struct rados_pending_drop *p = take_kept(re, oid);
    while (p != NULL) {
        struct rados_pending_drop *next = p->next;
        if (s == NULL)
            s = rados_drop_finish(re, p->dir_oid, p->oid, p->had, p->path);
        if (s == NULL) {
            free(p);
        } else {
            keep(re, p);
        }
        p = next;
    }
    if (s != NULL && !rados_dead(re))
        s = status_wrap(s, "rados: a name of %s left earlier and its drop is unfinished", oid);
    return s;
}

void rados_drops_forget(struct rados_env *re)
{
    while (re->pending_drops != NULL) {
        struct rados_pending_drop *p = re->pending_drops;
        re->pending_drops = p->next;
        free(p);
    }
}

/* The drop's first steps under oid's lock: the kept drops of oid
 * finished, a place to keep this one, its record added to op. */
static lsm_status *drop_prepare(struct rados_env *re, rados_write_op_t op, const char *oid,
                                struct rados_pending_drop **p, uint64_t *had, bool *found)
{
    *p = NULL;
    lsm_status *s = rados_drops_settle(re, oid);
    if (s == NULL && (*p = rados_pending_new()) == NULL)
        s = status_new(LSM_NO_MEMORY, "rados drop a name of %s: out of memory", oid);
    if (s == NULL)
        s = drop_begin(re, op, oid, had, found);
    return s;
}

lsm_status *rados_name_leaves(struct rados_env *re, rados_write_op_t op, const char *dir_oid,
                              const char *oid, const char *what, const char *path)
{
    assert(oid == NULL || mutex_held(rados_obj_mu(re, oid)));
    uint64_t had = 0;
    bool found = false;
    struct rados_pending_drop *p = NULL;
    lsm_status *s = oid != NULL ? drop_prepare(re, op, oid, &p, &had, &found) : NULL;
    if (s != NULL) {
        free(p);
        rados_release_write_op(op);
        return s;
    }
    if ((s = rados_operate(re, op, dir_oid, what, path)) != NULL || !found) {
        free(p);
        return s;
    }
    return rados_drop_done(re, p, dir_oid, oid, had, path);
}

lsm_status *rados_drop_finish(struct rados_env *re, const char *dir_oid, const char *oid,
                              uint64_t had, const char *path)
{
    assert(mutex_held(rados_obj_mu(re, oid)));
    char key[RADOS_OID_MAX + 8];
    drop_key(key, sizeof key, oid);
    lsm_status *s = rados_crash_point(re, "unnamed", oid);
    int r = s == NULL ? rados_fault(re, "drop", oid) : 0;
    if (r < 0)
        s = rados_error(r, "drop a name of", path);
    if (s == NULL)
        s = rados_refs_drop(re, oid, had, path);
    if (s == NULL)
        s = rados_crash_point(re, "dropped", oid);
    if (s == NULL && (r = rados_fault(re, "drop record", oid)) < 0)
        s = rados_error(r, "remove the drop record of", path);
    return s != NULL ? s : rados_dir_set(re, dir_oid, key, NULL, path);
}

/* A create that failed (not died) takes its intent back, its object
 * first, so a failed create leaves nothing (a crash leaves the intent for
 * the sweep). */
static void abandon(struct rados_env *re, const struct rados_entry *e, const char *oid,
                    const char *key, const char *path)
{
    if (rados_dead(re))
        return;
    lsm_status *s = rados_unref(re, oid, path);
    if (s == NULL || lsm_status_code(s) == LSM_NOT_FOUND)
        lsm_status_free(rados_dir_set(re, e->dir_oid, key, NULL, path));
    lsm_status_free(s);
}

/* Adds to op (the create's naming op) the checks that make it refused
 * unless its intent is still unclaimed (key = e->name) and the name still
 * names what it did (nothing: "", a missing key reads as empty). */
static void enter_checks(rados_write_op_t op, const struct rados_entry *e, const char *key,
                         int prval[2])
{
    rados_write_op_omap_cmp(op, key, LIBRADOS_CMPXATTR_OP_EQ, e->name, strlen(e->name), &prval[0]);
    rados_name_unchanged(op, e, &prval[1]);
}

/* The naming op of a create: the name set, the intent removed, the file it
 * replaces leaving by the one rule. */
static lsm_status *enter(struct rados_env *re, const struct rados_entry *e, const char *key,
                         const char *val, const char *path)
{
    rados_write_op_t op = rados_create_write_op();
    int prval[2] = {0, 0};
    enter_checks(op, e, key, prval);
    const char *keys[1] = {e->name}, *vals[1] = {val}, *rm[1] = {key};
    size_t lens[1] = {strlen(val)};
    rados_write_op_omap_set(op, keys, vals, lens, 1);
    rados_write_op_omap_rm_keys(op, rm, 1);
    const char *gone = e->found ? e->oid : NULL;
    if (gone != NULL)
        rados_obj_lock2(re, gone, NULL);
    lsm_status *s = rados_name_leaves(re, op, e->dir_oid, gone, "enter", path);
    if (gone != NULL)
        rados_obj_unlock2(re, gone, NULL);
    if (s != NULL && (prval[0] == -ECANCELED || prval[1] == -ECANCELED)) {
        lsm_status_free(s);
        s = status_new(LSM_BUSY, "rados create %s: another create of that name came first", path);
    }
    return s;
}

lsm_status *rados_create_named(struct rados_env *re, const struct rados_entry *e, const char *oid,
                               const char *val, const char *path)
{
    char key[RADOS_OID_MAX + 8];
    intent_key(key, sizeof key, oid);
    int r = rados_fault(re, "intent", oid);
    lsm_status *s = r < 0 ? rados_error(r, "write the intent of", path)
                          : rados_dir_set(re, e->dir_oid, key, e->name, path);
    if (s != NULL)
        return s;
    s = rados_crash_point(re, "intent", oid);
    if (s == NULL)
        s = rados_object_create(re, oid, path);
    if (s == NULL)
        s = rados_crash_point(re, "created", oid);
    if (s == NULL)
        s = enter(re, e, key, val, path);
    if (s != NULL)
        abandon(re, e, oid, key, path);
    return s;
}

/* What a directory's listing gives the sweep: a name, intent or drop
 * record (key), its value, and the object it is of. */
struct listed {
    char key[256];
    char val[RADOS_VALUE_MAX];
    char oid[RADOS_OID_MAX];
    bool is_dir;
};

struct entry_list {
    struct listed *v;
    size_t n, cap;
};

static lsm_status *add_entry(struct entry_list *l, const char *key, const char *val,
                             const char *oid, bool is_dir)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        struct listed *v = lsm_realloc(l->v, cap * sizeof *v);
        if (v == NULL)
            return status_new(LSM_NO_MEMORY, "rados sweep: out of memory");
        l->v = v;
        l->cap = cap;
    }
    struct listed *e = &l->v[l->n++];
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->val, sizeof e->val, "%s", val);
    snprintf(e->oid, sizeof e->oid, "%s", oid);
    e->is_dir = is_dir;
    return NULL;
}

static lsm_status *add_named(void *ctx, const char *key, const char *val)
{
    struct rados_entry e;
    memset(&e, 0, sizeof e);
    rados_entry_from_value(&e, val);
    return add_entry(ctx, key, val, e.oid, e.is_dir);
}

static lsm_status *add_intent(void *ctx, const char *key, const char *val)
{
    return add_entry(ctx, key, val, key + strlen(RADOS_INTENT_PREFIX), false);
}

static bool is_named(const struct entry_list *named, const char *oid)
{
    for (size_t i = 0; i < named->n; i++)
        if (strcmp(named->v[i].oid, oid) == 0)
            return true;
    return false;
}

/* An intent's value once a sweep has claimed it (no name has a '/'). */
#define CLAIMED "/swept"

/* Claims an intent for the sweep (its value CLAIMED, if it still is what
 * was listed): from then on its create cannot name its object (enter's
 * check). *gone: its create named it meanwhile (the intent went). */
static lsm_status *claim(struct rados_env *re, const char *dir_oid, const struct listed *it,
                         const char *path, bool *gone)
{
    *gone = false;
    if (strcmp(it->val, CLAIMED) == 0)
        return NULL;
    rados_write_op_t op = rados_create_write_op();
    int prval = 0;
    rados_write_op_omap_cmp(op, it->key, LIBRADOS_CMPXATTR_OP_EQ, it->val, strlen(it->val),
                            &prval);
    const char *keys[1] = {it->key}, *vals[1] = {CLAIMED};
    size_t lens[1] = {strlen(CLAIMED)};
    rados_write_op_omap_set(op, keys, vals, lens, 1);
    lsm_status *s = rados_operate(re, op, dir_oid, "claim the intent of", path);
    if (s != NULL && prval == -ECANCELED) {
        lsm_status_free(s);
        s = NULL;
        *gone = true;
    }
    return s;
}

/* Settles one intent of directory object dir_oid (at path dir): claimed,
 * its object goes unless named, then the intent. */
static lsm_status *settle(struct rados_env *re, const char *dir_oid, const char *dir,
                          const struct entry_list *named, const struct listed *intent)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, intent->oid);
    bool gone;
    lsm_status *s = claim(re, dir_oid, intent, path, &gone);
    if (s != NULL || gone)
        return s;
    if (!is_named(named, intent->oid)) {
        if (rados_dead(re))
            return status_new(LSM_IO_ERROR, "rados sweep %s: the env died", path);
        int r = rados_remove(re->io, intent->oid); /* unnamed: no fence to keep */
        if (r < 0 && r != -ENOENT)
            return rados_error(r, "sweep the unnamed object", path);
    }
    s = rados_crash_point(re, "swept", intent->oid);
    return s != NULL ? s : rados_dir_set(re, dir_oid, intent->key, NULL, path);
}

/* Settles the intents of directory object dir_oid whose value is name
 * (NULL: all), and the claimed ones. */
static lsm_status *settle_intents(struct rados_env *re, const char *dir_oid, const char *dir,
                                  const struct entry_list *named,
                                  const struct entry_list *intents, const char *name)
{
    lsm_status *s = NULL;
    for (size_t i = 0; s == NULL && i < intents->n; i++) {
        const struct listed *it = &intents->v[i];
        if (name == NULL || strcmp(it->val, name) == 0 || strcmp(it->val, CLAIMED) == 0)
            s = settle(re, dir_oid, dir, named, it);
    }
    return s;
}

static lsm_status *sweep_listed(struct rados_env *re, const char *dir_oid, const char *dir,
                                const struct entry_list *named, const struct entry_list *intents)
{
    lsm_status *s = settle_intents(re, dir_oid, dir, named, intents, NULL);
    for (size_t i = 0; s == NULL && i < named->n; i++) {
        if (!named->v[i].is_dir)
            continue;
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", dir, named->v[i].key);
        s = rados_sweep_tree(re, named->v[i].oid, sub);
    }
    return s;
}

/* A drop record: its object, and the count it had as its value. */
static lsm_status *add_drop(void *ctx, const char *key, const char *val)
{
    return add_entry(ctx, key, val, key + strlen(RADOS_DROP_PREFIX), false);
}

/* Finishes the drops a crash cut short in directory object dir_oid. */
static lsm_status *finish_drops(struct rados_env *re, const char *dir_oid, const char *dir,
                                const struct entry_list *drops)
{
    lsm_status *s = NULL;
    for (size_t i = 0; s == NULL && i < drops->n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, drops->v[i].oid);
        uint64_t had = strtoull(drops->v[i].val, NULL, 10);
        rados_obj_lock2(re, drops->v[i].oid, NULL);
        s = rados_drop_finish(re, dir_oid, drops->v[i].oid, had, path);
        rados_obj_unlock2(re, drops->v[i].oid, NULL);
    }
    return s;
}

/* The intents and names of directory object dir_oid. */
static lsm_status *list_for_sweep(struct rados_env *re, const char *dir_oid, const char *dir,
                                  struct entry_list *intents, struct entry_list *named)
{
    lsm_status *s = rados_dir_list(re, dir_oid, dir, RADOS_INTENT_PREFIX, add_intent, intents);
    return s != NULL ? s : rados_dir_list(re, dir_oid, dir, "", add_named, named);
}

lsm_status *rados_sweep_tree(struct rados_env *re, const char *dir_oid, const char *dir)
{
    struct entry_list named = {0}, intents = {0}, drops = {0};
    lsm_status *s = rados_settle_moves(re, dir_oid, dir);
    if (s == NULL)
        s = list_for_sweep(re, dir_oid, dir, &intents, &named);
    if (s == NULL)
        s = rados_dir_list(re, dir_oid, dir, RADOS_DROP_PREFIX, add_drop, &drops);
    if (s == NULL)
        s = finish_drops(re, dir_oid, dir, &drops);
    if (s == NULL)
        s = sweep_listed(re, dir_oid, dir, &named, &intents);
    free(named.v);
    free(intents.v);
    free(drops.v);
    return s;
}

lsm_status *rados_sweep_name(struct rados_env *re, const char *dir_oid, const char *dir,
                             const char *name)
{
    struct entry_list named = {0}, intents = {0};
    lsm_status *s = list_for_sweep(re, dir_oid, dir, &intents, &named);
    if (s == NULL)
        s = settle_intents(re, dir_oid, dir, &named, &intents, name);
    free(named.v);
    free(intents.v);
    return s;
}

/* ------------------------------------------- a directory's object leaves */

void rados_dir_intent(rados_write_op_t op, const struct rados_entry *e)
{
    char key[RADOS_OID_MAX + 8];
    intent_key(key, sizeof key, e->oid);
    const char *keys[1] = {key}, *vals[1] = {e->name};
    size_t lens[1] = {strlen(e->name)};
    rados_write_op_omap_set(op, keys, vals, lens, 1);
}

lsm_status *rados_dir_object_remove(struct rados_env *re, const struct rados_entry *e,
                                    const char *point, const char *path)
{
    char key[RADOS_OID_MAX + 8];
    intent_key(key, sizeof key, e->oid);
    int r = rados_fault(re, "remove dir", e->oid);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_remove(op);
    lsm_status *s = r < 0 ? rados_error(r, "remove the directory object of", path)
                          : rados_operate(re, op, e->oid, "remove the directory object of", path);
    if (r < 0)
        rados_release_write_op(op);
    if (s != NULL || (s = rados_crash_point(re, point, e->oid)) != NULL)
        return s;
    r = rados_fault(re, "dir intent", e->oid);
    s = r < 0 ? rados_error(r, "remove the intent of", path)
              : rados_dir_set(re, e->dir_oid, key, NULL, path);
    if (s != NULL && !rados_dead(re)) { /* the sweep finds it, and no object */
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

/* rmdir's object removal failed: its name back, its intent out, while the
 * intent is unclaimed and the name free (enter). false: the intent stays
 * for the next sweep, which removes the object. */
static bool dir_name_back(struct rados_env *re, const struct rados_entry *e, const char *path)
{
    struct rados_entry free_name = *e;
    free_name.found = false;
    char key[RADOS_OID_MAX + 8], val[RADOS_OID_MAX + 4];
    intent_key(key, sizeof key, e->oid);
    rados_entry_value(e, val, sizeof val);
    int r = rados_fault(re, "dir name back", e->oid);
    lsm_status *s = r < 0 ? rados_error(r, "put back the name of", path)
                          : enter(re, &free_name, key, val, path);
    bool back = s == NULL;
    lsm_status_free(s);
    return back;
}

lsm_status *rados_dir_leaves(struct rados_env *re, const struct rados_entry *e, const char *path,
                             bool *raced)
{
    int prval = 0, r = rados_fault(re, "rmdir", e->oid);
    rados_write_op_t op = rados_create_write_op();
    rados_name_unchanged(op, e, &prval);
    const char *keys[1] = {e->name};
    rados_write_op_omap_rm_keys(op, keys, 1);
    rados_dir_intent(op, e);
    lsm_status *s = r < 0 ? rados_error(r, "rmdir", path)
                          : rados_operate(re, op, e->dir_oid, "rmdir", path);
    if (r < 0)
        rados_release_write_op(op);
    *raced = s != NULL && prval == -ECANCELED;
    if (s != NULL || (s = rados_crash_point(re, "dir unnamed", e->oid)) != NULL)
        return s;
    s = rados_dir_object_remove(re, e, "dir removed", path);
    if (s == NULL || rados_dead(re))
        return s;
    if (!dir_name_back(re, e, path))
        s = status_wrap(s, "rados rmdir %s: its name is gone, the next sweep removes it", path);
    return s;
}
