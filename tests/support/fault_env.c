/*
 * fault_env.c — an env that injects faults and simulates power cuts; see
 * fault_env.h.
 *
 * What a power cut is modelled as:
 *  - File data: each file written through this env has a node recording the
 *    bytes handed to the base file (size) and the bytes made durable by a
 *    wfile sync (synced). At the cut every tracked file is truncated to its
 *    synced length. Opening a file for writing truncates it, and that counts
 *    as unsynced too (the cut leaves it empty until it is synced).
 *  - Lost writeback (fault_env_set_lost_writeback): a failed sync records
 *    where its unsynced data began (lost); the data stays readable, later
 *    syncs succeed without making it durable, and the cut truncates the file
 *    to at most that offset — Linux's behaviour after a writeback error.
 *  - Directory entries: every create (new_wfile of a path that did not
 *    exist), rename and remove is logged, per directory, as an undo record
 *    until sync_dir of that directory. The cut undoes each directory's log,
 *    newest first: created files are deleted, renames are reversed and
 *    removed files come back (with their synced data). To make that possible
 *    without copying, a remove is done as a rename to a hidden name
 *    (".fault-env-N.bak" in the same directory), and a rename over an
 *    existing file first moves the old file to such a name; sync_dir deletes
 *    the hidden files of the records it makes durable. get_children never
 *    lists them.
 *  - A rename is logged in the destination's directory only: a sync of that
 *    directory makes it durable (the store renames within one directory).
 *    A renamed directory takes the bookkeeping of what is below it along
 *    (a checkpoint renames its finished copy into place).
 *  - Directories are known by their spelling in the paths given (trailing
 *    slashes aside): "d/x" belongs to "d", which sync_dir("d/") syncs, but not
 *    sync_dir("./d"). Use one spelling per directory.
 *  - Directories themselves (create_dir, remove_dir) are durable at once;
 *    remove_dir first deletes the directory's hidden files and forgets its log.
 *  - Files opened before the cut (written or read) are dead: every operation
 *    on them fails with EIO and writes nothing. Files that existed before this
 *    env was made, and were not written through it, are durable as they are.
 *  - The power stays off until a store next locks its directory (or
 *    fault_env_restart): every create, rename, remove, mkdir and rmdir
 *    meanwhile fails with EIO, and the files open at the cut are dead, so
 *    the store that ran at the cut cannot save anything while it closes
 *    (its flush would otherwise write new tables and a new MANIFEST, and
 *    hide what the cut lost). Reads work; a sync has nothing to make
 *    durable.
 *  - This is the pessimistic end of what POSIX allows: a real disk may keep
 *    more (ext4 usually persists a new file's entry along with its fsync),
 *    and the store must not rely on that. It never keeps less than what was
 *    synced.
 *
 * Appends go straight through to the base file and are flushed there, so the
 * base file's own buffer is always empty between calls: closing a dead file
 * can write nothing.
 *
 * Locking. `cut` is a read-write lock: every operation holds it for reading
 * from start to end, and the power cut holds it for writing, so the cut never
 * sees an operation half done (no byte lands after the truncation). `mu`
 * guards the bookkeeping (fields marked below); it is held across the base
 * calls of directory operations, so the log and the disk agree, but never
 * across a file's data writes, syncs or the sync delay. Lock order: cut, then mu.
 */
#include "fault_env.h"

#include "status.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIDDEN_PREFIX ".fault-env-"

/* What is known about the data of one file written through the env. */
struct fe_node {
    char *path;      /* its current name (NULL once out of the table) */
    uint64_t size;   /* bytes handed to the base file */
    uint64_t synced; /* bytes durable; a cut truncates the file to this */
    uint64_t lost;   /* a cut truncates to at most this; UINT64_MAX: nothing lost */
    int refs;        /* 1 for the table + 1 per open wfile */
    struct fe_node *next;
};

enum undo_kind { UNDO_CREATE, UNDO_RENAME, UNDO_REMOVE };

/* One directory change not yet made durable. */
struct undo {
    enum undo_kind kind;
    char *name;        /* the created, renamed-to or removed path */
    char *from;        /* RENAME: where it came from */
    char *backup;      /* RENAME: the replaced file, REMOVE: the removed one; or NULL */
    struct undo *next; /* older record */
};

struct dirlog {
    char *dir;
    struct undo *ops; /* newest first */
    struct dirlog *next;
};

struct rule {
    unsigned ops;
    char *substr; /* NULL: any path */
    int err;
    int skip;
    int count; /* < 0: forever */
    struct rule *next;
};

/* The part every open file shares: its place in the list of open files. */
struct fe_handle {
    struct fe_handle *prev, *next; /* GUARDED_BY(mu) */
    /* Set by the power cut (with `cut` held for writing); read by the file's
     * operations with `cut` held for reading, so it needs no other lock. */
    bool dead;
    char *path;
};

struct fault_env {
    lsm_env env;   /* first: fault_env_env() hands out &env */
    lsm_env *base; /* immutable */
    pthread_rwlock_t cut;
    pthread_mutex_t mu;
    pthread_t mu_owner;     /* GUARDED_BY(mu): for assertions */
    bool mu_owned;          /* GUARDED_BY(mu) */
    struct fe_node *nodes;  /* GUARDED_BY(mu) */
    struct dirlog *dirs;    /* GUARDED_BY(mu) */
    struct fe_handle open;  /* GUARDED_BY(mu): sentinel of the open files */
    struct rule *rules;     /* GUARDED_BY(mu): oldest first */
    fault_fail_hook fail_hook; /* GUARDED_BY(mu): fault_env_on_fail */
    void *fail_ctx;            /* GUARDED_BY(mu) */
    fault_remove_hook remove_hook; /* GUARDED_BY(mu): fault_env_on_remove */
    void *remove_ctx;              /* GUARDED_BY(mu) */
    uint64_t sync_delay_us; /* GUARDED_BY(mu) */
    int last_hold;          /* GUARDED_BY(mu): the last hold_for_sync, -1 none */
    uint64_t holds;         /* GUARDED_BY(mu): hold_for_sync calls that held */
    bool sync_fails_late;   /* GUARDED_BY(mu) */
    uint64_t max_sleep_us;  /* GUARDED_BY(mu): 0, or sleep_micros' cap */
    _Atomic uint64_t clock_ahead_us; /* atomic: now_micros' lead on the base env's */
    bool lost_writeback;    /* GUARDED_BY(mu): fault_env_set_lost_writeback */
    bool avail_set;         /* GUARDED_BY(mu): disk_free reports at most avail_max */
    uint64_t avail_max;     /* GUARDED_BY(mu) */
    uint64_t syncs;         /* GUARDED_BY(mu) */
    uint64_t dir_syncs;     /* GUARDED_BY(mu) */
    uint64_t hidden_seq;    /* GUARDED_BY(mu): names hidden files */
    /* GUARDED_BY(mu): a power cut happened and no store has locked its
     * directory since, so the one that ran at the cut may still be closing:
     * creates, renames and removes fail (see the model above). */
    bool down;
    /* The sweep (fault_env_count_start), all GUARDED_BY(mu). */
    bool counting;
    pthread_t main_thread; /* its calls are FAULT_STREAM_MAIN */
    uint64_t calls[FAULT_STREAMS];
    fault_trace_fn trace;
    void *trace_ctx;
    bool armed, fired;
    int armed_stream;
    uint64_t armed_index;
    enum fault_kind armed_kind;
    bool disk_full; /* a FAULT_DISK_FULL fired: ENOSPC from then on */
    enum fault_call fired_call;
    char fired_path[PATH_MAX];
    bool hold_dir_syncs;     /* GUARDED_BY(mu) */
    int held;                /* GUARDED_BY(mu): threads waiting in wait_hold, 0 once released */
    uint64_t hold_gen;       /* GUARDED_BY(mu): one more at each release */
    pthread_cond_t hold_cv;  /* [mu] broadcast when hold_dir_syncs clears */
};

static fault_env *fe_of(lsm_env *env)
{
    return (fault_env *)env;
}

