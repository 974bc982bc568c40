/*
 * env_rados_dirmove.c — a directory's rename on RADOS (a snapshot's hiding
 * before its delete, a checkpoint's or a restore's publish, any env
 * caller): atomic across a crash, and the directory it replaces removed.
 *
 * In one directory it is one op (the old name out, the new in). To another
 * directory it is three: a move record ("/move/OID" = "A_NAME/B_DIR/B_NAME")
 * in the source directory, then the new name in the target's object, then
 * the old name and the record out of the source's. A crash between leaves
 * the record, and the sweep (env_rados_intent.c) settles it once: the new
 * name is there (the move landed: the old name goes) or not (the record
 * goes): one name either way, never a directory with two (whose removal
 * by either would take the other's files).
 *
 * A directory replaced (POSIX rename(2): only an empty one, else
 * ENOTEMPTY) leaves by the intent rule: the op that takes its name also
 * writes its intent ("/new/OID"), so the sweep removes the unnamed object
 * if a crash comes before the rename removes it.
 */
#include "env_rados_impl.h"

#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOVE_PREFIX "/move/"
#define MOVE_REC_MAX 600

/* One directory op: names checked unchanged since their lookup (the one
 * rule, rados_name_unchanged), then keys set, then keys removed, and
 * the intent of a directory whose name it replaces (rados_dir_intent). */
struct dir_change {
    const struct rados_entry *same[2];
    const struct rados_entry *leaving; /* a directory whose name c replaces */
    const char *set_key[2], *set_val[2];
    const char *rm_key[2];
    int nsame, nset, nrm;
};

/* Runs c on directory object dir_oid (guarded). *raced: a name checked
 * had changed, so nothing did (the caller looks again). */
static lsm_status *dir_change_run(struct rados_env *re, const char *dir_oid,
                                  const struct dir_change *c, const char *what, const char *path,
                                  bool *raced)
{
    rados_write_op_t op = rados_create_write_op();
    int prval[2] = {0, 0};
    for (int i = 0; i < c->nsame; i++)
        rados_name_unchanged(op, c->same[i], &prval[i]);
    for (int i = 0; i < c->nset; i++) {
        size_t len = strlen(c->set_val[i]);
        rados_write_op_omap_set(op, &c->set_key[i], &c->set_val[i], &len, 1);
    }
    if (c->nrm > 0)
        rados_write_op_omap_rm_keys(op, c->rm_key, (size_t)c->nrm);
    if (c->leaving != NULL)
        rados_dir_intent(op, c->leaving);
    lsm_status *s = rados_operate(re, op, dir_oid, what, path);
    *raced = s != NULL && (prval[0] == -ECANCELED || prval[1] == -ECANCELED);
    return s;
}

static void add_same(struct dir_change *c, const struct rados_entry *e)
{
    c->same[c->nsame++] = e;
}

static void add_set(struct dir_change *c, const char *key, const char *val)
{
    c->set_key[c->nset] = key;
    c->set_val[c->nset++] = val;
}

static void add_rm(struct dir_change *c, const char *key)
{
    c->rm_key[c->nrm++] = key;
}

static lsm_status *refuse_names(void *ctx, const char *name, const char *val)
{
    (void)ctx;
    (void)val;
    return rados_error(-ENOTEMPTY, "rename over a directory that holds", name);
}

/* Whether directory b may be replaced: empty, as rename(2) asks; what
 * crashes left in it (intents, drop records) settled, as an rmdir does. */
static lsm_status *replaceable(struct rados_env *re, const struct rados_entry *b, const char *to)
{
    lsm_status *s = rados_dir_list(re, b->oid, to, "", refuse_names, NULL);
    return s != NULL ? s : rados_sweep_tree(re, b->oid, to);
}

/* Removes replaced directory b (its intent written by the renaming op): a
 * failure leaves the intent, and the next sweep the object; only a crash
 * point fails the call. */
