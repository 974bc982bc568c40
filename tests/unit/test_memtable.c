/* test_memtable.c — the arena, the skiplist and the memtable, including one
 * writer racing three lock-free readers. */
#include "testutil.h"

#include "arena.h"
#include "memtable.h"
#include "skiplist.h"
#include "status.h"

#include <stdatomic.h>

static uint64_t next_rand(uint64_t *s)
{
    return tu_lcg31(s);
}

/* ---------------------------------------------------------------- arena */

typedef struct piece {
    unsigned char *p;
    size_t n;
    unsigned char tag;
} piece;

static void test_arena_alignment_and_no_overlap(void **state)
{
    (void)state;
    arena a;
    arena_init(&a, 0);
    enum { N = 5000 };
    piece *pc = calloc(N, sizeof(*pc));
    uint64_t rs = 7;
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        size_t n =
            next_rand(&rs) % 50 == 0 ? 1025 + next_rand(&rs) % 5000 : 1 + next_rand(&rs) % 300;
        size_t align = (size_t)1 << (next_rand(&rs) % 5); /* 1..16 */
        bool aligned = next_rand(&rs) % 2;
        unsigned char *p = aligned ? arena_alloc_aligned(&a, n, align) : arena_alloc(&a, n);
        assert_non_null(p);
        if (aligned)
            assert_int_equal((uintptr_t)p % align, 0);
        pc[i] = (piece){p, n, (unsigned char)(i * 31 + 1)};
        memset(p, pc[i].tag, n);
        total += n;
    }
    for (int i = 0; i < N; i++)
        for (size_t j = 0; j < pc[i].n; j++)
            assert_int_equal(pc[i].p[j], pc[i].tag);
    assert_true(arena_memory_usage(&a) >= total);
    /* Little waste: under 25% on top of what was asked (headers, tails). */
    assert_true(arena_memory_usage(&a) < total + total / 4);
    arena_destroy(&a);
    assert_int_equal(arena_memory_usage(&a), 0);
    free(pc);
}

static void test_arena_usage_accounting(void **state)
{
    (void)state;
    arena a;
    arena_init(&a, 0);
    assert_int_equal(arena_memory_usage(&a), 0);
    char *p1 = arena_alloc(&a, 1);
    size_t u1 = arena_memory_usage(&a);
    assert_true(u1 >= ARENA_DEFAULT_BLOCK && u1 <= ARENA_DEFAULT_BLOCK + 64);
    char *p2 = arena_alloc(&a, 100);
    assert_ptr_equal(p2, p1 + 1); /* same block, bumped */
    assert_int_equal(arena_memory_usage(&a), u1);

    /* A large request that fits is served from the current block. */
    char *mid = arena_alloc(&a, 3000);
    assert_ptr_equal(mid, p2 + 100);
    assert_int_equal(arena_memory_usage(&a), u1);

    /* One over a quarter block that does not fit gets a block of its own,
     * and the current block stays in use. */
    char *big = arena_alloc(&a, 2000);
    size_t u2 = arena_memory_usage(&a);
    assert_true(u2 >= u1 + 2000 && u2 <= u1 + 2000 + 64);
    char *p3 = arena_alloc(&a, 50);
    assert_ptr_equal(p3, mid + 3000);
    assert_int_equal(arena_memory_usage(&a), u2);
    (void)big;

    /* A small request that does not fit starts a default-size block. */
    size_t used = 3151;
    while (used + 200 <= ARENA_DEFAULT_BLOCK) {
        assert_non_null(arena_alloc(&a, 200));
        used += 200;
    }
    assert_int_equal(arena_memory_usage(&a), u2);
    assert_non_null(arena_alloc(&a, 200));
    assert_int_equal(arena_memory_usage(&a), u2 + u1);
    arena_destroy(&a);

    arena_init(&a, 256); /* custom block size: quarter is 64 */
    assert_non_null(arena_alloc(&a, 64));
    size_t s1 = arena_memory_usage(&a);
    assert_true(s1 >= 256 && s1 <= 256 + 64);
    char *q = arena_alloc(&a, 150); /* leaves 42 bytes */
    assert_int_equal(arena_memory_usage(&a), s1);
    assert_non_null(arena_alloc(&a, 65));
    assert_ptr_equal(arena_alloc(&a, 42), q + 150);
    assert_true(arena_memory_usage(&a) >= s1 + 65 && arena_memory_usage(&a) <= s1 + 65 + 64);
    arena_destroy(&a);
}

