/* test_fs_perm.c — the daemon's own POSIX permission check (fs/perm.c):
 * owner, group, supplementary groups and other each decided by their own
 * bits only, and root's exceptions. */
#include "testutil.h"

#include "perm.h"

#include <unistd.h>

#define OWNER 1000
#define GROUP 100

static perm_cred cred(uid_t uid, gid_t gid, size_t ngroups, const gid_t *groups)
{
    perm_cred c = {.uid = uid, .gid = gid, .ngroups = ngroups};
    c.groups = c.inline_groups;
    for (size_t i = 0; i < ngroups; i++)
        c.groups[i] = groups[i];
    return c;
}

static int check(const perm_cred *c, mode_t mode, int mask)
{
    return perm_check(c, S_IFREG | mode, OWNER, GROUP, mask);
}

/* Each class gets exactly the bits of its triple: every mask against
 * every value of the triple, the other two triples set to the opposite. */
static void class_gets_its_bits(const perm_cred *c, int shift)
{
    for (int bits = 0; bits < 8; bits++) {
        mode_t mode = (mode_t)(0777 & ~(7 << shift)) | (mode_t)(bits << shift);
        for (int mask = 0; mask < 8; mask++) {
            int want = (mask & ~bits) ? EACCES : 0;
            if (check(c, mode, mask) != want)
                fail_msg("uid %d gid %d mode %04o mask %d: got %d, want %d", (int)c->uid,
                         (int)c->gid, (unsigned)mode, mask, check(c, mode, mask), want);
        }
    }
}

static void test_owner(void **state)
{
    (void)state;
    perm_cred c = cred(OWNER, GROUP, 0, NULL); /* also in the group */
    class_gets_its_bits(&c, 6);
    assert_int_equal(check(&c, 0077, R_OK), EACCES); /* owner class only */
    assert_int_equal(check(&c, 0000, F_OK), 0);
}

static void test_group(void **state)
{
    (void)state;
    perm_cred c = cred(2000, GROUP, 0, NULL);
    class_gets_its_bits(&c, 3);
    assert_int_equal(check(&c, 0707, R_OK), EACCES); /* group class only */
}

static void test_supplementary_groups(void **state)
{
    (void)state;
    gid_t g[] = {7, 8, GROUP, 9};
    perm_cred c = cred(2000, 5, 4, g);
    class_gets_its_bits(&c, 3);
    assert_int_equal(check(&c, 0707, W_OK), EACCES);
    perm_cred outside = cred(2000, 5, 3, g); /* 7, 8, 9 not: GROUP is 3rd */
    outside.groups[2] = 9;
    class_gets_its_bits(&outside, 0);
}

static void test_other(void **state)
{
    (void)state;
    gid_t g[] = {7, 8};
    perm_cred c = cred(2000, 5, 2, g);
    class_gets_its_bits(&c, 0);
    assert_int_equal(check(&c, 0770, R_OK), EACCES);
}

static void test_root(void **state)
{
    (void)state;
    perm_cred c = cred(0, 0, 0, NULL);
    assert_int_equal(check(&c, 0000, R_OK | W_OK), 0);
    assert_int_equal(check(&c, 0644, X_OK), EACCES);
    assert_int_equal(check(&c, 0666, R_OK | X_OK), EACCES);
    assert_int_equal(check(&c, 0744, X_OK), 0);
    assert_int_equal(check(&c, 0654, X_OK), 0);
    assert_int_equal(check(&c, 0645, R_OK | W_OK | X_OK), 0);
    assert_int_equal(perm_check(&c, S_IFDIR | 0000, OWNER, GROUP, R_OK | W_OK | X_OK), 0);
    assert_int_equal(perm_check(&c, S_IFCHR | 0666, OWNER, GROUP, X_OK), EACCES);
    /* Root in the owner's place is still root. */
    assert_int_equal(perm_check(&c, S_IFREG | 0000, 0, 0, R_OK | W_OK), 0);
    assert_int_equal(perm_check(&c, S_IFREG | 0600, 0, 0, X_OK), EACCES);
}

static void test_directories(void **state)
{
    (void)state;
    perm_cred c = cred(2000, 5, 0, NULL);
    assert_int_equal(perm_check(&c, S_IFDIR | 0755, OWNER, GROUP, X_OK), 0);
    assert_int_equal(perm_check(&c, S_IFDIR | 0755, OWNER, GROUP, W_OK), EACCES);
    assert_int_equal(perm_check(&c, S_IFDIR | 0754, OWNER, GROUP, X_OK), EACCES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner),       cmocka_unit_test(test_group),
        cmocka_unit_test(test_supplementary_groups), cmocka_unit_test(test_other),
        cmocka_unit_test(test_root),        cmocka_unit_test(test_directories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
