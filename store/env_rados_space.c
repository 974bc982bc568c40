/*
 * env_rados_space.c — disk_free of the RADOS env: the pool's quota as the
 * store's disk.
 *
 * With a quota (max_bytes) on the pool, the store's disk is the quota: its
 * size, and free what the pool has not used of it (no more than the
 * cluster has free), so the RESERVE and the full-disk rules work inside
 * the quota. Without one it is the cluster's space. The figures come from
 * the mgr's statistics (a cluster without a mgr has none: unknown, which
 * the store reads as room) and are asked at most once per SPACE_TTL_US, as
 * the store asks under its lock on every memtable switch. While the pool
 * is full, the space this env freed counts as free (see below).
 *
 * A pool over its quota refuses a write that grows it (EDQUOT: LSM_NO_SPACE)
 * but takes one that frees space (a remove, a truncate), because the env's
 * ioctx is "full try" (env_rados.c): without it librados holds every write
 * to a full pool, deletes included, until the pool has room again.
 *
 * A quota of objects (max_objects) is a disk too: disk_free says bytes,
 * each object left counted as OBJECT_BYTES, and the tighter of the two
 * quotas wins. Bytes, not statfs's f_files: an lsmfs file is keys, not an
 * object, while df and the store's reserve and memtable caps read bytes,
 * so both see the pool fill as tables are made. A pool out of objects
 * refuses growth alike (the OSD flags the pool full, whichever quota), but
 * what the store must free is objects: once it removes one while full,
 * appends are forced (they add no object) and creates reuse the objects it
 * removed, plus ENV_RADOS_OBJECTS_SLACK once it gives up its reserve (its
 * RESERVE's object: the store then frees, and its flush and compaction
 * make objects before they remove others).
 *
 * The pool refuses a create only once the mon has seen it over its objects
 * quota, seconds late (the statistics' lag): a store creating fast outgrew
 * a pool of 10 objects to 47-55. So near that quota the env counts the
 * pool's objects itself (rados_space_create_take): listed (every client's,
 * exact then) at most once per COUNT_TTL_US, plus the creates it sent
 * since, in flight ones included, less the objects it removed; disk_free
 * says what that leaves (fresher than the statistics), and an unforced
 * create is refused once it reaches max_objects + ENV_RADOS_OBJECTS_SLACK,
 * the pool found full or not (a store must still open, flush and compact
 * there). The slack is given once, when the store gives up its reserve
 * where the pool is full or the count at the quota, not at any removal
 * there: a flush removes its old log as it fills the pool, and that slack
 * went to more of the fill (disk_free showed it free), leaving none for
 * the deletes. While the count says the pool is at its quota (count_full)
 * an unforced write the pool takes is no room again: the pool takes them
 * until the mon flags it, and each such "room again" gave the slack anew
 * (23 objects in a pool of 10 under ThreadSanitizer). So the pool holds
 * at most env_rados_objects_bound (env_rados.h), plus what other clients
 * create between two listings.
 */
#include "env_rados_impl.h"

#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPACE_TTL_US 1000000
/* The bytes an object of an objects quota stands for: the store's table
 * size (lsm.h's target_file_size default), as most of its objects are
 * tables. */
#define OBJECT_BYTES (4ull << 20)
/* The count of an objects quota is listed again after this long. */
#define COUNT_TTL_US 1000000
/* Near the quota: the statistics' count within this many objects of it
 * (or an eighth of it), more than the creates of their lag. */
#define COUNT_NEAR 256
/* What disk_free says when the cluster keeps no statistics (no mgr). */
#define RADOS_SPACE_UNKNOWN (1ULL << 50)

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A number in the mon's JSON answer after key ("\"quota_max_bytes\":"). */
static uint64_t json_number(const char *json, const char *key)
{
    const char *at = strstr(json, key);
    return at != NULL ? strtoull(at + strlen(key), NULL, 10) : 0;
}

/* The pool's max_bytes quota, and (*max_objects) its max_objects; 0 when
 * it has none or the mon does not say (no caps to ask, a pool this new, a
 * mon busy): then the cluster's space is the store's disk, as without a
 * quota, never a disk_free error that would make the store refuse every
 * write for want of a reserve. */