/* ------------------------------------------------------------- skiplist */

static int plain_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    return bytes_compare(a, an, b, bn);
}

static void sl_add(skiplist *sl, const char *key, size_t n)
{
    char *e = skiplist_alloc(sl, (size_t)varint_length(n) + n);
    assert_non_null(e);
    char *p = encode_varint32(e, (uint32_t)n);
    memcpy(p, key, n);
    skiplist_insert(sl, e);
}

typedef struct skey {
    char k[16];
    size_t n;
} skey;

static int skey_cmp(const void *a, const void *b)
{
    const skey *x = a, *y = b;
    return bytes_compare(x->k, x->n, y->k, y->n);
}

static void random_skey(uint64_t *rs, skey *k)
{
    k->n = 1 + next_rand(rs) % 16;
    for (size_t i = 0; i < k->n; i++)
        k->k[i] = (char)('a' + next_rand(rs) % 4); /* shared prefixes */
}

static void expect_pos(const skiplist_pos *p, const skey *k)
{
    assert_true(skiplist_pos_valid(p));
    size_t n;
    const char *key = skiplist_entry_key(skiplist_pos_entry(p), &n);
    assert_int_equal(n, k->n);
    assert_memory_equal(key, k->k, n);
}

static void test_skiplist_empty(void **state)
{
    (void)state;
    arena a;
    arena_init(&a, 0);
    skiplist sl;
    assert_true(skiplist_init(&sl, &a, plain_cmp));
    skiplist_pos p;
    skiplist_pos_init(&p, &sl);
    assert_false(skiplist_pos_valid(&p));
    skiplist_pos_seek_first(&p);
    assert_false(skiplist_pos_valid(&p));
    skiplist_pos_seek_last(&p);
    assert_false(skiplist_pos_valid(&p));
    skiplist_pos_seek(&p, "x", 1);
    assert_false(skiplist_pos_valid(&p));
    assert_false(skiplist_contains(&sl, "x", 1));
    arena_destroy(&a);
}