static void fe_lock(fault_env *fe)
{
    pthread_mutex_lock(&fe->mu);
    fe->mu_owner = pthread_self();
    fe->mu_owned = true;
}

static void fe_unlock(fault_env *fe)
{
    fe->mu_owned = false;
    pthread_mutex_unlock(&fe->mu);
}

static void assert_held(const fault_env *fe)
{
    assert(fe->mu_owned && pthread_equal(fe->mu_owner, pthread_self()));
    (void)fe;
}

/* The failure hook due on this thread, run once its operation has let go
 * of `cut` (a hook may wait for the store's threads, which take the store's
 * locks and then `cut`: run under it, the lock order would invert). */
static _Thread_local int ops_open;
static _Thread_local fault_fail_hook hook_due;
static _Thread_local void *hook_due_ctx;

static void run_hook(fault_fail_hook hook, void *ctx)
{
    if (ops_open > 0) {
        hook_due = hook;
        hook_due_ctx = ctx;
    } else {
        hook(ctx);
    }
}

static void op_begin(fault_env *fe)
{
    pthread_rwlock_rdlock(&fe->cut);
    ops_open++;
}

static void op_end(fault_env *fe)
{
    pthread_rwlock_unlock(&fe->cut);
    if (--ops_open == 0 && hook_due != NULL) {
        fault_fail_hook hook = hook_due;
        hook_due = NULL;
        hook(hook_due_ctx);
    }
}

static lsm_status *oom(const char *what, const char *path)
{
    return status_new(LSM_NO_MEMORY, "%s %s: out of memory", what, path);
}

static lsm_status *injected(int err, const char *what, const char *path)
{
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "%s %s (injected fault)", what, path);
    return status_from_errno(err, msg);
}

static lsm_status *down_error(const char *what, const char *path)
{
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "%s %s (after a simulated power cut)", what, path);
    return status_from_errno(EIO, msg);
}

static lsm_status *dead_error(const char *what, const char *path)
{
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "%s %s (file open at a simulated power cut)", what, path);
    return status_from_errno(EIO, msg);
}

/* The directory part of path: "a/b" -> "a", "b" -> ".", "/b" -> "/". */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    while (slash > path && slash[-1] == '/')
        slash--;
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* A directory path without trailing slashes. */
static char *dir_norm(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return strndup(dir, n);
}

/* ---------------------------------------------------------- injection */

/* Returns the errno to inject for this operation, or 0. */
static int should_fail(fault_env *fe, unsigned op, const char *path, const char *path2)
{
    int err = 0;
    fe_lock(fe);
    for (struct rule *r = fe->rules; r != NULL; r = r->next) {
        if (!(r->ops & op) || r->count == 0)
            continue;
        if (r->substr != NULL && strstr(path, r->substr) == NULL &&
            (path2 == NULL || strstr(path2, r->substr) == NULL))
            continue;
        if (r->skip > 0) {
            r->skip--;
        } else {
            if (r->count > 0)
                r->count--;
            err = r->err;
        }
        break;
    }
    fault_fail_hook hook = err != 0 ? fe->fail_hook : NULL;
    void *ctx = fe->fail_ctx;
    fe_unlock(fe);
    if (hook != NULL)
        run_hook(hook, ctx);
    return err;
}

void fault_env_on_remove(fault_env *fe, fault_remove_hook hook, void *ctx)
{
    fe_lock(fe);
    fe->remove_hook = hook;
    fe->remove_ctx = ctx;
    fe_unlock(fe);
}

void fault_env_on_fail(fault_env *fe, fault_fail_hook hook, void *ctx)
{
    fe_lock(fe);
    fe->fail_hook = hook;
    fe->fail_ctx = ctx;
    fe_unlock(fe);
}

/* Fails a change while the power is off since a cut; NULL otherwise.
 * REQUIRES: mu held; for a change that must not slip past a cut, `cut`
 * held for reading too (op_begin), as the change itself is. */
static lsm_status *down_locked(fault_env *fe, const char *what, const char *path)
{
    assert_held(fe);
    return fe->down ? down_error(what, path) : NULL;
}

static lsm_status *down_check(fault_env *fe, const char *what, const char *path)
{
    fe_lock(fe);
    lsm_status *s = down_locked(fe, what, path);
    fe_unlock(fe);
    return s;
}

void fault_env_fail(fault_env *fe, unsigned ops, const char *path_substr, int err, int skip,
                    int count)
{
    struct rule *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return;
    if (path_substr != NULL && (r->substr = strdup(path_substr)) == NULL) {
        free(r);
        return;
    }
    r->ops = ops;
    r->err = err;
    r->skip = skip;
    r->count = count;
    fe_lock(fe);
    struct rule **pp = &fe->rules;
    while (*pp != NULL)
        pp = &(*pp)->next;
    *pp = r;
    fe_unlock(fe);
}

void fault_env_clear_failures(fault_env *fe)
{
    fe_lock(fe);
    struct rule *r = fe->rules;
    fe->rules = NULL;
    fe_unlock(fe);
    while (r != NULL) {
        struct rule *next = r->next;
        free(r->substr);
        free(r);
        r = next;
    }
}

void fault_env_set_lost_writeback(fault_env *fe, bool on)
{
    fe_lock(fe);
    fe->lost_writeback = on;
    fe_unlock(fe);
}

void fault_env_set_disk_avail(fault_env *fe, bool set, uint64_t avail)
{
    fe_lock(fe);
    fe->avail_set = set;
    fe->avail_max = avail;
    fe_unlock(fe);
}

void fault_env_set_max_sleep_us(fault_env *fe, uint64_t us)
{
    fe_lock(fe);
    fe->max_sleep_us = us;
    fe_unlock(fe);
}

void fault_env_set_sync_fails_late(fault_env *fe, bool on)
{
    fe_lock(fe);
    fe->sync_fails_late = on;
    fe_unlock(fe);
}

int fault_env_last_hold(fault_env *fe, uint64_t *holds)
{
    fe_lock(fe);
    int on = fe->last_hold;
    if (holds != NULL)
        *holds = fe->holds;
    fe_unlock(fe);
    return on;
}

void fault_env_set_sync_delay_us(fault_env *fe, uint64_t us)
{
    fe_lock(fe);
    fe->sync_delay_us = us;
    fe_unlock(fe);
}

uint64_t fault_env_syncs(fault_env *fe)
{
    fe_lock(fe);
    uint64_t n = fe->syncs;
    fe_unlock(fe);
    return n;
}

uint64_t fault_env_dir_syncs(fault_env *fe)
{
    fe_lock(fe);
    uint64_t n = fe->dir_syncs;
    fe_unlock(fe);
    return n;
}

/* ------------------------------------------------------------ the sweep */

static const char *const call_names[FC_COUNT] = {
    [FC_CREATE] = "create",     [FC_APPEND] = "append",       [FC_FLUSH] = "flush",
    [FC_SYNC] = "sync",         [FC_PREALLOC] = "preallocate", [FC_CLOSE] = "close",
    [FC_OPEN_READ] = "open",    [FC_READ] = "read",           [FC_SKIP] = "skip",
    [FC_PREAD] = "pread",       [FC_LIST] = "list",           [FC_REMOVE] = "remove",
    [FC_RENAME] = "rename",     [FC_MKDIR] = "mkdir",         [FC_RMDIR] = "rmdir",
    [FC_FILE_SIZE] = "size",    [FC_SYNC_FILE] = "sync-file", [FC_SYNC_DIR] = "sync-dir",
    [FC_LOCK] = "lock",         [FC_UNLOCK] = "unlock",       [FC_DISK_FREE] = "disk-free", [FC_TRUNCATE] = "truncate",
    [FC_LINK] = "link",         [FC_STAT] = "stat",           [FC_CHMOD] = "chmod",
    [FC_MAP] = "map",
};

const char *fault_call_name(enum fault_call c)
{
    return c < FC_COUNT ? call_names[c] : "?";
}

