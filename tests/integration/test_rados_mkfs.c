/* test_rados_mkfs.c — mkfs.lsmfs on RADOS cut at each of its RADOS ops (run
 * by tests/ceph/run.sh; the cut by tests/shim/radoscrash.c): killed right
 * after the op, the next mkfs of the name makes the filesystem and the pool
 * holds nothing else of either; the op failing, mkfs says so and leaves
 * nothing. "Nothing" is looked at through librados: every object the runs
 * wrote to is gone or in the store's tree, and no intent, drop record or
 * mkfs mark is left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mount.h"

#include <rados/librados.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POOL "lsmfs"
#define CRASH_EXIT 86 /* radoscrash.c's */
#define MAX_OBJS 512
/* The killed runs' lease: short, as the next mkfs waits for it to lapse;
 * but its renewal (every quarter lease, refused writes once two round
 * trips take half of it) must keep up with a ThreadSanitizer-built mkfs,
 * eight at once beside the cluster: at 1 s one lost its lease at load 8. */
#ifdef __SANITIZE_THREAD__
#define KILLED_LEASE "lease_ms=5000"
#else
#define KILLED_LEASE "lease_ms=1000"
#endif

struct pool {
    rados_t c;
    rados_ioctx_t io;
};

static void pool_open(struct pool *p)
{
    const char *conf = getenv("CEPH_CONF");
    if (conf == NULL)
        fail_msg("CEPH_CONF is not set: run RADOS tests through tests/ceph/run.sh");
    assert_int_equal(rados_create(&p->c, NULL), 0);
    assert_int_equal(rados_conf_read_file(p->c, conf), 0);
    assert_int_equal(rados_connect(p->c), 0);
    assert_int_equal(rados_ioctx_create(p->c, POOL, &p->io), 0);
}

static void pool_close(struct pool *p)
{
    rados_ioctx_destroy(p->io);
    rados_shutdown(p->c);
}

/* A set of object names. */
struct oids {
    int n;
    char v[MAX_OBJS][64];
};

static bool oids_has(const struct oids *s, const char *oid)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], oid) == 0)
            return true;
    return false;
}

static void oids_add(struct oids *s, const char *oid)
{
    if (oids_has(s, oid))
        return;
    if (s->n == MAX_OBJS)
        fail_msg("more than %d objects", MAX_OBJS);
    snprintf(s->v[s->n++], sizeof s->v[0], "%s", oid);
}

/* fn(ctx, key, value) for each omap key of object oid starting with prefix. */
static void omap_each(struct pool *p, const char *oid, const char *prefix,
                      void (*fn)(void *ctx, const char *key, const char *val), void *ctx)
{
    char after[256] = "";
    unsigned char more = 1;
    while (more) {
        rados_read_op_t op = rados_create_read_op();
        rados_omap_iter_t it = NULL;
        int prval = 0;
        rados_read_op_omap_get_vals2(op, after, prefix, 1000, &it, &more, &prval);
        int r = rados_read_op_operate(op, p->io, oid, 0);
        rados_release_read_op(op);
        if (r < 0 || prval < 0)
            fail_msg("omap of %s: %d/%d", oid, r, prval);
        char *k, *v;
        size_t vlen;
        while (rados_omap_get_next(it, &k, &v, &vlen) == 0 && k != NULL) {
            char val[300];
            snprintf(val, sizeof val, "%.*s", (int)vlen, v);
            snprintf(after, sizeof after, "%s", k);
            fn(ctx, k, val);
        }
        rados_omap_get_end(it);
    }
}

/* The object a directory entry's value names ("f:OID", "d:ID"). */
static void value_oid(const char *val, char *oid, size_t cap)
{
    snprintf(oid, cap, "%s%.40s", val[0] == 'd' ? "lsmfs.d." : "", val + 2);
}

struct walk {
    struct pool *p;
    struct oids *tree;
    const char *where;
};

static void walk_dir(struct pool *p, const char *dir_oid, struct oids *tree, const char *where);