static lsm_status *replaced_finish(struct rados_env *re, const struct rados_entry *b, const char *to)
{
    lsm_status *s = rados_dir_object_remove(re, b, "replaced", to);
    if (s != NULL && !rados_dead(re)) {
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

/* Adds to c the new name b->name = val, checked unchanged, and the intent
 * of the directory it replaces. */
static void enter_new_name(struct dir_change *c, const struct rados_entry *b, const char *val)
{
    add_same(c, b);
    if (b->found)
        c->leaving = b;
    add_set(c, b->name, val);
}

/* In one directory: one op. */
static lsm_status *rename_here(struct rados_env *re, const struct rados_entry *a,
                               const struct rados_entry *b, const char *val, const char *to,
                               bool *raced)
{
    struct dir_change c = {0};
    add_same(&c, a);
    enter_new_name(&c, b, val);
    add_rm(&c, a->name);
    return dir_change_run(re, a->dir_oid, &c, "rename", to, raced);
}

/* The last step of a move: the old name and the record out, while the old
 * name still names the directory; else (it changed meanwhile) the record
 * alone. */
static lsm_status *move_finish(struct rados_env *re, const struct rados_entry *a, const char *key,
                               const char *to)
{
    struct dir_change c = {0};
    bool raced = false;
    add_same(&c, a);
    add_rm(&c, a->name);
    add_rm(&c, key);
    lsm_status *s = dir_change_run(re, a->dir_oid, &c, "rename (the old name of)", to, &raced);
    if (raced) {
        lsm_status_free(s);
        s = rados_dir_set(re, a->dir_oid, key, NULL, to);
    }
    return s;
}

/* To another directory: the record, the new name, the old name and the
 * record out. Once the new name is in, only a crash point fails the call
 * (else the sweep settles the record, as rados_name_leaves leaves a drop). */
static lsm_status *move_across(struct rados_env *re, const struct rados_entry *a,
                               const struct rados_entry *b, const char *val, const char *to,
                               bool *raced)
{
    char key[RADOS_OID_MAX + 8], rec[MOVE_REC_MAX];
    snprintf(key, sizeof key, "%s%s", MOVE_PREFIX, a->oid);
    snprintf(rec, sizeof rec, "%s/%s/%s", a->name, b->dir_oid, b->name);
    struct dir_change c1 = {0}, c2 = {0};
    add_same(&c1, a);
    add_set(&c1, key, rec);
    lsm_status *s = dir_change_run(re, a->dir_oid, &c1, "rename (record the move of)", to, raced);
    if (s == NULL)
        s = rados_crash_point(re, "moving", a->oid);
    if (s != NULL)
        return s;
    enter_new_name(&c2, b, val);
    s = dir_change_run(re, b->dir_oid, &c2, "rename to", to, raced);
    if (s != NULL) {
        if (!rados_dead(re)) /* undone: no record */
            lsm_status_free(rados_dir_set(re, a->dir_oid, key, NULL, to));
        return s;
    }
    if ((s = rados_crash_point(re, "moved", a->oid)) != NULL)
        return s;
    s = move_finish(re, a, key, to);
    if (s != NULL && !rados_dead(re)) {
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

lsm_status *rados_rename_dir(struct rados_env *re, const struct rados_entry *a,
                             const struct rados_entry *b, const char *to, bool *raced)
{
    char val[RADOS_OID_MAX + 4];
    rados_entry_value(a, val, sizeof val);
    *raced = false;
    pthread_mutex_lock(&re->dir_mu);
    lsm_status *s = b->found ? replaceable(re, b, to) : NULL;
    if (s == NULL && strcmp(a->dir_oid, b->dir_oid) == 0)
        s = rename_here(re, a, b, val, to, raced);
    else if (s == NULL)
        s = move_across(re, a, b, val, to, raced);
    if (s == NULL && b->found)
        s = replaced_finish(re, b, to);
    pthread_mutex_unlock(&re->dir_mu);
    return s;
}

/* ------------------------------------------------------------ the sweep */

/* Settles move record key = rec of directory object dir_oid: if its new
 * name names the directory, the old name goes (if it still names it); the
 * record goes either way. */
static lsm_status *settle_move(struct rados_env *re, const char *dir_oid, const char *key,
                               const char *rec, const char *path)
{
    struct rados_entry old = {.found = true, .is_dir = true}, now = old;
    char val[RADOS_OID_MAX + 4], at[RADOS_OID_MAX + 4];
    snprintf(old.oid, sizeof old.oid, "%s", key + strlen(MOVE_PREFIX));
    snprintf(old.dir_oid, sizeof old.dir_oid, "%s", dir_oid);
    if (sscanf(rec, "%255[^/]/%63[^/]/%255[^/]", old.name, now.dir_oid, now.name) != 3)
        return status_new(LSM_CORRUPTION, "rados sweep %s: move record %s = \"%s\" is malformed",
                          path, key, rec);
    rados_entry_value(&old, val, sizeof val);
    bool landed = false;
    lsm_status *s = rados_dir_lookup(re, now.dir_oid, now.name, &landed, at, sizeof at);
    if (s != NULL)
        return s;
    if (landed && strcmp(at, val) == 0)
        return move_finish(re, &old, key, path);
    return rados_dir_set(re, dir_oid, key, NULL, path);
}

struct moves_ctx {
    struct rados_env *re;
    const char *dir_oid, *path;
};

static lsm_status *settle_one(void *ctx, const char *key, const char *val)
{
    struct moves_ctx *m = ctx;
    return settle_move(m->re, m->dir_oid, key, val, m->path);
}

lsm_status *rados_settle_moves(struct rados_env *re, const char *dir_oid, const char *dir)
{
    struct moves_ctx m = {re, dir_oid, dir};
    return rados_dir_list(re, dir_oid, dir, MOVE_PREFIX, settle_one, &m);
}
