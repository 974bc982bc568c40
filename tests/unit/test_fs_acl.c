/* test_fs_acl.c — POSIX ACL bytes: validation, the mode of an access ACL,
 * chmod of an ACL, inheritance of a default ACL (the kernel's rules). */
#include "testutil.h"

#include "acl.h"

#include <errno.h>
#include <sys/stat.h>

enum { UO = 0x01, U = 0x02, GO = 0x04, G = 0x08, M = 0x10, O = 0x20 };

typedef struct ent {
    uint16_t tag, perm;
    uint32_t id;
} ent;

/* The xattr form of n entries (version 2); returns its size. */
static size_t make(unsigned char *out, const ent *e, size_t n)
{
    out[0] = 2;
    out[1] = out[2] = out[3] = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = out + ACL_HEADER_SIZE + i * ACL_ENTRY_SIZE;
        p[0] = (unsigned char)e[i].tag;
        p[1] = (unsigned char)(e[i].tag >> 8);
        p[2] = (unsigned char)e[i].perm;
        p[3] = (unsigned char)(e[i].perm >> 8);
        for (int k = 0; k < 4; k++)
            p[4 + k] = (unsigned char)(e[i].id >> (8 * k));
    }
    return ACL_HEADER_SIZE + n * ACL_ENTRY_SIZE;
}

static unsigned perm_at(const unsigned char *acl, size_t i)
{
    const unsigned char *p = acl + ACL_HEADER_SIZE + i * ACL_ENTRY_SIZE;
    return p[2] | p[3] << 8;
}

#define NONE 0xffffffffu
#define MAKE(out, ...)                                                                             \
    make(out, (const ent[]){__VA_ARGS__}, sizeof((const ent[]){__VA_ARGS__}) / sizeof(ent))

static void test_names(void **state)
{
    (void)state;
    assert_true(acl_is_access("system.posix_acl_access"));
    assert_true(acl_is_default("system.posix_acl_default"));
    assert_false(acl_is_access("system.posix_acl_accessx"));
    assert_false(acl_is_default("user.posix_acl_default"));
}

static void test_valid_acls(void **state)
{
    (void)state;
    unsigned char b[128];
    size_t n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), 0);
    n = MAKE(b, {UO, 7, NONE}, {U, 5, 10}, {U, 0, 20}, {GO, 5, NONE}, {G, 0, 3}, {M, 7, NONE},
             {O, 0, NONE});
    assert_int_equal(acl_valid(b, n), 0);
    n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {M, 4, NONE}, {O, 4, NONE}); /* mask, no names */
    assert_int_equal(acl_valid(b, n), 0);
}

