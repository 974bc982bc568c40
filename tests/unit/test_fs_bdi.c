/* test_fs_bdi.c — finding a mount's kernel I/O settings (fs/transport/bdi.c): a
 * path that is no mount point is refused and nothing is written. (Setting
 * a real FUSE mount's readahead is covered by test_requests.) */
#include "testutil.h"

#include "transport/bdi.h"

#include <errno.h>

/* A directory that exists but is no mount point: ENOENT. */
static void test_not_a_mount_point(void **state)
{
    (void)state;
    char dir[256];
    tu_mkdtemp(dir, sizeof dir, "bdi");
    assert_int_equal(bdi_set_readahead(dir, 1024), ENOENT);
    tu_rmtree(dir);
}

/* Paths that name nothing, or not in mountinfo's absolute form. */
static void test_no_such_path(void **state)
{
    (void)state;
    assert_int_equal(bdi_set_readahead("/no/such/mount/point", 1024), ENOENT);
    assert_int_equal(bdi_set_readahead("relative/path", 1024), ENOENT);
    assert_int_equal(bdi_set_readahead("", 1024), ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_a_mount_point),
        cmocka_unit_test(test_no_such_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
