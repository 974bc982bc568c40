/* test_fs_reserve.c — the root reserve's arithmetic (fs/reserve.c), and
 * that a disk it cannot look at (disk_free fails) refuses nothing: the store
 * reports a full disk itself. Refusals, which need a FUSE caller, are
 * tested on a mount (test_security). */
#include "testutil.h"

#include "reserve.h"

static void test_blocks(void **state)
{
    (void)state;
    root_reserve r;
    reserve_init(&r, lsm_env_default(), "/", 5, 0, 0);
    assert_int_equal(reserve_blocks(&r, 1000), 50);
    assert_int_equal(reserve_blocks(&r, 199), 9);
    assert_int_equal(reserve_blocks(&r, UINT64_MAX), UINT64_MAX / 100 * 5 + 15 * 5 / 100);
    reserve_init(&r, lsm_env_default(), "/", 0, 0, 0);
    assert_int_equal(reserve_blocks(&r, 1000), 0);
    assert_int_equal(reserve_admit(&r, NULL, 1 << 20), 0); /* no reserve: never asks */
}

static void test_unreadable_disk_refuses_nothing(void **state)
{
    (void)state;
    root_reserve r;
    reserve_init(&r, lsm_env_default(), "/nonexistent/lsmfs-store", 50, 0, 0);
    assert_int_equal(reserve_admit(&r, NULL, 1 << 20), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_unreadable_disk_refuses_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