static uint64_t pool_quota(struct rados_env *re, uint64_t *max_objects)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd,
             "{\"prefix\": \"osd pool get-quota\", \"pool\": \"%s\", \"format\": \"json\"}",
             re->pool);
    const char *cmds[1] = {cmd};
    char *out = NULL, *outs = NULL;
    size_t outlen = 0, outslen = 0;
    int r = rados_fault(re, "quota", re->pool);
    if (r == 0)
        r = rados_mon_command(re->cluster, cmds, 1, "", 0, &out, &outlen, &outs, &outslen);
    char json[1024];
    snprintf(json, sizeof json, "%.*s", r == 0 && out ? (int)outlen : 0, out ? out : "");
    rados_buffer_free(out);
    rados_buffer_free(outs);
    *max_objects = json_number(json, "\"quota_max_objects\":");
    return json_number(json, "\"quota_max_bytes\":");
}

/* A limit of size limit_total with limit_avail left: it becomes the disk
 * if less is left of it than of the disk so far. */
static void tighter(uint64_t limit_total, uint64_t limit_avail, uint64_t *total,
                    uint64_t *avail)
{
    if (limit_avail < *avail) {
        *total = limit_total;
        *avail = limit_avail;
    }
}

/* Asks the cluster: the quota's or the cluster's size and free bytes.
 * REQUIRES: space_mu held. */
static lsm_status *ask_space(struct rados_env *re, const char *path, uint64_t *total,
                             uint64_t *avail)
{
    struct rados_cluster_stat_t cs;
    int r = rados_fault(re, "cluster stat", re->pool);
    if (r == 0)
        r = rados_cluster_stat(re->cluster, &cs);
    if (r < 0)
        return rados_error(r, "cluster stat for", path);
    bool known = cs.kb != 0; /* a cluster without a mgr has no statistics */
    *total = known ? cs.kb * 1024 : RADOS_SPACE_UNKNOWN;
    *avail = known ? cs.kb_avail * 1024 : RADOS_SPACE_UNKNOWN;
    uint64_t max_objects = 0, quota = known ? pool_quota(re, &max_objects) : 0;
    atomic_store(&re->objects_quota, quota == 0 && max_objects > 0);
    re->space_max_objects = 0;
    if (quota == 0 && max_objects == 0)
        return NULL;
    struct rados_pool_stat_t ps;
    if ((r = rados_ioctx_pool_stat(re->io, &ps)) < 0)
        return rados_error(r, "pool stat for", path);
    re->space_max_objects = max_objects;
    re->space_objects = ps.num_objects;
    bool room = (quota == 0 || ps.num_bytes < quota) &&
                (max_objects == 0 || ps.num_objects < max_objects);
    if (room && atomic_load(&re->quota_full))
        atomic_store(&re->probe_due, true); /* room again: the next growth asks the pool */
    if (quota != 0) { /* the quota is the disk, no more free than the cluster has */
        uint64_t left = quota > ps.num_bytes ? quota - ps.num_bytes : 0;
        *total = quota;
        *avail = left < *avail ? left : *avail;
    }
    if (max_objects != 0)
        tighter(max_objects * OBJECT_BYTES,
                (max_objects > ps.num_objects ? max_objects - ps.num_objects : 0) * OBJECT_BYTES,
                total, avail);
    return NULL;
}

/* avail, or less where the env's count of an objects quota of max (0:
 * none) leaves less: fresher than the statistics, so the store keeps its
 * reserve's room (for deletes, flushes, compactions) before the count's
 * refusal past the quota (rados_space_create_take). */
static uint64_t count_avail(struct rados_env *re, uint64_t max, uint64_t avail)
{
    pthread_mutex_lock(&re->count_mu);
    int64_t have = re->count_at_us != 0 ? re->count_listed + re->count_since : -1;
    pthread_mutex_unlock(&re->count_mu);
    if (max == 0 || have < 0)
        return avail;
    uint64_t left = (uint64_t)have < max ? (max - (uint64_t)have) * OBJECT_BYTES : 0;
    return left < avail ? left : avail;
}