const char *fault_kind_name(enum fault_kind k)
{
    static const char *const names[FAULT_KINDS] = {
        [FAULT_EIO] = "EIO",
        [FAULT_ENOSPC] = "ENOSPC",
        [FAULT_POWER_CUT] = "power-cut",
        [FAULT_SYNC_LIE] = "sync-lie",
        [FAULT_DISK_FULL] = "disk-full",
    };
    return k < FAULT_KINDS ? names[k] : "?";
}

bool fault_kind_applies(enum fault_kind k, enum fault_call c)
{
    switch (k) {
    case FAULT_EIO:
    case FAULT_POWER_CUT:
        return true;
    case FAULT_ENOSPC:
        return c == FC_CREATE || c == FC_APPEND || c == FC_FLUSH || c == FC_SYNC ||
               c == FC_PREALLOC || c == FC_CLOSE || c == FC_RENAME || c == FC_MKDIR ||
               c == FC_SYNC_FILE || c == FC_LOCK || c == FC_LINK;
    case FAULT_SYNC_LIE:
        return c == FC_SYNC || c == FC_SYNC_FILE || c == FC_SYNC_DIR;
    case FAULT_DISK_FULL:
        return c == FC_CREATE || c == FC_APPEND || c == FC_FLUSH || c == FC_PREALLOC ||
               c == FC_MKDIR;
    default:
        return false;
    }
}

void fault_env_count_start(fault_env *fe, fault_trace_fn trace, void *ctx)
{
    fe_lock(fe);
    fe->counting = true;
    fe->main_thread = pthread_self();
    memset(fe->calls, 0, sizeof(fe->calls));
    fe->trace = trace;
    fe->trace_ctx = ctx;
    fe->armed = fe->fired = fe->disk_full = false;
    fe_unlock(fe);
}

void fault_env_arm(fault_env *fe, int stream, uint64_t index, enum fault_kind k)
{
    fe_lock(fe);
    fe->armed = true;
    fe->fired = fe->disk_full = false;
    fe->armed_stream = stream;
    fe->armed_index = index;
    fe->armed_kind = k;
    fe_unlock(fe);
}

/* Lets every held directory sync go on; from now on none counts as held
 * (fault_env_held), even before it has woken up. REQUIRES: mu held. */
static void release_held(fault_env *fe)
{
    assert_held(fe);
    fe->hold_dir_syncs = false;
    fe->hold_gen++;
    fe->held = 0;
    pthread_cond_broadcast(&fe->hold_cv);
}

void fault_env_count_stop(fault_env *fe)
{
    fe_lock(fe);
    fe->counting = false;
    fe->armed = fe->disk_full = false;
    fe->trace = NULL;
    release_held(fe);
    fe_unlock(fe);
}

uint64_t fault_env_calls(fault_env *fe, int stream)
{
    fe_lock(fe);
    uint64_t n = stream >= 0 && stream < FAULT_STREAMS ? fe->calls[stream] : 0;
    fe_unlock(fe);
    return n;
}

bool fault_env_fired(fault_env *fe, enum fault_call *c, char *path, size_t cap)
{
    fe_lock(fe);
    bool fired = fe->fired;
    if (fired && c != NULL)
        *c = fe->fired_call;
    if (fired && path != NULL && cap > 0)
        snprintf(path, cap, "%s", fe->fired_path);
    fe_unlock(fe);
    return fired;
}

void fault_env_hold_dir_syncs(fault_env *fe, bool hold)
{
    fe_lock(fe);
    if (hold)
        fe->hold_dir_syncs = true;
    else
        release_held(fe);
    fe_unlock(fe);
}

/* Waits while directory syncs of threads other than the main one are held.
 * REQUIRES: mu held. */
static void wait_hold(fault_env *fe, enum fault_call c)
{
    assert_held(fe);
    while (c == FC_SYNC_DIR && fe->hold_dir_syncs && fe->counting &&
           !pthread_equal(pthread_self(), fe->main_thread)) {
        fe->mu_owned = false;
        fe->held++;
        for (uint64_t gen = fe->hold_gen; fe->hold_gen == gen;)
            pthread_cond_wait(&fe->hold_cv, &fe->mu);
        fe->mu_owner = pthread_self();
        fe->mu_owned = true;
    }
}

int fault_env_held(fault_env *fe)
{
    fe_lock(fe);
    int n = fe->held;
    fe_unlock(fe);
    return n;
}

/* Counts call c (on path) and decides whether it is the armed one: returns
 * the kind to apply, or FAULT_KINDS for none. REQUIRES: mu not held. */
static enum fault_kind sweep_count(fault_env *fe, enum fault_call c, const char *path)
{
    fe_lock(fe);
    wait_hold(fe, c);
    enum fault_kind k = FAULT_KINDS;
    if (fe->counting) {
        int stream = pthread_equal(pthread_self(), fe->main_thread) ? FAULT_STREAM_MAIN
                                                                    : FAULT_STREAM_OTHER;
        uint64_t index = fe->calls[stream]++;
        if (fe->trace != NULL)
            fe->trace(fe->trace_ctx, stream, index, c, path);
        if (fe->armed && !fe->fired && stream == fe->armed_stream && index == fe->armed_index &&
            fault_kind_applies(fe->armed_kind, c)) {
            fe->fired = true;
            fe->fired_call = c;
            snprintf(fe->fired_path, sizeof(fe->fired_path), "%s", path);
            k = fe->armed_kind;
            fe->disk_full = k == FAULT_DISK_FULL;
        }
        if (fe->disk_full && fault_kind_applies(FAULT_DISK_FULL, c))
            k = FAULT_DISK_FULL;
    }
    fe_unlock(fe);
    return k;
}

/* The sweep's part of call c on path: counts it and applies the armed
 * fault. Returns the error to fail the call with (NULL: go ahead); *lie
 * (NULL for calls that are no sync) is set when the call must do its work
 * and then report EIO. REQUIRES: neither mu nor cut held (a power cut
 * takes both). */
static lsm_status *sweep_call(fault_env *fe, enum fault_call c, const char *path, bool *lie)
{
    if (lie != NULL)
        *lie = false;
    switch (sweep_count(fe, c, path)) {
    case FAULT_EIO:
        return injected(EIO, call_names[c], path);
    case FAULT_ENOSPC:
    case FAULT_DISK_FULL:
        return injected(ENOSPC, call_names[c], path);
    case FAULT_POWER_CUT: {
        lsm_status *s = fault_env_power_cut(fe);
        if (s != NULL) /* the model broke: the test cannot go on sensibly */
            fprintf(stderr, "fault_env: %s\n", lsm_status_message(s));
        lsm_status_free(s);
        return c == FC_LOCK ? down_error("lock", path) : NULL;
    }
    case FAULT_SYNC_LIE:
        if (lie != NULL)
            *lie = true;
        return NULL;
    default:
        return NULL;
    }
}

/* What a lying sync reports after doing its work (s: its own outcome). */
static lsm_status *sync_lie(bool lie, lsm_status *s, const char *what, const char *path)
{
    if (!lie || s != NULL)
        return s;
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "%s %s (injected: reported failed, but done)", what, path);
    return status_from_errno(EIO, msg);
}

/* -------------------------------------------------------------- nodes */

/* REQUIRES: mu held. */
static struct fe_node *node_find(fault_env *fe, const char *path)
{
    assert_held(fe);
    for (struct fe_node *n = fe->nodes; n != NULL; n = n->next)
        if (strcmp(n->path, path) == 0)
            return n;
    return NULL;
}

/* REQUIRES: mu held. */
static void node_unref(fault_env *fe, struct fe_node *n)
{
    assert_held(fe);
    if (--n->refs == 0) {
        free(n->path);
        free(n);
    }
}

/* Takes n out of the table. REQUIRES: mu held. */
static void node_drop(fault_env *fe, struct fe_node *n)
{
    assert_held(fe);
    struct fe_node **pp = &fe->nodes;
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    node_unref(fe, n);
}

