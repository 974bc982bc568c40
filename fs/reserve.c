/*
 * reserve.c — the root reserve (reserve.h).
 */
#include "reserve.h"

#include "caller.h"

#include <errno.h>
#include <linux/capability.h>
#include <time.h>

#define REFRESH_MS 100
/* Below this many bytes above the reserve, every change looks again. */
#define NEAR_BYTES (64ll << 20)
/* How long a refusal waits at most for running flushes and compactions. */
#define SETTLE_MS 2000

void reserve_init(root_reserve *r, lsm_db *db, lsm_env *env, const char *path, uint32_t pct,
                  uid_t uid, gid_t gid)
{
    r->db = db;
    r->pct = pct;
    r->uid = uid;
    r->gid = gid;
    r->env = env;
    r->path = path;
    atomic_store(&r->left, 0);
    atomic_store(&r->looked_ns, 0); /* the first change looks */
}

uint64_t reserve_blocks(const root_reserve *r, uint64_t blocks)
{
    return blocks / 100 * r->pct + blocks % 100 * r->pct / 100;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Looks at the disk (or pool): the bytes free above the reserve (negative:
 * inside it), or false when the env cannot say. */
static bool look(root_reserve *r, int64_t *left)
{
    uint64_t total, avail;
    lsm_status *s = r->env->disk_free(r->env, r->path, &total, &avail);
    if (s != NULL) {
        lsm_status_free(s);
        return false;
    }
    *left = (int64_t)(avail / 4096) - (int64_t)reserve_blocks(r, total / 4096);
    *left *= 4096;
    atomic_store(&r->left, *left);
    atomic_store(&r->looked_ns, now_ns());
    return true;
}

/* Waits until no flush or compaction runs (at most SETTLE_MS): whatever
 * space their inputs hold is then given back. */
static void settle(const root_reserve *r)
{
    uint64_t running = 0;
    for (int ms = 0; ms < SETTLE_MS && r->db != NULL &&
                     lsm_property_u64(r->db, "lsm.background-running", &running) && running > 0;
         ms += 2)
        r->env->sleep_micros(r->env, 2000);
}

static bool privileged(fuse_req_t req, const root_reserve *r)
{
    if (req == NULL)
        return false;
    const struct fuse_ctx *c = fuse_req_ctx(req);
    return c->uid == r->uid || (r->gid != 0 && caller_in_group(req, r->gid)) ||
           caller_capable(req, CAP_SYS_RESOURCE);
}

int reserve_admit(root_reserve *r, fuse_req_t req, uint64_t bytes)
{
    if (r->pct == 0)
        return 0;
    int64_t want = bytes > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)bytes;
    int64_t left = atomic_fetch_sub(&r->left, want) - want;
    bool fresh = now_ns() - atomic_load(&r->looked_ns) < (uint64_t)REFRESH_MS * 1000000u;
    if (fresh && left > NEAR_BYTES)
        return 0;
    if (!look(r, &left))
        return 0;
    if (left < want && !privileged(req, r)) {
        settle(r);
        if (look(r, &left) && left < want)
            return ENOSPC;
    }
    atomic_fetch_sub(&r->left, want);
    return 0;
}
