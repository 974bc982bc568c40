/*
 * rados_util.h — what the RADOS test programs share: the env over the test
 * cluster (tests/ceph/run.sh starts it and sets LSM_CEPH_CONF) and fresh
 * store names in its pool. Header-only, like testutil.h (include that first).
 * Without LSM_CEPH_CONF the test fails: a RADOS test is never skipped.
 */
#ifndef LSMFS_RADOS_UTIL_H
#define LSMFS_RADOS_UTIL_H

#include "env_rados.h"

#include <rados/librados.h>

#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* The pool tests/ceph/cluster.sh makes. */
#define TR_POOL "lsmfs"

/* A new env on pool of the test cluster (lease_ms 0: the default), or the
 * test fails. */
static inline lsm_env *tr_env_in(const char *pool, uint32_t lease_ms, bool takeover)
{
    const char *conf = getenv("LSM_CEPH_CONF");
    if (conf == NULL || conf[0] == '\0')
        fail_msg("LSM_CEPH_CONF is not set: run RADOS tests through tests/ceph/run.sh");
    env_rados_options o;
    env_rados_options_init(&o);
    o.pool = pool;
    o.ceph_conf = conf;
    o.lease_ms = lease_ms;
    o.takeover = takeover;
    lsm_env *env = NULL;
    lsm_status *s = env_rados_open(&o, &env);
    if (s != NULL)
        fail_msg("env_rados_open: %s", lsm_status_message(s));
    return env;
}

/* A new env on the test pool, or the test fails. */
static inline lsm_env *tr_env(uint32_t lease_ms, bool takeover)
{
    return tr_env_in(TR_POOL, lease_ms, takeover);
}

/* A store name no other test (or run) uses: "t-NAME-PID-NANOS". */
static inline void tr_name(char *out, size_t cap, const char *name)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "t-%s-%d-%ld%09ld", name, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
}

/* Removes the store in dir and dir itself, or the test fails. */
static inline void tr_destroy(const char *dir, lsm_env *e)
{
    lsm_options o;
    lsm_options_init(&o);
    o.env = e;
    ASSERT_OK(lsm_destroy(&o, dir));
    ASSERT_OK(e->remove_dir(e, dir));
}

/* A failure for env_rados_set_fault_hook: while armed, every op named op
 * fails with err (negative); seen counts them. */
struct tr_fault {
    const char *op;
    int err;
    atomic_bool armed;
    atomic_int seen;
};

static inline int tr_fault_hook(void *arg, const char *op, const char *oid)
{
    struct tr_fault *f = arg;
    (void)oid;
    if (!atomic_load(&f->armed) || strcmp(op, f->op) != 0)
        return 0;
    atomic_fetch_add(&f->seen, 1);
    return f->err;
}

/* A raw librados client of the test cluster as client.admin (for what
 * the env does not do: mon commands, probes): 0, or -1. */
static inline int tr_admin_connect(rados_t *admin)
{
    const char *conf = getenv("LSM_CEPH_CONF");
    if (conf == NULL || rados_create(admin, NULL) < 0)
        return -1;
    if (rados_conf_read_file(*admin, conf) < 0 || rados_connect(*admin) < 0) {
        rados_shutdown(*admin);
        return -1;
    }
    return 0;
}

/* Runs a mon command (JSON) as admin: its result, the mon's words printed
 * on failure. */
static inline int tr_mon_command(rados_t admin, const char *cmd)
{
    const char *cmds[1] = {cmd};
    char *out = NULL, *outs = NULL;
    size_t outlen = 0, outslen = 0;
    int r = rados_mon_command(admin, cmds, 1, "", 0, &out, &outlen, &outs, &outslen);
    if (r < 0)
        print_error("%s: %.*s\n", cmd, (int)outslen, outs ? outs : "");
    rados_buffer_free(out);
    rados_buffer_free(outs);
    return r;
}

#endif