static void test_skiplist_matches_sorted_array(void **state)
{
    (void)state;
    enum { N = 20000 };
    arena a;
    arena_init(&a, 0);
    skiplist sl;
    assert_true(skiplist_init(&sl, &a, plain_cmp));
    skey *keys = malloc(N * sizeof(*keys));
    uint64_t rs = 99;
    int n = 0;
    for (int i = 0; i < 3 * N && n < N; i++) {
        skey k;
        random_skey(&rs, &k);
        if (skiplist_contains(&sl, k.k, k.n))
            continue;
        sl_add(&sl, k.k, k.n);
        keys[n++] = k;
    }
    assert_true(n > N / 2);
    qsort(keys, (size_t)n, sizeof(*keys), skey_cmp);

    skiplist_pos p;
    skiplist_pos_init(&p, &sl);
    skiplist_pos_seek_first(&p);
    for (int i = 0; i < n; i++, skiplist_pos_next(&p))
        expect_pos(&p, &keys[i]);
    assert_false(skiplist_pos_valid(&p));
    skiplist_pos_seek_last(&p);
    for (int i = n - 1; i >= 0; i--, skiplist_pos_prev(&p))
        expect_pos(&p, &keys[i]);
    assert_false(skiplist_pos_valid(&p));

    for (int t = 0; t < 3000; t++) {
        skey target;
        random_skey(&rs, &target);
        int lo = 0, hi = n; /* lower bound */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (skey_cmp(&keys[mid], &target) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        skiplist_pos_seek(&p, target.k, target.n);
        if (lo == n) {
            assert_false(skiplist_pos_valid(&p));
            continue;
        }
        expect_pos(&p, &keys[lo]);
        assert_int_equal(skiplist_contains(&sl, target.k, target.n),
                         skey_cmp(&keys[lo], &target) == 0);
        skiplist_pos_prev(&p);
        if (lo == 0)
            assert_false(skiplist_pos_valid(&p));
        else
            expect_pos(&p, &keys[lo - 1]);
    }
    free(keys);
    arena_destroy(&a);
}

/* Node heights come from each list's own generator: two lists fed the
 * same keys get the same heights whether built apart or interleaved. With
 * tiny arena blocks every node is its own block, so usage reflects every
 * node's height exactly. */
static void test_skiplist_heights_deterministic_per_list(void **state)
{
    (void)state;
    arena a, b, c;
    arena_init(&a, 16);
    arena_init(&b, 16);
    arena_init(&c, 16);
    skiplist la, lb, lc;
    assert_true(skiplist_init(&la, &a, plain_cmp));
    assert_true(skiplist_init(&lb, &b, plain_cmp));
    assert_true(skiplist_init(&lc, &c, plain_cmp));
    char k[16];
    for (int i = 0; i < 2000; i++) {
        snprintf(k, sizeof(k), "%06d", i);
        sl_add(&la, k, 6);
    }
    for (int i = 0; i < 2000; i++) {
        snprintf(k, sizeof(k), "%06d", i);
        sl_add(&lb, k, 6);
        sl_add(&lc, k, 6);
    }
    assert_int_equal(arena_memory_usage(&a), arena_memory_usage(&b));
    assert_int_equal(arena_memory_usage(&b), arena_memory_usage(&c));
    /* and the heights do vary: more than all-height-1 nodes */
    assert_true(arena_memory_usage(&a) > 2000 * (8 + 7 + 16) + 2000 * 8 / 8);
    arena_destroy(&a);
    arena_destroy(&b);
    arena_destroy(&c);
}

/* ------------------------------------------------------------- memtable */

static void expect_get(memtable *m, const char *key, uint64_t seq, enum memtable_get_result want,
                       const char *want_val)
{
    char *v = NULL;
    size_t vn = 0;
    enum memtable_get_result r = memtable_get(m, key, strlen(key), seq, &v, &vn);
    assert_int_equal(r, want);
    if (want == MEMTABLE_FOUND) {
        assert_int_equal(vn, strlen(want_val));
        assert_memory_equal(v, want_val, vn);
        free(v);
    }
}

static void add(memtable *m, uint64_t seq, enum value_type t, const char *k, const char *v)
{
    assert_true(memtable_add(m, seq, t, k, strlen(k), v, strlen(v)));
}

static void test_memtable_get_snapshots(void **state)
{
    (void)state;
    memtable *m = memtable_new();
    assert_non_null(m);
    add(m, 1, TYPE_VALUE, "a", "v1");
    add(m, 5, TYPE_VALUE, "a", "v2");
    add(m, 8, TYPE_DELETION, "a", "");
    add(m, 12, TYPE_VALUE, "a", "v4");
    add(m, 3, TYPE_VALUE, "ab", "other");
    add(m, 2, TYPE_VALUE, "", "empty-key");
    add(m, 4, TYPE_VALUE, "b", "");

    expect_get(m, "a", 0, MEMTABLE_ABSENT, NULL);
    for (uint64_t s = 1; s <= 4; s++)
        expect_get(m, "a", s, MEMTABLE_FOUND, "v1");
    for (uint64_t s = 5; s <= 7; s++)
        expect_get(m, "a", s, MEMTABLE_FOUND, "v2");
    for (uint64_t s = 8; s <= 11; s++)
        expect_get(m, "a", s, MEMTABLE_DELETED, NULL);
    expect_get(m, "a", 12, MEMTABLE_FOUND, "v4");
    expect_get(m, "a", MAX_SEQUENCE, MEMTABLE_FOUND, "v4");
    expect_get(m, "a", UINT64_MAX, MEMTABLE_FOUND, "v4"); /* clamped */
    expect_get(m, "ab", 2, MEMTABLE_ABSENT, NULL);
    expect_get(m, "ab", 3, MEMTABLE_FOUND, "other");
    expect_get(m, "", 100, MEMTABLE_FOUND, "empty-key");
    expect_get(m, "", 1, MEMTABLE_ABSENT, NULL);
    expect_get(m, "b", 100, MEMTABLE_FOUND, "");
    expect_get(m, "aa", 100, MEMTABLE_ABSENT, NULL); /* between a and ab */
    expect_get(m, "c", 100, MEMTABLE_ABSENT, NULL);  /* past the end */
    assert_int_equal(memtable_entries(m), 7);
    memtable_unref(m);
}

static void test_memtable_long_keys(void **state)
{
    (void)state;
    memtable *m = memtable_new();
    char k1[1000], k2[1000];
    memset(k1, 'x', sizeof(k1));
    memcpy(k2, k1, sizeof(k2));
    k2[999] = 'y';
    assert_true(memtable_add(m, 1, TYPE_VALUE, k1, sizeof(k1), "one", 3));
    assert_true(memtable_add(m, 2, TYPE_VALUE, k2, sizeof(k2), "two", 3));
    char *v;
    size_t vn;
    assert_int_equal(memtable_get(m, k1, sizeof(k1), 10, &v, &vn), MEMTABLE_FOUND);
    assert_memory_equal(v, "one", 3);
    free(v);
    assert_int_equal(memtable_get(m, k2, sizeof(k2), 10, &v, &vn), MEMTABLE_FOUND);
    assert_memory_equal(v, "two", 3);
    free(v);
    assert_int_equal(memtable_get(m, k1, 999, 10, &v, &vn), MEMTABLE_ABSENT);
    memtable_unref(m);
}

/* The entries of test_memtable_iterator in iteration order: user key
 * ascending, sequence descending. */
static const struct ientry {
    const char *ukey;
    uint64_t seq;
    enum value_type type;
    const char *val;
} iorder[] = {{"a", 4, TYPE_VALUE, "a4"},
              {"a", 1, TYPE_VALUE, "a1"},
              {"b", 7, TYPE_DELETION, ""},
              {"b", 3, TYPE_VALUE, "b3"},
              {"c", 5, TYPE_VALUE, "c5"}};
enum { NIORDER = sizeof(iorder) / sizeof(iorder[0]) };

/* The iterator stands on iorder[i] (on nothing if i is out of range). */
static void expect_nth(iter *it, int i)
{
    if (i < 0 || i >= NIORDER) {
        assert_false(iter_valid(it));
        return;
    }
    const struct ientry *e = &iorder[i];
    assert_true(iter_valid(it));
    size_t n, vn;
    const char *k = iter_key(it, &n);
    parsed_ikey pk;
    assert_true(parse_ikey(k, n, &pk));
    assert_int_equal(pk.user_len, strlen(e->ukey));
    assert_memory_equal(pk.user_key, e->ukey, pk.user_len);
    assert_int_equal(pk.seq, e->seq);
    assert_int_equal(pk.type, e->type);
    const char *v = iter_value(it, &vn);
    assert_int_equal(vn, strlen(e->val));
    assert_memory_equal(v, e->val, vn);
}

static void seek_ikey(iter *it, const char *ukey, uint64_t seq)
{
    buf b;
    buf_init(&b);
    assert_true(buf_put_ikey(&b, ukey, strlen(ukey), seq, TYPE_SEEK));
    iter_seek(it, b.data, b.len);
    buf_free(&b);
}

static void test_memtable_iterator(void **state)
{
    (void)state;
    memtable *m = memtable_new();
    static const int insert_order[] = {3, 1, 2, 4, 0};
    for (int i = 0; i < NIORDER; i++) {
        const struct ientry *e = &iorder[insert_order[i]];
        add(m, e->seq, e->type, e->ukey, e->val);
    }
    iter *it = memtable_iter_new(m);
    assert_false(iter_valid(it));

    iter_seek_first(it);
    for (int i = 0; i < NIORDER; i++, iter_next(it))
        expect_nth(it, i);
    expect_nth(it, NIORDER);

    iter_seek_last(it);
    expect_nth(it, 4);
    iter_prev(it);
    expect_nth(it, 3);
    iter_prev(it);
    expect_nth(it, 2);
    iter_next(it); /* direction change */
    expect_nth(it, 3);
    iter_prev(it);
    iter_prev(it);
    expect_nth(it, 1);
    iter_prev(it);
    iter_prev(it);
    expect_nth(it, -1);

    seek_ikey(it, "b", 5); /* snapshot 5 skips the deletion at 7 */
    expect_nth(it, 3);
    seek_ikey(it, "b", 100);
    expect_nth(it, 2);
    seek_ikey(it, "a", 0); /* past every version of a */
    expect_nth(it, 2);
    seek_ikey(it, "bb", 9);
    expect_nth(it, 4);
    seek_ikey(it, "d", 9);
    expect_nth(it, -1);
    assert_null(iter_status(it));

    /* The iterator keeps the memtable alive after its owner lets go. */
    memtable_unref(m);
    iter_seek_first(it);
    expect_nth(it, 0);
    iter_free(it);
}

static void test_memtable_usage_and_entries(void **state)
{
    (void)state;
    memtable *m = memtable_new();
    size_t u0 = memtable_memory_usage(m);
    assert_true(u0 > 0); /* the head node */
    char val[100];
    memset(val, 'v', sizeof(val));
    size_t prev = u0;
    for (int i = 0; i < 10000; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "key%06d", i);
        assert_true(memtable_add(m, (uint64_t)i + 1, TYPE_VALUE, k, (size_t)n, val, sizeof(val)));
        assert_true(memtable_memory_usage(m) >= prev);
        prev = memtable_memory_usage(m);
    }
    assert_int_equal(memtable_entries(m), 10000);
    size_t payload = 10000 * (1 + 9 + 8 + 1 + 100);
    assert_true(prev >= payload);
    assert_true(prev < payload * 2); /* nodes cost a few links, not a malloc each */
    memtable_unref(m);
}

