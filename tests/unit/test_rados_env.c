/* test_rados_env.c — store/env_rados.c against a real cluster (run by
 * tests/ceph/run.sh): the env's file and directory contract, the store's
 * write path, recovery and checkpoints on it, the lease and the fence. */
#include "testutil.h"

#include "rados_util.h"

#include <rados/librados.h>

#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static lsm_env *env;

static int setup(void **state)
{
    (void)state;
    env = tr_env(3000, false);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    env_rados_close(env);
    return 0;
}

/* dir's value in the pool's top directory ("d:ID"), via a raw omap read:
 * its length, or -1. */
static int rados_omap_lookup_dir(rados_ioctx_t io, const char *dir, char *val, size_t cap)
{
    rados_read_op_t op = rados_create_read_op();
    rados_omap_iter_t it = NULL;
    int prval = 0;
    const char *keys[1] = {dir};
    rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
    int r = rados_read_op_operate(op, io, "lsmfs.root", 0);
    rados_release_read_op(op);
    char *k, *v;
    size_t n = 0;
    if (r == 0 && rados_omap_get_next(it, &k, &v, &n) == 0 && k != NULL) {
        n = n < cap - 1 ? n : cap - 1;
        memcpy(val, v, n);
        val[n] = '\0';
    } else {
        r = -1;
    }
    if (it)
        rados_omap_get_end(it);
    return r < 0 ? -1 : (int)n;
}

static void path_of(char *out, size_t cap, const char *dir, const char *name)
{
    if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap)
        fail_msg("path too long");
}

static void write_file(const char *path, const char *data)
{
    ASSERT_OK(env_write_file_sync(env, path, data, strlen(data)));
}

static void assert_file(const char *path, const char *want)
{
    char *got;
    size_t n;
    ASSERT_OK(env_read_file(env, path, &got, &n));
    assert_int_equal(n, strlen(want));
    assert_memory_equal(got, want, n);
    free(got);
}

/* Files: create, append across the buffer, sync, read back, size, rename
 * over an existing name, link (two names, one object), remove each name. */
static void test_files(void **state)
{
    (void)state;
    char dir[128], a[256], b[256], c[256];
    tr_name(dir, sizeof dir, "files");
    ASSERT_OK(env->create_dir(env, dir));
    ASSERT_OK(env->create_dir(env, dir)); /* ok if it exists */
    path_of(a, sizeof a, dir, "a");
    path_of(b, sizeof b, dir, "b");
    path_of(c, sizeof c, dir, "c");
    assert_false(env->file_exists(env, a));

    lsm_wfile *f;
    ASSERT_OK(env->new_wfile(env, a, &f));
    size_t big = 700 * 1024;
    char *data = malloc(big);
    assert_non_null(data);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)(i * 7 + i / 4096);
    for (size_t off = 0; off < big; off += 10000)
        ASSERT_OK(f->ops->append(f, data + off, big - off < 10000 ? big - off : 10000));
    ASSERT_OK(f->ops->sync(f));
    ASSERT_OK(f->ops->close(f));
    uint64_t size;
    ASSERT_OK(env->file_size(env, a, &size));
    assert_int_equal(size, big);
    lsm_rfile *r;
    ASSERT_OK(env->new_rfile(env, a, &r));
    char *back = malloc(big);
    size_t got;
    ASSERT_OK(r->ops->pread(r, 1000, back, big, &got));
    assert_int_equal(got, big - 1000);
    assert_memory_equal(back, data + 1000, got);
    r->ops->close(r);
    free(back);
    free(data);

    write_file(b, "old b");
    ASSERT_OK(env->rename_file(env, b, c));
    assert_false(env->file_exists(env, b));
    assert_file(c, "old b");
    write_file(b, "new b");
    ASSERT_OK(env->rename_file(env, b, c)); /* over an existing name */
    assert_file(c, "new b");

    ASSERT_OK(env->link_file(env, c, b));
    lsm_status *s = env->link_file(env, c, b);
    assert_non_null(s); /* b exists */
    lsm_status_free(s);
    ASSERT_OK(env->remove_file(env, c));
    assert_file(b, "new b"); /* the object lives on under its other name */
    assert_true(tu_has_child(env, dir, "b"));
    assert_false(tu_has_child(env, dir, "c"));

    ASSERT_OK(env->truncate_file(env, b, 3));
    assert_file(b, "new");
    ASSERT_OK(env->sync_file(env, b));
    ASSERT_OK(env->sync_dir(env, dir));

    s = env->remove_dir(env, dir);
    assert_non_null(s); /* not empty */
    lsm_status_free(s);
    ASSERT_OK(env->remove_file(env, a));
    ASSERT_OK(env->remove_file(env, b));
    s = env->new_sfile(env, a, &(lsm_sfile *){NULL});
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR); /* ENOENT */
    lsm_status_free(s);
    ASSERT_OK(env->remove_dir(env, dir));
    assert_false(env->file_exists(env, dir));
}

/* Directories nest and move whole: a renamed directory keeps its files. */
static void test_dirs(void **state)
{
    (void)state;
    char dir[128], sub[256], tmp[256], dest[256], f[300];
    tr_name(dir, sizeof dir, "dirs");
    ASSERT_OK(env->create_dir(env, dir));
    path_of(sub, sizeof sub, dir, "snapshots");
    ASSERT_OK(env->create_dir(env, sub));
    path_of(tmp, sizeof tmp, sub, ".tmp-x");
    path_of(dest, sizeof dest, sub, "x");
    ASSERT_OK(env->create_dir(env, tmp));
    path_of(f, sizeof f, tmp, "CURRENT");
    write_file(f, "MANIFEST-000002\n");
    ASSERT_OK(env_publish_dir(env, tmp, dest, sub));
    path_of(f, sizeof f, dest, "CURRENT");
    assert_file(f, "MANIFEST-000002\n");
    assert_true(tu_has_child(env, sub, "x"));
    assert_false(tu_has_child(env, sub, ".tmp-x"));
    env_remove_tree(env, dest);
    assert_false(env->file_exists(env, dest));
    ASSERT_OK(env->remove_dir(env, sub));
    ASSERT_OK(env->remove_dir(env, dir));
}

struct syncer {
    lsm_db *db;
    int id;
};

static void *sync_puts(void *arg)
{
    struct syncer *a = arg;
    lsm_write_options wo = {.sync = true};
    for (int i = 0; i < 40; i++) {
        char k[32];
        snprintf(k, sizeof k, "t%d-%03d", a->id, i);
        lsm_status *s = lsm_put(a->db, &wo, k, strlen(k), k, strlen(k));
        if (s) {
            fprintf(stderr, "put %s: %s\n", k, lsm_status_message(s));
            abort();
        }
    }
    return NULL;
}

/* The write path on RADOS: 8 threads of sync writes (their syncs overlap
 * and share), a flush to tables, a reopen that replays; all there. */
static void test_store_write_reopen(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "store");
    lsm_db *db = tu_open_db(dir, env, 64 * 1024);
    struct syncer args[8];
    for (int i = 0; i < 8; i++)
        args[i] = (struct syncer){db, i};
    tu_run_threads(8, sync_puts, args, sizeof args[0]);
    uint64_t syncs = tu_prop(db, "lsm.wal-syncs");
    assert_true(syncs > 0 && syncs <= 320);
    char v[2000];
    memset(v, 'v', sizeof v);
    lsm_write_options wo = {.sync = false};
    for (int i = 0; i < 200; i++) { /* past two memtables: tables too */
        char k[32];
        snprintf(k, sizeof k, "big%04d", i);
        ASSERT_OK(lsm_put(db, &wo, k, strlen(k), v, sizeof v));
    }
    ASSERT_OK(lsm_close(db));
    db = tu_open_db(dir, env, 64 * 1024);
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 40; i += 13) {
            char k[32];
            snprintf(k, sizeof k, "t%d-%03d", t, i);
            tu_assert_value(db, k, k);
        }
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    tr_destroy(dir, env);
}

/* A checkpoint under snapshots/ is copy-free (links) and opens read-only
 * while the writer goes on; the live store refuses a read-only open. */
static void test_checkpoint_read_while_writing(void **state)
{
    (void)state;
    char dir[128], snaps[256], cp[300];
    tr_name(dir, sizeof dir, "cp");
    lsm_db *db = tu_open_db(dir, env, 64 * 1024);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(db, &wo, "k", 1, "before", 6));
    path_of(snaps, sizeof snaps, dir, "snapshots");
    ASSERT_OK(env->create_dir(env, snaps));
    path_of(cp, sizeof cp, snaps, "one");
    ASSERT_OK(lsm_checkpoint(db, cp));
    ASSERT_OK(lsm_put(db, &wo, "k", 1, "after", 5));

    lsm_env *reader = tr_env(0, false); /* another client: another host */
    lsm_options o;
    tu_db_options(&o, reader, 0);
    o.create_if_missing = false;
    o.read_only = true;
    lsm_db *ro = NULL;
    ASSERT_OK(lsm_open(&o, cp, &ro));
    tu_assert_value(ro, "k", "before");
    ASSERT_OK(lsm_close(ro));
    lsm_status *s = lsm_open(&o, dir, &ro);
    assert_int_equal(lsm_status_code(s), LSM_BUSY);
    lsm_status_free(s);
    env_rados_close(reader);

    tu_assert_value(db, "k", "after");
    ASSERT_OK(lsm_close(db));
    tr_destroy(cp, env);
    ASSERT_OK(env->remove_dir(env, snaps));
    tr_destroy(dir, env);
}