/* Renames the node at `from` (if any) to `to`. REQUIRES: mu held. */
static void node_move(fault_env *fe, const char *from, char *to_owned)
{
    assert_held(fe);
    struct fe_node *n = node_find(fe, from);
    if (n == NULL) {
        free(to_owned);
        return;
    }
    if (to_owned == NULL) { /* out of memory: stop tracking it */
        node_drop(fe, n);
        return;
    }
    free(n->path);
    n->path = to_owned;
}

/* ------------------------------------------------------- directory log */

/* REQUIRES: mu held. NULL if out of memory. */
static struct dirlog *dirlog_get(fault_env *fe, const char *dir)
{
    assert_held(fe);
    for (struct dirlog *d = fe->dirs; d != NULL; d = d->next)
        if (strcmp(d->dir, dir) == 0)
            return d;
    struct dirlog *d = calloc(1, sizeof(*d));
    if (d == NULL || (d->dir = strdup(dir)) == NULL) {
        free(d);
        return NULL;
    }
    d->next = fe->dirs;
    fe->dirs = d;
    return d;
}

static void undo_free(struct undo *u)
{
    free(u->name);
    free(u->from);
    free(u->backup);
    free(u);
}

/* Detaches dir's log (newest first); NULL if it has none. REQUIRES: mu held. */
static struct undo *dirlog_take(fault_env *fe, const char *dir)
{
    assert_held(fe);
    for (struct dirlog **pp = &fe->dirs; *pp != NULL; pp = &(*pp)->next) {
        struct dirlog *d = *pp;
        if (strcmp(d->dir, dir) == 0) {
            struct undo *ops = d->ops;
            *pp = d->next;
            free(d->dir);
            free(d);
            return ops;
        }
    }
    return NULL;
}

/* Forgets records made durable: their hidden files go for good.
 * REQUIRES: mu held. */
static void undo_commit(fault_env *fe, struct undo *u)
{
    assert_held(fe);
    while (u != NULL) {
        struct undo *next = u->next;
        if (u->backup != NULL) {
            lsm_status_free(fe->base->remove_file(fe->base, u->backup));
            struct fe_node *n = node_find(fe, u->backup);
            if (n != NULL)
                node_drop(fe, n);
        }
        undo_free(u);
        u = next;
    }
}

/* A fresh hidden name in path's directory. REQUIRES: mu held. */
static char *hidden_name(fault_env *fe, const char *path)
{
    assert_held(fe);
    char *dir = dir_of(path);
    if (dir == NULL)
        return NULL;
    char *name = NULL;
    if (asprintf(&name, "%s/" HIDDEN_PREFIX "%llu.bak", dir, (unsigned long long)++fe->hidden_seq) <
        0)
        name = NULL;
    free(dir);
    return name;
}

/* The log of the directory holding path, made ready before a change so
 * that recording the change cannot fail. NULL if out of memory.
 * REQUIRES: mu held. */
static struct dirlog *dirlog_for(fault_env *fe, const char *path)
{
    assert_held(fe);
    char *dir = dir_of(path);
    struct dirlog *d = dir != NULL ? dirlog_get(fe, dir) : NULL;
    free(dir);
    return d;
}

static void dirlog_push(struct dirlog *d, struct undo *u)
{
    u->next = d->ops;
    d->ops = u;
}

static struct undo *undo_new(enum undo_kind kind, const char *name, const char *from)
{
    struct undo *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return NULL;
    u->kind = kind;
    u->name = strdup(name);
    u->from = from != NULL ? strdup(from) : NULL;
    if (u->name == NULL || (from != NULL && u->from == NULL)) {
        undo_free(u);
        return NULL;
    }
    return u;
}

/* ------------------------------------------------------ open file list */

static bool handle_init(struct fe_handle *h, const char *path)
{
    h->dead = false;
    h->prev = h->next = NULL;
    h->path = strdup(path);
    return h->path != NULL;
}

/* REQUIRES: mu held. */
static void handle_link(fault_env *fe, struct fe_handle *h)
{
    assert_held(fe);
    h->next = fe->open.next;
    h->prev = &fe->open;
    fe->open.next->prev = h;
    fe->open.next = h;
}

/* REQUIRES: mu held. */
static void handle_unlink(fault_env *fe, struct fe_handle *h)
{
    assert_held(fe);
    h->prev->next = h->next;
    h->next->prev = h->prev;
    free(h->path);
}

/* The checks before operation `what` (of kind `op`) on an open file: dead
 * since a power cut, or an injected failure. NULL if it may go ahead. */
static lsm_status *file_check(fault_env *fe, struct fe_handle *h, unsigned op, const char *what)
{
    if (h->dead)
        return dead_error(what, h->path);
    int err = should_fail(fe, op, h->path, NULL);
    return err != 0 ? injected(err, what, h->path) : NULL;
}

/* -------------------------------------------------------------- wfile */

struct fe_wfile {
    lsm_wfile base;
    struct fe_handle h;
    fault_env *fe;
    lsm_wfile *file;      /* the base env's file */
    struct fe_node *node; /* holds a reference */
};

static lsm_status *fw_append(lsm_wfile *wf, const void *data, size_t n)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    fault_env *fe = f->fe;
    lsm_status *swept = sweep_call(fe, FC_APPEND, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(fe);
    lsm_status *s = file_check(fe, &f->h, FAULT_WRITE, "append");
    if (s == NULL)
        s = f->file->ops->append(f->file, data, n);
    if (s == NULL)
        s = f->file->ops->flush(f->file);
    if (s == NULL) {
        fe_lock(fe);
        f->node->size += n;
        fe_unlock(fe);
    }
    op_end(fe);
    return s;
}

static lsm_status *fw_flush(lsm_wfile *wf)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    fault_env *fe = f->fe;
    lsm_status *swept = sweep_call(fe, FC_FLUSH, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(fe);
    lsm_status *s = file_check(fe, &f->h, FAULT_WRITE, "flush");
    if (s == NULL)
        s = f->file->ops->flush(f->file);
    op_end(fe);
    return s;
}

/* With lost writeback, a failed sync loses what it was to write.
 * REQUIRES: mu held. */
static void sync_failed(fault_env *fe, struct fe_node *n)
{
    assert_held(fe);
    if (fe->lost_writeback && n != NULL && n->synced < n->lost)
        n->lost = n->synced;
}

static lsm_status *fw_sync(lsm_wfile *wf)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    fault_env *fe = f->fe;
    bool lie;
    lsm_status *swept = sweep_call(fe, FC_SYNC, f->h.path, &lie);
    if (swept != NULL) {
        fe_lock(fe);
        sync_failed(fe, f->node);
        fe_unlock(fe);
        return swept;
    }
    op_begin(fe);
    fe_lock(fe);
    bool late = fe->sync_fails_late;
    fe_unlock(fe);
    lsm_status *s = late ? NULL : file_check(fe, &f->h, FAULT_SYNC, "sync");
    if (s == NULL) {
        fe_lock(fe);
        uint64_t delay = fe->sync_delay_us;
        uint64_t size = f->node->size; /* appended before this sync began */
        fe_unlock(fe);
        if (delay > 0)
            fe->base->sleep_micros(fe->base, delay);
        if (late)
            s = file_check(fe, &f->h, FAULT_SYNC, "sync");
        if (s == NULL)
            s = f->file->ops->sync(f->file);
        if (s == NULL) {
            fe_lock(fe);
            if (size > f->node->synced)
                f->node->synced = size;
            fe->syncs++;
            fe_unlock(fe);
        }
    }
    if (s != NULL) {
        fe_lock(fe);
        sync_failed(fe, f->node);
        fe_unlock(fe);
    }
    op_end(fe);
    return sync_lie(lie, s, "sync", f->h.path);
}

static lsm_status *fw_preallocate(lsm_wfile *wf, uint64_t len, enum wfile_space mode)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    lsm_status *swept = sweep_call(f->fe, FC_PREALLOC, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(f->fe);
    lsm_status *s =
        f->h.dead ? dead_error("preallocate", f->h.path) : f->file->ops->preallocate(f->file, len, mode);
    op_end(f->fe);
    return s;
}