static void test_malformed_acls(void **state)
{
    (void)state;
    unsigned char b[128];
    size_t n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n - 1), EINVAL);               /* size not whole entries */
    assert_int_equal(acl_valid(b, ACL_HEADER_SIZE), EINVAL);     /* no entries */
    assert_int_equal(acl_valid(b, 2), EINVAL);                   /* no header */
    b[0] = 1;
    assert_int_equal(acl_valid(b, n), EINVAL); /* version */
    n = MAKE(b, {UO, 6, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* no owning group */
    n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* no other */
    n = MAKE(b, {GO, 4, NONE}, {UO, 6, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* out of order */
    n = MAKE(b, {UO, 6, NONE}, {U, 6, 5}, {GO, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* named entry without a mask */
    n = MAKE(b, {UO, 6, NONE}, {U, 6, 5}, {U, 4, 5}, {GO, 4, NONE}, {M, 6, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* duplicate */
    n = MAKE(b, {UO, 6, NONE}, {U, 6, 9}, {U, 4, 5}, {GO, 4, NONE}, {M, 6, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* unsorted */
    n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {G, 4, 7}, {G, 4, 7}, {M, 6, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* duplicate group */
    n = MAKE(b, {UO, 8, NONE}, {GO, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* perm beyond rwx */
    n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {0x40, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* unknown tag */
    n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {O, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* after other */
    n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {M, 4, NONE}, {M, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_valid(b, n), EINVAL); /* two masks */
}

static void test_equivalent_mode(void **state)
{
    (void)state;
    unsigned char b[128];
    bool equiv;
    size_t n = MAKE(b, {UO, 6, NONE}, {GO, 4, NONE}, {O, 4, NONE});
    assert_int_equal(acl_mode(b, n, S_IFREG | 04600, &equiv), S_IFREG | 04644);
    assert_true(equiv);
    n = MAKE(b, {UO, 7, NONE}, {U, 0, 65534}, {GO, 7, NONE}, {M, 5, NONE}, {O, 1, NONE});
    assert_int_equal(acl_mode(b, n, S_IFDIR | 02700, &equiv), S_IFDIR | 02751);
    assert_false(equiv); /* the group bits come from the mask */
    n = MAKE(b, {UO, 6, NONE}, {GO, 6, NONE}, {M, 0, NONE}, {O, 0, NONE});
    assert_int_equal(acl_mode(b, n, S_IFREG | 0666, &equiv), S_IFREG | 0600);
    assert_false(equiv); /* a mask alone is not a mode */
}

static void test_chmod_updates_mask(void **state)
{
    (void)state;
    unsigned char b[128];
    size_t n = MAKE(b, {UO, 7, NONE}, {U, 7, 5}, {GO, 7, NONE}, {M, 7, NONE}, {O, 7, NONE});
    acl_chmod(b, n, 0640);
    assert_int_equal(perm_at(b, 0), 6);
    assert_int_equal(perm_at(b, 1), 7); /* named entries stay */
    assert_int_equal(perm_at(b, 2), 7); /* the owning group stays: the mask rules */
    assert_int_equal(perm_at(b, 3), 4);
    assert_int_equal(perm_at(b, 4), 0);
    assert_int_equal(acl_valid(b, n), 0);
    n = MAKE(b, {UO, 7, NONE}, {GO, 7, NONE}, {O, 7, NONE});
    acl_chmod(b, n, 0751);
    assert_int_equal(perm_at(b, 0), 7);
    assert_int_equal(perm_at(b, 1), 5); /* no mask: the owning group */
    assert_int_equal(perm_at(b, 2), 1);
}

static void test_inheritance(void **state)
{
    (void)state;
    unsigned char b[128];
    /* Default u::rwx u:65534:rwx g::r-x m::rwx o::---, a file made 0666. */
    size_t n = MAKE(b, {UO, 7, NONE}, {U, 7, 65534}, {GO, 5, NONE}, {M, 7, NONE}, {O, 0, NONE});
    mode_t mode = S_IFREG | 0666;
    assert_true(acl_inherit(b, n, &mode));
    assert_int_equal(mode, S_IFREG | 0660);
    assert_int_equal(perm_at(b, 0), 6);
    assert_int_equal(perm_at(b, 1), 7); /* named entries are kept, masked by the mask */
    assert_int_equal(perm_at(b, 2), 5);
    assert_int_equal(perm_at(b, 3), 6);
    assert_int_equal(perm_at(b, 4), 0);
    assert_int_equal(acl_valid(b, n), 0);
    /* Only base entries: the mode alone says it (no access ACL stored). */
    n = MAKE(b, {UO, 7, NONE}, {GO, 5, NONE}, {O, 5, NONE});
    mode = S_IFDIR | 02777;
    assert_false(acl_inherit(b, n, &mode));
    assert_int_equal(mode, S_IFDIR | 02755);
    n = MAKE(b, {UO, 6, NONE}, {GO, 0, NONE}, {O, 0, NONE});
    mode = S_IFREG | 0755;
    assert_false(acl_inherit(b, n, &mode));
    assert_int_equal(mode, S_IFREG | 0600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_valid_acls),
        cmocka_unit_test(test_malformed_acls),
        cmocka_unit_test(test_equivalent_mode),
        cmocka_unit_test(test_chmod_updates_mask),
        cmocka_unit_test(test_inheritance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