/* A second client is refused while the lease is live, naming the holder. */
static void test_lease_refuses_second_writer(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "lease");
    lsm_db *db = tu_open_db(dir, env, 0);
    lsm_env *other = tr_env(3000, false);
    lsm_options o;
    tu_db_options(&o, other, 0);
    lsm_db *db2 = NULL;
    lsm_status *s = lsm_open(&o, dir, &db2);
    assert_int_equal(lsm_status_code(s), LSM_BUSY);
    lsm_status_free(s);
    /* The lease outlives several renewal periods. */
    sleep(4);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(db, &wo, "k", 1, "v", 1));
    ASSERT_OK(lsm_close(db));
    ASSERT_OK(lsm_open(&o, dir, &db2)); /* let go cleanly: no takeover */
    assert_int_equal(env_rados_takeover_us(other), 0);
    tu_assert_value(db2, "k", "v");
    ASSERT_OK(lsm_close(db2));
    tr_destroy(dir, other);
    env_rados_close(other);
}

/* The lease contract: once a renewal fails (here: an operator broke the
 * lock), the writer refuses every write to its store itself (EIO, sticky),
 * reads go on, and so do writes elsewhere through the env. */
static void test_lost_lease_refuses_writes(void **state)
{
    (void)state;
    char dir[128], oid[128];
    tr_name(dir, sizeof dir, "lost");
    lsm_env *a_env = tr_env(2000, false);
    lsm_db *a = tu_open_db(dir, a_env, 0);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(a, &wo, "k", 1, "v", 1));

    /* Break A's lock from another client, as `rados lock break` would. */
    rados_t c;
    rados_ioctx_t io;
    assert_int_equal(rados_create(&c, NULL), 0);
    assert_int_equal(rados_conf_read_file(c, getenv("LSM_CEPH_CONF")), 0);
    assert_int_equal(rados_connect(c), 0);
    assert_int_equal(rados_ioctx_create(c, TR_POOL, &io), 0);
    char val[64];
    int n = rados_omap_lookup_dir(io, dir, val, sizeof val);
    assert_true(n > 2);
    snprintf(oid, sizeof oid, "lsmfs.d.%s", val + 2);
    int excl;
    char tag[128], clients[128], cookies[256], addrs[256];
    size_t tl = sizeof tag, cl = sizeof clients, kl = sizeof cookies, al = sizeof addrs;
    assert_int_equal(rados_list_lockers(io, oid, "lsmfs.writer", &excl, tag, &tl, clients, &cl,
                                        cookies, &kl, addrs, &al),
                     1);
    assert_int_equal(rados_break_lock(io, oid, "lsmfs.writer", clients, cookies), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(c);

    sleep(2); /* past a renewal (every half second) */
    lsm_status *s = lsm_put(a, &wo, "k", 1, "w", 1);
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    assert_true(tu_mentions(s, "lease"));
    lsm_status_free(s);
    tu_assert_value(a, "k", "v"); /* reads go on */
    /* Outside the lost store's tree the env goes on writing (before: its
     * every create was refused, in any directory). */
    char elsewhere[160];
    snprintf(elsewhere, sizeof elsewhere, "%s-elsewhere", dir);
    ASSERT_OK(a_env->create_dir(a_env, elsewhere));
    ASSERT_OK(a_env->remove_dir(a_env, elsewhere));
    lsm_status_free(lsm_close(a));
    env_rados_close(a_env);
}

/* Takeover: B breaks A's live lease (-o takeover), blocklists A and raises
 * the fence; A's next write is refused (EIO, sticky), B has A's synced
 * writes and nothing A tried after. */
static void test_takeover_fences_old_writer(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "fence");
    lsm_env *a_env = tr_env(3000, false);
    lsm_db *a = tu_open_db(dir, a_env, 0);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(a, &wo, "k", 1, "a1", 2));
    uint64_t a_epoch = env_rados_epoch(a_env);
    assert_true(a_epoch > 0);

    lsm_env *b_env = tr_env(3000, true);
    lsm_db *b = tu_open_db(dir, b_env, 0);
    assert_true(env_rados_epoch(b_env) > a_epoch);
    assert_true(env_rados_takeover_us(b_env) > 0);
    ASSERT_OK(lsm_put(b, &wo, "k", 1, "b1", 2));

    lsm_status *s = lsm_put(a, &wo, "k", 1, "a2", 2);
    assert_non_null(s); /* refused: blocklisted or fenced */
    lsm_status_free(s);
    s = lsm_put(a, &wo, "j", 1, "a3", 2);
    assert_non_null(s); /* sticky */
    lsm_status_free(s);
    lsm_status_free(lsm_close(a));
    env_rados_close(a_env);

    tu_assert_value(b, "k", "b1");
    char *v = NULL;
    size_t n;
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    s = lsm_get(b, &ro, "j", 1, &v, &n);
    assert_int_equal(lsm_status_code(s), LSM_NOT_FOUND);
    lsm_status_free(s);
    ASSERT_OK(lsm_close(b));
    tr_destroy(dir, b_env);
    env_rados_close(b_env);
}

/* ------------------------------------------------ raw looks at the pool */

struct raw {
    rados_t c;
    rados_ioctx_t io;
};

static void raw_open(struct raw *r)
{
    assert_int_equal(rados_create(&r->c, NULL), 0);
    assert_int_equal(rados_conf_read_file(r->c, getenv("LSM_CEPH_CONF")), 0);
    assert_int_equal(rados_connect(r->c), 0);
    assert_int_equal(rados_ioctx_create(r->c, TR_POOL, &r->io), 0);
}

static void raw_close(struct raw *r)
{
    rados_ioctx_destroy(r->io);
    rados_shutdown(r->c);
}

/* The object of store directory dir (in the pool's top directory). */
static void raw_dir_oid(struct raw *r, const char *dir, char *oid, size_t cap)
{
    char val[64];
    assert_true(rados_omap_lookup_dir(r->io, dir, val, sizeof val) > 2);
    snprintf(oid, cap, "lsmfs.d.%s", val + 2);
}

/* One directory object's omap: keys (names and intents) and the objects
 * names point at (files: "f:OID"; directories: "d:ID"). */
struct raw_dir {
    int n;
    char key[64][128];
    char oid[64][64];
};

static void raw_list(struct raw *r, const char *dir_oid, struct raw_dir *d)
{
    rados_read_op_t op = rados_create_read_op();
    rados_omap_iter_t it = NULL;
    unsigned char more = 0;
    int prval = 0;
    rados_read_op_omap_get_vals2(op, "", "", 64, &it, &more, &prval);
    assert_int_equal(rados_read_op_operate(op, r->io, dir_oid, 0), 0);
    rados_release_read_op(op);
    assert_false(more);
    d->n = 0;
    char *k, *v;
    size_t vlen;
    while (rados_omap_get_next(it, &k, &v, &vlen) == 0 && k != NULL) {
        snprintf(d->key[d->n], sizeof d->key[0], "%s", k);
        d->oid[d->n][0] = '\0';
        if (vlen > 2 && v[1] == ':')
            snprintf(d->oid[d->n], sizeof d->oid[0], "%s%.*s", v[0] == 'd' ? "lsmfs.d." : "",
                     (int)vlen - 2, v + 2);
        d->n++;
    }
    rados_omap_get_end(it);
}

/* Store directory dir's omap. */
static void raw_list_dir(struct raw *r, const char *dir, struct raw_dir *d)
{
    char dir_oid[128];
    raw_dir_oid(r, dir, dir_oid, sizeof dir_oid);
    raw_list(r, dir_oid, d);
}

/* Object oid's numeric xattr name, or -1 when it has none (or is gone). */
static long long raw_number(struct raw *r, const char *oid, const char *name)
{
    char v[32];
    int n = rados_getxattr(r->io, oid, name, v, sizeof v - 1);
    if (n < 0)
        return -1;
    v[n] = '\0';
    return atoll(v);
}

static long long raw_epoch(struct raw *r, const char *oid)
{
    return raw_number(r, oid, "lsmfs.epoch");
}

/* Every object of the store in dir (its files, then its own) carries the
 * directory's epoch. */
static void assert_tree_stamped(struct raw *r, const char *dir)
{
    char dir_oid[128];
    struct raw_dir d;
    raw_dir_oid(r, dir, dir_oid, sizeof dir_oid);
    raw_list(r, dir_oid, &d);
    long long epoch = raw_epoch(r, dir_oid);
    assert_true(epoch > 0);
    for (int i = 0; i < d.n; i++)
        if (d.oid[i][0] != '\0' && raw_epoch(r, d.oid[i]) != epoch)
            fail_msg("%s (%s) has epoch %lld, its directory %lld", d.key[i], d.oid[i],
                     raw_epoch(r, d.oid[i]), epoch);
}

/* A crash point: the env dies at the at-th pass of point once armed. */
struct crash_at {
    const char *point;
    int at;
    atomic_bool armed;
    atomic_int seen;
    char oid[64]; /* the object it died at */
};

static bool crash_hook(void *arg, const char *point, const char *oid)
{
    struct crash_at *c = arg;
    if (!atomic_load(&c->armed) || strcmp(point, c->point) != 0 || ++c->seen != c->at)
        return false;
    snprintf(c->oid, sizeof c->oid, "%s", oid);
    return true;
}

/* A store with a few files in dir, closed cleanly. */
static void make_small_store(const char *dir)
{
    lsm_db *db = tu_open_db(dir, env, 0);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(db, &wo, "k", 1, "v", 1));
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0)); /* a table too */
    ASSERT_OK(lsm_put(db, &wo, "j", 1, "w", 1));
    ASSERT_OK(lsm_put(db, &wo, "after", 5, "0", 1));
    ASSERT_OK(lsm_close(db));
}

/* The store's objects as a first stamping finds them (no fence yet: a store
 * written before it had one), or, holder set, as a writer that died left
 * them (its address recorded). */
