/*
 * test_oom_manage.c — the store's management calls out of memory: a backup
 * of an open store (its checkpoint and copy), restore, verify, purge, list,
 * a checkpoint, private modes tightened, store location options. Each call
 * runs with its allocation N failing (only N; lsm_malloc.h's seam), N = 1,
 * 2, ... until it runs with none failed: the calling thread's allocations,
 * and for the calls that wait for a flush the background threads' too.
 * Each answer must be success or LSM_NO_MEMORY (never damage, never a
 * success for what was not done); a failed call leaves nothing a later
 * call trusts half done (no backup listed that does not verify, nothing
 * at a restore's or a checkpoint's destination, no checkpoint of a backup
 * left in the store); and the call repeated with memory back succeeds and
 * gives what an unfailed run gives.
 *
 * Every run starts from a copy of one template (a store and a backup
 * directory holding backups 1 and 2), in memory (/dev/shm) when it can.
 * Environment: OOM_SWEEP=full fails every N, then again N and every later
 * allocation (memory gone until the call returns; make torture); by
 * default the first 20 and every 5th, N only. OOM_MANAGE_CASE=name runs one case;
 * OOM_MANAGE_VERBOSE=1 prints each run and each case's allocation count.
 */
#include "fixture.h"

#include "alloc_fail.h"
#include "store_uri.h"

#include <dirent.h>
#include <inttypes.h>
#include <sys/stat.h>

enum { NKEYS = 600, WBS = 64 << 10 };

static char base[160], tmpl[200], work[200], live[260], bdir[260], dest[260];
static char *want1, *want2; /* the store as backups 1 and 2 hold it */
static lsm_db *db;          /* the open store of a case that needs one */

/* ------------------------------------------------------------- helpers */

static void put_keys(lsm_db *d, int from, int to, int gen)
{
    for (int i = from; i < to; i++) {
        char k[16], v[120];
        snprintf(k, sizeof k, "key%05d", i);
        memset(v, 'a' + (i + gen) % 26, sizeof v);
        snprintf(v, sizeof v, "%d.%d", i, gen);
        ASSERT_OK(lsm_put(d, NULL, k, strlen(k), v, sizeof v));
    }
}

/* The store at dir (opened writable, as a restored one must) dumps as want. */
static void assert_store_holds(const char *dir, const char *want, const char *what)
{
    lsm_db *d = tu_open_existing(dir, false);
    char *got = tu_dump_db(d);
    if (strcmp(got, want) != 0)
        fail_msg("%s: %zu bytes of keys and values, %zu expected", what, strlen(got),
                 strlen(want));
    free(got);
    tu_verify_clean(d);
    ASSERT_OK(lsm_close(d));
}

/* Whether dir holds an entry whose name begins with prefix. */
static bool has_entry(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;)
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

static void no_report(void *ctx, const char *msg)
{
    fail_msg("%s: reported \"%s\"", (const char *)ctx, msg);
}

/* Every backup in bdir verifies, and the list holds `ids` (ascending). */
static void assert_backups(const uint64_t *ids, size_t n, const char *what)
{
    lsm_backup_info *list = NULL;
    size_t got = 0;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &got));
    bool same = got == n;
    for (size_t i = 0; same && i < n; i++)
        same = list[i].id == ids[i];
    free(list);
    if (!same)
        fail_msg("%s: %zu backups listed, %zu expected", what, got, n);
    ASSERT_OK(lsm_backup_verify(bdir, 0, NULL, no_report, (void *)what));
}

/* --------------------------------------------------------- the template */

static void make_template(void)
{
    char tl[300], tb[300];
    snprintf(tl, sizeof tl, "%s/live", tmpl);
    snprintf(tb, sizeof tb, "%s/backups", tmpl);
    assert_int_equal(mkdir(tmpl, 0700), 0);
    lsm_db *d = tu_open_db(tl, NULL, WBS);
    put_keys(d, 0, NKEYS, 1);
    want1 = tu_dump_db(d);
    ASSERT_OK(lsm_backup(d, tb, NULL, NULL));
    put_keys(d, NKEYS / 2, NKEYS + 20, 2);
    want2 = tu_dump_db(d);
    ASSERT_OK(lsm_backup(d, tb, NULL, NULL));
    ASSERT_OK(lsm_close(d));
}

