/* test_fs_reserve.c — the root reserve (fs/reserve.c): its arithmetic; a
 * disk it cannot look at (disk_free fails) refuses nothing, as the store
 * reports a full disk itself; and a refusal first waits for the store's
 * running flush, whose table holds space only until it ends. Refusals of a
 * real caller (privileges) are tested on a mount (test_security); here a
 * NULL request is a caller without privilege. */
#include "fixture.h"

#include "fault_env.h"
#include "reserve.h"

#include <pthread.h>

#define WBS (64 * 1024)

static void test_blocks(void **state)
{
    (void)state;
    root_reserve r;
    reserve_init(&r, NULL, lsm_env_default(), "/", 5, 0, 0);
    assert_int_equal(reserve_blocks(&r, 1000), 50);
    assert_int_equal(reserve_blocks(&r, 199), 9);
    assert_int_equal(reserve_blocks(&r, UINT64_MAX), UINT64_MAX / 100 * 5 + 15 * 5 / 100);
    reserve_init(&r, NULL, lsm_env_default(), "/", 0, 0, 0);
    assert_int_equal(reserve_blocks(&r, 1000), 0);
    assert_int_equal(reserve_admit(&r, NULL, 1 << 20), 0); /* no reserve: never asks */
}

static void test_unreadable_disk_refuses_nothing(void **state)
{
    (void)state;
    root_reserve r;
    reserve_init(&r, NULL, lsm_env_default(), "/nonexistent/lsmfs-store", 50, 0, 0);
    assert_int_equal(reserve_admit(&r, NULL, 1 << 20), 0);
}

/* Puts until a memtable is being flushed and that flush waits in its
 * held directory sync (the flush's table is written, its memtable and the
 * log it replaces not yet given up). */
static void hold_a_flush(fault_env *fe, lsm_db *db)
{
    fault_env_count_start(fe, NULL, NULL); /* holding needs the count */
    fault_env_hold_dir_syncs(fe, true);
    char k[32], v[200];
    memset(v, 'v', sizeof v);
    lsm_write_options wo = {.sync = false};
    for (int i = 0; tu_prop(db, "lsm.immutable-memtables") == 0; i++) {
        assert_true(i < 10000);
        snprintf(k, sizeof k, "k%06d", i);
        ASSERT_OK(lsm_put(db, &wo, k, strlen(k), v, sizeof v));
    }
    for (int i = 0; fault_env_held(fe) == 0; i++) {
        assert_true(i < 10000);
        usleep(1000);
    }
    assert_int_equal(tu_prop(db, "lsm.background-running"), 1);
}

/* After 100 ms: the disk shows its true free space again, then the held
 * flush ends (as a flush's space comes back when it ends). */
static void *end_flush_main(void *p)
{
    fault_env *fe = p;
    usleep(100 * 1000);
    fault_env_set_disk_avail(fe, false, 0);
    fault_env_hold_dir_syncs(fe, false);
    return NULL;
}

/* A write that would reach into the reserve while a flush runs is let in
 * once the flush has ended and the disk has room again; with nothing
 * running and no room, it is refused at once. */
static void test_refusal_waits_for_running_flush(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), WBS);
    lsm_db *db = tu_open_with(&o);
    root_reserve r;
    reserve_init(&r, db, fault_env_env(fe), tu_dir, 1, 0, 0); /* 1%: a real disk has it */

    hold_a_flush(fe, db);
    fault_env_set_disk_avail(fe, true, 0); /* the flush's table fills the disk */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, end_flush_main, fe), 0);
    assert_int_equal(reserve_admit(&r, NULL, 4096), 0);
    pthread_join(t, NULL);
    fault_env_count_stop(fe);

    fault_env_set_disk_avail(fe, true, 0); /* full, and nothing runs */
    for (int i = 0; tu_prop(db, "lsm.background-running") > 0; i++) {
        assert_true(i < 10000);
        usleep(1000);
    }
    reserve_init(&r, db, fault_env_env(fe), tu_dir, 1, 0, 0); /* looks at once */
    assert_int_equal(reserve_admit(&r, NULL, 4096), ENOSPC);
    fault_env_set_disk_avail(fe, false, 0);
    lsm_status_free(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_unreadable_disk_refuses_nothing),
        TU_TEST(test_refusal_waits_for_running_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