static void reset_fence(struct raw *r, const char *dir, const char *holder)
{
    char dir_oid[128];
    struct raw_dir d;
    raw_dir_oid(r, dir, dir_oid, sizeof dir_oid);
    raw_list(r, dir_oid, &d);
    if (holder == NULL) {
        for (int i = 0; i < d.n; i++)
            if (d.oid[i][0] != '\0')
                rados_rmxattr(r->io, d.oid[i], "lsmfs.epoch");
        rados_rmxattr(r->io, dir_oid, "lsmfs.epoch");
    } else {
        assert_int_equal(rados_setxattr(r->io, dir_oid, "lsmfs.holder", holder, strlen(holder)),
                         0);
    }
}

/* Opens the store in dir, writes, compacts (every old table and log is
 * replaced and removed: guarded ops on the old objects), closes. */
static void write_after_takeover(const char *dir, const char *value)
{
    lsm_env *b_env = tr_env(0, true); /* the dead writer's lock has not lapsed */
    lsm_db *b = tu_open_db(dir, b_env, 0);
    tu_assert_value(b, "k", "v");
    tu_assert_value(b, "j", "w");
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(b, &wo, "after", 5, value, strlen(value))); /* one key: the tree stays small */
    ASSERT_OK(lsm_compact_range(b, NULL, 0, NULL, 0));
    tu_verify_clean(b);
    ASSERT_OK(lsm_close(b));
    env_rados_close(b_env);
}

/* A stamping slowed at each object: "stamped" sleeps sleep_ms. */
static bool slow_stamp_hook(void *arg, const char *point, const char *oid)
{
    (void)oid;
    if (strcmp(point, "stamped") == 0)
        usleep((useconds_t)*(const int *)arg * 1000);
    return false;
}

/* A lock whose fence (a first stamping here, a takeover alike) takes longer
 * than the lease keeps it: the renewer runs from the moment the lock is won
 * (before: it started after the fence, so the lease lapsed during its own
 * takeover and the open's first write was refused). */
static void test_slow_fence_keeps_its_lease(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "slowfence");
    make_small_store(dir);
    struct raw r;
    raw_open(&r);
    reset_fence(&r, dir, NULL);
    raw_close(&r);
    enum { LEASE_MS = 1200 };
    int sleep_ms = 400; /* the store's ≥ 5 objects and its directory: ≥ 2.4 s */
    lsm_env *a_env = tr_env(LEASE_MS, false);
    env_rados_set_crash_hook(a_env, slow_stamp_hook, &sleep_ms);
    lsm_options o;
    tu_db_options(&o, a_env, 0);
    lsm_db *a = NULL;
    ASSERT_OK(lsm_open(&o, dir, &a));
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(a, &wo, "n", 1, "1", 1));
    ASSERT_OK(lsm_close(a));
    env_rados_close(a_env);
    tr_destroy(dir, env);
}

/* A writer that dies after stamping k objects of the tree, at every k, at a
 * first stamping and at a takeover: the next writer's every op on every
 * object works (before: the directory was stamped first, so a first
 * stamping cut short left its files without an epoch and them refused as
 * fenced for good). */
static void test_fence_stamping_crash_points(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "stampcrash");
    make_small_store(dir);
    struct raw r;
    raw_open(&r);
    const char *holders[2] = {NULL, "127.0.0.1:9/4242"};
    for (int h = 0; h < 2; h++) {
        bool died = true;
        for (int k = 1; died; k++) {
            reset_fence(&r, dir, holders[h]);
            lsm_env *a_env = tr_env(0, true);
            struct crash_at c = {.point = "stamped", .at = k};
            atomic_store(&c.armed, true);
            env_rados_set_crash_hook(a_env, crash_hook, &c);
            lsm_options o;
            tu_db_options(&o, a_env, 0);
            lsm_db *a = NULL;
            lsm_status *s = lsm_open(&o, dir, &a);
            died = s != NULL;
            if (died)
                assert_true(tu_mentions(s, "crash point"));
            else
                ASSERT_OK(lsm_close(a)); /* k past the tree: no crash */
            lsm_status_free(s);
            env_rados_close(a_env);
            char value[32];
            snprintf(value, sizeof value, "%d-%d", h, k);
            print_message("holder %s, died after %d stamped: %s\n", holders[h] ? "set" : "none",
                          k, died ? "yes" : "no (the whole tree stamped)");
            write_after_takeover(dir, value);
            assert_tree_stamped(&r, dir);
        }
    }
    raw_close(&r);
    tr_destroy(dir, env);
}

/* Whether d names (not intends) object oid. */
static bool raw_names(const struct raw_dir *d, const char *oid)
{
    for (int i = 0; i < d->n; i++)
        if (d->key[i][0] != '/' && strcmp(d->oid[i], oid) == 0)
            return true;
    return false;
}

static bool raw_has_key(const struct raw_dir *d, const char *key)
{
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->key[i], key) == 0)
            return true;
    return false;
}

/* Writes to writer a (unsynced, past memtables) until its env dies at its
 * crash point c (a new log's or table's create). */
static void write_until_crash(lsm_db *a, struct crash_at *c)
{
    char v[2000];
    memset(v, 'v', sizeof v);
    lsm_write_options wo = {.sync = false};
    lsm_status *s = NULL;
    atomic_store(&c->armed, true);
    for (int i = 0; s == NULL && atomic_load(&c->seen) < 1 && i < 5000; i++) {
        char k[32];
        snprintf(k, sizeof k, "big%05d", i);
        s = lsm_put(a, &wo, k, strlen(k), v, sizeof v);
    }
    lsm_status_free(s);
    for (int i = 0; atomic_load(&c->seen) < 1 && i < 100; i++)
        usleep(50 * 1000); /* a flush's table may be the create */
    assert_int_equal(atomic_load(&c->seen), 1);
}

/* A writer that dies between a new object's intent or create and its name
 * leaves an intent (and an object no name points at): the next holder's
 * lock sweeps both away (a holder that dies mid-sweep leaves the intent
 * for the next) and removes no named object; the store is intact (before:
 * such an object stayed in the pool for good). */
static void test_orphan_swept_at_takeover(void **state)
{
    (void)state;
    const char *points[2] = {"created", "intent"};
    for (int p = 0; p < 2; p++) {
        char dir[128], lock[160], dir_oid[128], key[96];
        tr_name(dir, sizeof dir, "orphan");
        path_of(lock, sizeof lock, dir, "LOCK");
        lsm_env *a_env = tr_env(0, false);
        struct crash_at c = {.point = points[p], .at = 1};
        env_rados_set_crash_hook(a_env, crash_hook, &c);
        lsm_db *a = tu_open_db(dir, a_env, 64 * 1024);
        lsm_write_options wo = {.sync = true};
        ASSERT_OK(lsm_put(a, &wo, "k", 1, "v", 1));
        write_until_crash(a, &c);
        lsm_status_free(lsm_close(a));
        env_rados_close(a_env);

        struct raw r;
        raw_open(&r);
        raw_dir_oid(&r, dir, dir_oid, sizeof dir_oid);
        struct raw_dir before, after;
        raw_list(&r, dir_oid, &before);
        snprintf(key, sizeof key, "/new/%s", c.oid);
        assert_true(raw_has_key(&before, key));
        assert_false(raw_names(&before, c.oid));
        uint64_t size;
        time_t mtime;
        assert_int_equal(rados_stat(r.io, c.oid, &size, &mtime), p == 0 ? 0 : -ENOENT);

        lsm_filelock *l = NULL;
        if (p == 0) { /* a holder that dies mid-sweep: the next one sweeps again */
            lsm_env *d_env = tr_env(0, true);
            struct crash_at d = {.point = "swept", .at = 1};
            atomic_store(&d.armed, true);
            env_rados_set_crash_hook(d_env, crash_hook, &d);
            lsm_status *s = d_env->lock_file(d_env, lock, &l);
            assert_true(tu_mentions(s, "crash point"));
            lsm_status_free(s);
            env_rados_close(d_env);
            assert_string_equal(d.oid, c.oid);
            assert_int_equal(rados_stat(r.io, c.oid, &size, &mtime), -ENOENT);
            raw_list(&r, dir_oid, &after);
            assert_true(raw_has_key(&after, key)); /* the intent outlived it */
        }
        lsm_env *b_env = tr_env(0, true); /* the dead writer's lock has not lapsed */
        ASSERT_OK(b_env->lock_file(b_env, lock, &l));
        assert_int_equal(rados_stat(r.io, c.oid, &size, &mtime), -ENOENT);
        raw_list(&r, dir_oid, &after);
        assert_false(raw_has_key(&after, key));
        for (int i = 0; i < before.n; i++) {
            if (before.key[i][0] == '/')
                continue;
            assert_true(raw_has_key(&after, before.key[i]));
            assert_int_equal(rados_stat(r.io, before.oid[i], &size, &mtime), 0);
        }
        ASSERT_OK(b_env->unlock_file(b_env, l));
        lsm_db *b = tu_open_db(dir, b_env, 0);
        tu_assert_value(b, "k", "v");
        tu_verify_clean(b);
        ASSERT_OK(lsm_close(b));
        tr_destroy(dir, b_env);
        env_rados_close(b_env);
        raw_close(&r);
    }
}

/* Whether any key of d is an intent. */
static bool raw_has_intent(const struct raw_dir *d)
{
    for (int i = 0; i < d->n; i++)
        if (d->key[i][0] == '/')
            return true;
    return false;
}

