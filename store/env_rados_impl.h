/*
 * env_rados_impl.h — what env_rados.c (files and directories) and
 * env_rados_lease.c (lease and fence) share. Not a public header.
 */
#ifndef LSM_ENV_RADOS_IMPL_H
#define LSM_ENV_RADOS_IMPL_H

#include "env_rados.h"

#include "mutex.h"

#include <pthread.h>
#include <rados/librados.h>
#include <stdatomic.h>

#define RADOS_ROOT_OBJ "lsmfs.root"
#define RADOS_DIR_PREFIX "lsmfs.d."
#define RADOS_XATTR_EPOCH "lsmfs.epoch"
#define RADOS_XATTR_REFS "lsmfs.refs"
#define RADOS_XATTR_HOLDER "lsmfs.holder"
#define RADOS_OID_MAX 64
/* A directory's omap key recording the drop of a name of object OID:
 * RADOS_DROP_PREFIX OID (env_rados_intent.c). */
#define RADOS_DROP_PREFIX "/drop/"
/* A directory's omap key recording the intent of object OID: it goes once
 * no name of that directory names it (env_rados_intent.c). */
#define RADOS_INTENT_PREFIX "/new/"
/* The longest value of a directory's omap key: a name, or a record's. */
#define RADOS_VALUE_MAX 640
/* Name counts change under their object's lock, one of RADOS_OBJ_LOCKS
 * picked by a hash of its id: changes to different objects go on at once. */
#define RADOS_OBJ_LOCKS 64

typedef struct lsm_filelock lsm_filelock;

struct rados_env {
    lsm_env env; /* first: the env handed out */
    rados_t cluster;
    rados_ioctx_t io;
    uint32_t lease_ms;
    bool takeover;
    pthread_mutex_t mu; /* guards lease */
    /* Guards directory creation (a name looked up, then made). Taken
     * before obj_mu. */
    pthread_mutex_t dir_mu;
    /* Each guards the name counts (read, compare, write of lsmfs.refs)
     * and drop records of the objects that hash to it (rados_obj_mu), so
     * this process never races itself on one object. Two are taken in
     * index order (rados_obj_lock2). */
    mutex obj_mu[RADOS_OBJ_LOCKS];
    /* The fence: 0 until a lease is held; then every write op on a
     * non-root object carries cmpxattr(lsmfs.epoch == epoch). Written once
     * by the lease's holder before any guarded write, read by all. */
    _Atomic uint64_t epoch;
    /* Set (for good) when the lease was lost or may have lapsed: every
     * write is refused with EIO. */
    atomic_bool lease_lost;
    /* Monotonic micros until which the lease is certainly ours (less a
     * margin); 0 while no lease is held. Written by the renewer. */
    _Atomic uint64_t lease_valid_until;
    _Atomic uint64_t takeover_us;
    struct lsm_filelock *lease; /* GUARDED_BY(mu): the store lease, at most one */
    /* The leased store's directory (plain path): the fence covers it and
     * everything below. Written (rados_set_store_path) only while epoch is
     * 0, before the lease holder sets epoch; read once epoch != 0. */
    char store_path[4096];
    char pool[256]; /* const after open */
    /* disk_free's figures (env_rados_space.c), asked at most once a TTL. */
    pthread_mutex_t space_mu;
    uint64_t space_at_us;  /* GUARDED_BY(space_mu): when asked; 0: never */
    uint64_t space_total;  /* GUARDED_BY(space_mu) */
    uint64_t space_avail;  /* GUARDED_BY(space_mu) */
    /* The statistics' count of the pool's objects and its max_objects (0:
     * none), as last asked. */
    uint64_t space_objects;     /* GUARDED_BY(space_mu) */
    uint64_t space_max_objects; /* GUARDED_BY(space_mu) */
    /* An objects quota's own count (env_rados_space.c): the pool listed
     * under count_mu (it nests no lock of ours; librados's under it). */
    pthread_mutex_t count_mu;
    rados_ioctx_t count_io; /* const after open: the pool, every namespace */
    uint64_t count_at_us;   /* GUARDED_BY(count_mu): when listed; 0: never */
    int64_t count_listed;   /* GUARDED_BY(count_mu): the objects listed then */
    int64_t count_since;    /* GUARDED_BY(count_mu): creates sent since, less removes */
    int64_t count_flying;   /* GUARDED_BY(count_mu): creates sent, not answered */
    /* The count says the pool holds max_objects or more: a write the pool
     * takes is then no room again (it flags itself seconds late). Written
     * under count_mu, read without it (librados' callback thread). */
    atomic_bool count_full;
    /* The pool refused a growing write (EDQUOT) and none since went
     * through unforced; bytes this env freed since, not yet reused. */
    atomic_bool quota_full;
    _Atomic int64_t freed_while_full;
    /* The pool's quota counts objects only (max_objects, no max_bytes):
     * a full pool lacks objects, not bytes (set by disk_free's ask); and
     * the objects this env removed since it was found full, not reused;
     * and whether it removed any since (the store gave up its reserve). */
    atomic_bool objects_quota;
    _Atomic int64_t objects_freed_while_full;
    atomic_bool objects_freeing;
    /* ENV_RADOS_OBJECTS_SLACK was added to objects_freed_while_full (the
     * store gave up its reserve) since the pool was found full. */
    atomic_bool objects_slack_given;
    /* The statistics show room while quota_full: the next growing write
     * goes unforced, to see whether the pool takes it. */
    atomic_bool probe_due;
    /* The files open for writing (env_rados_wfile.c), by object: a sync or
     * truncate by path first waits for what they have sent. */
    pthread_mutex_t open_mu; /* taken before any file's own mutex */
    struct rados_wfile *open_files; /* GUARDED_BY(open_mu): linked by open_next */
    /* Drops of a name whose finish failed (the name went, the count or the
     * record did not): the next change of that object's names finishes
     * them first (rados_drops_settle). A leaf lock. */
    pthread_mutex_t drops_mu;
    struct rados_pending_drop *pending_drops; /* GUARDED_BY(drops_mu) */
    /* The test seam (env_rados_set_crash_hook): set before use, read by all. */
    env_rados_crash_fn crash_fn;
    void *crash_arg;
    env_rados_fault_fn fault_fn; /* env_rados_set_fault_hook: likewise */
    void *fault_arg;
    /* Set (for good) once crash_fn said "die here": nothing more is sent
     * that changes the pool, as if the process had died. */
    atomic_bool dead;
};