/* A store directory's entry: no intent, drop record or mkfs mark. */
static void walk_entry(void *ctx, const char *key, const char *val)
{
    struct walk *w = ctx;
    if (key[0] == '/')
        fail_msg("%s: %s = %s is left in the store's directory", w->where, key, val);
    if (strcmp(key, "MKFS-UNFINISHED") == 0)
        fail_msg("%s: the mkfs mark is left", w->where);
    char oid[64];
    value_oid(val, oid, sizeof oid);
    oids_add(w->tree, oid);
    if (val[0] == 'd')
        walk_dir(w->p, oid, w->tree, w->where);
}

static void walk_dir(struct pool *p, const char *dir_oid, struct oids *tree, const char *where)
{
    struct walk w = {p, tree, where};
    oids_add(tree, dir_oid);
    omap_each(p, dir_oid, "", walk_entry, &w);
}

struct root_look {
    const char *name;
    char dir_val[64]; /* the name's entry, "" if none */
    int intents;      /* intents of the name (or claimed ones) */
};

static void root_entry(void *ctx, const char *key, const char *val)
{
    struct root_look *l = ctx;
    if (strcmp(key, l->name) == 0)
        snprintf(l->dir_val, sizeof l->dir_val, "%s", val);
    else if (strncmp(key, "/new/", 5) == 0 && (strcmp(val, l->name) == 0 || val[0] == '/'))
        l->intents++;
}

/* The objects the log names (a line each). */
static void read_log(const char *log, struct oids *s)
{
    s->n = 0;
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return; /* no op logged */
    char line[300];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "lsmfs.root") != 0)
            oids_add(s, line);
    }
    fclose(f);
}

/* The pool after the runs logged in log on store NAME: whole (its name in
 * the pool's top, every logged object in its tree or gone) or, !whole,
 * nothing of it at all. */
static void look_at_pool(const char *name, const char *log, bool whole, const char *where)
{
    static struct oids logged, tree;
    struct pool p;
    pool_open(&p);
    struct root_look l = {.name = name};
    omap_each(&p, "lsmfs.root", "", root_entry, &l);
    if (l.intents > 0)
        fail_msg("%s: %d intent(s) of %s left in the pool's top", where, l.intents, name);
    tree.n = 0;
    if (whole && l.dir_val[0] == '\0')
        fail_msg("%s: no %s in the pool's top", where, name);
    if (!whole && l.dir_val[0] != '\0')
        fail_msg("%s: %s is left in the pool's top", where, name);
    if (whole) {
        char dir_oid[64];
        value_oid(l.dir_val, dir_oid, sizeof dir_oid);
        walk_dir(&p, dir_oid, &tree, where);
    }
    read_log(log, &logged);
    for (int i = 0; i < logged.n; i++) {
        uint64_t size;
        time_t mtime;
        if (rados_stat(p.io, logged.v[i], &size, &mtime) == 0 && !oids_has(&tree, logged.v[i]))
            fail_msg("%s: %s is left in the pool, outside the store", where, logged.v[i]);
    }
    pool_close(&p);
}

/* fsck.lsmfs -n of store: its exit status, its output in out. */
static int fsck_n(char *out, size_t cap, const char *store)
{
    return tm_sh(out, cap, "%s -n %s 2>&1", tm_bin("fsck.lsmfs"), store);
}

/* As look_at_pool, and whole: fsck clean. */
static void check_pool(const char *name, const char *store, const char *log, bool whole,
                       const char *where)
{
    look_at_pool(name, log, whole, where);
    char out[4096];
    int rc = whole ? fsck_n(out, sizeof out, store) : 0;
    if (rc != 0)
        fail_msg("%s: fsck.lsmfs -n %s: %d: %s", where, store, rc, out);
}

/* rados:lsmfs/NAME for a fresh NAME "t-TAG-PID-NANOS" (into name too). */
static void fresh_store(char *store, size_t cap, char *name, size_t ncap, const char *tag)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, ncap, "t-%s-%d-%ld%09ld", tag, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
    snprintf(store, cap, "rados:%s/%s", POOL, name);
}

static const char *shim(void)
{
    static char path[4096];
    if (path[0] != '\0')
        return path;
    char exe[4000];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, sizeof path, "%s/libradoscrash.so", exe);
    assert_int_equal(access(path, R_OK), 0);
    return path;
}

/* mkfs.lsmfs of store under the shim with its settings (cut: "NAME=N"
 * or ""), objects logged to log; its exit status, its output in out. */