/* A fresh copy of the template in work; the store opened if open. */
static void fresh(bool open)
{
    if (access(work, F_OK) == 0)
        tu_rmtree(work);
    char cmd[sizeof tmpl + sizeof work + 16];
    snprintf(cmd, sizeof cmd, "cp -a %s %s", tmpl, work); /* (names of ours: no quoting) */
    assert_int_equal(system(cmd), 0);
    db = open ? tu_open_db(live, NULL, WBS) : NULL;
}

static void close_db(void)
{
    if (db != NULL)
        ASSERT_OK(lsm_close(db));
    db = NULL;
}

/* ---------------------------------------------------------------- cases */

typedef struct mcase {
    const char *name;
    bool needs_db;   /* runs against the open store */
    bool background; /* waits for a flush: the background's allocations too */
    lsm_status *(*run)(void);
    /* After the call answered s: what it left, then the call repeated
     * with memory back and its outcome. */
    void (*check)(lsm_status *s);
} mcase;

static lsm_status *run_backup(void)
{
    return lsm_backup(db, bdir, NULL, NULL);
}
/* The id of the newest backup listed. */
static uint64_t newest_backup(void)
{
    lsm_backup_info *list = NULL;
    size_t n = 0;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    uint64_t id = n > 0 ? list[n - 1].id : 0;
    free(list);
    return id;
}

static void check_backup(lsm_status *s)
{
    static const uint64_t before[] = {1, 2}, after[] = {1, 2, 3};
    uint64_t n = newest_backup();
    /* listed only when its last directory sync failed, which it says */
    if (s != NULL && n == 3 && !tu_mentions(s, "listed"))
        fail_msg("a failed backup is listed: %s", lsm_status_message(s));
    assert_backups(n == 3 ? after : before, (size_t)n, "after the backup");
    /* The next backup (the failed one repeated) succeeds and takes away
     * whatever this one could not. */
    ASSERT_OK(run_backup());
    if (has_entry(live, ".backup-") || has_entry(live, "..backup-"))
        fail_msg("a backup's checkpoint is left in the store (%s)",
                 s ? lsm_status_message(s) : "the backup succeeded");
    close_db();
    char r[sizeof work + 8];
    snprintf(r, sizeof r, "%s/newest", work);
    ASSERT_OK(lsm_backup_restore(bdir, newest_backup(), r, NULL));
    assert_store_holds(r, want2, "the newest backup restored");
}

static lsm_status *run_restore(void)
{
    return lsm_backup_restore(bdir, 1, dest, NULL);
}
/* A restore or checkpoint to dest that failed left nothing there, nor its
 * hidden copy (".restored.tmp-..."). */
static void assert_nothing_at_dest(const char *what)
{
    if (access(dest, F_OK) == 0)
        fail_msg("a failed %s left %s", what, dest);
    if (has_entry(work, ".restored"))
        fail_msg("a failed %s left its hidden copy", what);
}

static void check_restore(lsm_status *s)
{
    if (s != NULL) {
        assert_nothing_at_dest("restore");
        ASSERT_OK(run_restore());
    }
    assert_store_holds(dest, want1, "backup 1 restored");
}

static lsm_status *run_verify(void)
{
    return lsm_backup_verify(bdir, 0, NULL, no_report, "verify");
}
static void check_verify(lsm_status *s)
{
    if (s != NULL)
        ASSERT_OK(run_verify());
}