static inline struct rados_env *rados_env_of(lsm_env *env)
{
    return (struct rados_env *)env;
}

/* What a path names: its parent directory's object, the last component,
 * and (found) the entry's value "f:OID" / "d:ID". */
struct rados_entry {
    char dir_oid[RADOS_OID_MAX]; /* the parent directory's object */
    char name[256];
    bool found;
    bool is_dir;
    char oid[RADOS_OID_MAX]; /* found: the file's or directory's object */
};

lsm_status *rados_resolve(struct rados_env *re, const char *path, struct rados_entry *e);
/* The one check of every op that changes a name it looked up: adds to op a
 * comparison that e's name still holds what the lookup found (the same file
 * or directory, or nothing), so that if another thread or client changed
 * the name in between, the whole op is refused (*prval = -ECANCELED) and
 * the caller looks again, instead of acting on what the name no longer
 * names: two removes of one name would each drop the object's name count
 * (a checkpoint's linked table then lost its object). */
void rados_name_unchanged(rados_write_op_t op, const struct rados_entry *e, int *prval);
/* e's value in its directory, the one spelling of an entry ("f:OID" /
 * "d:ID"; "" when not found: a missing key compares as empty). cap: at
 * least RADOS_OID_MAX + 4. */
void rados_entry_value(const struct rados_entry *e, char *val, size_t cap);
/* A directory's object (ENOENT / ENOTDIR as a status). "" is the root. */
lsm_status *rados_dir_oid(struct rados_env *re, const char *path, char *oid);
/* Adds the fence guard to op on the object for path (a file, or the
 * directory holding entry path): nothing before a lease is held or outside
 * the leased store's tree. Refuses (EIO status) when the lease is lost or
 * may lapse before op lands. */
lsm_status *rados_guard(struct rados_env *re, rados_write_op_t op, const char *what,
                        const char *path);
/* Sets the leased store's directory. REQUIRES: epoch 0 (no lease held). */
void rados_set_store_path(struct rados_env *re, const char *dir);
/* Runs op on oid, the object for path as rados_guard says (released here);
 * a refused guard is EIO naming the fence. */