lsm_status *rados_disk_free(lsm_env *env, const char *path, uint64_t *total, uint64_t *avail)
{
    struct rados_env *re = rados_env_of(env);
    pthread_mutex_lock(&re->space_mu);
    uint64_t now = mono_us();
    lsm_status *s = NULL;
    if (re->space_at_us == 0 || now - re->space_at_us >= SPACE_TTL_US) {
        s = ask_space(re, path, &re->space_total, &re->space_avail);
        re->space_at_us = s == NULL ? now : 0;
    }
    *total = s == NULL ? re->space_total : 0;
    *avail = s == NULL ? re->space_avail : 0;
    uint64_t max = re->space_max_objects;
    pthread_mutex_unlock(&re->space_mu);
    if (s == NULL)
        *avail = count_avail(re, max, *avail);
    int64_t freed = atomic_load(&re->objects_quota) ? 0 : atomic_load(&re->freed_while_full);
    if (s == NULL && atomic_load(&re->quota_full) && freed > 0 && (uint64_t)freed > *avail)
        *avail = (uint64_t)freed < *total ? (uint64_t)freed : *total; /* ours now; stats lag */
    return s;
}

/* ------------------------------------------- the space freed while full */

/* A pool over its quota takes no write that grows it until the mon has
 * seen the pool's statistics fall below the quota again: seconds after
 * the space was freed. Meanwhile the space this env freed (the RESERVE
 * given up, tables removed) is its own to reuse at once: growing writes it
 * covers are forced past the pool's full flag, so the pool never holds
 * more than when it was found full, and the store's deletes and the
 * flushes and compactions after them go on as on a local disk. */

int rados_space_grow_flags(struct rados_env *re, uint64_t n)
{
    if (!atomic_load(&re->quota_full) || atomic_exchange(&re->probe_due, false))
        return 0;
    if (atomic_load(&re->objects_quota)) /* what is short is objects */
        return atomic_load(&re->objects_freeing) ? LIBRADOS_OPERATION_FULL_FORCE : 0;
    int64_t have = atomic_load(&re->freed_while_full);
    while (have >= (int64_t)n && have > 0)
        if (atomic_compare_exchange_weak(&re->freed_while_full, &have, have - (int64_t)n))
            return LIBRADOS_OPERATION_FULL_FORCE;
    return 0;
}

int rados_space_create_flags(struct rados_env *re)
{
    if (!atomic_load(&re->objects_quota))
        return rados_space_grow_flags(re, 1);
    if (!atomic_load(&re->quota_full) || atomic_exchange(&re->probe_due, false))
        return 0;
    int64_t have = atomic_load(&re->objects_freed_while_full);
    while (have > 0)
        if (atomic_compare_exchange_weak(&re->objects_freed_while_full, &have, have - 1))
            return LIBRADOS_OPERATION_FULL_FORCE;
    return 0;
}

/* ------------------------------------------- the count of an objects quota */

/* Lists the pool: its objects in *n; 0, or a librados error. */
static int list_objects(struct rados_env *re, int64_t *n)
{
    rados_list_ctx_t ls;
    int r = rados_fault(re, "count objects", re->pool);
    if (r == 0)
        r = rados_nobjects_list_open(re->count_io, &ls);
    if (r < 0)
        return r;
    const char *entry;
    int64_t k = 0;
    while ((r = rados_nobjects_list_next(ls, &entry, NULL, NULL)) == 0)
        k++;
    rados_nobjects_list_close(ls);
    *n = k;
    return r == -ENOENT ? 0 : r; /* ENOENT: the end */
}

/* The objects the count says the pool holds (listed again once a TTL), or
 * -1 when the pool cannot be listed: then the count refuses nothing (the
 * pool refuses itself, late). REQUIRES: count_mu held. */
static int64_t count_now(struct rados_env *re)
{
    uint64_t now = mono_us();
    if (re->count_at_us == 0 || now - re->count_at_us >= COUNT_TTL_US) {
        int64_t n = 0;
        if (list_objects(re, &n) < 0)
            return -1;
        re->count_listed = n;
        re->count_since = re->count_flying; /* may be listed too: counted twice, never missed */
        re->count_at_us = now;
    }
    return re->count_listed + re->count_since;
}