static lsm_status *run_purge(void)
{
    uint64_t removed = 0;
    lsm_status *s = lsm_backup_purge(bdir, 1, NULL, &removed);
    if (s == NULL && removed != 1)
        fail_msg("purge: %" PRIu64 " removed, 1 expected", removed);
    return s;
}
static void check_purge(lsm_status *s)
{
    static const uint64_t kept[] = {2}, both[] = {1, 2};
    if (s != NULL) {
        lsm_backup_info *list = NULL;
        size_t n = 0;
        ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
        free(list);
        assert_backups(n == 1 ? kept : both, n, "after the failed purge");
        uint64_t removed = 0;
        ASSERT_OK(lsm_backup_purge(bdir, 1, NULL, &removed));
    }
    assert_backups(kept, 1, "after the purge");
    ASSERT_OK(lsm_backup_restore(bdir, 2, dest, NULL));
    assert_store_holds(dest, want2, "backup 2 restored after the purge");
}

static lsm_status *run_list(void)
{
    lsm_backup_info *list = NULL;
    size_t n = 0;
    lsm_status *s = lsm_backup_list(bdir, NULL, &list, &n);
    if (s == NULL && (n != 2 || list[0].id != 1 || list[1].id != 2))
        fail_msg("list: %zu backups, not 1 and 2", n);
    free(list);
    return s;
}
static void check_list(lsm_status *s)
{
    if (s != NULL)
        ASSERT_OK(run_list());
}

static lsm_status *run_checkpoint(void)
{
    return lsm_checkpoint(db, dest);
}
static void check_checkpoint(lsm_status *s)
{
    if (s != NULL) {
        assert_nothing_at_dest("checkpoint");
        ASSERT_OK(run_checkpoint());
    }
    close_db();
    assert_store_holds(dest, want2, "the checkpoint");
}

/* Loosens the modes of the store's directory and files (as a store made
 * before the env made everything private). */
static void loosen(void)
{
    DIR *d = opendir(live);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char p[sizeof live + sizeof e->d_name + 1];
        snprintf(p, sizeof p, "%s/%s", live, e->d_name);
        if (e->d_name[0] != '.')
            assert_int_equal(chmod(p, 0644), 0);
    }
    closedir(d);
    assert_int_equal(chmod(live, 0755), 0);
}

static int loose_now(void)
{
    int loose = -1;
    ASSERT_OK(lsm_private_modes(NULL, live, false, NULL, NULL, &loose));
    return loose;
}

static lsm_status *run_private(void)
{
    return lsm_private_modes(NULL, live, true, NULL, NULL, NULL);
}
static void check_private(lsm_status *s)
{
    if (s != NULL)
        ASSERT_OK(lsm_private_modes(NULL, live, true, NULL, NULL, NULL));
    assert_int_equal(loose_now(), 0);
}

static lsm_status *run_uri(void)
{
    return store_uri_options("ceph_conf=/nonexistent/ceph.conf,ceph_id=oom,lease_ms=5000");
}
static void check_uri(lsm_status *s)
{
    if (s != NULL)
        ASSERT_OK(run_uri());
    ASSERT_FAILS(store_uri_options("ceph_id=oom,bogus"), LSM_INVALID_ARGUMENT,
                 "unknown option -o bogus");
}

static const mcase cases[] = {
    {"backup", true, true, run_backup, check_backup},
    {"restore", false, false, run_restore, check_restore},
    {"verify", false, false, run_verify, check_verify},
    {"purge", false, false, run_purge, check_purge},
    {"list", false, false, run_list, check_list},
    {"checkpoint", true, true, run_checkpoint, check_checkpoint},
    {"private_modes", false, false, run_private, check_private},
    {"uri_options", false, false, run_uri, check_uri},
};

/* ---------------------------------------------------------------- sweep */

/* Allocation N and every later one of its stream fail (memory gone until
 * the call returns), not only N. */
static bool for_good;

/* One run of c with allocation n of stream failing (0: none); false when
 * the call made fewer than n allocations (nothing failed). */