lsm_status *rados_operate(struct rados_env *re, rados_write_op_t op, const char *oid,
                          const char *what, const char *path);
/* The error of a write op the fence refused (ECANCELED). */
lsm_status *rados_fenced_error(const char *what, const char *path);
/* A fresh id, 16 hex digits. */
void rados_new_id(char *out, size_t cap);
/* status for a librados error code r < 0. */
lsm_status *rados_error(int r, const char *what, const char *path);
/* Every object under the directory object dir_oid (recursively, the
 * directory objects included) gets xattr name = value. */
lsm_status *rados_set_xattr_tree(struct rados_env *re, const char *dir_oid, const char *name,
                                 const char *value);

/* Sets (or, val NULL, removes) entry name in directory object dir, guarded. */
lsm_status *rados_dir_set(struct rados_env *re, const char *dir, const char *name,
                          const char *val, const char *path);
/* Page by page, the entries of directory object dir whose keys start with
 * prefix: fn(ctx, key, value). Intents (keys starting with '/', see
 * env_rados_intent.c) are listed only for a prefix that starts with '/'. */
lsm_status *rados_dir_list(struct rados_env *re, const char *dir, const char *path,
                           const char *prefix,
                           lsm_status *(*fn)(void *ctx, const char *key, const char *val),
                           void *ctx);
/* The entry name of directory object dir: *found, and its value in val
 * (a directory with no object yet has none). */
lsm_status *rados_dir_lookup(struct rados_env *re, const char *dir, const char *name, bool *found,
                             char *val, size_t cap);
/* Renames directory a to b (env_rados_dirmove.c): atomic across a crash
 * (one op in one directory; else a move record the sweep settles); an
 * existing b, which must be an empty directory (else ENOTEMPTY), is
 * removed. *raced: a name changed since a or b was looked up (the rule of
 * rados_name_unchanged): nothing changed, the caller looks again. */
lsm_status *rados_rename_dir(struct rados_env *re, const struct rados_entry *a,
                             const struct rados_entry *b, const char *to, bool *raced);
/* The sweep's part of it: settles every move record a crash left in
 * directory object dir_oid (at plain path dir). REQUIRES: as
 * rados_sweep_tree. */
lsm_status *rados_settle_moves(struct rados_env *re, const char *dir_oid, const char *dir);
/* Splits a directory entry's value ("f:OID" / "d:ID") into e's oid, is_dir. */
void rados_entry_from_value(struct rados_entry *e, const char *val);

/* The crash seam: NULL, or (the hook said die here) a status naming the
 * point, and the env is dead from then on. */
lsm_status *rados_crash_point(struct rados_env *re, const char *point, const char *oid);
/* The fault seam: 0, or the error a test makes op on oid fail with. */
int rados_fault(struct rados_env *re, const char *op, const char *oid);
/* A point where the hook may only wait (its answer is not asked): a test
 * plays a slow OSD there. */
void rados_seam(struct rados_env *re, const char *point, const char *oid);
/* Whether the env died at a crash point (then it changes nothing more). */
static inline bool rados_dead(struct rados_env *re)
{
    return atomic_load(&re->dead);
}

/* The lock of object oid's name count. */
mutex *rados_obj_mu(struct rados_env *re, const char *oid);
/* Locks the objects a and b (b NULL: a only; one lock taken once). */
void rados_obj_lock2(struct rados_env *re, const char *a, const char *b);
void rados_obj_unlock2(struct rados_env *re, const char *a, const char *b);

/* Object oid's name count; LSM_NOT_FOUND: it is gone. */
lsm_status *rados_refs_get(struct rados_env *re, const char *oid, uint64_t *refs);
/* Drops one name of object oid if it still has had (else the drop was
 * done, or its object is gone). REQUIRES: oid's lock held. */
lsm_status *rados_refs_drop(struct rados_env *re, const char *oid, uint64_t had, const char *path);
/* Creates object oid with one name (lsmfs.refs 1) and the fence epoch. */
lsm_status *rados_object_create(struct rados_env *re, const char *oid, const char *path);
/* Drops a name of object oid (the object goes with its last). */
lsm_status *rados_unref(struct rados_env *re, const char *oid, const char *path);