static lsm_status *fw_close(lsm_wfile *wf)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    fault_env *fe = f->fe;
    /* A close that fails still closes (the env's contract). */
    lsm_status *swept = sweep_call(fe, FC_CLOSE, f->h.path, NULL);
    op_begin(fe);
    /* A dead file's base buffer is empty (appends flush at once), so this
     * close writes nothing; it still reports that the file died. */
    lsm_status *s = f->file->ops->close(f->file);
    if (f->h.dead && s == NULL)
        s = dead_error("close", f->h.path);
    fe_lock(fe);
    handle_unlink(fe, &f->h);
    node_unref(fe, f->node);
    fe_unlock(fe);
    op_end(fe);
    free(f);
    if (swept != NULL) {
        lsm_status_free(s);
        return swept;
    }
    return s;
}

/* A hint, not an I/O call: passed to the file below (never fails). */
static void fw_hold_for_sync(lsm_wfile *wf, bool on)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    fe_lock(f->fe);
    f->fe->last_hold = on;
    f->fe->holds += on;
    fe_unlock(f->fe);
    if (f->file->ops->hold_for_sync != NULL)
        f->file->ops->hold_for_sync(f->file, on);
}

/* A hint, not an I/O call: passed to the file below. */
static void fw_write_through(lsm_wfile *wf)
{
    struct fe_wfile *f = (struct fe_wfile *)wf;
    if (f->file->ops->write_through != NULL)
        f->file->ops->write_through(f->file);
}

static const struct lsm_wfile_ops fw_ops = {
    .append = fw_append,
    .flush = fw_flush,
    .sync = fw_sync,
    .preallocate = fw_preallocate,
    .close = fw_close,
    .hold_for_sync = fw_hold_for_sync,
    .write_through = fw_write_through,
};

/* Creates or resets the node of a file just opened for writing (empty,
 * nothing synced) and takes a reference for the open file.
 * REQUIRES: mu held. */
static struct fe_node *node_open(fault_env *fe, const char *path, struct fe_node *spare)
{
    assert_held(fe);
    struct fe_node *n = node_find(fe, path);
    if (n == NULL) {
        n = spare;
        n->refs = 1;
        n->next = fe->nodes;
        fe->nodes = n;
    } else {
        free(spare->path);
        free(spare);
    }
    n->size = n->synced = 0;
    n->lost = UINT64_MAX;
    n->refs++;
    return n;
}

/* The directory-side half of new_wfile. REQUIRES: mu held. */
static lsm_status *create_locked(fault_env *fe, const char *path, struct fe_wfile *f,
                                 struct fe_node *spare, struct undo *u)
{
    assert_held(fe);
    struct dirlog *d = dirlog_for(fe, path);
    if (d == NULL)
        return oom("create", path);
    bool existed = fe->base->file_exists(fe->base, path);
    lsm_status *s = fe->base->new_wfile(fe->base, path, &f->file);
    if (s != NULL)
        return s;
    if (existed)
        undo_free(u);
    else
        dirlog_push(d, u);
    f->node = node_open(fe, path, spare);
    handle_link(fe, &f->h);
    return NULL;
}

static lsm_status *fe_new_wfile(lsm_env *env, const char *path, lsm_wfile **out)
{
    fault_env *fe = fe_of(env);
    *out = NULL;
    lsm_status *swept = sweep_call(fe, FC_CREATE, path, NULL);
    if (swept != NULL)
        return swept;
    int err = should_fail(fe, FAULT_CREATE, path, NULL);
    if (err != 0)
        return injected(err, "create", path);
    struct fe_wfile *f = calloc(1, sizeof(*f));
    struct fe_node *spare = calloc(1, sizeof(*spare));
    struct undo *u = undo_new(UNDO_CREATE, path, NULL);
    if (f == NULL || spare == NULL || u == NULL || !handle_init(&f->h, path) ||
        (spare->path = strdup(path)) == NULL) {
        if (f != NULL)
            free(f->h.path);
        free(f);
        if (spare != NULL)
            free(spare->path);
        free(spare);
        if (u != NULL)
            undo_free(u);
        return oom("create", path);
    }
    f->base.ops = &fw_ops;
    f->fe = fe;
    op_begin(fe);
    fe_lock(fe);
    lsm_status *s = down_locked(fe, "create", path);
    if (s == NULL)
        s = create_locked(fe, path, f, spare, u);
    fe_unlock(fe);
    op_end(fe);
    if (s != NULL) {
        free(f->h.path);
        free(f);
        free(spare->path);
        free(spare);
        undo_free(u);
        return s;
    }
    *out = &f->base;
    return NULL;
}

/* ------------------------------------------------------- sfile, rfile */

/* A file opened for reading through the base env, front to back (an
 * sfile) or at offsets (an rfile). */
struct fe_reader {
    union {
        lsm_sfile s;
        lsm_rfile r;
    } base;
    struct fe_handle h;
    fault_env *fe;
    union {
        lsm_sfile *s;
        lsm_rfile *r;
    } file; /* the base env's file, of the same kind */
};

/* The end of a close, once the base file is closed: forgets the handle,
 * ends the operation and frees f. */
static void reader_closed(struct fe_reader *f)
{
    fe_lock(f->fe);
    handle_unlink(f->fe, &f->h);
    fe_unlock(f->fe);
    op_end(f->fe);
    free(f);
}