static int mkfs_cut(char *out, size_t cap, const char *cut, const char *log, const char *opts,
                    const char *store)
{
    return tm_sh(out, cap, "ASAN_OPTIONS='%s' LD_PRELOAD=%s %s LSMFS_RADOS_LOG=%s %s -q %s %s 2>&1",
                 tm_preload_asan_options(), shim(), cut, log, tm_bin("mkfs.lsmfs"), opts, store);
}

/* Runs cmd (on store) until it is not refused for a lease still held (a
 * dead or failed writer's lapses within 10 s): its exit status. */
static int run_past_lease(char *out, size_t cap, const char *cmd, const char *log,
                          const char *store)
{
    int rc = -1;
    for (int tries = 0; tries < 60; tries++) {
        if (tries > 0)
            usleep(250 * 1000);
        rc = cmd != NULL ? tm_sh(out, cap, "%s -y %s 2>&1", cmd, store)
                         : mkfs_cut(out, cap, "", log, "", store);
        if (rc == 0 || strstr(out, "in use") == NULL)
            break;
    }
    return rc;
}

/* The next writer of the store (fsck.lsmfs -y): its lock finishes what a
 * writer that died or failed left (drops of names). Its exit status. */
static int next_writer(char *out, size_t cap, const char *store)
{
    return run_past_lease(out, cap, tm_bin("fsck.lsmfs"), NULL, store);
}

/* The next mkfs of store after one that died: it may wait for the dead
 * one's lease (KILLED_LEASE) to lapse, then makes the filesystem; one killed once
 * the filesystem was whole (its mark removed) is refused, and the next
 * writer's lock finishes it (*was_whole). Its exit status. */
static int mkfs_again(char *out, size_t cap, const char *store, const char *log,
                      bool *was_whole)
{
    int rc = run_past_lease(out, cap, NULL, log, store);
    *was_whole = rc != 0 && strstr(out, "already holds an lsmfs filesystem") != NULL;
    return *was_whole ? next_writer(out, cap, store) : rc;
}

/* One cut run of mkfs: a fresh store, its log, the shim's setting
 * (VAR=k) and how the test names it. */
struct cut_run {
    char store[200], name[160], log[64], cut[64], where[64];
};

static void cut_run_init(struct cut_run *r, const char *tag, const char *var, int k,
                         const char *where)
{
    fresh_store(r->store, sizeof r->store, r->name, sizeof r->name, tag);
    snprintf(r->log, sizeof r->log, "/tmp/lsmfs-%s-%d-%d.log", tag, (int)getpid(), k);
    unlink(r->log);
    snprintf(r->cut, sizeof r->cut, "%s=%d", var, k);
    snprintf(r->where, sizeof r->where, where, k);
}

/* Cut runs go BATCH at a time, each in a child of its own (their stores,
 * logs and leases apart), as the waits for a dead run's lease to lapse
 * are most of their time; the pool is looked at here once a batch is
 * done. */
#define BATCH 8

/* What a cut run's commands answered (written by its child). */
struct run_result {
    int rc;         /* the cut mkfs's exit status */
    int again_rc;   /* after it: the next mkfs's, or the next writer's */
    bool again;     /* that ran */
    bool was_whole; /* the next mkfs found the filesystem whole */
    int fsck_rc;    /* fsck.lsmfs -n, once the filesystem is whole */
    char out[4096], again_out[4096], fsck_out[4096];
};

typedef void (*run_fn)(const struct cut_run *r, struct run_result *res);

/* Runs fn for runs[0..n) at once, each in a child process; waits for all.
 * res: shared with the children. */
static void run_batch(const struct cut_run *runs, struct run_result *res, int n, run_fn fn)
{
    pid_t pid[BATCH];
    (void)shim(); /* its checks here, not in a child */
    for (int i = 0; i < n; i++) {
        memset(&res[i], 0, sizeof res[i]);
        res[i].fsck_rc = -1;
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0) {
            fn(&runs[i], &res[i]);
            _exit(0);
        }
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("%s: its child ended %d", runs[i].where, st);
    }
}