/* Creates object oid named e->name (value val) in directory object
 * e->dir_oid, with an intent first (env_rados_intent.c): a crash leaves no
 * object that the next sweep cannot find. A file e names (e->found) is
 * replaced: its name leaves by the one rule. REQUIRES: no object lock held. */
lsm_status *rados_create_named(struct rados_env *re, const struct rados_entry *e, const char *oid,
                               const char *val, const char *path);
/* The one rule for a name that leaves a directory (a remove; a name a
 * rename, link or create replaces): op, the directory's op that removes or
 * replaces the name, also records the drop of a name of object oid, with
 * the count it has then; once op went, the count is lowered (if it still
 * is that) and the record removed (rados_drop_finish). A crash between
 * leaves the record for the sweep, which drops the name once. oid NULL: no
 * file's name leaves, op just runs. op is released. Once op went, only a
 * crash point fails the call (else the sweep finishes a failed drop).
 * REQUIRES: oid's lock held. */
lsm_status *rados_name_leaves(struct rados_env *re, rados_write_op_t op, const char *dir_oid,
                              const char *oid, const char *what, const char *path);
/* Adds to op the record of a drop of a name of oid while it has had
 * names (set), or its removal (!set). A link records the drop that undoes
 * it (had: the count it makes) before raising the count, and removes the
 * record in the op that names it. */
void rados_drop_record(rados_write_op_t op, const char *oid, uint64_t had, bool set);
/* A drop's record and its count are exact only while no other drop of
 * its object waits: a later record of it would read the count the waiting
 * one has yet to lower (and share its key in one directory), so one of
 * them would be lost (a leak), or a stale record, its count met again by a
 * later link, applied twice (an object removed while named). So a drop
 * whose finish failed is kept (rados_drop_done), and every change of an
 * object's names first finishes those of it (rados_drops_settle), or is
 * refused. */
struct rados_pending_drop;
/* A place to keep a drop whose finish may fail: taken before the name op,
 * so keeping it cannot fail once the name went. NULL: out of memory. */
struct rados_pending_drop *rados_pending_new(void);
/* Finishes the drop of a name of oid whose count was had (recorded in
 * directory object dir_oid); if that fails but the env lives, keeps it in
 * p for rados_drops_settle and succeeds. p is taken either way. Only a
 * crash point fails the call. REQUIRES: oid's lock held. */
lsm_status *rados_drop_done(struct rados_env *re, struct rados_pending_drop *p,
                            const char *dir_oid, const char *oid, uint64_t had, const char *path);
/* Finishes every kept drop of oid; one that fails again fails the call
 * (nothing changed: the name change waiting for it must not go on).
 * REQUIRES: oid's lock held. */
lsm_status *rados_drops_settle(struct rados_env *re, const char *oid);
/* Frees the drops still kept (at close: the next lease's sweep finishes
 * their records). */
void rados_drops_forget(struct rados_env *re);
/* Drops a name of oid from its count if it still is had, then removes
 * its record from directory object dir_oid. REQUIRES: oid's lock held. */
lsm_status *rados_drop_finish(struct rados_env *re, const char *dir_oid, const char *oid,
                              uint64_t had, const char *path);
/* Removes, in the tree of directory object dir_oid (at plain path dir),
 * every object whose create a crash cut short (an intent, no name), and
 * finishes every drop of a name a crash cut short (rados_name_leaves).
 * REQUIRES: no other process creates in the tree: the store's lease held
 * (epoch set), or (rmdir) the directory is empty and being removed. */
lsm_status *rados_sweep_tree(struct rados_env *re, const char *dir_oid, const char *dir);

/* Adds to op, the op of directory object e->dir_oid that removes or
 * replaces directory e's name, e's intent: a crash after it leaves the
 * intent, and the sweep removes the unnamed object once. */
void rados_dir_intent(rados_write_op_t op, const struct rados_entry *e);
/* Removes directory object e->oid, whose name left with its intent
 * (rados_dir_intent), passes crash point point, then removes the intent.
 * The object's removal failing is the call's error (the intent kept, the
 * name not back: the caller's choice); the intent's removal failing is not
 * (the sweep finds it and no object). */
lsm_status *rados_dir_object_remove(struct rados_env *re, const struct rados_entry *e,
                                    const char *point, const char *path);