static lsm_status *fs_read(lsm_sfile *sf, void *buf, size_t n, size_t *got)
{
    struct fe_reader *f = (struct fe_reader *)sf;
    *got = 0;
    lsm_status *swept = sweep_call(f->fe, FC_READ, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(f->fe);
    lsm_status *s = file_check(f->fe, &f->h, FAULT_READ, "read");
    if (s == NULL)
        s = f->file.s->ops->read(f->file.s, buf, n, got);
    op_end(f->fe);
    return s;
}

static lsm_status *fs_skip(lsm_sfile *sf, uint64_t n)
{
    struct fe_reader *f = (struct fe_reader *)sf;
    lsm_status *swept = sweep_call(f->fe, FC_SKIP, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(f->fe);
    lsm_status *s = f->h.dead ? dead_error("skip", f->h.path) : f->file.s->ops->skip(f->file.s, n);
    op_end(f->fe);
    return s;
}

static void fs_close(lsm_sfile *sf)
{
    struct fe_reader *f = (struct fe_reader *)sf;
    op_begin(f->fe);
    f->file.s->ops->close(f->file.s);
    reader_closed(f);
}

/* pread, or (point) read_point: the same faults either way. */
static lsm_status *fr_read(lsm_rfile *rf, bool point, uint64_t off, void *buf, size_t n,
                           size_t *got)
{
    struct fe_reader *f = (struct fe_reader *)rf;
    *got = 0;
    lsm_status *swept = sweep_call(f->fe, FC_PREAD, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(f->fe);
    lsm_status *s = file_check(f->fe, &f->h, FAULT_READ, "read");
    if (s == NULL)
        s = point ? env_read_point(f->file.r, off, buf, n, got)
                  : f->file.r->ops->pread(f->file.r, off, buf, n, got);
    op_end(f->fe);
    return s;
}

static lsm_status *fr_pread(lsm_rfile *rf, uint64_t off, void *buf, size_t n, size_t *got)
{
    return fr_read(rf, false, off, buf, n, got);
}

static lsm_status *fr_read_point(lsm_rfile *rf, uint64_t off, void *buf, size_t n, size_t *got)
{
    return fr_read(rf, true, off, buf, n, got);
}

static lsm_status *fr_map(lsm_rfile *rf, uint64_t size)
{
    struct fe_reader *f = (struct fe_reader *)rf;
    lsm_status *swept = sweep_call(f->fe, FC_MAP, f->h.path, NULL);
    if (swept != NULL)
        return swept;
    op_begin(f->fe);
    lsm_status *s = file_check(f->fe, &f->h, FAULT_MAP, "map");
    if (s == NULL)
        s = f->file.r->ops->map != NULL
                ? f->file.r->ops->map(f->file.r, size)
                : status_new(LSM_NOT_SUPPORTED, "map %s: the base env cannot", f->h.path);
    op_end(f->fe);
    return s;
}

static void fr_close(lsm_rfile *rf)
{
    struct fe_reader *f = (struct fe_reader *)rf;
    op_begin(f->fe);
    f->file.r->ops->close(f->file.r);
    reader_closed(f);
}

static const struct lsm_sfile_ops fs_ops = {.read = fs_read, .skip = fs_skip, .close = fs_close};
static const struct lsm_rfile_ops fr_ops = {
    .pread = fr_pread, .close = fr_close, .map = fr_map, .read_point = fr_read_point};

/* Opens path on the base env as an sfile (sequential) or an rfile, and
 * links it into the list of open files (so that a power cut kills it). */
static lsm_status *new_reader(fault_env *fe, const char *path, bool sequential,
                              struct fe_reader **out)
{
    *out = NULL;
    lsm_status *swept = sweep_call(fe, FC_OPEN_READ, path, NULL);
    if (swept != NULL)
        return swept;
    struct fe_reader *f = calloc(1, sizeof(*f));
    if (f == NULL || !handle_init(&f->h, path)) {
        free(f);
        return oom("open", path);
    }
    f->fe = fe;
    op_begin(fe);
    lsm_status *s;
    if (sequential) {
        f->base.s.ops = &fs_ops;
        s = fe->base->new_sfile(fe->base, path, &f->file.s);
    } else {
        f->base.r.ops = &fr_ops;
        s = fe->base->new_rfile(fe->base, path, &f->file.r);
    }
    if (s == NULL) {
        fe_lock(fe);
        handle_link(fe, &f->h);
        fe_unlock(fe);
    }
    op_end(fe);
    if (s != NULL) {
        free(f->h.path);
        free(f);
        return s;
    }
    *out = f;
    return NULL;
}

static lsm_status *fe_new_sfile(lsm_env *env, const char *path, lsm_sfile **out)
{
    struct fe_reader *f;
    lsm_status *s = new_reader(fe_of(env), path, true, &f);
    *out = f != NULL ? &f->base.s : NULL;
    return s;
}

static lsm_status *fe_new_rfile(lsm_env *env, const char *path, lsm_rfile **out)
{
    struct fe_reader *f;
    lsm_status *s = new_reader(fe_of(env), path, false, &f);
    *out = f != NULL ? &f->base.r : NULL;
    return s;
}

/* ---------------------------------------------------- directory ops */

static bool fe_file_exists(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    return fe->base->file_exists(fe->base, path);
}

static bool is_hidden(const char *name)
{
    return strncmp(name, HIDDEN_PREFIX, strlen(HIDDEN_PREFIX)) == 0;
}

static lsm_status *fe_get_children(lsm_env *env, const char *dir, char ***names, int *n)
{
    fault_env *fe = fe_of(env);
    *names = NULL;
    *n = 0;
    lsm_status *s = sweep_call(fe, FC_LIST, dir, NULL);
    if (s != NULL)
        return s;
    s = fe->base->get_children(fe->base, dir, names, n);
    if (s != NULL)
        return s;
    int kept = 0;
    for (int i = 0; i < *n; i++) {
        if (is_hidden((*names)[i]))
            free((*names)[i]);
        else
            (*names)[kept++] = (*names)[i];
    }
    *n = kept;
    return NULL;
}

/* REQUIRES: mu held. */
static lsm_status *remove_locked(fault_env *fe, const char *path, struct undo *u)
{
    assert_held(fe);
    if (!fe->base->file_exists(fe->base, path))
        return fe->base->remove_file(fe->base, path); /* the base's own error */
    struct dirlog *d = dirlog_for(fe, path);
    u->backup = hidden_name(fe, path);
    char *node_name = u->backup != NULL ? strdup(u->backup) : NULL;
    if (d == NULL || node_name == NULL) {
        free(node_name);
        return oom("remove", path);
    }
    lsm_status *s = fe->base->rename_file(fe->base, path, u->backup);
    if (s != NULL) {
        free(node_name);
        return status_wrap(s, "remove %s", path);
    }
    node_move(fe, path, node_name);
    dirlog_push(d, u);
    return NULL;
}

static lsm_status *fe_remove_file(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    fe_lock(fe);
    fault_remove_hook hook = fe->remove_hook;
    void *hook_ctx = fe->remove_ctx;
    fe_unlock(fe);
    if (hook != NULL)
        hook(hook_ctx, path);
    lsm_status *swept = sweep_call(fe, FC_REMOVE, path, NULL);
    if (swept != NULL)
        return swept;
    struct undo *u = undo_new(UNDO_REMOVE, path, NULL);
    if (u == NULL)
        return oom("remove", path);
    op_begin(fe);
    fe_lock(fe);
    lsm_status *s = down_locked(fe, "remove", path);
    if (s == NULL)
        s = remove_locked(fe, path, u);
    bool logged = s == NULL;
    fe_unlock(fe);
    op_end(fe);
    if (!logged)
        undo_free(u);
    return s;
}

/* from + rest of path, where path begins with the directory from/; NULL
 * when it does not (or out of memory). */
static char *moved_path(const char *path, const char *from, const char *to)
{
    size_t n = strlen(from);
    if (strncmp(path, from, n) != 0 || path[n] != '/')
        return NULL;
    char *p = NULL;
    return asprintf(&p, "%s%s", to, path + n) < 0 ? NULL : p;
}

static void repath(char **path, const char *from, const char *to)
{
    char *p = *path != NULL ? moved_path(*path, from, to) : NULL;
    if (p != NULL) {
        free(*path);
        *path = p;
    }
}

/* A directory renamed from -> to: the files below it and its log go with
 * it (a power cut then finds them by their new names). REQUIRES: mu held. */
static void move_below(fault_env *fe, const char *from, const char *to)
{
    assert_held(fe);
    for (struct fe_node *n = fe->nodes; n != NULL; n = n->next)
        repath(&n->path, from, to);
    for (struct dirlog *d = fe->dirs; d != NULL; d = d->next) {
        if (strcmp(d->dir, from) == 0) {
            char *t = strdup(to);
            if (t != NULL) {
                free(d->dir);
                d->dir = t;
            }
        } else {
            repath(&d->dir, from, to);
        }
        for (struct undo *u = d->ops; u != NULL; u = u->next) {
            repath(&u->name, from, to);
            repath(&u->from, from, to);
            repath(&u->backup, from, to);
        }
    }
}

/* REQUIRES: mu held. */
static lsm_status *rename_locked(fault_env *fe, const char *from, const char *to, struct undo *u)
{
    assert_held(fe);
    struct dirlog *d = dirlog_for(fe, to);
    char *to_name = strdup(to);
    if (d == NULL || to_name == NULL) {
        free(to_name);
        return oom("rename", from);
    }
    if (fe->base->file_exists(fe->base, to)) {
        char *node_name = NULL;
        if ((u->backup = hidden_name(fe, to)) == NULL || (node_name = strdup(u->backup)) == NULL) {
            free(to_name);
            return oom("rename", from);
        }
        lsm_status *s = fe->base->rename_file(fe->base, to, u->backup);
        if (s != NULL) {
            free(to_name);
            free(node_name);
            return s;
        }
        node_move(fe, to, node_name);
    }
    lsm_status *s = fe->base->rename_file(fe->base, from, to);
    if (s != NULL) {
        if (u->backup != NULL) { /* put the destination back as it was */
            lsm_status_free(fe->base->rename_file(fe->base, u->backup, to));
            node_move(fe, u->backup, strdup(to));
        }
        free(to_name);
        return s;
    }
    node_move(fe, from, to_name);
    move_below(fe, from, to);
    dirlog_push(d, u);
    return NULL;
}

static lsm_status *fe_rename_file(lsm_env *env, const char *from, const char *to)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_RENAME, from, NULL);
    if (swept != NULL)
        return swept;
    int err = should_fail(fe, FAULT_RENAME, from, to);
    if (err != 0)
        return injected(err, "rename", from);
    if (strcmp(from, to) == 0)
        return fe->base->rename_file(fe->base, from, to);
    struct undo *u = undo_new(UNDO_RENAME, to, from);
    if (u == NULL)
        return oom("rename", from);
    op_begin(fe);
    fe_lock(fe);
    lsm_status *s = down_locked(fe, "rename", from);
    if (s == NULL)
        s = rename_locked(fe, from, to, u);
    fe_unlock(fe);
    op_end(fe);
    if (s != NULL)
        undo_free(u);
    return s;
}

/* A new name is a create in to's directory: a cut before that directory
 * is synced removes it (the file itself keeps its other name and data). */
static lsm_status *fe_link_file(lsm_env *env, const char *from, const char *to)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_LINK, to, NULL);
    if (swept != NULL)
        return swept;
    int err = should_fail(fe, FAULT_CREATE, to, from);
    if (err != 0)
        return injected(err, "link", to);
    if (fe->base->link_file == NULL)
        return status_new(LSM_NOT_SUPPORTED, "link %s: the base env has no links", to);
    struct undo *u = undo_new(UNDO_CREATE, to, NULL);
    if (u == NULL)
        return oom("link", to);
    op_begin(fe);
    fe_lock(fe);
    struct dirlog *d = dirlog_for(fe, to);
    lsm_status *s = down_locked(fe, "link", to);
    if (s == NULL && d == NULL)
        s = oom("link", to);
    if (s == NULL)
        s = fe->base->link_file(fe->base, from, to);
    if (s == NULL)
        dirlog_push(d, u);
    fe_unlock(fe);
    op_end(fe);
    if (s != NULL)
        undo_free(u);
    return s;
}

