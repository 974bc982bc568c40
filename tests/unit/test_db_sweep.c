/*
 * test_db_sweep.c — db_delete_obsolete_files: one sweep at a time. The
 * flush and compaction threads both sweep; two sweeps side by side listed
 * the same obsolete table and both removed it (on RADOS each remove of a
 * name is several ops, and before the env checked names in its ops the
 * second remove dropped a name count a checkpoint's link still needed).
 */
#include "fixture.h"

#include "db_impl.h"
#include "fault_env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* Counts the removes of one file; the first waits (up to 2 s) for a second
 * to arrive, so a sweep beside it has every chance to remove it too. */
struct remove_watch {
    const char *name;
    atomic_int calls;
};

static void watch_remove(void *ctx, const char *path)
{
    struct remove_watch *w = ctx;
    if (strstr(path, w->name) == NULL)
        return;
    if (atomic_fetch_add(&w->calls, 1) > 0)
        return;
    for (int i = 0; i < 2000 && atomic_load(&w->calls) < 2; i++)
        usleep(1000);
}

static void *sweep_main(void *arg)
{
    lsm_db *db = arg;
    mutex_lock(&db->mu);
    db_delete_obsolete_files(db);
    mutex_unlock(&db->mu);
    return NULL;
}

/* A second sweep while the first is removing: the file is removed once
 * (before: twice, "0x2 != 0x1"), and gone when the second returns. */
static void test_two_sweeps_remove_a_file_once(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    char stray[256];
    tu_path(stray, sizeof stray, "000900.ldb"); /* a table no version names */
    ASSERT_OK(env_write_file_sync(tu_env(), stray, "x", 1));
    struct remove_watch w = {.name = "000900.ldb"};
    fault_env_on_remove(fe, watch_remove, &w);
    pthread_t first;
    assert_int_equal(pthread_create(&first, NULL, sweep_main, db), 0);
    for (int i = 0; i < 10000 && atomic_load(&w.calls) == 0; i++)
        usleep(1000); /* the first sweep is removing it */
    assert_int_equal(atomic_load(&w.calls), 1);
    sweep_main(db);
    assert_false(tu_env()->file_exists(tu_env(), stray));
    pthread_join(first, NULL);
    assert_int_equal(atomic_load(&w.calls), 1);
    fault_env_on_remove(fe, NULL, NULL);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_two_sweeps_remove_a_file_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