/* Every name of d points at an object that exists, and no intent is left. */
static void assert_names_whole(struct raw *r, const struct raw_dir *d)
{
    uint64_t size;
    time_t mtime;
    assert_false(raw_has_intent(d));
    for (int i = 0; i < d->n; i++)
        if (d->oid[i][0] != '\0' && rados_stat(r->io, d->oid[i], &size, &mtime) != 0)
            fail_msg("%s names %s, which is gone", d->key[i], d->oid[i]);
}

/* Writing a create's intent fails: the create fails naming the path and
 * the intent, nothing is made, the name it would replace keeps its file;
 * a store whose new log or table cannot be made keeps every write it
 * acknowledged. */
static void test_intent_write_fails(void **state)
{
    (void)state;
    char dir[128], a[256], sub[256];
    tr_name(dir, sizeof dir, "intentfail");
    lsm_env *e = tr_env(0, false);
    struct tr_fault f = {.op = "intent", .err = -EIO};
    env_rados_set_fault_hook(e, tr_fault_hook, &f);
    ASSERT_OK(e->create_dir(e, dir));
    path_of(a, sizeof a, dir, "a");
    path_of(sub, sizeof sub, dir, "sub");
    ASSERT_OK(env_write_file_sync(e, a, "old a", 5));
    struct raw r;
    raw_open(&r);
    char dir_oid[128];
    struct raw_dir before, after;
    raw_dir_oid(&r, dir, dir_oid, sizeof dir_oid);
    raw_list(&r, dir_oid, &before);

    atomic_store(&f.armed, true);
    lsm_wfile *w = NULL;
    char want[400];
    snprintf(want, sizeof want, "rados write the intent of %s: Input/output error", a);
    ASSERT_FAILS(e->new_wfile(e, a, &w), LSM_IO_ERROR, want);
    assert_null(w);
    ASSERT_FAILS(e->create_dir(e, sub), LSM_IO_ERROR, "intent");
    atomic_store(&f.armed, false);
    raw_list(&r, dir_oid, &after);
    assert_int_equal(after.n, before.n);
    for (int i = 0; i < before.n; i++)
        assert_string_equal(after.oid[i], before.oid[i]);
    char *got;
    size_t n;
    ASSERT_OK(env_read_file(e, a, &got, &n));
    assert_int_equal(n, 5);
    assert_memory_equal(got, "old a", 5);
    free(got);
    assert_false(e->file_exists(e, sub));
    ASSERT_OK(e->remove_file(e, a));

    /* The store: writes until a new log or table's intent fails. */
    lsm_db *db = tu_open_db(dir, e, 64 * 1024);
    char v[2000];
    memset(v, 'v', sizeof v);
    int acked = 0;
    atomic_store(&f.armed, true);
    lsm_status *p = NULL;
    while (p == NULL && acked < 5000) {
        char k[32];
        snprintf(k, sizeof k, "big%05d", acked);
        lsm_write_options wo = {.sync = true};
        if ((p = lsm_put(db, &wo, k, strlen(k), v, sizeof v)) == NULL)
            acked++;
    }
    ASSERT_FAILS(p, LSM_IO_ERROR, "intent");
    atomic_store(&f.armed, false);
    assert_true(atomic_load(&f.seen) > 0);
    print_message("%d writes acknowledged before a create's intent failed\n", acked);
    lsm_status_free(lsm_close(db)); /* a failed flush is sticky: the close may say so */
    raw_list(&r, dir_oid, &after);
    assert_names_whole(&r, &after);
    db = tu_open_db(dir, e, 64 * 1024);
    for (int i = 0; i < acked; i++) {
        char k[32];
        snprintf(k, sizeof k, "big%05d", i);
        char *got_v = NULL;
        size_t got_n = 0;
        lsm_read_options ro;
        lsm_read_options_init(&ro);
        ASSERT_OK(lsm_get(db, &ro, k, strlen(k), &got_v, &got_n));
        assert_int_equal(got_n, sizeof v);
        free(got_v);
    }
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    raw_close(&r);
    tr_destroy(dir, e);
    env_rados_close(e);
}

/* Opens the store in dir on a new env (takeover as asked) whose op fails
 * with EIO: the open fails with LSM_IO_ERROR mentioning want; how many
 * times op failed. */
static int open_failing(const char *dir, bool takeover, const char *op, const char *want)
{
    lsm_env *e = tr_env(0, takeover);
    struct tr_fault f = {.op = op, .err = -EIO};
    atomic_store(&f.armed, true);
    env_rados_set_fault_hook(e, tr_fault_hook, &f);
    lsm_options o;
    tu_db_options(&o, e, 0);
    lsm_db *db = NULL;
    ASSERT_FAILS(lsm_open(&o, dir, &db), LSM_IO_ERROR, want);
    assert_null(db);
    env_rados_close(e);
    return atomic_load(&f.seen);
}

/* The sweep's listing of intents fails as a writer locks the store (at a
 * plain open, and at a takeover from a live writer): the open fails with
 * the listing's error, the lease goes with it (the next open is not told
 * the store is busy), and the store is whole. */
static void test_sweep_listing_fails(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "sweepfail");
    make_small_store(dir);
    for (int takeover = 0; takeover < 2; takeover++) {
        lsm_env *a_env = NULL;
        lsm_db *a = NULL;
        if (takeover) { /* a live writer, taken over */
            a_env = tr_env(0, false);
            a = tu_open_db(dir, a_env, 0);
        }
        assert_true(open_failing(dir, takeover, "list intents", "rados list") > 0);
        lsm_env *c_env = tr_env(0, takeover);
        lsm_db *c = tu_open_db(dir, c_env, 0);
        tu_assert_value(c, "k", "v");
        tu_assert_value(c, "j", "w");
        tu_verify_clean(c);
        ASSERT_OK(lsm_close(c));
        env_rados_close(c_env);
        if (a != NULL) {
            lsm_status_free(lsm_close(a));
            env_rados_close(a_env);
        }
    }
    struct raw r;
    raw_open(&r);
    struct raw_dir d;
    raw_list_dir(&r, dir, &d);
    assert_names_whole(&r, &d);
    raw_close(&r);
    tr_destroy(dir, env);
}

/* A takeover whose breaking of the live writer's lease fails: the open
 * fails naming the break and its error (before: "the store is in use
 * (lease held)", the failure ignored), the writer keeps its lease and
 * writes on, and the next takeover wins. */
static void test_takeover_break_fails(void **state)
{
    (void)state;
    char dir[128];
    tr_name(dir, sizeof dir, "breakfail");
    make_small_store(dir);
    lsm_env *a_env = tr_env(0, false);
    lsm_db *a = tu_open_db(dir, a_env, 0);
    assert_int_equal(open_failing(dir, true, "break lock", "cannot break the lease held by"), 1);
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(a, &wo, "still", 5, "a", 1));
    lsm_env *c_env = tr_env(0, true);
    lsm_db *c = tu_open_db(dir, c_env, 0);
    tu_assert_value(c, "still", "a");
    ASSERT_OK(lsm_close(c));
    env_rados_close(c_env);
    lsm_status_free(lsm_close(a)); /* fenced: its close may fail */
    env_rados_close(a_env);
    tr_destroy(dir, env);
}

/* A directory whose creates a crash cut short (an intent, maybe its
 * object, no name) is removed with them: rmdir removes the unnamed objects
 * too (before: the directory went and the object stayed in the pool for
 * good, no sweep ever to find it). */
static void test_rmdir_sweeps_intents(void **state)
{
    (void)state;
    char dir[128], x[256], dir_oid[128];
    tr_name(dir, sizeof dir, "rmdirintent");
    ASSERT_OK(env->create_dir(env, dir));
    path_of(x, sizeof x, dir, "x");
    const char *points[2] = {"created", "intent"};
    char created[64] = "";
    for (int p = 0; p < 2; p++) {
        lsm_env *a_env = tr_env(0, false);
        struct crash_at c = {.point = points[p], .at = 1};
        atomic_store(&c.armed, true);
        env_rados_set_crash_hook(a_env, crash_hook, &c);
        lsm_wfile *w = NULL;
        ASSERT_FAILS(a_env->new_wfile(a_env, x, &w), LSM_IO_ERROR, "crash point");
        env_rados_close(a_env);
        if (p == 0)
            snprintf(created, sizeof created, "%s", c.oid);
    }
    struct raw r;
    raw_open(&r);
    raw_dir_oid(&r, dir, dir_oid, sizeof dir_oid);
    struct raw_dir d;
    raw_list(&r, dir_oid, &d);
    assert_int_equal(d.n, 2);
    assert_true(raw_has_intent(&d));
    uint64_t size;
    time_t mtime;
    assert_int_equal(rados_stat(r.io, created, &size, &mtime), 0);
    ASSERT_OK(env->remove_dir(env, dir));
    assert_false(env->file_exists(env, dir));
    assert_int_equal(rados_stat(r.io, dir_oid, &size, &mtime), -ENOENT);
    if (rados_stat(r.io, created, &size, &mtime) != -ENOENT)
        fail_msg("%s, created under an intent in %s, outlived its directory", created, dir);
    raw_close(&r);
}

/* Object oid's name count, or -1 when it is gone. */
static long long raw_refs(struct raw *r, const char *oid)
{
    return raw_number(r, oid, "lsmfs.refs");
}

/* A directory for a crash window: dir with file a ("data"); b and LOCK
 * named, not made. */
struct window {
    char dir[128], a[256], b[256], lock[256];
};

static void window_make(struct window *w, const char *name)
{
    tr_name(w->dir, sizeof w->dir, name);
    ASSERT_OK(env->create_dir(env, w->dir));
    path_of(w->a, sizeof w->a, w->dir, "a");
    path_of(w->b, sizeof w->b, w->dir, "b");
    path_of(w->lock, sizeof w->lock, w->dir, "LOCK");
    write_file(w->a, "data");
}