/* rmdir's ops on directory e (found, empty, its intents swept): its name
 * out with its intent (compared unchanged: else *raced, nothing changed),
 * the object, the intent. A failed removal of the object is reported and
 * the name put back (if that fails too, the intent stays for the sweep):
 * never a name without its object, never an object no sweep finds. */
lsm_status *rados_dir_leaves(struct rados_env *re, const struct rados_entry *e, const char *path,
                             bool *raced);

/* Settles the intents of directory object dir_oid (at plain path dir)
 * that creates of name left (a crash, or a failure to take them back), and
 * the claimed ones: the next create of a name in a directory no lease
 * covers (a store's own, in the pool's top) sweeps what earlier ones of it
 * left. Safe against a live create of the name: a claimed intent's create
 * is refused (LSM_BUSY) when it names its object. */
lsm_status *rados_sweep_name(struct rados_env *re, const char *dir_oid, const char *dir,
                             const char *name);

/* env.h's new_wfile (env_rados_wfile.c). */
lsm_status *rados_new_wfile(lsm_env *env, const char *path, lsm_wfile **out);
/* The one rule for a sync or truncate by path of object oid: every send
 * its open writers have made (what they flushed) is answered first, as
 * fsync(2) by path covers what another descriptor wrote; a send that failed
 * is the answer (the file may hold a hole). Bytes a writer flushed but
 * holds for its sends in flight are sent first; bytes it was not asked to
 * flush are not sent, as a process's own buffer is not; those that would
 * land at or past cut (a truncate's length; UINT64_MAX: none) are dropped,
 * so the torn record a truncate cuts from a log cannot come back at close.
 * May wait for the OSDs; holds open_mu meanwhile (a new file waits). */
lsm_status *rados_settle_writers(struct rados_env *re, const char *oid, uint64_t cut);

/* env.h's disk_free: the pool's quota, else the cluster (env_rados_space.c). */
lsm_status *rados_disk_free(lsm_env *env, const char *path, uint64_t *total, uint64_t *avail);

/* The flags for a write op growing the pool by n bytes: FULL_FORCE when the
 * pool was found full and space this env freed since covers n (taken), or,
 * under a quota of objects only (an append adds none), once this env has
 * removed an object since. */
int rados_space_grow_flags(struct rados_env *re, uint64_t n);
/* The flags for a create: as a growth of one byte, but under an objects
 * quota FULL_FORCE only while an object this env removed covers it. */
int rados_space_create_flags(struct rados_env *re);
/* Counts a create about to be sent (unforced: flags 0) under an objects
 * quota: 0, or -EDQUOT (the pool then counts as full, as after its own
 * refusal) when the objects counted reach max_objects +
 * ENV_RADOS_OBJECTS_SLACK, the pool found full or not. A forced create is
 * counted, never refused here. Each 0 is answered by rados_space_created. */
int rados_space_create_take(struct rados_env *re, int flags);
/* A create counted by rados_space_create_take was answered r. */
void rados_space_created(struct rados_env *re, int r);
/* A growing op sent with flags was answered r: EDQUOT finds the pool
 * full; an unforced write taken is room again, unless the count says the
 * pool is at its objects quota. */
void rados_space_answered(struct rados_env *re, int r, int flags);
/* Whether an append of n more bytes must be refused (LSM_NO_SPACE, before
 * anything is sent): the pool is full and what this env freed does not
 * cover it. */
bool rados_space_refuses(struct rados_env *re, uint64_t n);
/* Whether the pool was found full (then freed bytes are counted). */
bool rados_space_full(struct rados_env *re);
/* n bytes and objects of the pool freed by this env (an object removed,
 * a truncate; reserve: the object was the store's RESERVE). While the pool
 * is full what they free is reused; the reserve given up where the pool is
 * full or the count at the quota finds it full (rados_space_full) and adds
 * ENV_RADOS_OBJECTS_SLACK, once until the pool has room again. */
void rados_space_freed(struct rados_env *re, uint64_t n, int objects, bool reserve);

lsm_status *rados_lock_file(lsm_env *env, const char *path, lsm_filelock **out);
lsm_status *rados_lock_file_shared(lsm_env *env, const char *path, lsm_filelock **out);
lsm_status *rados_unlock_file(lsm_env *env, lsm_filelock *lock);

#endif
