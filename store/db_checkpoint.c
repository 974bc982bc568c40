/*
 * db_checkpoint.c — lsm_checkpoint: a copy of the open store at one
 * sequence number, as an ordinary store in another directory.
 *
 * The cut. Holding the head of the write queue (writers wait behind it for
 * the length of a memtable switch, no I/O), the checkpoint switches the
 * memtable: every write acknowledged before the call is now in an immutable
 * memtable or a table, deferred batches too, and every later write goes
 * to the new memtable. Memtables flush oldest first, each as one MANIFEST
 * edit, so the version installed by the flush of the memtable just made
 * immutable holds exactly the writes up to the switch: flush_one hands it
 * over (db_checkpoint_flushed) with a reference, which keeps its tables
 * from the obsolete-file sweep while they are linked or copied. The copy
 * then needs no log at all (a deferred batch cannot be half in it), and
 * opens without a replay. The alternative — copying the live logs up to
 * the cut — would have to keep logs from being deleted under the copy and
 * would leave a replay (and, for batches logged late, markers whose bodies
 * come after the cut) to every open of the copy.
 *
 * The copy is built in a hidden sibling of dest_dir (".NAME.tmp-PID-N"):
 * tables hard-linked (the tables never change once written) or copied and
 * synced, an empty LOCK, a MANIFEST with one edit naming exactly the
 * pinned version's tables, CURRENT, each directory entry synced; only then
 * is it renamed to dest_dir and dest_dir's parent synced. A crash or an
 * error before that rename leaves at most the hidden directory, which no
 * one takes for a checkpoint; an error leaves none (removed, best effort).
 */
#include "lsm_malloc.h"
#include "db_impl.h"
#include "filename.h"
#include "status.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void lsm_checkpoint_options_init(lsm_checkpoint_options *o)
{
    memset(o, 0, sizeof(*o));
}

void db_checkpoint_flushed(lsm_db *db, uint64_t mem_id)
{
    assert(mutex_held(&db->mu));
    if (!db->ckpt_waiting || db->ckpt_mem_id != mem_id)
        return;
    version_ref(db->vs.current);
    db->ckpt_version = db->vs.current;
    db->ckpt_waiting = false;
}

/* Switches the memtable and waits for the version that holds exactly the
 * writes before the switch; *v gets it (referenced), *seq its last
 * sequence. REQUIRES: mu held; db->checkpointing owned by the caller. */
static lsm_status *pin_cut(lsm_db *db, version **v, uint64_t *seq)
{
    assert(mutex_held(&db->mu) && db->checkpointing);
    *v = NULL;
    struct writer w = {.batch = NULL, .sync = false, .solo = true};
    bool leads = db_queue_wait(db, &w);
    assert(leads); /* a solo writer is never done by someone else */
    (void)leads;
    /* Armed before the switch: the switch releases mu (it syncs the old
     * log), and the flush may be done before it returns. With the active
     * memtable empty, the newest immutable one ends at the cut; with none,
     * the current version is the cut. */
    lsm_status *s = NULL;
    if (memtable_entries(db->mem) > 0 || db->wal_broken) {
        db->ckpt_waiting = true;
        db->ckpt_mem_id = db->mem_id;
        s = db_make_room_for_write(db, true, false, 0);
    } else if (db->nimm > 0) {
        db->ckpt_waiting = true;
        db->ckpt_mem_id = db->imm_id[db->nimm - 1];
    } else {
        version_ref(db->ckpt_version = db->vs.current);
    }
    *seq = db->last_seq;
    db_queue_pop_head(db, &w, NULL);
    uint64_t full_before = db->nospace_events;
    db->flush_asked++; /* a flush waiting to retry after a full disk does so now */
    while (s == NULL && db->ckpt_version == NULL && db->bg_error == NULL &&
           db->nospace_events == full_before) {
        pthread_cond_broadcast(&db->work_cv);
        cond_wait(&db->room_cv, &db->mu);
    }
    db->ckpt_waiting = false;
    if (s == NULL && db->ckpt_version == NULL)
        s = status_copy(db->bg_error ? db->bg_error : db->nospace);
    if (s == NULL && db->ckpt_version == NULL) /* a full disk that cleared */
        s = status_new(LSM_NO_SPACE, "checkpoint: the disk was full for the flush");
    if (s != NULL && db->ckpt_version != NULL)
        version_unref(db->ckpt_version);
    else if (s == NULL)
        *v = db->ckpt_version;
    db->ckpt_version = NULL;
    return s;
}

