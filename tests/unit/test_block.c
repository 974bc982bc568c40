/* test_block.c — block builder and iterator: round trips over random keys,
 * seeks and both directions, restart-point edge cases, and damaged blocks
 * (every byte flipped, every truncation) that must never crash. */
#include "testutil.h"

#include "block.h"
#include "status.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    return tu_xorshift64(&rng_state);
}

static int plain_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    return bytes_compare(a, alen, b, blen);
}

typedef tu_kv kv;

static int kv_sort(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    return bytes_compare(x->key, x->klen, y->key, y->klen);
}

/* n distinct sorted entries; keys share random-length prefixes (drawn from
 * a small alphabet) so prefix compression is exercised, some longer than
 * the iterator's inline key space. */
static kv *make_entries(size_t n, size_t max_key, size_t max_val)
{
    kv *e = calloc(n, sizeof(*e));
    assert_non_null(e);
    for (size_t i = 0; i < n; i++) {
        e[i].klen = (size_t)(rnd() % (max_key + 1));
        e[i].key = malloc(e[i].klen + 1);
        for (size_t j = 0; j < e[i].klen; j++)
            e[i].key[j] = (char)('a' + rnd() % 3);
        e[i].vlen = (size_t)(rnd() % (max_val + 1));
        e[i].val = malloc(e[i].vlen + 1);
        for (size_t j = 0; j < e[i].vlen; j++)
            e[i].val[j] = (char)rnd();
    }
    qsort(e, n, sizeof(*e), kv_sort);
    size_t m = 0; /* drop duplicates */
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && bytes_compare(e[m - 1].key, e[m - 1].klen, e[i].key, e[i].klen) == 0) {
            free(e[i].key);
            free(e[i].val);
            continue;
        }
        e[m++] = e[i];
    }
    for (size_t i = m; i < n; i++)
        e[i].key = e[i].val = NULL, e[i].klen = SIZE_MAX;
    return e;
}

static size_t count_entries(const kv *e, size_t n)
{
    size_t m = 0;
    while (m < n && e[m].klen != SIZE_MAX)
        m++;
    return m;
}

static void free_entries(kv *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(e[i].key);
        free(e[i].val);
    }
    free(e);
}

static void build(block_builder *bb, const kv *e, size_t n, const char **data, size_t *size)
{
    for (size_t i = 0; i < n; i++)
        assert_true(block_builder_add(bb, e[i].key, e[i].klen, e[i].val, e[i].vlen));
    assert_true(block_builder_finish(bb, data, size));
    assert_int_equal(*size, block_builder_size(bb));
}

/* A block of random entries (see make_entries) and what it was built from. */
typedef struct built {
    kv *e;
    size_t n, m; /* entries allocated, and distinct ones in the block */
    block_builder bb;
    const char *data;
    size_t size;
} built;

static void build_random(built *b, size_t n, int interval, size_t max_key, size_t max_val)
{
    b->e = make_entries(n, max_key, max_val);
    b->n = n;
    b->m = count_entries(b->e, n);
    block_builder_init(&b->bb, interval);
    build(&b->bb, b->e, b->m, &b->data, &b->size);
}

static void built_free(built *b)
{
    block_builder_destroy(&b->bb);
    free_entries(b->e, b->n);
}

static void assert_at(const block_iter *it, const kv *e)
{
    assert_true(block_iter_valid(it));
    assert_int_equal(it->key_len, e->klen);
    assert_memory_equal(it->key, e->key, e->klen);
    assert_int_equal(it->val_len, e->vlen);
    if (e->vlen)
        assert_memory_equal(it->val, e->val, e->vlen);
}

/* Checks every way of walking the block against the sorted entries. */
static void check_block(const char *data, size_t size, const kv *e, size_t n)
{
    block b;
    assert_true(block_parse(&b, data, size));
    block_iter it;
    block_iter_init(&it, plain_cmp);
    block_iter_set_block(&it, &b);

    block_iter_seek_first(&it);
    for (size_t i = 0; i < n; i++) {
        assert_at(&it, &e[i]);
        block_iter_next(&it);
    }
    assert_false(block_iter_valid(&it));

    block_iter_seek_last(&it);
    for (size_t i = n; i-- > 0;) {
        assert_at(&it, &e[i]);
        block_iter_prev(&it);
    }
    assert_false(block_iter_valid(&it));

    for (size_t i = 0; i < n; i++) {
        block_iter_seek(&it, e[i].key, e[i].klen);
        assert_at(&it, &e[i]);
        /* zig-zag around every entry */
        if (i > 0) {
            block_iter_prev(&it);
            assert_at(&it, &e[i - 1]);
            block_iter_next(&it);
            assert_at(&it, &e[i]);
        }
        block_iter_next(&it);
        if (i + 1 < n)
            assert_at(&it, &e[i + 1]);
        else
            assert_false(block_iter_valid(&it));
    }

    char t[80];
    for (int r = 0; r < 500; r++) { /* random targets, mostly absent */
        size_t tlen = (size_t)(rnd() % sizeof(t));
        for (size_t j = 0; j < tlen; j++)
            t[j] = (char)('a' + rnd() % 3);
        size_t want = tu_kv_lower_bound(e, n, t, tlen);
        block_iter_seek(&it, t, tlen);
        if (want == n)
            assert_false(block_iter_valid(&it));
        else
            assert_at(&it, &e[want]);
    }
    assert_null(block_iter_error(&it));
    block_iter_destroy(&it);
}

