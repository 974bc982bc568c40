/* test_fs_caller.c — the CapEff and Groups lines of a /proc status text. */
#include "testutil.h"

#include "caller.h"

static void test_capeff_parsed(void **state)
{
    (void)state;
    unsigned long long set = 1;
    assert_true(caller_parse_capeff("Name:\tx\nCapPrm:\t0000000000000010\n"
                                    "CapEff:\t000001ffffffffef\nCapBnd:\t0\n",
                                    &set));
    assert_int_equal(set, 0x1ffffffffefULL);
    assert_true(caller_parse_capeff("Name:\tx\nCapEff:\t0000000000000000\n", &set));
    assert_int_equal(set, 0);
}

/* A missing or malformed line gives no capabilities at all. */
static void test_capeff_malformed(void **state)
{
    (void)state;
    unsigned long long set = 0;
    assert_false(caller_parse_capeff("Name:\tx\nCapPrm:\t0000000000000010\n", &set));
    assert_false(caller_parse_capeff("Name:\tx\nCapEff:\t\n", &set));
    assert_false(caller_parse_capeff("Name:\tx\nCapEff:\t00zz\n", &set));
    assert_false(
        caller_parse_capeff("CapEff:\t0000000000000010\n", &set)); /* not at a line start */
    assert_false(caller_parse_capeff("", &set));
}

/* Whether the Groups line of `text` holds gid, read from a file. */
static bool has_group(const char *text, gid_t gid)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fflush(f);
    rewind(f);
    bool in = caller_status_has_group(fileno(f), gid);
    fclose(f);
    return in;
}

static void test_groups_line(void **state)
{
    (void)state;
    const char *t = "Name:\tx\nGid:\t0\t0\t0\t0\nGroups:\t424 42420 7 \nNSpgid:\t1\n";
    assert_true(has_group(t, 424));
    assert_true(has_group(t, 42420));
    assert_true(has_group(t, 7));
    assert_false(has_group(t, 4242)); /* no prefix nor part of another */
    assert_false(has_group(t, 42));
    assert_false(has_group(t, 0)); /* Gid: is no group line */
    assert_false(has_group("Name:\tx\nXGroups:\t5\n", 5));
    assert_false(has_group("Name:\tx\nGroups:\t\nNSpgid:\t5\n", 5));
    assert_false(has_group("Name:\tx\n", 5));
    assert_true(has_group("Groups:\t5", 5)); /* the file's end ends the line */
    assert_false(has_group("Groups:\t99999999999999999999\n", 1)); /* too long for a gid */
}

/* A list of 65536 groups (ngroups_max) is read in pieces, all of it. */
static void test_groups_line_long(void **state)
{
    (void)state;
    size_t cap = 65536 * 8 + 64, len = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    len += (size_t)snprintf(t, cap, "Name:\tx\nGroups:\t");
    for (unsigned g = 100000; g < 100000 + 65536; g++)
        len += (size_t)snprintf(t + len, cap - len, "%u ", g);
    snprintf(t + len, cap - len, "\nNSpgid:\t1\n");
    assert_true(has_group(t, 100000));
    assert_true(has_group(t, 100000 + 65535));
    assert_true(has_group(t, 100000 + 4096));
    assert_false(has_group(t, 100000 + 65536));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capeff_parsed),
        cmocka_unit_test(test_capeff_malformed),
        cmocka_unit_test(test_groups_line),
        cmocka_unit_test(test_groups_line_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