/* Puts every table of v into dir: a hard link, or a copy where links are
 * refused (or o->copy_tables). No lock needed (v is pinned). */
static lsm_status *put_tables(lsm_db *db, const version *v, const char *dir,
                              const lsm_checkpoint_options *o, lsm_checkpoint_info *info)
{
    lsm_env *env = db->env;
    bool link = !o->copy_tables && env->link_file != NULL;
    lsm_status *s = NULL;
    for (int l = 0; s == NULL && l < NUM_LEVELS; l++) {
        for (int i = 0; s == NULL && i < v->nfiles[l]; i++) {
            const file_meta *f = v->files[l][i];
            char *src = table_file_name(db->dir, f->number);
            char *dst = table_file_name(dir, f->number);
            if (src == NULL || dst == NULL)
                s = status_new(LSM_NO_MEMORY, "out of memory");
            if (s == NULL && link) {
                s = env->link_file(env, src, dst);
                if (lsm_status_code(s) == LSM_NOT_SUPPORTED) { /* copy from now on */
                    lsm_status_free(s);
                    s = NULL;
                    link = false;
                } else if (s == NULL) {
                    info->linked_bytes += f->size;
                }
            }
            if (s == NULL && !link) {
                s = env_copy_file(env, src, env, dst, f->size, NULL, NULL);
                if (s == NULL)
                    info->copied_bytes += f->size;
            }
            if (s == NULL)
                info->tables++;
            free(src);
            free(dst);
        }
    }
    return s;
}

/* The MANIFEST edit of the copy: v's tables, no log (log_number is the
 * MANIFEST's own number, above every file of v), sequences up to seq.
 * REQUIRES: mu held. */
static lsm_status *copy_edit(lsm_db *db, const version *v, uint64_t seq, uint64_t number,
                             version_edit *e)
{
    assert(mutex_held(&db->mu));
    lsm_status *s = vset_snapshot_of(&db->vs, v, e);
    if (s != NULL)
        return s;
    version_edit_set_log_number(e, number);
    version_edit_set_next_file(e, number + 1);
    version_edit_set_last_seq(e, seq);
    return NULL;
}

/* Writes the copy into the (new, empty) directory tmp. No lock needed. */
static lsm_status *build_copy(lsm_db *db, const version *v, const version_edit *e,
                              uint64_t number, const char *tmp, const lsm_checkpoint_options *o,
                              lsm_checkpoint_info *info)
{
    lsm_env *env = db->env;
    lsm_status *s = put_tables(db, v, tmp, o, info);
    char *lock = s == NULL ? lock_file_name(tmp) : NULL;
    if (s == NULL && lock == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    /* So read-only opens of the copy take their shared lock against a
     * writer, as on the store itself. */
    if (s == NULL)
        s = env_write_file_sync(env, lock, "", 0);
    free(lock);
    if (s == NULL) /* the tables' and LOCK's names, before the MANIFEST names them */
        s = env->sync_dir(env, tmp);
    if (s == NULL)
        s = vset_write_copy(env, tmp, number, e);
    return s;
}

/* Removes what build_copy made in tmp by name first (env_remove_tree
 * lists tmp, which out of memory cannot), then the rest and tmp. */
static void unmake_copy(lsm_env *env, const version *v, uint64_t number, const char *tmp)
{
    char name[FILE_NAME_MAX];
    for (int l = 0; l < NUM_LEVELS; l++)
        for (int i = 0; i < v->nfiles[l]; i++) {
            numbered_file_name(FILE_TABLE, v->files[l][i]->number, name);
            env_remove_in(env, tmp, name);
        }
    const enum file_type made[] = {FILE_MANIFEST, FILE_TEMP};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        numbered_file_name(made[i], number, name);
        env_remove_in(env, tmp, name);
    }
    env_remove_in(env, tmp, "CURRENT");
    env_remove_in(env, tmp, "LOCK");
    env_remove_tree(env, tmp);
}

