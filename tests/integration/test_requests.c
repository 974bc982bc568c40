/*
 * test_requests — the store work a request costs (issue 6).
 *
 * Every FUSE request is a round trip the application waits for, and what
 * the daemon does inside one adds to it. These tests read the daemon's own
 * counters of store point reads ("fs store gets") and writes from the
 * root's user.lsmfs.stats attribute around a system call, and check that a
 * call costs no more than it must: the kernel's security.capability query
 * before a write, a write that replaces every stored byte it touches, ...
 * Each also checks the result (content read back from the daemon, after a
 * remount and a clean fsck), so a request made cheaper by doing less than
 * it must fails here too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_requests test", NULL);
}

static uint64_t gets(const struct tmount *m)
{
    return tm_stats_counter(m, "fs store gets");
}

/* An inode without extended attributes answers getxattr and listxattr
 * (the kernel asks security.capability before every write) from the inode
 * cache; one with them still finds them in the store. */
static void test_xattr_queries_of_inode_without_any(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *f = P("f");
    tm_touch(f);
    char buf[64];
    uint64_t g0 = gets(m);
    TM_ERR(getxattr(f, "security.capability", buf, sizeof buf), ENODATA);
    TM_ERR(getxattr(f, "user.a", buf, sizeof buf), ENODATA);
    assert_int_equal(listxattr(f, buf, sizeof buf), 0);
    assert_int_equal(gets(m) - g0, 0);

    TM_OK(setxattr(f, "user.a", "v1", 2, 0));
    assert_int_equal(getxattr(f, "user.a", buf, sizeof buf), 2);
    assert_memory_equal(buf, "v1", 2);
    assert_int_equal(listxattr(f, buf, sizeof buf), (int)sizeof "user.a");
    TM_OK(removexattr(f, "user.a"));
    TM_ERR(getxattr(f, "user.a", buf, sizeof buf), ENODATA);
    assert_int_equal(listxattr(f, buf, sizeof buf), 0);

    TM_OK(setxattr(f, "user.b", "v2", 2, 0));
    tm_remount_checked(m);
    assert_int_equal(getxattr(f, "user.b", buf, sizeof buf), 2);
    assert_memory_equal(buf, "v2", 2);
    TM_ERR(getxattr(P("."), "user.b", buf, sizeof buf), ENODATA);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_xattr_queries_of_inode_without_any, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
