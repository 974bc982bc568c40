/* store_uri.c — store locations, local or on RADOS; see store_uri.h. */
#include "store_uri.h"

#include "env_rados.h"
#include "lsm_malloc.h"
#include "status.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POOLS 8

static struct {
    pthread_mutex_t mu;
    char *ceph_conf; /* GUARDED_BY(mu), like every field here */
    char *ceph_id;
    bool takeover;
    uint32_t lease_ms;
    int n;
    char *pool[MAX_POOLS];
    lsm_env *env[MAX_POOLS];
} uri = {.mu = PTHREAD_MUTEX_INITIALIZER};

bool store_uri_is_rados(const char *loc)
{
    return loc != NULL && strncmp(loc, STORE_URI_RADOS, strlen(STORE_URI_RADOS)) == 0;
}

/* Whether opt is "key=VALUE"; if so *dst becomes a copy of VALUE (kept as
 * it was, and *oom set, when out of memory). */
static bool take_string(const char *opt, const char *key, char **dst, bool *oom)
{
    size_t n = strlen(key);
    if (strncmp(opt, key, n) != 0 || opt[n] != '=')
        return false;
    char *v = lsm_strdup(opt + n + 1);
    if (v == NULL) {
        *oom = true;
        return true;
    }
    free(*dst);
    *dst = v;
    return true;
}

lsm_status *store_uri_option(const char *opt, bool *ours)
{
    bool oom = false;
    pthread_mutex_lock(&uri.mu);
    *ours = take_string(opt, "ceph_conf", &uri.ceph_conf, &oom) ||
            take_string(opt, "ceph_id", &uri.ceph_id, &oom);
    if (!*ours && strcmp(opt, "takeover") == 0)
        *ours = uri.takeover = true;
    if (!*ours && strncmp(opt, "lease_ms=", 9) == 0) {
        uri.lease_ms = (uint32_t)strtoul(opt + 9, NULL, 10);
        *ours = true;
    }
    pthread_mutex_unlock(&uri.mu);
    return oom ? status_new(LSM_NO_MEMORY, "-o %s: out of memory", opt) : NULL;
}

lsm_status *store_uri_options(const char *list)
{
    char *copy = lsm_strdup(list), *save = NULL;
    if (copy == NULL)
        return status_new(LSM_NO_MEMORY, "-o %s: out of memory", list);
    lsm_status *s = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && s == NULL;
         t = strtok_r(NULL, ",", &save)) {
        bool ours = false;
        s = store_uri_option(t, &ours);
        if (s == NULL && !ours)
            s = status_new(LSM_INVALID_ARGUMENT, "unknown option -o %s", t);
    }
    free(copy);
    return s;
}

/* The env of pool, connected on first use. REQUIRES: uri.mu held. */
static lsm_status *pool_env(const char *pool, lsm_env **env)
{
    for (int i = 0; i < uri.n; i++)
        if (strcmp(uri.pool[i], pool) == 0) {
            *env = uri.env[i];
            return NULL;
        }
    if (uri.n == MAX_POOLS)
        return status_new(LSM_INVALID_ARGUMENT, "ceph: more than %d pools", MAX_POOLS);
    env_rados_options o;
    env_rados_options_init(&o);
    o.pool = pool;
    o.ceph_conf = uri.ceph_conf;
    o.ceph_id = uri.ceph_id;
    o.takeover = uri.takeover;
    o.lease_ms = uri.lease_ms;
    lsm_status *s = env_rados_open(&o, env);
    if (s != NULL)
        return s;
    if ((uri.pool[uri.n] = lsm_strdup(pool)) == NULL) {
        env_rados_close(*env);
        return status_new(LSM_NO_MEMORY, "ceph: out of memory");
    }
    uri.env[uri.n++] = *env;
    return NULL;
}

lsm_status *store_uri_resolve(const char *loc, lsm_env **env, char **path)
{
    *env = NULL;
    *path = NULL;
    if (!store_uri_is_rados(loc)) {
        *env = lsm_env_default();
        *path = lsm_strdup(loc);
        return *path ? NULL : status_new(LSM_NO_MEMORY, "out of memory");
    }
    const char *p = loc + strlen(STORE_URI_RADOS);
    const char *slash = strchr(p, '/');
    if (slash == NULL || slash == p || slash[1] == '\0')
        return status_new(LSM_INVALID_ARGUMENT, "%s: not a store location (rados:POOL/NAME)",
                          loc);
    char *pool = lsm_strndup(p, (size_t)(slash - p));
    if (pool == NULL || (*path = lsm_strdup(slash + 1)) == NULL) {
        free(pool);
        return status_new(LSM_NO_MEMORY, "out of memory");
    }
    pthread_mutex_lock(&uri.mu);
    lsm_status *s = pool_env(pool, env);
    pthread_mutex_unlock(&uri.mu);
    free(pool);
    if (s != NULL) {
        free(*path);
        *path = NULL;
    }
    return s;
}

void store_uri_shutdown(void)
{
    pthread_mutex_lock(&uri.mu);
    for (int i = 0; i < uri.n; i++) {
        env_rados_close(uri.env[i]);
        free(uri.pool[i]);
    }
    uri.n = 0;
    pthread_mutex_unlock(&uri.mu);
}
