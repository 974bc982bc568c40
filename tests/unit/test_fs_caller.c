/* test_fs_caller.c — the CapEff line of a /proc status text. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capeff_parsed),
        cmocka_unit_test(test_capeff_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