int rados_space_create_take(struct rados_env *re, int flags)
{
    pthread_mutex_lock(&re->space_mu);
    uint64_t max = re->space_max_objects, stats = re->space_objects;
    pthread_mutex_unlock(&re->space_mu);
    uint64_t near = max / 8 > COUNT_NEAR ? max / 8 : COUNT_NEAR;
    bool check = flags == 0 && max != 0 && stats + near >= max;
    pthread_mutex_lock(&re->count_mu);
    int64_t have = check ? count_now(re) : -1;
    bool out = have >= (int64_t)(max + ENV_RADOS_OBJECTS_SLACK);
    if (flags == 0) /* a forced create leaves the count's word as it was */
        atomic_store(&re->count_full, have >= (int64_t)max);
    if (!out) {
        re->count_since++;
        re->count_flying++;
    }
    pthread_mutex_unlock(&re->count_mu);
    if (out)
        rados_space_answered(re, -EDQUOT, 0);
    return out ? -EDQUOT : 0;
}

void rados_space_created(struct rados_env *re, int r)
{
    pthread_mutex_lock(&re->count_mu);
    re->count_flying--;
    if (r < 0)
        re->count_since--;
    pthread_mutex_unlock(&re->count_mu);
}

void rados_space_answered(struct rados_env *re, int r, int flags)
{
    if (r == -EDQUOT) {
        atomic_store(&re->quota_full, true);
    } else if (r >= 0 && flags == 0 && atomic_load(&re->quota_full) &&
               !atomic_load(&re->count_full)) {
        atomic_store(&re->quota_full, false); /* the pool took a write: room again */
        atomic_store(&re->freed_while_full, 0);
        atomic_store(&re->objects_freed_while_full, 0);
        atomic_store(&re->objects_freeing, false);
        atomic_store(&re->objects_slack_given, false);
        atomic_store(&re->probe_due, false);
    }
}

bool rados_space_refuses(struct rados_env *re, uint64_t n)
{
    if (!atomic_load(&re->quota_full))
        return false;
    uint64_t total, avail; /* the statistics may show room again */
    lsm_status_free(rados_disk_free(&re->env, "", &total, &avail));
    if (!atomic_load(&re->quota_full) || atomic_load(&re->probe_due))
        return false;
    if (atomic_load(&re->objects_quota))
        return !atomic_load(&re->objects_freeing);
    return atomic_load(&re->freed_while_full) < (int64_t)n;
}

bool rados_space_full(struct rados_env *re)
{
    return atomic_load(&re->quota_full);
}

/* Whether the count says the pool is at its objects quota (max: 0, none).
 * REQUIRES: count_mu held. */
static bool count_at_quota(const struct rados_env *re, uint64_t max)
{
    return max != 0 && re->count_at_us != 0 &&
           re->count_listed + re->count_since >= (int64_t)max;
}

void rados_space_freed(struct rados_env *re, uint64_t n, int objects, bool reserve)
{
    pthread_mutex_lock(&re->space_mu);
    uint64_t max = re->space_max_objects;
    pthread_mutex_unlock(&re->space_mu);
    pthread_mutex_lock(&re->count_mu);
    bool at_quota = reserve && count_at_quota(re, max);
    re->count_since -= objects;
    if (objects > 0)
        atomic_store(&re->count_full, count_at_quota(re, max));
    pthread_mutex_unlock(&re->count_mu);
    if (at_quota) /* the store gives up its reserve where the count is full */
        atomic_store(&re->quota_full, true);
    if (!atomic_load(&re->quota_full))
        return;
    atomic_fetch_add(&re->freed_while_full, (int64_t)n);
    if (objects > 0)
        atomic_store(&re->objects_freeing, true);
    bool first = reserve && !atomic_exchange(&re->objects_slack_given, true);
    int64_t slack = first ? ENV_RADOS_OBJECTS_SLACK : 0;
    atomic_fetch_add(&re->objects_freed_while_full, objects + slack);
}
