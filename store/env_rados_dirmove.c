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

/* One directory op: keys compared (a missing key reads as ""), then keys
 * set, then keys removed. */
struct dir_change {
    const char *cmp_key[2], *cmp_val[2];
    const char *set_key[2], *set_val[2];
    const char *rm_key[2];
    int ncmp, nset, nrm;
};

/* Runs c on directory object dir_oid (guarded); a failed compare is
 * LSM_BUSY: the directory changed since it was read. */
static lsm_status *dir_change_run(struct rados_env *re, const char *dir_oid,
                                  const struct dir_change *c, const char *what, const char *path)
{
    rados_write_op_t op = rados_create_write_op();
    int prval[2] = {0, 0};
    for (int i = 0; i < c->ncmp; i++)
        rados_write_op_omap_cmp(op, c->cmp_key[i], LIBRADOS_CMPXATTR_OP_EQ, c->cmp_val[i],
                                strlen(c->cmp_val[i]), &prval[i]);
    for (int i = 0; i < c->nset; i++) {
        size_t len = strlen(c->set_val[i]);
        rados_write_op_omap_set(op, &c->set_key[i], &c->set_val[i], &len, 1);
    }
    if (c->nrm > 0)
        rados_write_op_omap_rm_keys(op, c->rm_key, (size_t)c->nrm);
    lsm_status *s = rados_operate(re, op, dir_oid, what, path);
    if (s != NULL && (prval[0] == -ECANCELED || prval[1] == -ECANCELED)) {
        lsm_status_free(s);
        s = status_new(LSM_BUSY, "rados %s %s: the directory changed meanwhile", what, path);
    }
    return s;
}