static void window_remove(const struct window *w)
{
    ASSERT_OK(env->remove_file(env, w->lock));
    ASSERT_OK(env->remove_dir(env, w->dir));
}

/* w's subdirectories s1 and s2 (paths of cap bytes), made. */
static void window_subdirs(const struct window *w, char *s1, char *s2, size_t cap)
{
    path_of(s1, cap, w->dir, "s1");
    path_of(s2, cap, w->dir, "s2");
    ASSERT_OK(env->create_dir(env, s1));
    ASSERT_OK(env->create_dir(env, s2));
}

/* Removes w with its (empty) subdirectories s1 and s2 and its file a. */
static void window_remove_all(const struct window *w, const char *s1, const char *s2)
{
    ASSERT_OK(env->remove_dir(env, s1));
    ASSERT_OK(env->remove_dir(env, s2));
    ASSERT_OK(env->remove_file(env, w->a));
    window_remove(w);
}

/* A new env that dies at the first pass of point c (armed). */
static lsm_env *dying_env(struct crash_at *c)
{
    lsm_env *x = tr_env(0, false);
    atomic_store(&c->armed, true);
    env_rados_set_crash_hook(x, crash_hook, c);
    return x;
}

/* The next writer's lock on dir (at lock) sweeps: then no intent or drop
 * record is left; r is open for more looks. */
static void sweep_by_lock(const char *dir, const char *lock, struct raw *r)
{
    lsm_filelock *l = NULL;
    ASSERT_OK(env->lock_file(env, lock, &l));
    ASSERT_OK(env->unlock_file(env, l));
    raw_open(r);
    struct raw_dir d;
    raw_list_dir(r, dir, &d);
    assert_false(raw_has_intent(&d));
}

/* A writer dies in a remove between the name's removal and its object's
 * name count ("unnamed"), or between the count and the record ("dropped"),
 * of a file with one name and of one with two (a checkpoint's link): the
 * next lock drops the name once — the object goes with its last name and
 * stays with its other (before: an object with no name and no intent
 * stayed in the pool for good). */
static void test_remove_crash_windows(void **state)
{
    (void)state;
    const char *points[2] = {"unnamed", "dropped"};
    for (int p = 0; p < 2; p++) {
        for (int names = 1; names <= 2; names++) {
            struct window w;
            window_make(&w, "rmcrash");
            if (names == 2)
                ASSERT_OK(env->link_file(env, w.a, w.b));
            struct crash_at c = {.point = points[p], .at = 1};
            lsm_env *x = dying_env(&c);
            ASSERT_FAILS(x->remove_file(x, w.a), LSM_IO_ERROR, "crash point");
            env_rados_close(x);
            struct raw r;
            sweep_by_lock(w.dir, w.lock, &r);
            assert_false(env->file_exists(env, w.a));
            long long want = names == 1 ? -1 : 1; /* -1: the object is gone */
            if (raw_refs(&r, c.oid) != want)
                fail_msg("%s, %d name(s), died %s: %lld names counted, want %lld", c.oid, names,
                         points[p], raw_refs(&r, c.oid), want);
            if (names == 2) {
                assert_file(w.b, "data");
                ASSERT_OK(env->remove_file(env, w.b));
            }
            assert_int_equal(raw_refs(&r, c.oid), -1);
            raw_close(&r);
            window_remove(&w);
        }
    }
}

/* A writer dies in a link after recording it ("linking") or after raising
 * the count ("linked"), before the new name: the next lock undoes the
 * count; removing the one name drops the object (before: the count stayed
 * one too high and the object outlived its last name). */
static void test_link_crash_windows(void **state)
{
    (void)state;
    const char *points[2] = {"linking", "linked"};
    for (int p = 0; p < 2; p++) {
        struct window w;
        window_make(&w, "lncrash");
        struct crash_at c = {.point = points[p], .at = 1};
        lsm_env *x = dying_env(&c);
        ASSERT_FAILS(x->link_file(x, w.a, w.b), LSM_IO_ERROR, "crash point");
        env_rados_close(x);
        struct raw r;
        sweep_by_lock(w.dir, w.lock, &r);
        if (raw_refs(&r, c.oid) != 1)
            fail_msg("%s, died %s: %lld names counted, want 1", c.oid, points[p],
                     raw_refs(&r, c.oid));
        assert_false(env->file_exists(env, w.b));
        assert_file(w.a, "data");
        ASSERT_OK(env->remove_file(env, w.a));
        assert_int_equal(raw_refs(&r, c.oid), -1);
        raw_close(&r);
        window_remove(&w);
    }
}

/* The object name names in directory d ("" if none). */
static void raw_oid_of(const struct raw_dir *d, const char *name, char *oid, size_t cap)
{
    oid[0] = '\0';
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->key[i], name) == 0)
            snprintf(oid, cap, "%s", d->oid[i]);
}

/* How many names of d (not records) point at object oid. */
static int raw_count_names(const struct raw_dir *d, const char *oid)
{
    int n = 0;
    for (int i = 0; i < d->n; i++)
        n += d->key[i][0] != '/' && strcmp(d->oid[i], oid) == 0;
    return n;
}

/* Object oid's name count is the number of names d1 and d2 (NULL: none)
 * give it; no name: the object is gone. */
static void assert_counted(struct raw *r, const char *oid, const struct raw_dir *d1,
                           const struct raw_dir *d2, const char *when)
{
    int names = raw_count_names(d1, oid) + (d2 ? raw_count_names(d2, oid) : 0);
    long long want = names == 0 ? -1 : names;
    if (raw_refs(r, oid) != want)
        fail_msg("%s, %s: %lld names counted, %d named (want %lld)", oid, when, raw_refs(r, oid),
                 names, want);
}

/* A writer dies as a create replaces a file's name: after the name went
 * to the new object, before the old one's count was lowered ("unnamed"),
 * or after, before its record went ("dropped"); of a file with one name
 * and of one with two: the next lock drops the old name once, the new
 * (empty) file stays (before: no record, the old object stayed in the pool
 * with no name for good: "1 names counted, 0 named"). */
static void test_replace_crash_windows(void **state)
{
    (void)state;
    const char *points[2] = {"unnamed", "dropped"};
    for (int p = 0; p < 2; p++) {
        for (int names = 1; names <= 2; names++) {
            struct window w;
            window_make(&w, "replcrash");
            if (names == 2)
                ASSERT_OK(env->link_file(env, w.a, w.b));
            struct raw r;
            struct raw_dir d;
            char old[64];
            raw_open(&r);
            raw_list_dir(&r, w.dir, &d);
            raw_oid_of(&d, "a", old, sizeof old);
            raw_close(&r);
            struct crash_at c = {.point = points[p], .at = 1};
            lsm_env *x = dying_env(&c);
            lsm_wfile *f = NULL;
            ASSERT_FAILS(x->new_wfile(x, w.a, &f), LSM_IO_ERROR, "crash point");
            env_rados_close(x);
            assert_string_equal(c.oid, old);
            sweep_by_lock(w.dir, w.lock, &r);
            raw_list_dir(&r, w.dir, &d);
            char when[64];
            snprintf(when, sizeof when, "%d name(s), died %s", names, points[p]);
            assert_counted(&r, old, &d, NULL, when);
            assert_file(w.a, "");
            ASSERT_OK(env->remove_file(env, w.a));
            if (names == 2) {
                assert_file(w.b, "data");
                ASSERT_OK(env->remove_file(env, w.b));
            }
            assert_int_equal(raw_refs(&r, old), -1);
            raw_close(&r);
            window_remove(&w);
        }
    }
}

/* A writer dies at each step of a file's rename to another directory over
 * a file there: the next lock leaves every object counted as it is named
 * (the rename done, or both names of the moved file), the replaced file
 * gone with its last name, nothing unnamed (before: the moved file had two
 * names counted as one, so removing one would drop the object the other
 * still names, and the replaced object stayed in the pool: "1 names
 * counted, 2 named"). */
static void test_rename_across_crash_windows(void **state)
{
    (void)state;
    const struct {
        const char *point;
        int at;
    } steps[] = {{"unnamed", 1}, {"dropped", 1}, {"unnamed", 2},
                 {"dropped", 2}, {"linking", 1}, {"linked", 1}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        struct window w;
        char s1[300], s2[300], a[320], b[320], s1_oid[64], s2_oid[64], oa[64], ob[64];
        window_make(&w, "mvcrash");
        window_subdirs(&w, s1, s2, sizeof s1);
        path_of(a, sizeof a, s1, "a");
        path_of(b, sizeof b, s2, "b");
        write_file(a, "moved");
        write_file(b, "old");
        struct raw r;
        struct raw_dir top, d1, d2;
        raw_open(&r);
        raw_list_dir(&r, w.dir, &top);
        raw_oid_of(&top, "s1", s1_oid, sizeof s1_oid);
        raw_oid_of(&top, "s2", s2_oid, sizeof s2_oid);
        raw_list(&r, s1_oid, &d1);
        raw_list(&r, s2_oid, &d2);
        raw_oid_of(&d1, "a", oa, sizeof oa);
        raw_oid_of(&d2, "b", ob, sizeof ob);
        raw_close(&r);
        struct crash_at c = {.point = steps[i].point, .at = steps[i].at};
        lsm_env *x = dying_env(&c);
        ASSERT_FAILS(x->rename_file(x, a, b), LSM_IO_ERROR, "crash point");
        env_rados_close(x);
        sweep_by_lock(w.dir, w.lock, &r);
        raw_list(&r, s1_oid, &d1);
        raw_list(&r, s2_oid, &d2);
        assert_false(raw_has_intent(&d1) || raw_has_intent(&d2));
        char when[64];
        snprintf(when, sizeof when, "died at %s #%d", steps[i].point, steps[i].at);
        print_message("%s: a %s, b %s\n", when, env->file_exists(env, a) ? "kept" : "gone",
                      raw_count_names(&d2, oa) ? "moved" : "old");
        assert_counted(&r, oa, &d1, &d2, when);
        assert_counted(&r, ob, &d1, &d2, when);
        assert_file(b, raw_count_names(&d2, oa) ? "moved" : "old");
        if (env->file_exists(env, a)) {
            assert_file(a, "moved");
            ASSERT_OK(env->remove_file(env, a));
        }
        ASSERT_OK(env->remove_file(env, b));
        assert_int_equal(raw_refs(&r, oa), -1);
        assert_int_equal(raw_refs(&r, ob), -1);
        raw_close(&r);
        window_remove_all(&w, s1, s2);
    }
}

