/* test_bloom.c — the table bloom filter: no false negatives, ~1% false
 * positives at 10 bits per key, a stable on-disk hash, and filters of
 * unknown shape that match everything. */
#include "testutil.h"

#include "bloom.h"

static size_t key_of(char *out, uint64_t i)
{
    return (size_t)snprintf(out, 32, "key%010llu", (unsigned long long)i);
}

static void build_filter(buf *f, int bits_per_key, uint64_t first, size_t n)
{
    bloom_builder b;
    bloom_builder_init(&b, bits_per_key);
    for (size_t i = 0; i < n; i++) {
        char k[32];
        size_t kn = key_of(k, first + i);
        assert_true(bloom_builder_add(&b, k, kn));
    }
    assert_int_equal(bloom_builder_count(&b), n);
    f->len = 0;
    assert_true(bloom_builder_finish(&b, f));
    assert_int_equal(bloom_builder_count(&b), 0);
    bloom_builder_destroy(&b);
}

/* Fraction of `probes` keys never added that the filter lets through. */
static double fp_rate(const buf *f, size_t probes)
{
    size_t hits = 0;
    for (size_t i = 0; i < probes; i++) {
        char k[32];
        size_t kn = key_of(k, 1000000000ull + i);
        hits += bloom_may_match(f->data, f->len, k, kn);
    }
    return (double)hits / (double)probes;
}

static void test_no_false_negatives(void **state)
{
    (void)state;
    buf f;
    buf_init(&f);
    static const size_t sizes[] = {1, 2, 10, 100, 1000, 10000};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        build_filter(&f, 10, 0, sizes[s]);
        for (size_t i = 0; i < sizes[s]; i++) {
            char k[32];
            size_t kn = key_of(k, i);
            assert_true(bloom_may_match(f.data, f.len, k, kn));
        }
    }
    buf_free(&f);
}

static void test_false_positive_rate(void **state)
{
    (void)state;
    buf f;
    buf_init(&f);
    build_filter(&f, 10, 0, 10000);
    assert_true(f.len >= 10000 * 10 / 8);
    assert_true(f.len <= 10000 * 10 / 8 + 64 + 1);
    double rate = fp_rate(&f, 100000);
    print_message("bloom: 10 bits/key, 10000 keys: false positives %.3f%%\n", rate * 100);
    assert_true(rate < 0.02);
    assert_true(rate > 0.001); /* a filter that rejects everything is broken too */

    /* Across sizes the rate stays low (small filters round up to a block). */
    for (size_t n = 100; n <= 100000; n *= 10) {
        build_filter(&f, 10, 0, n);
        rate = fp_rate(&f, 20000);
        print_message("bloom: 10 bits/key, %zu keys: %.3f%%\n", n, rate * 100);
        assert_true(rate < 0.02);
    }
    /* More bits, fewer false positives. */
    build_filter(&f, 20, 0, 10000);
    assert_true(fp_rate(&f, 100000) < 0.002);
    buf_free(&f);
}

static void test_empty_filter(void **state)
{
    (void)state;
    buf f;
    buf_init(&f);
    build_filter(&f, 10, 0, 0);
    assert_int_equal(f.len, 64 + 1);
    assert_false(bloom_may_match(f.data, f.len, "a", 1));
    assert_false(bloom_may_match(f.data, f.len, "", 0));
    buf_free(&f);
}

/* Repeated keys (versions of one user key) are counted once. */
static void test_duplicates_collapse(void **state)
{
    (void)state;
    bloom_builder b;
    bloom_builder_init(&b, 10);
    for (int i = 0; i < 5; i++)
        assert_true(bloom_builder_add(&b, "same", 4));
    assert_true(bloom_builder_add(&b, "other", 5));
    assert_true(bloom_builder_add(&b, "same", 4)); /* not consecutive: counted */
    assert_int_equal(bloom_builder_count(&b), 3);
    bloom_builder_destroy(&b);
}

static void test_one_shot_create(void **state)
{
    (void)state;
    const char *keys[] = {"alpha", "beta", "", "gamma"};
    size_t lens[] = {5, 4, 0, 5};
    buf f;
    buf_init(&f);
    assert_true(bloom_create(10, keys, lens, 4, &f));
    for (int i = 0; i < 4; i++)
        assert_true(bloom_may_match(f.data, f.len, keys[i], lens[i]));
    buf_free(&f);
}

/* Malformed or unknown filters must not reject: they would lose data. */
static void test_unknown_filters_match(void **state)
{
    (void)state;
    char z[200];
    memset(z, 0, sizeof(z));
    assert_true(bloom_may_match(z, 0, "k", 1));
    assert_true(bloom_may_match(z, 1, "k", 1));
    assert_true(bloom_may_match(z, 64, "k", 1)); /* not blocks + 1 */
    assert_true(bloom_may_match(z, 66, "k", 1));
    z[64] = 0; /* k = 0 */
    assert_true(bloom_may_match(z, 65, "k", 1));
    z[64] = 31; /* k too large */
    assert_true(bloom_may_match(z, 65, "k", 1));
    z[64] = 6; /* a valid empty filter */
    assert_false(bloom_may_match(z, 65, "k", 1));
}

/* The hash is part of the table format: changing it breaks old tables. */
static void test_hash_is_stable(void **state)
{
    (void)state;
    assert_int_equal(bloom_hash("", 0), UINT64_C(0x7acdbb98b1344213));
    assert_int_equal(bloom_hash("a", 1), UINT64_C(0x6d708dbed973a203));
    assert_int_equal(bloom_hash("key0000000001", 13), UINT64_C(0xd8804ee51608bd76));
    assert_true(bloom_hash("ab", 2) != bloom_hash("ba", 2));
    assert_true(bloom_hash("a\0", 2) != bloom_hash("a", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_false_negatives), cmocka_unit_test(test_false_positive_rate),
        cmocka_unit_test(test_empty_filter),       cmocka_unit_test(test_duplicates_collapse),
        cmocka_unit_test(test_one_shot_create),    cmocka_unit_test(test_unknown_filters_match),
        cmocka_unit_test(test_hash_is_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