static lsm_status *fe_create_dir(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_MKDIR, path, NULL);
    if (swept != NULL)
        return swept;
    /* An existing directory is no change (the store's open asks for its
     * own before it locks it). */
    lsm_status *down = fe->base->file_exists(fe->base, path) ? NULL : down_check(fe, "mkdir", path);
    return down != NULL ? down : fe->base->create_dir(fe->base, path);
}

/* A change the fault env keeps no record of: counted, then refused while
 * the power is off. NULL if it may go ahead. */
static lsm_status *untracked_change(fault_env *fe, enum fault_call c, const char *what,
                                    const char *path)
{
    lsm_status *s = sweep_call(fe, c, path, NULL);
    return s != NULL ? s : down_check(fe, what, path);
}

/* Directories are durable at once here (see the top), new ones too. */
static lsm_status *fe_create_dir_new(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    lsm_status *s = untracked_change(fe, FC_MKDIR, "mkdir", path);
    return s != NULL ? s : fe->base->create_dir_new(fe->base, path);
}

static lsm_status *fe_path_info(lsm_env *env, const char *path, lsm_path_info *out)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_STAT, path, NULL);
    return swept != NULL ? swept : fe->base->path_info(fe->base, path, out);
}

static lsm_status *fe_make_private(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    lsm_status *s = untracked_change(fe, FC_CHMOD, "chmod", path);
    return s != NULL ? s : fe->base->make_private(fe->base, path);
}

static lsm_status *fe_remove_dir(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_RMDIR, path, NULL);
    if (swept != NULL)
        return swept;
    lsm_status *down = down_check(fe, "rmdir", path);
    if (down != NULL)
        return down;
    char *dir = dir_norm(path);
    if (dir == NULL)
        return oom("rmdir", path);
    op_begin(fe);
    fe_lock(fe);
    undo_commit(fe, dirlog_take(fe, dir));
    lsm_status *s = fe->base->remove_dir(fe->base, path);
    fe_unlock(fe);
    op_end(fe);
    free(dir);
    return s;
}

static lsm_status *fe_file_size(lsm_env *env, const char *path, uint64_t *size)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_FILE_SIZE, path, NULL);
    return swept != NULL ? swept : fe->base->file_size(fe->base, path, size);
}

/* Puts records that did not become durable back at the old end of dir's log.
 * REQUIRES: mu held. */
static void dirlog_restore(fault_env *fe, const char *dir, struct undo *ops)
{
    assert_held(fe);
    if (ops == NULL)
        return;
    struct dirlog *d = dirlog_get(fe, dir);
    if (d == NULL) {
        undo_commit(fe, ops); /* out of memory: treat them as durable */
        return;
    }
    struct undo **pp = &d->ops;
    while (*pp != NULL)
        pp = &(*pp)->next;
    *pp = ops;
}

static lsm_status *fe_sync_file(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    bool lie;
    lsm_status *swept = sweep_call(fe, FC_SYNC_FILE, path, &lie);
    if (swept != NULL) {
        fe_lock(fe);
        sync_failed(fe, node_find(fe, path));
        fe_unlock(fe);
        return swept;
    }
    int err = should_fail(fe, FAULT_SYNC, path, NULL);
    if (err != 0) {
        fe_lock(fe);
        sync_failed(fe, node_find(fe, path));
        fe_unlock(fe);
        return injected(err, "sync", path);
    }
    op_begin(fe);
    lsm_status *s = fe->base->sync_file(fe->base, path);
    if (s == NULL) {
        fe_lock(fe);
        struct fe_node *n = node_find(fe, path);
        if (n)
            n->synced = n->size; /* everything handed to the base file */
        fe->syncs++;
        fe_unlock(fe);
    }
    op_end(fe);
    return sync_lie(lie, s, "sync", path);
}

/* Truncation is a write: FAULT_WRITE failures apply to it, but for ENOSPC
 * (a file cut back needs no space, as on a real full disk). */
static lsm_status *fe_truncate_file(lsm_env *env, const char *path, uint64_t len)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_TRUNCATE, path, NULL);
    if (swept != NULL)
        return swept;
    int err = should_fail(fe, FAULT_WRITE, path, NULL);
    if (err != 0 && err != ENOSPC)
        return injected(err, "truncate", path);
    op_begin(fe);
    lsm_status *s = fe->base->truncate_file(fe->base, path, len);
    if (s == NULL) {
        fe_lock(fe);
        struct fe_node *n = node_find(fe, path);
        if (n && n->size > len)
            n->size = len;
        if (n && n->synced > len)
            n->synced = len;
        fe_unlock(fe);
    }
    op_end(fe);
    return s;
}

static lsm_status *fe_sync_dir(lsm_env *env, const char *path)
{
    fault_env *fe = fe_of(env);
    bool lie;
    lsm_status *swept = sweep_call(fe, FC_SYNC_DIR, path, &lie);
    if (swept != NULL)
        return swept;
    int err = should_fail(fe, FAULT_SYNC_DIR, path, NULL);
    if (err != 0)
        return injected(err, "sync directory", path);
    char *dir = dir_norm(path);
    if (dir == NULL)
        return oom("sync directory", path);
    op_begin(fe);
    /* The records logged so far become durable with this sync; ones logged
     * while it runs wait for the next. */
    fe_lock(fe);
    struct undo *ops = dirlog_take(fe, dir);
    fe_unlock(fe);
    lsm_status *s = fe->base->sync_dir(fe->base, path);
    fe_lock(fe);
    if (s == NULL) {
        undo_commit(fe, ops);
        fe->dir_syncs++;
    } else {
        dirlog_restore(fe, dir, ops);
    }
    fe_unlock(fe);
    op_end(fe);
    free(dir);
    return sync_lie(lie, s, "sync directory", path);
}

void fault_env_restart(fault_env *fe)
{
    fe_lock(fe);
    fe->down = false;
    fe_unlock(fe);
}

/* A store opening: the machine was restarted, the power is on again. */
static lsm_status *fe_lock_file(lsm_env *env, const char *path, lsm_filelock **out)
{
    fault_env *fe = fe_of(env);
    *out = NULL;
    lsm_status *swept = sweep_call(fe, FC_LOCK, path, NULL);
    if (swept != NULL)
        return swept;
    fault_env_restart(fe);
    return fe->base->lock_file(fe->base, path, out);
}