/* A rename between two names of one file does nothing, as rename(2)
 * (before: one name went and the count stayed: "2 names counted, 1
 * named"). */
static void test_rename_between_links(void **state)
{
    (void)state;
    struct window w;
    window_make(&w, "mvlinks");
    ASSERT_OK(env->link_file(env, w.a, w.b));
    ASSERT_OK(env->rename_file(env, w.a, w.b));
    struct raw r;
    struct raw_dir d;
    char oa[64];
    raw_open(&r);
    raw_list_dir(&r, w.dir, &d);
    raw_oid_of(&d, "b", oa, sizeof oa);
    assert_counted(&r, oa, &d, NULL, "renamed between its names");
    assert_file(w.a, "data");
    ASSERT_OK(env->remove_file(env, w.a));
    ASSERT_OK(env->remove_file(env, w.b));
    assert_int_equal(raw_refs(&r, oa), -1);
    raw_close(&r);
    ASSERT_OK(env->remove_dir(env, w.dir));
}

/* Where a remove's lookup is done: both removers wait for each other
 * there, so both have looked the name up before either changes it. */
struct both_resolved {
    atomic_int n;
};

static bool resolved_hook(void *arg, const char *point, const char *oid)
{
    (void)oid;
    struct both_resolved *b = arg;
    if (strcmp(point, "resolved") != 0)
        return false;
    atomic_fetch_add(&b->n, 1);
    for (int i = 0; i < 10000 && atomic_load(&b->n) < 2; i++)
        usleep(1000);
    return false;
}

struct remover {
    lsm_env *env;
    const char *path;
    lsm_status *s;
};

static void *remove_main(void *p)
{
    struct remover *r = p;
    r->s = r->env->remove_file(r->env, r->path);
    return NULL;
}

/* Two removes of one name that both looked it up first (the store's two
 * background threads sweeping the same obsolete table): one removes it, the
 * other finds it gone (ENOENT, as unlink(2)), and a second name of the file keeps its object
 * (before: both dropped the name count, the object went with the second
 * name still in a directory — a checkpoint's linked table lost: "1 names
 * counted" or "No such file"). */