static void round_trip(size_t n, int interval, size_t max_key, size_t max_val)
{
    built b;
    build_random(&b, n, interval, max_key, max_val);
    check_block(b.data, b.size, b.e, b.m);
    /* The builder is reusable after reset. */
    block_builder_reset(&b.bb);
    assert_true(block_builder_empty(&b.bb));
    build(&b.bb, b.e, b.m, &b.data, &b.size);
    check_block(b.data, b.size, b.e, b.m);
    built_free(&b);
}

static void test_round_trip_random(void **state)
{
    (void)state;
    round_trip(1000, BLOCK_RESTART_INTERVAL, 24, 40);
    round_trip(1000, 1, 24, 40);
    round_trip(300, 2, 100, 3); /* keys beyond the iterator's inline space */
    round_trip(200, 7, 300, 0); /* empty values */
}

/* Entry counts around multiples of the restart interval (16). */
static void test_restart_edges(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 2, 15, 16, 17, 31, 32, 33, 48, 49};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        kv *e = calloc(n + 1, sizeof(*e));
        for (size_t i = 0; i < n; i++) {
            e[i].key = malloc(16);
            e[i].klen = (size_t)snprintf(e[i].key, 16, "key%06zu", i * 2 + 1);
            e[i].val = malloc(8);
            e[i].vlen = (size_t)snprintf(e[i].val, 8, "v%zu", i);
        }
        block_builder bb;
        block_builder_init(&bb, BLOCK_RESTART_INTERVAL);
        const char *data;
        size_t size;
        build(&bb, e, n, &data, &size);
        check_block(data, size, e, n);

        block b;
        assert_true(block_parse(&b, data, size));
        assert_int_equal(b.num_restarts, (n + BLOCK_RESTART_INTERVAL - 1) / BLOCK_RESTART_INTERVAL);
        block_iter it;
        block_iter_init(&it, plain_cmp);
        block_iter_set_block(&it, &b);
        block_iter_seek(&it, "a", 1); /* before the first */
        if (n)
            assert_at(&it, &e[0]);
        else
            assert_false(block_iter_valid(&it));
        block_iter_seek(&it, "z", 1); /* after the last */
        assert_false(block_iter_valid(&it));
        for (size_t i = 0; i < n; i++) { /* between entries: lands on the next */
            char t[16];
            int tl = snprintf(t, sizeof(t), "key%06zu", i * 2);
            block_iter_seek(&it, t, (size_t)tl);
            assert_at(&it, &e[i]);
        }
        assert_null(block_iter_error(&it));
        block_iter_destroy(&it);
        block_builder_destroy(&bb);
        free_entries(e, n + 1);
    }
}

static void test_no_iterator_block(void **state)
{
    (void)state;
    block_iter it;
    block_iter_init(&it, plain_cmp);
    block_iter_seek_first(&it);
    assert_false(block_iter_valid(&it));
    block_iter_seek(&it, "x", 1);
    assert_false(block_iter_valid(&it));
    block_iter_seek_last(&it);
    assert_false(block_iter_valid(&it));
    block_iter_destroy(&it);
}

static void test_iter_interface(void **state)
{
    (void)state;
    built bt;
    build_random(&bt, 100, 4, 12, 12);
    block b;
    assert_true(block_parse(&b, bt.data, bt.size));
    iter *it = block_iter_new(&b, plain_cmp);
    assert_non_null(it);
    size_t i = 0;
    for (iter_seek_first(it); iter_valid(it); iter_next(it), i++) {
        const kv *e = &bt.e[i];
        size_t kn, vn;
        const char *k = iter_key(it, &kn), *v = iter_value(it, &vn);
        assert_int_equal(kn, e->klen);
        assert_memory_equal(k, e->key, kn);
        assert_int_equal(vn, e->vlen);
        if (vn)
            assert_memory_equal(v, e->val, vn);
    }
    assert_int_equal(i, bt.m);
    assert_null(iter_status(it));
    iter_free(it);
    built_free(&bt);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    block b;
    char d[64];
    memset(d, 0, sizeof(d));
    assert_false(block_parse(&b, d, 0));
    assert_false(block_parse(&b, d, 3));
    assert_true(block_parse(&b, d, 4)); /* no entries, no restarts: empty */
    assert_int_equal(b.num_restarts, 0);
    encode_fixed32(d, 100); /* count larger than the block */
    assert_false(block_parse(&b, d, 4));
    /* 8 bytes of entries, restarts {0, 12}: 12 is past the entries */
    memset(d, 0, sizeof(d));
    encode_fixed32(d + 8, 0);
    encode_fixed32(d + 12, 12);
    encode_fixed32(d + 16, 2);
    assert_false(block_parse(&b, d, 20));
    encode_fixed32(d + 12, 0); /* not strictly rising */
    assert_false(block_parse(&b, d, 20));
    encode_fixed32(d + 8, 4); /* first restart not 0 */
    encode_fixed32(d + 12, 6);
    assert_false(block_parse(&b, d, 20));
    encode_fixed32(d + 8, 0); /* {0, 6}: fine */
    assert_true(block_parse(&b, d, 20));
    assert_int_equal(b.num_restarts, 2);
    assert_int_equal(b.restart_offset, 8);
}