/* Values of MEMTABLE_REF_MIN bytes or more lying in the buffer a memtable
 * keeps (memtable_keep) are not copied: its entries point at them, its
 * usage counts the buffer once, and the buffer lives until the memtable's
 * last reference (here an iterator's) goes. Small values, and values
 * elsewhere, are copied. */
static void test_memtable_kept_values_not_copied(void **state)
{
    (void)state;
    enum { BIG = MEMTABLE_REF_MIN, N = 8 };
    memtable *m = memtable_new();
    buf kept;
    buf_init(&kept);
    assert_true(buf_reserve(&kept, N * BIG));
    for (int i = 0; i < N; i++)
        memset(kept.data + (size_t)i * BIG, 'a' + i, BIG);
    kept.len = N * BIG;
    const char *bytes = kept.data;
    size_t u0 = memtable_memory_usage(m);
    assert_true(memtable_keep(m, &kept));
    assert_null(kept.data); /* taken */
    assert_int_equal(memtable_memory_usage(m), u0 + N * BIG);
    static char outside[BIG];
    memset(outside, 'z', sizeof(outside));
    for (int i = 0; i < N; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "k%d", i);
        size_t vlen = i == 0 ? BIG - 1 : BIG; /* k0: too small to point at */
        const char *v = i == N - 1 ? outside : bytes + (size_t)i * BIG;
        assert_true(memtable_add(m, (uint64_t)i + 1, TYPE_VALUE, k, (size_t)n, v, vlen));
    }
    /* Entries, not values: well under one value's size each. */
    assert_true(memtable_memory_usage(m) < u0 + N * BIG + 3 * BIG);
    iter *it = memtable_iter_new(m);
    memtable_unref(m); /* the iterator's reference keeps entries and bytes */
    int i = 0;
    for (it->ops->seek_first(it); it->ops->valid(it); it->ops->next(it), i++) {
        size_t vn;
        const char *v = it->ops->value(it, &vn);
        const char *at = bytes + (size_t)i * BIG;
        bool pointed = i > 0 && i < N - 1;
        assert_int_equal(vn, i == 0 ? BIG - 1 : BIG);
        assert_true(pointed ? v == at : v != at && v != outside);
        for (size_t j = 0; j < vn; j++)
            assert_int_equal(v[j], i == N - 1 ? 'z' : 'a' + i);
    }
    assert_int_equal(i, N);
    it->ops->free(it);
}