static bool run_one(const mcase *c, enum lsm_alloc_stream stream, uint64_t n, uint64_t *count)
{
    if (getenv("OOM_MANAGE_VERBOSE") != NULL)
        print_message("%s: stream %d allocation %" PRIu64 "\n", c->name, (int)stream, n);
    fresh(c->needs_db);
    if (c->run == run_private)
        loosen();
    if (db != NULL) { /* the background idle, then a memtable for the call to flush */
        ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
        put_keys(db, NKEYS / 2, NKEYS, 2); /* as they are: the store holds want2 still */
    }
    lsm_alloc_hook_arm_from(stream, n, for_good);
    lsm_status *s = c->run();
    lsm_alloc_hook_disarm();
    bool fired = lsm_alloc_hook_fired();
    *count = lsm_alloc_hook_count(stream);
    if (s != NULL && lsm_status_code(s) != LSM_NO_MEMORY)
        fail_msg("%s, allocation %" PRIu64 " of stream %d failing: %s (not out of memory)",
                 c->name, n, (int)stream, lsm_status_message(s));
    if (s != NULL && !fired)
        fail_msg("%s: %s with no allocation failed", c->name, lsm_status_message(s));
    c->check(s);
    lsm_status_free(s);
    close_db();
    return fired;
}

/* Whether the sweep runs N: every N with OOM_SWEEP=full (make torture),
 * else the first 20 and every 5th (as test_oom_sweep). */
static bool sampled(uint64_t n)
{
    const char *mode = getenv("OOM_SWEEP");
    return (mode != NULL && strcmp(mode, "full") == 0) || n <= 20 || n % 5 == 0;
}

static void sweep(const mcase *c, enum lsm_alloc_stream stream)
{
    uint64_t unfailed = 0, count = 0, ran = 0;
    run_one(c, stream, 0, &unfailed);
    if (stream == LSM_ALLOC_MAIN && unfailed == 0)
        fail_msg("%s allocates nothing through lsm_malloc.h: the sweep reaches nothing", c->name);
    for (uint64_t n = 1; n <= unfailed; n++) {
        if (!sampled(n))
            continue;
        if (!run_one(c, stream, n, &count) && stream == LSM_ALLOC_MAIN) /* (the other: timing's) */
            fail_msg("%s: allocation %" PRIu64 " of stream %d never came (%" PRIu64
                     " unfailed)", c->name, n, (int)stream, unfailed);
        ran++;
    }
    if (getenv("OOM_MANAGE_VERBOSE") != NULL)
        print_message("%-14s stream %d%s: %" PRIu64 " allocations, %" PRIu64 " failed in turn\n",
                      c->name, (int)stream, for_good ? " (for good)" : "", unfailed, ran);
}

static void test_every_call_out_of_memory(void **state)
{
    (void)state;
    make_template();
    const char *only = getenv("OOM_MANAGE_CASE"), *mode = getenv("OOM_SWEEP");
    int ran = 0;
    /* memory gone for good: make torture's */
    int modes = mode != NULL && strcmp(mode, "full") == 0 ? 2 : 1;
    for (int m = 0; m < modes; m++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (only != NULL && strcmp(only, cases[i].name) != 0)
                continue;
            for_good = m == 1;
            sweep(&cases[i], LSM_ALLOC_MAIN);
            if (cases[i].background)
                sweep(&cases[i], LSM_ALLOC_OTHER);
            ran++;
        }
    assert_true(ran > 0);
    free(want1);
    free(want2);
}

static int setup(void **state)
{
    int rc = tu_setup(state);
    snprintf(base, sizeof base, "/dev/shm/lsm-oom-manage-XXXXXX");
    if (mkdtemp(base) == NULL)
        snprintf(base, sizeof base, "%s", tu_dir);
    snprintf(tmpl, sizeof tmpl, "%s/template", base);
    snprintf(work, sizeof work, "%s/work", base);
    snprintf(live, sizeof live, "%s/live", work);
    snprintf(bdir, sizeof bdir, "%s/backups", work);
    snprintf(dest, sizeof dest, "%s/restored", work);
    return rc;
}

static int teardown(void **state)
{
    lsm_alloc_hook_disarm();
    if (db != NULL) /* a check failed with the store open: close it first */
        lsm_status_free(lsm_close(db));
    db = NULL;
    if (strcmp(base, tu_dir) != 0)
        tu_rmtree(base);
    return tu_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_call_out_of_memory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
