/*
 * env_rados_lease.c — the writer's lease and fence of the RADOS env.
 *
 * lock_file("DIR/LOCK") takes an exclusive RADOS lock with a duration
 * (lease_ms) on DIR's object, renewed by a thread every quarter lease. The
 * lease contract: the env refuses every write once the renewer has failed,
 * or once a quarter lease before the end of the last lease it won (so a
 * renewal stuck in the network cannot let two writers overlap); the store
 * then sees EIO on its WAL, which is sticky (writes fail, reads go on).
 *
 * The fence: DIR's object keeps lsmfs.epoch (also set on every object
 * under DIR) and lsmfs.holder (the address of a writer that has not let go
 * cleanly). A new writer that finds a holder blocklists it, waits for the
 * latest OSD map and raises the epoch on the whole tree (files first, DIR
 * last: a stamping a crash cut short is redone, as DIR still shows no epoch
 * or the old holder); then it sweeps away what creates a crash cut short
 * (env_rados_intent.c). Every write op the
 * env sends carries cmpxattr(lsmfs.epoch == its epoch), so an old writer
 * that wakes up has every write refused by the OSDs (ECANCELED, EIO to the
 * store) even where the blocklist has not arrived.
 */
#include "env_rados_impl.h"

#include "lsm_malloc.h"
#include "port.h"
#include "status.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define LOCK_NAME "lsmfs.writer"
#define BLOCKLIST_S 3600