/* A freed memtable's blocks go to the pool. */
static void test_memtable_blocks_pooled(void **state)
{
    (void)state;
    static char val[4096];
    memtable *m = memtable_new_pooled();
    for (int i = 0; i < 100; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "chunk%06d", i);
        assert_true(memtable_add(m, (uint64_t)i + 1, TYPE_VALUE, k, (size_t)n, val, sizeof(val)));
    }
    size_t before = arena_pool_bytes();
    memtable_unref(m);
    assert_true(arena_pool_bytes() >= before + 2 * ARENA_POOLED_BLOCK);
}

/* The next pooled arena reuses the block the last one gave back. */
static void test_arena_pool_reuses_blocks(void **state)
{
    (void)state;
    arena a;
    arena_init_pooled(&a);
    char *p = arena_alloc(&a, 100);
    arena_destroy(&a);
    arena_init_pooled(&a);
    assert_ptr_equal(arena_alloc(&a, 100), p);
    arena_destroy(&a);
}

/* The pool keeps at most ARENA_POOL_MAX_BYTES; blocks of another size
 * (dedicated to a large request) go back to malloc. */
static void test_arena_pool_bounded(void **state)
{
    (void)state;
    enum { BLOCKS = 2 * ARENA_POOL_MAX_BYTES / ARENA_POOLED_BLOCK };
    arena a;
    arena_init_pooled(&a);
    for (int i = 0; i < BLOCKS; i++)
        assert_non_null(arena_alloc(&a, ARENA_POOLED_BLOCK));
    arena_destroy(&a);
    size_t full = arena_pool_bytes();
    assert_true(full <= ARENA_POOL_MAX_BYTES);
    assert_true(full > ARENA_POOL_MAX_BYTES - 2 * ARENA_POOLED_BLOCK);
    arena_init_pooled(&a);
    assert_non_null(arena_alloc(&a, ARENA_POOLED_BLOCK / 4 + 1)); /* a block of its own */
    assert_int_equal(arena_pool_bytes(), full);
    arena_destroy(&a);
    assert_int_equal(arena_pool_bytes(), full);
}

