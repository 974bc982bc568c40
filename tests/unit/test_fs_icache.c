/* test_fs_icache.c — the inode cache's budget of kept inline payloads
 * (fs/icache.c icache_payload_keep): payloads are kept until the budget is
 * reached, none past it, and an inode's eviction gives its share back. */
#include "testutil.h"

#include "icache.h"
#include "inode.h"

#define PIECE 4096

static char *piece(void)
{
    char *p = malloc(PIECE);
    assert_non_null(p);
    memset(p, 'x', PIECE);
    return p;
}

static void test_payload_budget(void **state)
{
    (void)state;
    icache *c = icache_new();
    assert_non_null(c);
    const int fit = (int)(ICACHE_PAYLOAD_BUDGET / PIECE);
    inode *first = NULL;
    for (int i = 0; i < fit; i++) {
        inode *n;
        assert_int_equal(icache_reserve(c, 100 + (uint64_t)i, &n), 0);
        icache_payload_keep(c, n, piece(), PIECE);
        assert_true(n->pay_kept);
        if (i == 0)
            first = n; /* stays pinned */
        else
            icache_put(c, n); /* evicted: gives its share back */
    }
    assert_int_equal(icache_payload_bytes(c), PIECE);
    for (int i = 0; i < fit - 1; i++) { /* fill it again, kept pinned */
        inode *n;
        assert_int_equal(icache_reserve(c, 100000 + (uint64_t)i, &n), 0);
        icache_payload_keep(c, n, piece(), PIECE);
        assert_true(n->pay_kept);
    }
    assert_int_equal(icache_payload_bytes(c), ICACHE_PAYLOAD_BUDGET);
    inode *n;
    assert_int_equal(icache_reserve(c, 5, &n), 0);
    icache_payload_keep(c, n, piece(), PIECE); /* past the budget: freed */
    assert_false(n->pay_kept);
    assert_null(n->pay);
    assert_int_equal(icache_payload_bytes(c), ICACHE_PAYLOAD_BUDGET);
    icache_payload_keep(c, first, NULL, 0); /* replaced by an empty one */
    assert_true(first->pay_kept);
    icache_payload_keep(c, n, piece(), PIECE); /* fits again */
    assert_true(n->pay_kept);
    assert_int_equal(icache_payload_bytes(c), ICACHE_PAYLOAD_BUDGET);
    icache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
