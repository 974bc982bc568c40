/* test_grow.c — lsm_grow, the doubling rule of every growable array: the
 * capacities it picks, the array it keeps, and what it leaves alone when
 * memory runs out or the size would overflow. */
#include "testutil.h"

#include "alloc_fail.h"
#include "grow.h"

#include <stdint.h>

static void test_first_room_and_doubling(void **state)
{
    (void)state;
    size_t cap = 0;
    uint64_t *v = lsm_grow(NULL, &cap, 1, sizeof *v, 16);
    assert_non_null(v);
    assert_int_equal(cap, 16);
    for (size_t i = 0; i < 16; i++)
        v[i] = i;
    uint64_t *same = lsm_grow(v, &cap, 16, sizeof *v, 16);
    assert_ptr_equal(same, v); /* room enough: untouched */
    assert_int_equal(cap, 16);
    v = lsm_grow(v, &cap, 17, sizeof *v, 16);
    assert_non_null(v);
    assert_int_equal(cap, 32);
    for (size_t i = 0; i < 16; i++)
        assert_int_equal(v[i], i); /* the elements travel */
    v = lsm_grow(v, &cap, 200, sizeof *v, 16);
    assert_non_null(v);
    assert_int_equal(cap, 256); /* doubled until it holds need */
    free(v);
}

static void test_first_cap_covers_need(void **state)
{
    (void)state;
    size_t cap = 0;
    char *s = lsm_grow(NULL, &cap, 1000, 1, 256);
    assert_non_null(s);
    assert_int_equal(cap, 1024);
    free(s);
}

static void test_overflow_leaves_array(void **state)
{
    (void)state;
    size_t cap = 0;
    uint64_t *v = lsm_grow(NULL, &cap, 4, sizeof *v, 4);
    assert_non_null(v);
    assert_null(lsm_grow(v, &cap, SIZE_MAX / 2, sizeof *v, 4)); /* bytes overflow */
    assert_int_equal(cap, 4);
    assert_null(lsm_grow(v, &cap, SIZE_MAX, 1, 4)); /* the capacity itself */
    assert_int_equal(cap, 4);
    free(v);
}

static void test_out_of_memory_leaves_array(void **state)
{
    (void)state;
    size_t cap = 0;
    int *v = lsm_grow(NULL, &cap, 2, sizeof *v, 2);
    assert_non_null(v);
    v[0] = 7;
    v[1] = 9;
    lsm_alloc_hook_arm(LSM_ALLOC_MAIN, 1);
    int *w = lsm_grow(v, &cap, 3, sizeof *v, 2);
    lsm_alloc_hook_disarm();
    assert_true(lsm_alloc_hook_fired());
    assert_null(w);
    assert_int_equal(cap, 2); /* still the caller's array, as it was */
    assert_int_equal(v[0], 7);
    assert_int_equal(v[1], 9);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_room_and_doubling),
        cmocka_unit_test(test_first_cap_covers_need),
        cmocka_unit_test(test_overflow_leaves_array),
        cmocka_unit_test(test_out_of_memory_leaves_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
