/*
 * env_rados.h — an lsm_env over Ceph RADOS (librados' C API).
 *
 * Paths are relative to the env's pool: "mail1/000005.log". Every directory
 * is one RADOS object whose omap maps a name to "f:OID" (a file: its own
 * object) or "d:ID" (a subdirectory: object "lsmfs.d.ID"); "lsmfs.root" is
 * the pool's top directory. A rename is one write op on the directory
 * object, so CURRENT's publish stays atomic; a file object counts its names
 * (xattr lsmfs.refs), so link_file is copy-free and remove_file drops the
 * object with its last name. Appends are buffered and sent with
 * rados_aio_write_op_operate, pipelined (a bounded number in flight per
 * file); while the store says a sync is coming (hold_for_sync), a flush
 * keeps its bytes for that sync's send; a sync waits for the OSDs'
 * acknowledgement of everything appended before it (an OSD acknowledges
 * once every replica has the write), so sync_dir has nothing left to do
 * and sync_file (and truncate_file) only waits for the answers to what the
 * file's open writers have sent (env_rados_wfile.c).
 *
 * lock_file is a lease and a fence (see env_rados_lease.c): an exclusive
 * RADOS lock with a duration on the directory's object (and, as env.h
 * says, the file itself, empty), renewed by a thread; once held, every write
 * op the env sends carries a cmpxattr guard on the store's fence epoch, so
 * a writer that another host has taken over from has every write refused
 * by the OSDs (EIO to the store), and a lease that could not be renewed in
 * time makes the env refuse writes to its store's tree itself before it
 * can lapse. One store writer per env.
 */
#ifndef LSM_ENV_RADOS_H
#define LSM_ENV_RADOS_H

#include "env.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct env_rados_options {
    const char *pool;      /* required */
    const char *ceph_conf; /* NULL: $CEPH_CONF, else /etc/ceph/ceph.conf */
    const char *ceph_id;   /* NULL: "admin" (client.admin); "client." prefix optional */
    uint32_t lease_ms;     /* the writer's lease; 0: 10000 */
    /* lock_file breaks a live holder's lock (an operator knows its host is
     * gone) instead of failing with LSM_BUSY. */
    bool takeover;
    /* How long connecting may take before it fails (seconds; 0: 10). */
    uint32_t connect_timeout_s;
} env_rados_options;

void env_rados_options_init(env_rados_options *o);

/* Connects to the cluster and opens the pool: a clear one-line error for a
 * missing pool, a bad conf or key, or a cluster that does not answer. */
lsm_status *env_rados_open(const env_rados_options *o, lsm_env **out);
/* Only after every store using it is closed. */
void env_rados_close(lsm_env *env);
/* True for an env made by env_rados_open. */
bool env_is_rados(const lsm_env *env);

/* Test seam: crash points. fn(arg, point, oid) is called as the env passes
 * "stamped" (an object got the fence epoch), "intent" (a create's intent
 * is in its directory), "created" (the object exists, not yet named) and
 * "swept" (a sweep removed an unnamed object, not yet its intent),
 * "unnamed" (a name removed or replaced, its drop recorded, the object's
 * name count not yet lowered), "dropped" (lowered, the record kept),
 * "linking" (a link's record written, the count not yet raised) and
 * "linked" (raised, the new name not yet entered), "moving" (a directory's
 * move to another directory recorded), "moved" (its new name entered, the
 * old one and the record not yet removed) and "replaced" (the directory a
 * rename replaced removed, its intent not yet).
 * Returning true makes the env act as a process that died there: the call
 * fails, and nothing more that changes the pool is sent (no cleanup, no
 * unlock, no lease renewal). It is also called at "answered" (an append's
 * answer came, before the env takes it, in librados' callback thread) and
 * at "resolved" (a remove looked its name up and has changed nothing yet)
 * and at "send" (an append is about to be sent):
 * there its return is ignored, and a hook that waits plays an OSD slow to
 * acknowledge, or lines up two callers. Set before the env is used. */
typedef bool (*env_rados_crash_fn)(void *arg, const char *point, const char *oid);
void env_rados_set_crash_hook(lsm_env *env, env_rados_crash_fn fn, void *arg);

/* Test seam: failures. fn(arg, op, oid) is asked before the env sends op
 * on object oid — "intent" (a create's intent record), "list" and "list
 * intents" (a page of a directory's names or intents: the sweep's),
 * "quota" (the mon's quota query), "cluster stat", "drop" (lowering a
 * name count after its name went) and "drop record" (removing the drop's
 * record) — and a negative errno
 * fails that call as if the cluster had answered it. Set before use. */
typedef int (*env_rados_fault_fn)(void *arg, const char *op, const char *oid);
void env_rados_set_fault_hook(lsm_env *env, env_rados_fault_fn fn, void *arg);

/* A pool with a quota of objects (max_objects) is outgrown by this env by
 * at most ENV_RADOS_OBJECTS_SLACK objects before it is found full (a store
 * opens, flushes and compacts by making objects before it removes others)
 * and as many again once the store frees (gives up its reserve):
 * env_rados_space.c. */
#define ENV_RADOS_OBJECTS_SLACK 4
/* The most objects a pool of objects quota max_objects holds while one
 * env writes to it alone: 2 x ENV_RADOS_OBJECTS_SLACK past the quota, plus
 * one a remove in flight as the env lists the pool leaves uncounted. */
static inline uint64_t env_rados_objects_bound(uint64_t max_objects)
{
    return max_objects + 2 * ENV_RADOS_OBJECTS_SLACK + 1;
}

/* Measurements for benchmarks and tests. */
/* Microseconds the last takeover took (lock won to fence raised), 0 if none. */
uint64_t env_rados_takeover_us(lsm_env *env);
/* The fence epoch this env writes under (0: it holds no lease). */
uint64_t env_rados_epoch(lsm_env *env);

#endif