/* ----------------------------------------------------- one writer, 3 readers */

enum { CONC_ENTRIES = 200000, CONC_READERS = 3 };

typedef struct conc {
    memtable *m;
    atomic_bool done;
} conc;

/* Value: the sequence (fixed64) then the user key, so a reader can tell a
 * complete entry from a partially built one. */
static void *writer_main(void *arg)
{
    conc *c = arg;
    uint64_t rs = 2024, start = 0;
    unsigned mode = 0;
    for (uint64_t seq = 1; seq <= CONC_ENTRIES; seq++) {
        /* Runs of 64 keys: random, ascending or descending (the insert's
         * splice serves the runs from the last insert's path). */
        if (seq % 64 == 1) {
            mode = (unsigned)(next_rand(&rs) % 3);
            start = next_rand(&rs) % 100000;
        }
        uint64_t step = seq % 64, k = mode == 0   ? next_rand(&rs) % 100000
                                      : mode == 1 ? (start + step) % 100000
                                                  : (start + 100000 - step) % 100000;
        char key[17], val[8 + 16];
        snprintf(key, sizeof(key), "%016llx", (unsigned long long)k);
        encode_fixed64(val, seq);
        memcpy(val + 8, key, 16);
        if (!memtable_add(c->m, seq, TYPE_VALUE, key, 16, val, sizeof(val)))
            return "memtable_add failed";
    }
    atomic_store(&c->done, true);
    return NULL;
}

/* NULL if the current entry is whole and well-formed, else what is wrong. */
static const char *check_entry(iter *it)
{
    size_t n, vn;
    const char *k = iter_key(it, &n);
    parsed_ikey pk;
    if (!parse_ikey(k, n, &pk) || pk.user_len != 16 || pk.type != TYPE_VALUE)
        return "bad internal key";
    if (pk.seq < 1 || pk.seq > CONC_ENTRIES)
        return "bad sequence";
    const char *v = iter_value(it, &vn);
    if (vn != 24 || decode_fixed64(v) != pk.seq || memcmp(v + 8, pk.user_key, 16) != 0)
        return "value does not match its key";
    return NULL;
}

/* Walks up to `steps` entries (all if < 0) forward or backward, checking
 * order and integrity; counts them in *seen. */