static void test_concurrent_removes_of_one_name(void **state)
{
    (void)state;
    struct window w;
    window_make(&w, "rmtwice");
    ASSERT_OK(env->link_file(env, w.a, w.b));
    struct both_resolved br = {0};
    lsm_env *x = tr_env(0, false);
    env_rados_set_crash_hook(x, resolved_hook, &br);
    struct remover r[2] = {{x, w.a, NULL}, {x, w.a, NULL}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, remove_main, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    env_rados_close(x);
    assert_int_equal(atomic_load(&br.n) >= 2, true);
    int ok = (r[0].s == NULL) + (r[1].s == NULL);
    for (int i = 0; i < 2; i++) {
        if (r[i].s != NULL && strstr(lsm_status_message(r[i].s), "No such file") == NULL)
            fail_msg("remove %d: %s", i, lsm_status_message(r[i].s));
        lsm_status_free(r[i].s);
    }
    assert_int_equal(ok, 1);
    assert_false(env->file_exists(env, w.a));
    struct raw raw;
    struct raw_dir d;
    char ob[64];
    raw_open(&raw);
    raw_list_dir(&raw, w.dir, &d);
    raw_oid_of(&d, "b", ob, sizeof ob);
    if (raw_refs(&raw, ob) != 1)
        fail_msg("%s: %lld names counted, 1 named", ob, raw_refs(&raw, ob));
    assert_file(w.b, "data");
    ASSERT_OK(env->remove_file(env, w.b));
    assert_int_equal(raw_refs(&raw, ob), -1);
    raw_close(&raw);
    ASSERT_OK(env->remove_dir(env, w.dir));
}

/* A directory to rename: dir holds directory s1 (with file f, "inner")
 * and, across, directory s2; to is s2/d (across) or d, made (empty) when
 * over. The objects: s1's, the target's parent's and (over) d's. */
struct dirmove {
    struct window w;
    char s1[300], s2[300], to[320], f[320];
    char s1_oid[64], parent_oid[128], old_oid[64];
    bool across;
};

static void dirmove_make(struct dirmove *m, bool across, bool over)
{
    window_make(&m->w, "dirmv");
    m->across = across;
    path_of(m->s1, sizeof m->s1, m->w.dir, "s1");
    path_of(m->s2, sizeof m->s2, m->w.dir, "s2");
    path_of(m->f, sizeof m->f, m->s1, "f");
    path_of(m->to, sizeof m->to, across ? m->s2 : m->w.dir, "d");
    ASSERT_OK(env->create_dir(env, m->s1));
    write_file(m->f, "inner");
    if (across)
        ASSERT_OK(env->create_dir(env, m->s2));
    if (over)
        ASSERT_OK(env->create_dir(env, m->to));
    struct raw r;
    struct raw_dir top, d2;
    raw_open(&r);
    raw_list_dir(&r, m->w.dir, &top);
    raw_oid_of(&top, "s1", m->s1_oid, sizeof m->s1_oid);
    if (across)
        raw_oid_of(&top, "s2", m->parent_oid, sizeof m->parent_oid);
    else
        raw_dir_oid(&r, m->w.dir, m->parent_oid, sizeof m->parent_oid);
    raw_list(&r, m->parent_oid, &d2);
    raw_oid_of(&d2, "d", m->old_oid, sizeof m->old_oid);
    raw_close(&r);
}

/* After a rename of s1 to `to` (done or not, by a sweep or itself): the
 * moved directory has exactly one name, no record is left, its file is
 * whole under it, and the directory it replaced is gone iff it moved.
 * Returns whether it moved; removes everything. */
static bool dirmove_check(struct dirmove *m, const char *when)
{
    struct raw r;
    struct raw_dir top, d2;
    raw_open(&r);
    raw_list_dir(&r, m->w.dir, &top);
    raw_list(&r, m->parent_oid, &d2);
    int names = raw_count_names(&top, m->s1_oid) + (m->across ? raw_count_names(&d2, m->s1_oid) : 0);
    if (names != 1)
        fail_msg("%s: the moved directory %s has %d names", when, m->s1_oid, names);
    assert_false(raw_has_intent(&top) || raw_has_intent(&d2));
    char at_d[64];
    raw_oid_of(&d2, "d", at_d, sizeof at_d);
    bool moved = strcmp(at_d, m->s1_oid) == 0;
    print_message("%s: %s\n", when, moved ? "moved" : "not moved");
    uint64_t size;
    time_t mtime;
    if (m->old_oid[0] != '\0' && moved &&
        rados_stat(r.io, m->old_oid, &size, &mtime) != -ENOENT)
        fail_msg("%s: the replaced directory %s is left in the pool", when, m->old_oid);
    if (m->old_oid[0] != '\0' && !moved)
        assert_int_equal(rados_stat(r.io, m->old_oid, &size, &mtime), 0);
    raw_close(&r);
    const char *at = moved ? m->to : m->s1;
    char f[400];
    path_of(f, sizeof f, at, "f");
    assert_file(f, "inner");
    ASSERT_OK(env->remove_file(env, f));
    ASSERT_OK(env->remove_dir(env, at));
    if (!moved && m->old_oid[0] != '\0')
        ASSERT_OK(env->remove_dir(env, m->to));
    if (env->file_exists(env, m->s2))
        ASSERT_OK(env->remove_dir(env, m->s2));
    ASSERT_OK(env->remove_file(env, m->w.a));
    if (env->file_exists(env, m->w.lock)) /* a sweep's lock left it */
        ASSERT_OK(env->remove_file(env, m->w.lock));
    ASSERT_OK(env->remove_dir(env, m->w.dir));
    return moved;
}

/* A directory renamed over an empty one, in one directory and to another:
 * the replaced directory's object goes (before: it stayed in the pool with
 * no name, "the replaced directory ... is left in the pool"); over one that
 * holds a name: ENOTEMPTY, nothing changed, as rename(2); into itself:
 * EINVAL. */
static void test_rename_dir_replaces(void **state)
{
    (void)state;
    for (int across = 0; across < 2; across++) {
        struct dirmove m;
        dirmove_make(&m, across, true);
        ASSERT_OK(env->rename_file(env, m.s1, m.to));
        assert_true(dirmove_check(&m, across ? "over a directory elsewhere" : "over one here"));
    }
    struct dirmove m;
    dirmove_make(&m, true, true);
    char held[400], into[400];
    path_of(held, sizeof held, m.to, "x");
    write_file(held, "kept");
    ASSERT_FAILS(env->rename_file(env, m.s1, m.to), LSM_IO_ERROR, "rename over a directory");
    path_of(into, sizeof into, m.s1, "sub");
    ASSERT_FAILS(env->rename_file(env, m.s1, into), LSM_INVALID_ARGUMENT, "into itself");
    assert_file(held, "kept");
    ASSERT_OK(env->remove_file(env, held));
    m.old_oid[0] = '\0'; /* not replaced: removed as a directory of its own */
    ASSERT_OK(env->remove_dir(env, m.to));
    assert_false(dirmove_check(&m, "over a directory that holds a file"));
}

/* A writer dies at each step of a directory's rename, to another directory
 * and in one, over nothing and over an empty directory: the next lock
 * leaves it with exactly one name, its file whole, and the replaced
 * directory gone iff the rename landed (before: two ops, so a crash after
 * the first left both names — removing either would remove the other's
 * files — "has 2 names"). */
static void test_rename_dir_crash_windows(void **state)
{
    (void)state;
    const struct {
        bool across, over;
        const char *point;
    } steps[] = {{true, false, "moving"}, {true, false, "moved"},  {true, true, "moving"},
                 {true, true, "moved"},   {true, true, "replaced"}, {false, true, "replaced"}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        struct dirmove m;
        dirmove_make(&m, steps[i].across, steps[i].over);
        struct crash_at c = {.point = steps[i].point, .at = 1};
        lsm_env *x = dying_env(&c);
        ASSERT_FAILS(x->rename_file(x, m.s1, m.to), LSM_IO_ERROR, "crash point");
        env_rados_close(x);
        struct raw r;
        sweep_by_lock(m.w.dir, m.w.lock, &r);
        raw_close(&r);
        char when[96];
        snprintf(when, sizeof when, "%s%s, died at %s", steps[i].across ? "across" : "here",
                 steps[i].over ? " over a directory" : "", steps[i].point);
        bool moved = dirmove_check(&m, when);
        assert_true(moved == (strcmp(steps[i].point, "moving") != 0));
    }
}

/* The object dir's name `name` points at (dir a store directory or, sub
 * not NULL, its subdirectory sub). */
static void raw_file_oid(const char *dir, const char *sub, const char *name, char *oid, size_t cap)
{
    struct raw r;
    struct raw_dir d;
    raw_open(&r);
    raw_list_dir(&r, dir, &d);
    if (sub != NULL) {
        char sub_oid[64];
        raw_oid_of(&d, sub, sub_oid, sizeof sub_oid);
        raw_list(&r, sub_oid, &d);
    }
    raw_oid_of(&d, name, oid, cap);
    raw_close(&r);
    assert_true(oid[0] != '\0');
}

/* Removes path with the env failing its drop's step op (then disarmed):
 * the name goes, the call succeeds (the drop is finished later). */
static void remove_failing(const char *path, const char *op)
{
    struct tr_fault f = {.op = op, .err = -EIO};
    env_rados_set_fault_hook(env, tr_fault_hook, &f);
    atomic_store(&f.armed, true);
    ASSERT_OK(env->remove_file(env, path));
    atomic_store(&f.armed, false);
    env_rados_set_fault_hook(env, NULL, NULL);
    assert_int_equal(atomic_load(&f.seen), 1);
    assert_false(env->file_exists(env, path));
}

/* A drop whose count failed to go down (not a crash: the name went, the
 * call succeeded), then a link of the same file in the same directory:
 * every name removed, the object goes (before: the link's record took the
 * waiting one's key and went with its name, so the drop was lost — "1
 * names counted, 0 named", an object left in the pool for good). */
static void test_failed_drop_then_link(void **state)
{
    (void)state;
    struct window w;
    char c[300], oid[64];
    window_make(&w, "dropkey");
    path_of(c, sizeof c, w.dir, "c");
    raw_file_oid(w.dir, NULL, "a", oid, sizeof oid);
    ASSERT_OK(env->link_file(env, w.a, w.b));
    remove_failing(w.b, "drop");
    ASSERT_OK(env->link_file(env, w.a, c));
    assert_file(c, "data");
    ASSERT_OK(env->remove_file(env, w.a));
    ASSERT_OK(env->remove_file(env, c));
    struct raw r;
    sweep_by_lock(w.dir, w.lock, &r);
    if (raw_refs(&r, oid) != -1)
        fail_msg("%s: %lld names counted, 0 named", oid, raw_refs(&r, oid));
    raw_close(&r);
    window_remove(&w);
}

/* A drop done but its record left (its removal failed), then a link of
 * the file into another directory, then a crash's sweep: both names are
 * counted and the file stays whole under each (before: the sweep met the
 * stale record's count again and dropped it a second time, "1 names
 * counted, 2 named": removing one name would remove the object the other
 * still names). */
static void test_stale_drop_record_then_link(void **state)
{
    (void)state;
    struct window w;
    char s1[300], s2[300], a[320], b[320], c[320], oid[64];
    window_make(&w, "dropstale");
    window_subdirs(&w, s1, s2, sizeof s1);
    path_of(a, sizeof a, s1, "a");
    path_of(b, sizeof b, s1, "b");
    path_of(c, sizeof c, s2, "c");
    write_file(a, "whole");
    raw_file_oid(w.dir, "s1", "a", oid, sizeof oid);
    ASSERT_OK(env->link_file(env, a, b));
    remove_failing(b, "drop record");
    ASSERT_OK(env->link_file(env, a, c));
    struct raw r;
    sweep_by_lock(w.dir, w.lock, &r);
    if (raw_refs(&r, oid) != 2)
        fail_msg("%s: %lld names counted, 2 named", oid, raw_refs(&r, oid));
    ASSERT_OK(env->remove_file(env, a));
    assert_file(c, "whole");
    ASSERT_OK(env->remove_file(env, c));
    assert_int_equal(raw_refs(&r, oid), -1);
    raw_close(&r);
    window_remove_all(&w, s1, s2);
}

/* A drop that failed and fails again when the file's next name change
 * finishes it first: that change is refused in one line, nothing changed;
 * once the cluster answers, it goes through and the counts are exact. */
static void test_unfinished_drop_refuses_next_change(void **state)
{
    (void)state;
    struct window w;
    char c[300], oid[64];
    window_make(&w, "dropagain");
    path_of(c, sizeof c, w.dir, "c");
    raw_file_oid(w.dir, NULL, "a", oid, sizeof oid);
    ASSERT_OK(env->link_file(env, w.a, w.b));
    struct tr_fault f = {.op = "drop", .err = -EIO};
    env_rados_set_fault_hook(env, tr_fault_hook, &f);
    atomic_store(&f.armed, true);
    ASSERT_OK(env->remove_file(env, w.b));
    ASSERT_FAILS(env->link_file(env, w.a, c), LSM_IO_ERROR, "its drop is unfinished");
    ASSERT_FAILS(env->remove_file(env, w.a), LSM_IO_ERROR, "its drop is unfinished");
    atomic_store(&f.armed, false);
    env_rados_set_fault_hook(env, NULL, NULL);
    assert_false(env->file_exists(env, c));
    assert_file(w.a, "data");
    ASSERT_OK(env->link_file(env, w.a, c));
    struct raw r;
    raw_open(&r);
    assert_int_equal(raw_refs(&r, oid), 2);
    ASSERT_OK(env->remove_file(env, w.a));
    ASSERT_OK(env->remove_file(env, c));
    assert_int_equal(raw_refs(&r, oid), -1);
    raw_close(&r);
    ASSERT_OK(env->remove_dir(env, w.dir));
}

struct renamer {
    lsm_env *env;
    const char *from, *to;
    lsm_status *s;
};

static void *rename_main(void *p)
{
    struct renamer *r = p;
    r->s = r->env->rename_file(r->env, r->from, r->to);
    return NULL;
}

/* Two renames of one directory (to two new names) that both looked it up
 * first: one moves it, the other looks again and finds it gone (ENOENT, as
 * rename(2)), by the one rule every name change keeps; the directory has
 * one name, its file whole (before: the directory's rename kept its own
 * compare and answered "the directory changed meanwhile", LSM_BUSY). */
static void test_concurrent_renames_of_one_dir(void **state)
{
    (void)state;
    struct window w;
    char s1[300], d1[300], d2[300], f[400];
    window_make(&w, "mvdirtwice");
    path_of(s1, sizeof s1, w.dir, "s1");
    path_of(d1, sizeof d1, w.dir, "d1");
    path_of(d2, sizeof d2, w.dir, "d2");
    path_of(f, sizeof f, s1, "f");
    ASSERT_OK(env->create_dir(env, s1));
    write_file(f, "inner");
    struct both_resolved br = {0};
    lsm_env *x = tr_env(0, false);
    env_rados_set_crash_hook(x, resolved_hook, &br);
    struct renamer r[2] = {{x, s1, d1, NULL}, {x, s1, d2, NULL}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, rename_main, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    env_rados_close(x);
    assert_true(atomic_load(&br.n) >= 2);
    int ok = -1;
    for (int i = 0; i < 2; i++) {
        if (r[i].s == NULL)
            ok = ok == -1 ? i : 2;
        else if (strstr(lsm_status_message(r[i].s), "No such file") == NULL)
            fail_msg("rename %d: %s", i, lsm_status_message(r[i].s));
        lsm_status_free(r[i].s);
    }
    if (ok < 0 || ok > 1)
        fail_msg("%s of the two renames went through", ok < 0 ? "none" : "both");
    assert_false(env->file_exists(env, s1));
    assert_false(env->file_exists(env, ok == 0 ? d2 : d1));
    const char *at = ok == 0 ? d1 : d2;
    path_of(f, sizeof f, at, "f");
    assert_file(f, "inner");
    ASSERT_OK(env->remove_file(env, f));
    ASSERT_OK(env->remove_dir(env, at));
    ASSERT_OK(env->remove_file(env, w.a));
    ASSERT_OK(env->remove_dir(env, w.dir));
}

/* A failure for env_rados_set_fault_hook: every op named ops[0] or ops[1]
 * fails with EIO; seen counts them. */
struct faults {
    const char *ops[2];
    atomic_int seen;
};

static int faults_hook(void *arg, const char *op, const char *oid)
{
    struct faults *f = arg;
    (void)oid;
    for (int i = 0; i < 2; i++)
        if (f->ops[i] != NULL && strcmp(op, f->ops[i]) == 0) {
            atomic_fetch_add(&f->seen, 1);
            return -EIO;
        }
    return 0;
}

/* w's subdirectory "sub", made: its path and its object. */
static void window_subdir(const struct window *w, char *sub, size_t cap, char *oid, size_t ocap)
{
    path_of(sub, cap, w->dir, "sub");
    ASSERT_OK(env->create_dir(env, sub));
    struct raw r;
    struct raw_dir d;
    raw_open(&r);
    raw_list_dir(&r, w->dir, &d);
    raw_oid_of(&d, "sub", oid, ocap);
    raw_close(&r);
    assert_true(oid[0] != '\0');
}

/* Whether object oid is in the pool. */
static bool raw_exists(const char *oid)
{
    struct raw r;
    uint64_t size;
    time_t mtime;
    raw_open(&r);
    int got = rados_stat(r.io, oid, &size, &mtime);
    raw_close(&r);
    return got == 0;
}

/* rmdir of w's "sub" with ops failing (EIO): want_ok, the call's answer;
 * then the directory is there iff kept, with its object; none left without
 * a name after the next lock's sweep, and no intent. */
static void rmdir_failing(const char *op1, const char *op2, bool want_ok, bool kept)
{
    struct window w;
    char sub[300], oid[64];
    window_make(&w, "rmdirfail");
    window_subdir(&w, sub, sizeof sub, oid, sizeof oid);
    struct faults f = {.ops = {op1, op2}};
    env_rados_set_fault_hook(env, faults_hook, &f);
    lsm_status *s = env->remove_dir(env, sub);
    env_rados_set_fault_hook(env, NULL, NULL);
    char when[96];
    snprintf(when, sizeof when, "rmdir, %s%s%s failing", op1, op2 ? " and " : "", op2 ? op2 : "");
    print_message("%s: %s\n", when, s ? lsm_status_message(s) : "ok");
    assert_true(atomic_load(&f.seen) >= 1);
    if (want_ok && s != NULL)
        fail_msg("%s: %s", when, lsm_status_message(s));
    if (!want_ok && s == NULL)
        fail_msg("%s: succeeded", when);
    lsm_status_free(s);
    if (env->file_exists(env, sub) != kept)
        fail_msg("%s: the directory is %s", when, kept ? "gone" : "still named");
    if (kept && !raw_exists(oid))
        fail_msg("%s: its name is kept, its object %s is gone", when, oid);
    struct raw r;
    sweep_by_lock(w.dir, w.lock, &r);
    raw_close(&r);
    if (!kept && raw_exists(oid))
        fail_msg("%s: the directory's object %s is left in the pool", when, oid);
    if (kept) {
        ASSERT_OK(env->remove_dir(env, sub));
        assert_false(raw_exists(oid));
    }
    ASSERT_OK(env->remove_file(env, w.a));
    window_remove(&w);
}

/* rmdir's each op failing: the name's removal (nothing changed), the
 * object's (reported, the name put back: before, the failure was ignored,
 * rmdir said done and the object stayed in the pool for good), that and
 * putting the name back (reported; the next lock's sweep removes the object
 * once), the intent's (done; the sweep removes the intent). */
static void test_rmdir_failures(void **state)
{
    (void)state;
    rmdir_failing("remove dir", NULL, false, true);
    rmdir_failing("rmdir", NULL, false, true);
    rmdir_failing("remove dir", "dir name back", false, false);
    rmdir_failing("dir intent", NULL, true, false);
}

/* A writer dies in an rmdir after the name went ("dir unnamed") or after
 * the object ("dir removed"): the next lock removes the object and the
 * intent once (before: a crash after the name left the object with no
 * name and no intent in the pool for good). */
static void test_rmdir_crash_windows(void **state)
{
    (void)state;
    const char *points[2] = {"dir unnamed", "dir removed"};
    for (int p = 0; p < 2; p++) {
        struct window w;
        char sub[300], oid[64];
        window_make(&w, "rmdircrash");
        window_subdir(&w, sub, sizeof sub, oid, sizeof oid);
        struct crash_at c = {.point = points[p], .at = 1};
        lsm_env *x = dying_env(&c);
        ASSERT_FAILS(x->remove_dir(x, sub), LSM_IO_ERROR, "crash point");
        env_rados_close(x);
        assert_false(env->file_exists(env, sub));
        struct raw r;
        sweep_by_lock(w.dir, w.lock, &r);
        raw_close(&r);
        if (raw_exists(oid))
            fail_msg("died at %s: the directory's object %s is left in the pool", points[p], oid);
        ASSERT_OK(env->remove_file(env, w.a));
        window_remove(&w);
    }
}

/* test_admin_socket_peer_gone's files, all in a private temp directory
 * (mkdtemp) that its teardown removes, passed or failed part-way. */
struct asok_files {
    char dir[32];   /* "/tmp/lsmfs-asok-XXXXXX" */
    char conf[64];  /* dir/ceph.conf */
    char asok[108]; /* dir/admin.asok: librados' admin socket */
    lsm_env *env;   /* open while the test runs */
};

static struct asok_files asok_files;

/* Makes the private directory and names the files in it; -1 if it fails. */
static int asok_setup(void **state)
{
    struct asok_files *t = &asok_files;
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/lsmfs-asok-XXXXXX");
    if (mkdtemp(t->dir) == NULL)
        return -1;
    snprintf(t->conf, sizeof t->conf, "%.*s/ceph.conf", (int)sizeof t->dir, t->dir);
    snprintf(t->asok, sizeof t->asok, "%.*s/admin.asok", (int)sizeof t->dir, t->dir);
    *state = t;
    return 0;
}

/* Closes the env if the test left it open, removes the files and the
 * directory: 0, or -1 (the directory is left: something else is in it). */
static int asok_teardown(void **state)
{
    struct asok_files *t = *state;
    if (t->env != NULL)
        env_rados_close(t->env);
    t->env = NULL;
    unlink(t->asok);
    unlink(t->conf);
    return rmdir(t->dir) == 0 ? 0 : -1;
}

/* Writes t->conf: the test cluster's, with client.admin's admin socket at
 * t->asok. */
static void conf_with_asok(const struct asok_files *t)
{
    char *base;
    size_t n;
    lsm_env *posix = lsm_env_default();
    ASSERT_OK(env_read_file(posix, getenv("LSM_CEPH_CONF"), &base, &n));
    FILE *f = fopen(t->conf, "w");
    assert_non_null(f);
    fwrite(base, 1, n, f);
    fprintf(f, "\n[client.admin]\nadmin_socket = %s\n", t->asok);
    assert_int_equal(fclose(f), 0);
    free(base);
}

/* librados writes to pipes and sockets whose peer may be gone (its admin
 * socket answers a client that hung up): a process with the env open is
 * never killed by SIGPIPE, whatever its own disposition (the default here). */
static void test_admin_socket_peer_gone(void **state)
{
    struct asok_files *t = *state;
    conf_with_asok(t);
    assert_true(signal(SIGPIPE, SIG_DFL) != SIG_ERR);
    env_rados_options o;
    env_rados_options_init(&o);
    o.pool = TR_POOL;
    o.ceph_conf = t->conf;
    ASSERT_OK(env_rados_open(&o, &t->env));
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", t->asok);
    static const char ask[] = "{\"prefix\": \"config show\"}";
    for (int i = 0; i < 20; i++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(write(fd, ask, sizeof ask), (ssize_t)sizeof ask);
        close(fd); /* before the answer: the env's process writes to a closed peer */
        usleep(20 * 1000);
    }
    usleep(200 * 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_dirs),
        cmocka_unit_test(test_store_write_reopen),
        cmocka_unit_test(test_checkpoint_read_while_writing),
        cmocka_unit_test(test_lease_refuses_second_writer),
        cmocka_unit_test(test_lost_lease_refuses_writes),
        cmocka_unit_test(test_takeover_fences_old_writer),
        cmocka_unit_test(test_fence_stamping_crash_points),
        cmocka_unit_test(test_orphan_swept_at_takeover),
        cmocka_unit_test(test_intent_write_fails),
        cmocka_unit_test(test_sweep_listing_fails),
        cmocka_unit_test(test_takeover_break_fails),
        cmocka_unit_test(test_rmdir_sweeps_intents),
        cmocka_unit_test(test_remove_crash_windows),
        cmocka_unit_test(test_link_crash_windows),
        cmocka_unit_test(test_replace_crash_windows),
        cmocka_unit_test(test_rename_across_crash_windows),
        cmocka_unit_test(test_rename_between_links),
        cmocka_unit_test(test_concurrent_removes_of_one_name),
        cmocka_unit_test(test_rename_dir_replaces),
        cmocka_unit_test(test_rename_dir_crash_windows),
        cmocka_unit_test(test_failed_drop_then_link),
        cmocka_unit_test(test_stale_drop_record_then_link),
        cmocka_unit_test(test_unfinished_drop_refuses_next_change),
        cmocka_unit_test(test_slow_fence_keeps_its_lease),
        cmocka_unit_test(test_concurrent_renames_of_one_dir),
        cmocka_unit_test(test_rmdir_failures),
        cmocka_unit_test(test_rmdir_crash_windows),
        cmocka_unit_test_setup_teardown(test_admin_socket_peer_gone, asok_setup, asok_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