/* Shared memory for a batch's results. */
static struct run_result *results_map(void)
{
    void *m = mmap(NULL, BATCH * sizeof(struct run_result), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    return m;
}

/* A child's fsck.lsmfs -n of a whole filesystem. */
static void fsck_whole(const struct cut_run *r, struct run_result *res)
{
    res->fsck_rc = fsck_n(res->fsck_out, sizeof res->fsck_out, r->store);
}

/* A killed run: the cut mkfs, the next one, fsck. */
static void killed_run(const struct cut_run *r, struct run_result *res)
{
    res->rc = mkfs_cut(res->out, sizeof res->out, r->cut, r->log, "-o " KILLED_LEASE, r->store);
    if (res->rc == CRASH_EXIT) {
        res->again = true;
        res->again_rc =
            mkfs_again(res->again_out, sizeof res->again_out, r->store, r->log, &res->was_whole);
    }
    if (res->rc == 0 || (res->again && res->again_rc == 0))
        fsck_whole(r, res);
}

/* The parent's look at a killed run: true once past mkfs's last op. */
static bool killed_checked(const struct cut_run *r, const struct run_result *res)
{
    if (res->rc != 0 && res->rc != CRASH_EXIT)
        fail_msg("%s: mkfs exited %d: %s", r->where, res->rc, res->out);
    if (res->again && res->again_rc != 0)
        fail_msg("%s: the next %s: %d: %s", r->where,
                 res->was_whole ? "writer (fsck.lsmfs -y)" : "mkfs", res->again_rc,
                 res->again_out);
    if (res->was_whole)
        print_message("%s: the filesystem was whole\n", r->where);
    const char *where = res->rc == 0 ? "not killed" : r->where;
    look_at_pool(r->name, r->log, true, where);
    if (res->fsck_rc != 0)
        fail_msg("%s: fsck.lsmfs -n %s: %d: %s", where, r->store, res->fsck_rc, res->fsck_out);
    unlink(r->log);
    return res->rc == 0;
}

/* Killed right after its k-th RADOS op, at every k: the next mkfs of the
 * name sweeps what it left (an intent in the pool's top, a half-made store
 * directory) and makes the filesystem; nothing else is left (before: an
 * intent in the pool's top stayed for good, and a half-made store was
 * refused by every later mkfs as "not an lsmfs filesystem"). */
static void test_mkfs_killed_at_each_op(void **state)
{
    (void)state;
    tm_watchdog(600, "test_mkfs_killed_at_each_op");
    struct run_result *res = results_map();
    int last = 0; /* the first k past mkfs's last op */
    for (int base = 1; last == 0; base += BATCH) {
        struct cut_run r[BATCH];
        for (int i = 0; i < BATCH; i++)
            cut_run_init(&r[i], "mkkill", "LSMFS_RADOS_CRASH_AFTER", base + i,
                         "killed after op %d");
        run_batch(r, res, BATCH, killed_run);
        for (int i = 0; i < BATCH; i++)
            if (killed_checked(&r[i], &res[i]) && last == 0)
                last = base + i;
    }
    munmap(res, BATCH * sizeof *res);
    print_message("mkfs.lsmfs killed after each of its %d RADOS ops\n", last - 1);
    assert_true(last > 20);
}

/* Lines in file. */
static int count_lines(const char *file)
{
    FILE *f = fopen(file, "r");
    int n = 0, c;
    while (f != NULL && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f != NULL)
        fclose(f);
    return n;
}

/* How many RADOS ops a whole mkfs makes (its filesystem left whole). */
static int mkfs_ops(void)
{
    char store[200], name[160], log[64], out[4096];
    fresh_store(store, sizeof store, name, sizeof name, "mkcount");
    snprintf(log, sizeof log, "/tmp/lsmfs-mkcount-%d.log", (int)getpid());
    unlink(log);
    if (mkfs_cut(out, sizeof out, "", log, "", store) != 0)
        fail_msg("mkfs %s: %s", store, out);
    check_pool(name, store, log, true, "a whole mkfs");
    int n = count_lines(log);
    unlink(log);
    return n;
}

/* A failing run: the mkfs whose op fails; if it succeeded, the next
 * writer, then fsck. */
static void failing_run(const struct cut_run *r, struct run_result *res)
{
    res->rc = mkfs_cut(res->out, sizeof res->out, r->cut, r->log, "", r->store);
    if (res->rc == 0) { /* a drop that failed after its name went: the next lock's */
        res->again = true;
        res->again_rc = next_writer(res->again_out, sizeof res->again_out, r->store);
        fsck_whole(r, res);
    }
}

/* The parent's look at a failing run: true if mkfs failed. */
static bool failing_checked(const struct cut_run *r, const struct run_result *res)
{
    if (res->rc != 0 && (res->rc != 1 || strncmp(res->out, "mkfs.lsmfs: ", 12) != 0))
        fail_msg("%s: want exit 1 and its error, got %d: %s", r->where, res->rc, res->out);
    if (res->rc != 0)
        print_message("%s: %s", r->where, res->out);
    if (res->again && res->again_rc != 0)
        fail_msg("%s: fsck.lsmfs -y %s: %d: %s", r->where, r->store, res->again_rc,
                 res->again_out);
    look_at_pool(r->name, r->log, res->rc == 0, r->where);
    if (res->rc == 0 && res->fsck_rc != 0)
        fail_msg("%s: fsck.lsmfs -n %s: %d: %s", r->where, r->store, res->fsck_rc,
                 res->fsck_out);
    unlink(r->log);
    return res->rc != 0;
}

/* Its k-th RADOS op fails, at each k of a whole mkfs's: mkfs says so on
 * stderr, exits 1 and leaves nothing of the store (or, where the failure
 * needed no undoing, succeeds with the filesystem whole, a drop of a name
 * that failed left to the next writer's lock). */
static void test_mkfs_failing_at_each_op(void **state)
{
    (void)state;
    tm_watchdog(600, "test_mkfs_failing_at_each_op");
    struct run_result *res = results_map();
    int ops = mkfs_ops(), failed = 0;
    for (int base = 1; base <= ops; base += BATCH) {
        int n = ops - base + 1 < BATCH ? ops - base + 1 : BATCH;
        struct cut_run r[BATCH];
        for (int i = 0; i < n; i++)
            cut_run_init(&r[i], "mkfail", "LSMFS_RADOS_FAIL_AT", base + i, "op %d failed");
        run_batch(r, res, n, failing_run);
        for (int i = 0; i < n; i++)
            failed += failing_checked(&r[i], &res[i]);
    }
    munmap(res, BATCH * sizeof *res);
    print_message("mkfs.lsmfs failed cleanly at %d of its %d RADOS ops\n", failed, ops);
    assert_true(failed > ops / 2);
}

/* The next mkfs's sweep of what a killed one left (its intent in the pool's
 * top and its object: killed after op 2) fails at each of its ops (the
 * claim, the object's removal, the intent's): that mkfs fails cleanly, and
 * the one after it sweeps and makes the filesystem, nothing else left. */
static void test_mkfs_sweep_failing(void **state)
{
    (void)state;
    tm_watchdog(300, "test_mkfs_sweep_failing");
    for (int k = 1; k <= 3; k++) {
        struct cut_run r;
        char out[4096], fail[64];
        cut_run_init(&r, "mksweep", "LSMFS_RADOS_CRASH_AFTER", 2, "sweep op %d failed");
        snprintf(r.where, sizeof r.where, "sweep op %d failed", k);
        assert_int_equal(mkfs_cut(out, sizeof out, r.cut, r.log, "", r.store), CRASH_EXIT);
        snprintf(fail, sizeof fail, "LSMFS_RADOS_FAIL_AT=%d", k);
        int rc = mkfs_cut(out, sizeof out, fail, r.log, "", r.store);
        if (rc != 1 || strncmp(out, "mkfs.lsmfs: ", 12) != 0)
            fail_msg("%s: want exit 1 and its error, got %d: %s", r.where, rc, out);
        print_message("%s: %s", r.where, out);
        bool was_whole;
        rc = mkfs_again(out, sizeof out, r.store, r.log, &was_whole);
        if (rc != 0)
            fail_msg("%s: the next mkfs: %d: %s", r.where, rc, out);
        check_pool(r.name, r.store, r.log, true, r.where);
        unlink(r.log);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkfs_killed_at_each_op),
        cmocka_unit_test(test_mkfs_failing_at_each_op),
        cmocka_unit_test(test_mkfs_sweep_failing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