/* A read-only open is no restart: the power stays as it is. */
static lsm_status *fe_lock_file_shared(lsm_env *env, const char *path, lsm_filelock **out)
{
    fault_env *fe = fe_of(env);
    *out = NULL;
    lsm_status *swept = sweep_call(fe, FC_LOCK, path, NULL);
    if (swept != NULL)
        return swept;
    if (fe->base->lock_file_shared == NULL)
        return NULL; /* as the store does without one: no lock */
    return fe->base->lock_file_shared(fe->base, path, out);
}

static lsm_status *fe_unlock_file(lsm_env *env, lsm_filelock *lock)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_UNLOCK, "LOCK", NULL);
    lsm_status *s = fe->base->unlock_file(fe->base, lock); /* frees lock in every case */
    if (swept != NULL) {
        lsm_status_free(s);
        return swept;
    }
    return s;
}

static lsm_status *fe_disk_free(lsm_env *env, const char *path, uint64_t *total, uint64_t *avail)
{
    fault_env *fe = fe_of(env);
    lsm_status *swept = sweep_call(fe, FC_DISK_FREE, path, NULL);
    if (swept != NULL)
        return swept;
    int err = should_fail(fe, FAULT_DISK_FREE, path, NULL);
    if (err != 0)
        return injected(err, "disk_free", path);
    lsm_status *s = fe->base->disk_free(fe->base, path, total, avail);
    fe_lock(fe);
    if (s == NULL && fe->avail_set && *avail > fe->avail_max)
        *avail = fe->avail_max;
    if (s == NULL && fe->disk_full)
        *avail = 0;
    fe_unlock(fe);
    return s;
}

static uint64_t fe_now_micros(lsm_env *env)
{
    fault_env *fe = fe_of(env);
    return fe->base->now_micros(fe->base) + atomic_load(&fe->clock_ahead_us);
}

void fault_env_advance_clock(fault_env *fe, uint64_t us)
{
    atomic_fetch_add(&fe->clock_ahead_us, us);
}

static void fe_sleep_micros(lsm_env *env, uint64_t us)
{
    fault_env *fe = fe_of(env);
    fe_lock(fe);
    if (fe->max_sleep_us > 0 && us > fe->max_sleep_us)
        us = fe->max_sleep_us;
    fe_unlock(fe);
    fe->base->sleep_micros(fe->base, us);
}

/* ----------------------------------------------------------- power cut */

/* Cuts the file at path down to len bytes using only base env calls
 * (read the prefix, rewrite the file). */
static lsm_status *truncate_file(lsm_env *base, const char *path, uint64_t len)
{
    uint64_t size;
    if (base->file_size(base, path, &size) != NULL || size <= len)
        return NULL; /* gone already, or nothing unsynced reached it */
    char *data = malloc(len > 0 ? (size_t)len : 1);
    if (data == NULL)
        return oom("power cut: truncate", path);
    lsm_rfile *rf;
    size_t got = 0;
    lsm_status *s = base->new_rfile(base, path, &rf);
    if (s == NULL) {
        s = rf->ops->pread(rf, 0, data, (size_t)len, &got);
        rf->ops->close(rf);
    }
    if (s == NULL && got != len)
        s = status_new(LSM_IO_ERROR, "power cut: %s shrank behind the fault env", path);
    if (s == NULL)
        s = env_write_file_sync(base, path, data, (size_t)len);
    free(data);
    return s;
}

/* Reverses one directory change on the base. */
static lsm_status *undo_apply(lsm_env *base, const struct undo *u)
{
    lsm_status *s = NULL;
    switch (u->kind) {
    case UNDO_CREATE:
        if (base->file_exists(base, u->name))
            s = base->remove_file(base, u->name);
        break;
    case UNDO_RENAME:
        if (base->file_exists(base, u->name))
            s = base->rename_file(base, u->name, u->from);
        if (s == NULL && u->backup != NULL)
            s = base->rename_file(base, u->backup, u->name);
        break;
    case UNDO_REMOVE:
        s = base->rename_file(base, u->backup, u->name);
        break;
    }
    return s;
}

/* REQUIRES: mu held, cut held for writing. */
static lsm_status *power_cut_locked(fault_env *fe)
{
    assert_held(fe);
    lsm_status *first = NULL;
    fe->down = true;
    for (struct fe_handle *h = fe->open.next; h != &fe->open; h = h->next)
        h->dead = true;
    for (struct fe_node *n = fe->nodes; n != NULL; n = n->next)
        status_keep_first(&first,
                   truncate_file(fe->base, n->path, n->synced < n->lost ? n->synced : n->lost));
    while (fe->dirs != NULL) {
        struct dirlog *d = fe->dirs;
        fe->dirs = d->next;
        for (struct undo *u = d->ops; u != NULL;) {
            struct undo *next = u->next;
            status_keep_first(&first, undo_apply(fe->base, u));
            undo_free(u);
            u = next;
        }
        free(d->dir);
        free(d);
    }
    /* What is on the disk now is all durable. */
    while (fe->nodes != NULL)
        node_drop(fe, fe->nodes);
    return status_wrap(first, "power cut");
}

lsm_status *fault_env_power_cut(fault_env *fe)
{
    pthread_rwlock_wrlock(&fe->cut);
    fe_lock(fe);
    lsm_status *s = power_cut_locked(fe);
    fe_unlock(fe);
    pthread_rwlock_unlock(&fe->cut);
    return s;
}

/* ------------------------------------------------------- construction */

static const lsm_env fault_env_ops = {
    .new_wfile = fe_new_wfile,
    .new_sfile = fe_new_sfile,
    .new_rfile = fe_new_rfile,
    .file_exists = fe_file_exists,
    .get_children = fe_get_children,
    .remove_file = fe_remove_file,
    .rename_file = fe_rename_file,
    .link_file = fe_link_file,
    .create_dir = fe_create_dir,
    .create_dir_new = fe_create_dir_new,
    .path_info = fe_path_info,
    .make_private = fe_make_private,
    .remove_dir = fe_remove_dir,
    .file_size = fe_file_size,
    .sync_file = fe_sync_file,
    .truncate_file = fe_truncate_file,
    .sync_dir = fe_sync_dir,
    .lock_file = fe_lock_file,
    .unlock_file = fe_unlock_file,
    .lock_file_shared = fe_lock_file_shared,
    .disk_free = fe_disk_free,
    .now_micros = fe_now_micros,
    .sleep_micros = fe_sleep_micros,
};

fault_env *fault_env_new(lsm_env *base)
{
    fault_env *fe = calloc(1, sizeof(*fe));
    if (fe == NULL)
        return NULL;
    fe->last_hold = -1;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* A power cut must not wait forever behind a stream of operations. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int r = pthread_rwlock_init(&fe->cut, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (r != 0) {
        free(fe);
        return NULL;
    }
    if (pthread_mutex_init(&fe->mu, NULL) != 0) {
        pthread_rwlock_destroy(&fe->cut);
        free(fe);
        return NULL;
    }
    if (pthread_cond_init(&fe->hold_cv, NULL) != 0) {
        pthread_mutex_destroy(&fe->mu);
        pthread_rwlock_destroy(&fe->cut);
        free(fe);
        return NULL;
    }
    fe->env = fault_env_ops;
    fe->base = base;
    fe->open.next = fe->open.prev = &fe->open;
    return fe;
}

lsm_env *fault_env_env(fault_env *fe)
{
    return &fe->env;
}

void fault_env_free(fault_env *fe)
{
    if (fe == NULL)
        return;
    fault_env_clear_failures(fe);
    fe_lock(fe);
    assert(fe->open.next == &fe->open); /* every file closed */
    /* No power cut came: pending removes and replaced files go for good. */
    while (fe->dirs != NULL) {
        struct dirlog *d = fe->dirs;
        fe->dirs = d->next;
        undo_commit(fe, d->ops);
        free(d->dir);
        free(d);
    }
    while (fe->nodes != NULL)
        node_drop(fe, fe->nodes);
    fe_unlock(fe);
    pthread_cond_destroy(&fe->hold_cv);
    pthread_mutex_destroy(&fe->mu);
    pthread_rwlock_destroy(&fe->cut);
    free(fe);
}