struct lsm_filelock {
    struct rados_env *re;
    char oid[RADOS_OID_MAX];
    char cookie[128];
    bool store;    /* the env's store lease: it raised the fence */
    bool recorded; /* the fence recorded this writer as lsmfs.holder */
    pthread_t renewer;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* GUARDED_BY(mu) */
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The directory holding path ("d/LOCK" → "d"). */
static void parent_of(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        out[0] = '\0';
}

/* The lock's holder ("client.4123 at ADDR, COOKIE") into who, its client
 * name, cookie and address into the others; false when none. */
static bool holder(struct rados_env *re, const char *oid, char *who, size_t cap, char *client,
                   char *cookie, char *addr)
{
    int excl = 0;
    char tag[256], clients[256], cookies[256], addrs[256];
    size_t tl = sizeof tag, cl = sizeof clients, kl = sizeof cookies, al = sizeof addrs;
    ssize_t n = rados_list_lockers(re->io, oid, LOCK_NAME, &excl, tag, &tl, clients, &cl,
                                   cookies, &kl, addrs, &al);
    if (n <= 0)
        return false;
    snprintf(client, 256, "%s", clients);
    snprintf(cookie, 256, "%s", cookies);
    snprintf(addr, 256, "%s", addrs);
    snprintf(who, cap, "%s at %s (%s)", clients, addrs, cookies);
    return true;
}

static int lock_once(struct rados_env *re, struct lsm_filelock *l, uint8_t flags)
{
    struct timeval tv = {(time_t)(re->lease_ms / 1000), (suseconds_t)(re->lease_ms % 1000) * 1000};
    return rados_lock_exclusive(re->io, l->oid, LOCK_NAME, l->cookie, "lsmfs writer", &tv, flags);
}

/* Wins the lock: breaks a live holder's only with takeover. */
static lsm_status *acquire(struct rados_env *re, struct lsm_filelock *l, const char *path)
{
    int r = lock_once(re, l, 0);
    char who[800], client[256], cookie[256], addr[256];
    if ((r == -EBUSY || r == -EEXIST) && holder(re, l->oid, who, sizeof who, client, cookie, addr)) {
        if (!re->takeover)
            return status_new(LSM_BUSY, "lock %s: the store is in use: its lease is held by %s",
                              path, who);
        int b = rados_fault(re, "break lock", l->oid);
        if (b == 0)
            b = rados_break_lock(re->io, l->oid, LOCK_NAME, client, cookie);
        if (b < 0 && b != -ENOENT) /* ENOENT: let go meanwhile */
            return status_new(LSM_IO_ERROR, "lock %s: cannot break the lease held by %s: %s",
                              path, who, strerror(-b));
        r = lock_once(re, l, 0);
    }
    if (r == -EBUSY || r == -EEXIST)
        return status_new(LSM_BUSY, "lock %s: the store is in use (lease held)", path);
    return r < 0 ? rados_error(r, "lock", path) : NULL;
}

static lsm_status *xattr_get(struct rados_env *re, const char *oid, const char *name, char *v,
                             size_t cap, bool *found)
{
    int r = rados_getxattr(re->io, oid, name, v, cap - 1);
    *found = r >= 0;
    v[r >= 0 ? r : 0] = '\0';
    return r < 0 && r != -ENODATA && r != -ENOENT ? rados_error(r, "read xattr of", oid) : NULL;
}

/* Cuts off an old writer that did not let go: blocklist, latest map. */
static lsm_status *cut_off(struct rados_env *re, const char *old, const char *path)
{
    char *mine = NULL; /* "127.0.0.1:0/NONCE"; the lock lists "v1:127.0.0.1:0/NONCE" */
    if (rados_getaddrs(re->cluster, &mine) == 0 && mine != NULL && mine[0] != '\0' &&
        (strstr(mine, old) != NULL || strstr(old, mine) != NULL)) {
        rados_buffer_free(mine);
        return NULL; /* ourselves (an earlier open in this process) */
    }
    if (mine)
        rados_buffer_free(mine);
    int r = rados_blocklist_add(re->cluster, (char *)old, BLOCKLIST_S);
    if (r < 0 && r != -EINVAL)
        return rados_error(r, "blocklist the old writer of", path);
    r = rados_wait_for_latest_osdmap(re->cluster);
    return r < 0 ? rados_error(r, "wait for the OSD map for", path) : NULL;
}

/* Raises (or sets up) the fence of the store whose lock l now holds. */
static lsm_status *fence(struct rados_env *re, struct lsm_filelock *l, const char *path)
{
    uint64_t t0 = now_us();
    char old[256], ev[24];
    bool had_holder, had_epoch;
    lsm_status *s = xattr_get(re, l->oid, RADOS_XATTR_HOLDER, old, sizeof old, &had_holder);
    if (s == NULL)
        s = xattr_get(re, l->oid, RADOS_XATTR_EPOCH, ev, sizeof ev, &had_epoch);
    if (s)
        return s;
    uint64_t epoch = had_epoch ? strtoull(ev, NULL, 10) : 0;
    if (had_holder && old[0] != '\0' && (s = cut_off(re, old, path)) != NULL)
        return s;
    rados_set_store_path(re, path); /* path is DIR/LOCK: the tree is DIR's */
    char *slash = strrchr(re->store_path, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        re->store_path[0] = '\0';
    if (had_holder || !had_epoch) {
        snprintf(ev, sizeof ev, "%" PRIu64, ++epoch);
        if ((s = rados_set_xattr_tree(re, l->oid, RADOS_XATTR_EPOCH, ev)) != NULL)
            return s;
    }
    atomic_store(&re->epoch, epoch);
    char who[800], client[256], cookie[256], addr[256];
    if (holder(re, l->oid, who, sizeof who, client, cookie, addr)) {
        rados_write_op_t op = rados_create_write_op();
        rados_write_op_setxattr(op, RADOS_XATTR_HOLDER, addr, strlen(addr));
        s = rados_operate(re, op, l->oid, "record the writer of", path);
        l->recorded = s == NULL;
    }
    if (s == NULL)
        s = rados_sweep_tree(re, l->oid, re->store_path);
    if (had_holder)
        atomic_store(&re->takeover_us, now_us() - t0);
    return s;
}

static void *renew_main(void *arg)
{
    struct lsm_filelock *l = arg;
    port_thread_name("lsm-lease");
    struct rados_env *re = l->re;
    uint64_t lease = (uint64_t)re->lease_ms * 1000;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + lease / 4 * 1000;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
        if (l->stop)
            break;
        pthread_mutex_unlock(&l->mu);
        uint64_t t0 = now_us();
        int r = rados_dead(re) ? -ESHUTDOWN : lock_once(re, l, LIBRADOS_LOCK_FLAG_MUST_RENEW);
        if (l->store && r < 0)
            atomic_store(&re->lease_lost, true);
        else if (l->store)
            atomic_store(&re->lease_valid_until, t0 + lease - lease / 4);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* The store's lease l lets go: the holder record it made removed (so the
 * next writer cuts no one off; an old holder's stays to be cut off), then
 * the env holds no lease. */
static lsm_status *let_go(struct rados_env *re, struct lsm_filelock *l)
{
    lsm_status *s = NULL;
    if (l->recorded) {
        rados_write_op_t op = rados_create_write_op();
        rados_write_op_rmxattr(op, RADOS_XATTR_HOLDER);
        char lock[4200];
        snprintf(lock, sizeof lock, "%s/LOCK", re->store_path);
        s = rados_operate(re, op, l->oid, "let go of", lock);
    }
    pthread_mutex_lock(&re->mu);
    re->lease = NULL;
    pthread_mutex_unlock(&re->mu);
    atomic_store(&re->epoch, 0);
    atomic_store(&re->lease_valid_until, 0);
    return s;
}

/* Stops l's renewer and waits for it. REQUIRES: it was started. */
static void stop_renewer(struct lsm_filelock *l)
{
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->renewer, NULL);
}

static void lock_free(struct lsm_filelock *l)
{
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

/* env.h's lock_file creates its file: an empty one at path, if there is
 * none (a backup directory is known by its LOCK). The lock itself is the
 * directory object's. */
static lsm_status *make_lock_file(lsm_env *env, const char *path)
{
    if (env->file_exists(env, path))
        return NULL;
    lsm_wfile *f;
    lsm_status *s = env->new_wfile(env, path, &f);
    return s != NULL ? s : f->ops->close(f);
}

lsm_status *rados_lock_file(lsm_env *env, const char *path, lsm_filelock **out)
{
    struct rados_env *re = rados_env_of(env);
    *out = NULL;
    char dir[4096], host[64] = "?";
    parent_of(path, dir, sizeof dir);
    struct lsm_filelock *l = lsm_calloc(1, sizeof *l);
    if (l == NULL)
        return status_new(LSM_NO_MEMORY, "lock %s: out of memory", path);
    l->re = re;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    gethostname(host, sizeof host - 1);
    snprintf(l->cookie, sizeof l->cookie, "%s:%d:%" PRIx64, host, (int)getpid(), now_us());
    uint64_t t0 = now_us();
    lsm_status *s = rados_dir_oid(re, dir, l->oid);
    if (s == NULL)
        s = acquire(re, l, path);
    pthread_mutex_lock(&re->mu);
    l->store = s == NULL && re->lease == NULL;
    if (l->store)
        re->lease = l;
    pthread_mutex_unlock(&re->mu);
    if (s == NULL && l->store) {
        uint64_t lease = (uint64_t)re->lease_ms * 1000;
        atomic_store(&re->lease_lost, false);
        atomic_store(&re->lease_valid_until, t0 + lease - lease / 4);
    }
    /* Renewed from the moment it is won: the fence's stamping and sweep may
     * take longer than the lease. */
    bool renewing = false;
    if (s == NULL && pthread_create(&l->renewer, NULL, renew_main, l) != 0)
        s = status_new(LSM_IO_ERROR, "lock %s: cannot start the lease's renewer", path);
    else if (s == NULL)
        renewing = true;
    if (s == NULL && l->store)
        s = fence(re, l, path);
    if (s == NULL)
        s = make_lock_file(env, path);
    if (s != NULL) {
        if (renewing)
            stop_renewer(l);
        if (l->store) /* a holder recorded (the fence got that far) goes too */
            lsm_status_free(let_go(re, l));
        if (!rados_dead(re))
            rados_unlock(re->io, l->oid, LOCK_NAME, l->cookie);
        lock_free(l);
        return s;
    }
    *out = l;
    return NULL;
}

/* A read-only open takes no lock: refused only while a writer holds the
 * directory (a snapshot's directory has none, so any number may read). */
lsm_status *rados_lock_file_shared(lsm_env *env, const char *path, lsm_filelock **out)
{
    struct rados_env *re = rados_env_of(env);
    *out = NULL;
    char dir[4096], oid[RADOS_OID_MAX], who[800], client[256], cookie[256], addr[256];
    parent_of(path, dir, sizeof dir);
    lsm_status *s = rados_dir_oid(re, dir, oid);
    if (s == NULL && holder(re, oid, who, sizeof who, client, cookie, addr))
        s = status_new(LSM_BUSY, "lock %s: the store is in use: its lease is held by %s", path,
                       who);
    return s;
}

lsm_status *rados_unlock_file(lsm_env *env, lsm_filelock *l)
{
    struct rados_env *re = rados_env_of(env);
    if (l == NULL)
        return NULL;
    stop_renewer(l);
    lsm_status *s = l->store ? let_go(re, l) : NULL;
    int r = rados_dead(re) ? 0 : rados_unlock(re->io, l->oid, LOCK_NAME, l->cookie);
    if (s == NULL && r < 0 && r != -ENOENT)
        s = rados_error(r, "unlock", l->oid);
    lock_free(l);
    return s;
}
