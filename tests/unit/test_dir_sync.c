/* test_dir_sync.c — a directory the store makes has its own entry made
 * durable before anything relies on it: lsm_open(create_if_missing) syncs
 * the parent of the store directory it creates (mkfs.lsmfs creates through
 * it), and the first backup into a new directory syncs it after creating
 * LOCK, before the backup is listed (else after a power cut verify and
 * restore call it "not a backup directory"). Checked on the fault env's
 * trace of the calls, in order. */
#include "fixture.h"

#include "fault_env.h"

#define MAX_CALLS 4096

struct trace {
    int n;
    enum fault_call c[MAX_CALLS];
    char path[MAX_CALLS][256];
};

static void record(void *ctx, int stream, uint64_t index, enum fault_call c, const char *path)
{
    (void)index;
    struct trace *t = ctx;
    if (stream != FAULT_STREAM_MAIN || t->n >= MAX_CALLS)
        return;
    t->c[t->n] = c;
    snprintf(t->path[t->n], sizeof t->path[0], "%s", path);
    t->n++;
}

/* The index of the first call c on exactly path at or after from; -1 if none. */
static int find(const struct trace *t, int from, enum fault_call c, const char *path)
{
    for (int i = from < 0 ? 0 : from; i < t->n; i++)
        if (t->c[i] == c && strcmp(t->path[i], path) == 0)
            return i;
    return -1;
}

static void test_open_creating_syncs_parent(void **state)
{
    (void)state;
    char store[128];
    tu_path(store, sizeof store, "store");
    fault_env *fe = fault_env_new(lsm_env_default());
    struct trace *t = calloc(1, sizeof(*t));
    assert_non_null(fe);
    assert_non_null(t);
    fault_env_count_start(fe, record, t);
    lsm_db *db = tu_open_db(store, fault_env_env(fe), 0);
    fault_env_count_stop(fe);
    int made = find(t, 0, FC_MKDIR, store);
    assert_true(made >= 0);
    if (find(t, made, FC_SYNC_DIR, tu_dir) < 0)
        fail_msg("the store directory %s was created, its parent %s never synced", store, tu_dir);
    ASSERT_OK(lsm_close(db));
    /* Opening it again creates nothing, and syncs no parent. */
    t->n = 0;
    fault_env_count_start(fe, record, t);
    db = tu_open_db(store, fault_env_env(fe), 0);
    fault_env_count_stop(fe);
    assert_int_equal(find(t, 0, FC_SYNC_DIR, tu_dir), -1);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
    free(t);
}

static void test_first_backup_syncs_lock_entry(void **state)
{
    (void)state;
    char store[128], bk[128], lock[160], meta_tmp[160];
    tu_path(store, sizeof store, "store");
    tu_path(bk, sizeof bk, "bk");
    snprintf(lock, sizeof lock, "%s/LOCK", bk);
    snprintf(meta_tmp, sizeof meta_tmp, "%s/meta/.tmp-1", bk);
    lsm_db *db = tu_open_db(store, NULL, 0);
    ASSERT_OK(lsm_put(db, NULL, "k", 1, "v", 1));
    ASSERT_OK(lsm_close(db));
    fault_env *fe = fault_env_new(lsm_env_default());
    struct trace *t = calloc(1, sizeof(*t));
    assert_non_null(fe);
    assert_non_null(t);
    lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.env = fault_env_env(fe);
    fault_env_count_start(fe, record, t);
    ASSERT_OK(lsm_backup_store(store, bk, &o, NULL));
    fault_env_count_stop(fe);
    int locked = find(t, 0, FC_LOCK, lock), listed = find(t, 0, FC_RENAME, meta_tmp);
    assert_true(locked >= 0 && listed > locked);
    int synced = find(t, locked, FC_SYNC_DIR, bk);
    if (synced < 0 || synced > listed)
        fail_msg("backup 1 was listed (call %d) before %s's entry was synced (call %d)", listed,
                 lock, synced);
    fault_env_free(fe);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_open_creating_syncs_parent),
        TU_TEST(test_first_backup_syncs_lock_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