/* Walks a damaged block every way; whatever it yields must lie inside the
 * block (or the iterator's key buffer) and every walk must end. */
static void exercise_damaged(const char *data, size_t size, const kv *e, size_t n)
{
    block b;
    if (!block_parse(&b, data, size))
        return;
    block_iter it;
    block_iter_init(&it, plain_cmp);
    block_iter_set_block(&it, &b);
    size_t steps = 0, bound = size / 3 + 1; /* each entry takes >= 3 bytes */
    for (block_iter_seek_first(&it); block_iter_valid(&it); block_iter_next(&it)) {
        assert_true(it.val >= data && it.val + it.val_len <= data + size);
        bool in_block = it.key >= data && it.key + it.key_len <= data + size;
        bool in_buf = it.key == it.kbuf && it.key_len <= it.kcap;
        assert_true(in_block || in_buf);
        assert_true(it.key_len <= size);
        assert_true(++steps <= bound);
    }
    block_iter_set_block(&it, &b);
    steps = 0;
    for (block_iter_seek_last(&it); block_iter_valid(&it); block_iter_prev(&it))
        assert_true(++steps <= bound);
    for (size_t i = 0; i < n; i++) {
        block_iter_set_block(&it, &b); /* clears a sticky error */
        block_iter_seek(&it, e[i].key, e[i].klen);
        if (block_iter_valid(&it)) {
            assert_true(it.val >= data && it.val + it.val_len <= data + size);
            block_iter_prev(&it);
        }
    }
    if (block_iter_error(&it) != NULL)
        assert_int_equal(lsm_status_code(block_iter_error(&it)), LSM_CORRUPTION);
    block_iter_destroy(&it);
}

static void test_corrupt_every_byte(void **state)
{
    (void)state;
    built bt;
    build_random(&bt, 40, 4, 20, 10);
    const char *data = bt.data;
    size_t size = bt.size;
    /* Each damaged copy lives in its own exact-size allocation so that any
     * read past its end is caught by the address sanitizer. */
    static const unsigned char flips[] = {0x01, 0x10, 0x80, 0xff};
    size_t detected = 0;
    for (size_t off = 0; off < size; off++) {
        for (size_t f = 0; f < sizeof(flips); f++) {
            char *copy = tu_exact_copy(data, size);
            copy[off] ^= (char)flips[f];
            block b;
            if (!block_parse(&b, copy, size))
                detected++;
            exercise_damaged(copy, size, bt.e, bt.m);
            free(copy);
        }
        for (int v = 0; v < 2; v++) { /* set to 0x00 and 0xff */
            char *copy = tu_exact_copy(data, size);
            copy[off] = v ? (char)0xff : 0;
            exercise_damaged(copy, size, bt.e, bt.m);
            free(copy);
        }
    }
    assert_true(detected > 0);                /* the restart array is checked */
    for (size_t len = 0; len < size; len++) { /* every truncation */
        char *copy = tu_exact_copy(data, len);
        exercise_damaged(copy, len, bt.e, bt.m);
        free(copy);
    }
    built_free(&bt);
}

/* A restart entry that claims a shared prefix is corruption, reported. */
static void test_corruption_status(void **state)
{
    (void)state;
    block_builder bb;
    block_builder_init(&bb, 2);
    assert_true(block_builder_add(&bb, "abc", 3, "1", 1));
    assert_true(block_builder_add(&bb, "abd", 3, "2", 1));
    assert_true(block_builder_add(&bb, "abe", 3, "3", 1));
    const char *data;
    size_t size;
    assert_true(block_builder_finish(&bb, &data, &size));
    char *copy = tu_exact_copy(data, size);
    /* entries: [0 3 1 abc 1] [2 1 1 d 2] [0 3 1 abe 3]; the third is a
     * restart at offset 12. Claim it shares 2 bytes. */
    assert_int_equal(copy[12], 0);
    copy[12] = 2;
    block b;
    assert_true(block_parse(&b, copy, size));
    iter *it = block_iter_new(&b, plain_cmp);
    iter_seek(it, "abe", 3);
    assert_false(iter_valid(it));
    ASSERT_FAILS(iter_status(it), LSM_CORRUPTION, NULL);
    /* sticky: a later seek stays invalid */
    iter_seek_first(it);
    assert_false(iter_valid(it));
    iter_free(it);
    free(copy);
    block_builder_destroy(&bb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_random), cmocka_unit_test(test_restart_edges),
        cmocka_unit_test(test_no_iterator_block), cmocka_unit_test(test_iter_interface),
        cmocka_unit_test(test_parse_rejects),     cmocka_unit_test(test_corrupt_every_byte),
        cmocka_unit_test(test_corruption_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