static void add_cmp(struct dir_change *c, const char *key, const char *val)
{
    c->cmp_key[c->ncmp] = key;
    c->cmp_val[c->ncmp++] = val;
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

/* A directory entry's value for directory object oid ("d:ID"). */
static void dir_value(char *out, size_t cap, const char *oid)
{
    snprintf(out, cap, "d:%s", oid + strlen(RADOS_DIR_PREFIX));
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

/* Removes replaced directory object b->oid, then the intent its rename
 * wrote: a failure leaves the intent, and the next sweep the object; only
 * a crash point fails the call. */
static lsm_status *replaced_finish(struct rados_env *re, const struct rados_entry *b, const char *to)
{
    char key[RADOS_OID_MAX + 8];
    snprintf(key, sizeof key, "%s%s", RADOS_INTENT_PREFIX, b->oid);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_remove(op);
    lsm_status *s = rados_operate(re, op, b->oid, "remove the replaced directory", to);
    if (s == NULL)
        s = rados_crash_point(re, "replaced", b->oid);
    if (s == NULL)
        s = rados_dir_set(re, b->dir_oid, key, NULL, to);
    if (s != NULL && !rados_dead(re)) {
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

/* Adds to c the new name b->name = val, checked to name what it did, and
 * the intent of the directory it replaces (key: its buffer). */
static void enter_new_name(struct dir_change *c, const struct rados_entry *b, const char *val,
                           char *was, char *key)
{
    was[0] = '\0';
    if (b->found) {
        dir_value(was, RADOS_OID_MAX + 4, b->oid);
        snprintf(key, RADOS_OID_MAX + 8, "%s%s", RADOS_INTENT_PREFIX, b->oid);
        add_set(c, key, b->name);
    }
    add_cmp(c, b->name, was);
    add_set(c, b->name, val);
}

/* In one directory: one op. */
static lsm_status *rename_here(struct rados_env *re, const struct rados_entry *a,
                               const struct rados_entry *b, const char *val, const char *to)
{
    struct dir_change c = {0};
    char was[RADOS_OID_MAX + 4], key[RADOS_OID_MAX + 8];
    add_cmp(&c, a->name, val);
    enter_new_name(&c, b, val, was, key);
    add_rm(&c, a->name);
    return dir_change_run(re, a->dir_oid, &c, "rename", to);
}

/* To another directory: the record, the new name, the old name and the
 * record out. Once the new name is in, only a crash point fails the call
 * (a failure after is left to the sweep, as rados_name_leaves does). */
static lsm_status *move_across(struct rados_env *re, const struct rados_entry *a,
                               const struct rados_entry *b, const char *val, const char *to)
{
    char key[RADOS_OID_MAX + 8], rec[MOVE_REC_MAX];
    snprintf(key, sizeof key, "%s%s", MOVE_PREFIX, a->oid);
    snprintf(rec, sizeof rec, "%s/%s/%s", a->name, b->dir_oid, b->name);
    struct dir_change c1 = {0}, c2 = {0}, c3 = {0};
    add_cmp(&c1, a->name, val);
    add_set(&c1, key, rec);
    lsm_status *s = dir_change_run(re, a->dir_oid, &c1, "rename (record the move of)", to);
    if (s == NULL)
        s = rados_crash_point(re, "moving", a->oid);
    if (s != NULL)
        return s;
    char was[RADOS_OID_MAX + 4], ikey[RADOS_OID_MAX + 8];
    enter_new_name(&c2, b, val, was, ikey);
    s = dir_change_run(re, b->dir_oid, &c2, "rename to", to);
    if (s != NULL) {
        if (!rados_dead(re)) /* undone: no record */
            lsm_status_free(rados_dir_set(re, a->dir_oid, key, NULL, to));
        return s;
    }
    if ((s = rados_crash_point(re, "moved", a->oid)) != NULL)
        return s;
    add_rm(&c3, a->name);
    add_rm(&c3, key);
    s = dir_change_run(re, a->dir_oid, &c3, "rename (the old name of)", to);
    if (s != NULL && !rados_dead(re)) { /* the sweep settles the record */
        lsm_status_free(s);
        s = NULL;
    }
    return s;
}

lsm_status *rados_rename_dir(struct rados_env *re, const struct rados_entry *a,
                             const struct rados_entry *b, const char *to)
{
    char val[RADOS_OID_MAX + 4];
    dir_value(val, sizeof val, a->oid);
    pthread_mutex_lock(&re->dir_mu);
    lsm_status *s = b->found ? replaceable(re, b, to) : NULL;
    if (s == NULL && strcmp(a->dir_oid, b->dir_oid) == 0)
        s = rename_here(re, a, b, val, to);
    else if (s == NULL)
        s = move_across(re, a, b, val, to);
    if (s == NULL && b->found)
        s = replaced_finish(re, b, to);
    pthread_mutex_unlock(&re->dir_mu);
    return s;
}

/* ------------------------------------------------------------ the sweep */

/* The value of name in directory object dir ("" if none). */
static lsm_status *entry_value(struct rados_env *re, const char *dir, const char *name,
                               char *val, size_t cap)
{
    bool found = false;
    lsm_status *s = rados_dir_lookup(re, dir, name, &found, val, cap);
    if (s == NULL && !found)
        val[0] = '\0';
    return s;
}

/* Settles move record key = rec of directory object dir_oid: if its new
 * name names the directory, the old name goes (if it still names it); the
 * record goes either way. */
static lsm_status *settle_move(struct rados_env *re, const char *dir_oid, const char *key,
                               const char *rec, const char *path)
{
    char a_name[256], b_dir[RADOS_OID_MAX], b_name[256], oid[RADOS_OID_MAX];
    char val[RADOS_OID_MAX + 4], now[RADOS_OID_MAX + 4];
    snprintf(oid, sizeof oid, "%s", key + strlen(MOVE_PREFIX));
    dir_value(val, sizeof val, oid);
    if (sscanf(rec, "%255[^/]/%63[^/]/%255[^/]", a_name, b_dir, b_name) != 3)
        return status_new(LSM_CORRUPTION, "rados sweep %s: move record %s = \"%s\" is malformed",
                          path, key, rec);
    lsm_status *s = entry_value(re, b_dir, b_name, now, sizeof now);
    bool landed = s == NULL && strcmp(now, val) == 0;
    if (s == NULL && landed)
        s = entry_value(re, dir_oid, a_name, now, sizeof now);
    if (s != NULL)
        return s;
    struct dir_change c = {0};
    if (landed && strcmp(now, val) == 0)
        add_rm(&c, a_name);
    add_rm(&c, key);
    return dir_change_run(re, dir_oid, &c, "settle the move record of", path);
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