static const char *walk(iter *it, int steps, bool forward, long *seen)
{
    const char *err = NULL;
    char prev[24];
    size_t prev_n = 0;
    *seen = 0;
    for (; iter_valid(it) && steps != 0; steps--) {
        if ((err = check_entry(it)) != NULL)
            return err;
        size_t n;
        const char *k = iter_key(it, &n);
        if (prev_n) {
            int c = ikey_compare(prev, prev_n, k, n);
            if (forward ? c >= 0 : c <= 0)
                return "out of order";
        }
        memcpy(prev, k, n);
        prev_n = n;
        ++*seen;
        forward ? iter_next(it) : iter_prev(it);
    }
    return NULL;
}

static void *reader_main(void *arg)
{
    conc *c = arg;
    iter *it = memtable_iter_new(c->m);
    uint64_t rs = (uint64_t)(uintptr_t)&it;
    long last_full = 0;
    size_t last_usage = 0;
    const char *err = NULL;
    bool finished;
    do {
        finished = atomic_load(&c->done);
        size_t usage = memtable_memory_usage(c->m);
        if (usage < last_usage) {
            err = "memory usage went down";
            break;
        }
        last_usage = usage;
        long seen;
        char target[24];
        unsigned op = (unsigned)(next_rand(&rs) % 4);
        if (op == 0 || finished) { /* a whole forward scan sees only growth */
            iter_seek_first(it);
            if ((err = walk(it, -1, true, &seen)) != NULL)
                break;
            if (seen < last_full) {
                err = "entries disappeared";
                break;
            }
            last_full = seen;
            continue;
        }
        snprintf(target, sizeof(target), "%016llx", (unsigned long long)(next_rand(&rs) % 100000));
        encode_fixed64(target + 16, pack_seq_type(next_rand(&rs) % CONC_ENTRIES, TYPE_SEEK));
        if (op == 1) {
            iter_seek(it, target, 24);
            if (iter_valid(it) && ikey_compare(iter_key(it, &(size_t){0}), 24, target, 24) < 0) {
                err = "seek landed before its target";
                break;
            }
            err = walk(it, 200, true, &seen);
        } else if (op == 2) {
            iter_seek(it, target, 24);
            if (iter_valid(it))
                err = walk(it, 100, false, &seen);
        } else {
            iter_seek_last(it);
            err = walk(it, 100, false, &seen);
        }
    } while (err == NULL && !finished);
    if (err == NULL && last_full != CONC_ENTRIES)
        err = "final scan did not see every entry";
    iter_free(it);
    return (void *)err;
}

static void test_memtable_concurrent_readers(void **state)
{
    (void)state;
    conc c;
    c.m = memtable_new();
    atomic_init(&c.done, false);
    pthread_t w, r[CONC_READERS];
    for (int i = 0; i < CONC_READERS; i++)
        assert_int_equal(pthread_create(&r[i], NULL, reader_main, &c), 0);
    assert_int_equal(pthread_create(&w, NULL, writer_main, &c), 0);
    void *res;
    assert_int_equal(pthread_join(w, &res), 0);
    if (res != NULL)
        fail_msg("writer: %s", (const char *)res);
    for (int i = 0; i < CONC_READERS; i++) {
        assert_int_equal(pthread_join(r[i], &res), 0);
        if (res != NULL)
            fail_msg("reader %d: %s", i, (const char *)res);
    }
    assert_int_equal(memtable_entries(c.m), CONC_ENTRIES);
    memtable_unref(c.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_alignment_and_no_overlap),
        cmocka_unit_test(test_arena_usage_accounting),
        cmocka_unit_test(test_skiplist_empty),
        cmocka_unit_test(test_skiplist_matches_sorted_array),
        cmocka_unit_test(test_skiplist_heights_deterministic_per_list),
        cmocka_unit_test(test_memtable_get_snapshots),
        cmocka_unit_test(test_memtable_long_keys),
        cmocka_unit_test(test_memtable_iterator),
        cmocka_unit_test(test_memtable_usage_and_entries),
        cmocka_unit_test(test_memtable_kept_values_not_copied),
        cmocka_unit_test(test_memtable_concurrent_readers),
        cmocka_unit_test(test_memtable_blocks_pooled),
        cmocka_unit_test(test_arena_pool_reuses_blocks),
        cmocka_unit_test(test_arena_pool_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