/* Everything after the cut: the copy in tmp, renamed to dest, synced. */
static lsm_status *write_checkpoint(lsm_db *db, const char *dest, const char *tmp,
                                    const char *parent, const version *v,
                                    const version_edit *e, uint64_t number,
                                    const lsm_checkpoint_options *o, lsm_checkpoint_info *info)
{
    lsm_env *env = db->env;
    lsm_status *s = env->create_dir_new(env, tmp);
    if (s != NULL)
        return status_wrap(s, "checkpoint %s", dest);
    /* The hidden directory's own entry; the rename's comes after. */
    s = env->sync_dir(env, parent);
    if (s == NULL)
        s = build_copy(db, v, e, number, tmp, o, info);
    if (s != NULL) {
        unmake_copy(env, v, number, tmp);
        return status_wrap(s, "checkpoint %s", dest);
    }
    /* dest is complete once renamed: a failed sync after leaves it
     * (complete, as it is, or hidden again after a crash), and says so. */
    s = env_publish_dir(env, tmp, dest, parent);
    return s ? status_wrap(s, "checkpoint") : NULL;
}

/* Refuses what cannot be checkpointed. REQUIRES: mu held. */
static lsm_status *checkpoint_refused(lsm_db *db, const char *dest)
{
    assert(mutex_held(&db->mu));
    if (db->bg_error != NULL)
        return status_new(lsm_status_code(db->bg_error),
                          "checkpoint %s refused: the store has a sticky error (%s)", dest,
                          lsm_status_message(db->bg_error));
    if (db->env->file_exists(db->env, dest))
        return status_new(LSM_INVALID_ARGUMENT, "checkpoint %s: it exists", dest);
    return NULL;
}

lsm_status *lsm_checkpoint_ex(lsm_db *db, const char *dest_dir, const lsm_checkpoint_options *o,
                              lsm_checkpoint_info *info)
{
    lsm_checkpoint_options defaults;
    lsm_checkpoint_info scratch;
    if (o == NULL) {
        lsm_checkpoint_options_init(&defaults);
        o = &defaults;
    }
    if (info == NULL)
        info = &scratch;
    memset(info, 0, sizeof(*info));
    uint64_t t0 = db->env->now_micros(db->env);
    lsm_status *s = db_refuse_read_only(db);
    char *tmp = NULL, *parent = NULL;
    if (s == NULL)
        s = hidden_sibling_name(dest_dir, &tmp, &parent);
    if (s != NULL)
        s = status_wrap(s, "checkpoint");
    if (s != NULL)
        return s;
    mutex_lock(&db->mu);
    while (db->checkpointing)
        cond_wait(&db->room_cv, &db->mu);
    db->checkpointing = true;
    version *v = NULL;
    uint64_t seq = 0, number = 0;
    version_edit e;
    bool have_edit = false;
    s = checkpoint_refused(db, dest_dir);
    if (s == NULL)
        s = pin_cut(db, &v, &seq);
    if (s == NULL) {
        number = vset_new_file_number(&db->vs);
        s = copy_edit(db, v, seq, number, &e);
        have_edit = s == NULL;
    }
    mutex_unlock(&db->mu);
    info->seq = seq;
    info->cut_micros = db->env->now_micros(db->env) - t0;
    if (s == NULL)
        s = write_checkpoint(db, dest_dir, tmp, parent, v, &e, number, o, info);
    mutex_lock(&db->mu);
    if (have_edit)
        version_edit_destroy(&e); /* its file refs are counted under mu */
    if (v != NULL)
        version_unref(v);
    db->checkpointing = false;
    pthread_cond_broadcast(&db->room_cv);
    mutex_unlock(&db->mu);
    free(tmp);
    free(parent);
    info->total_micros = db->env->now_micros(db->env) - t0;
    return s;
}

lsm_status *lsm_checkpoint(lsm_db *db, const char *dest_dir)
{
    return lsm_checkpoint_ex(db, dest_dir, NULL, NULL);
}
