/* test_batch.c — WriteBatch encoding, append, iteration, insertion into a
 * memtable, and rejection of corrupt contents. */
#include "testutil.h"

#include "batch.h"
#include "bufpool.h"
#include "status.h"

/* A handler that logs records as "P key=val" / "D key" lines. */
typedef struct logger {
    char text[8192];
    size_t len;
    int calls;
} logger;

static void log_put(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
    logger *l = ctx;
    l->len += (size_t)snprintf(l->text + l->len, sizeof(l->text) - l->len, "P %.*s=%.*s\n",
                               (int)klen, (const char *)key, (int)vlen, (const char *)val);
    l->calls++;
}

static void log_del(void *ctx, const void *key, size_t klen)
{
    logger *l = ctx;
    l->len += (size_t)snprintf(l->text + l->len, sizeof(l->text) - l->len, "D %.*s\n", (int)klen,
                               (const char *)key);
    l->calls++;
}

static lsm_status *log_batch(const lsm_batch *b, logger *l)
{
    memset(l, 0, sizeof(*l));
    lsm_batch_handler h = {l, log_put, log_del};
    return lsm_batch_iterate(b, &h);
}

static void expect_log(const lsm_batch *b, const char *want)
{
    logger l;
    assert_null(log_batch(b, &l));
    assert_string_equal(l.text, want);
}

static void test_layout_bytes_exact(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    assert_non_null(b);
    assert_true(lsm_batch_put(b, "k1", 2, "v1", 2));
    assert_true(lsm_batch_delete(b, "key2", 4));
    assert_true(lsm_batch_put(b, "", 0, "", 0));
    batch_set_sequence(b, UINT64_C(0x0102030405060708));
    static const unsigned char want[] = {
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* sequence */
        0x03, 0x00, 0x00, 0x00,                         /* count */
        0x01, 0x02, 'k',  '1',  0x02, 'v',  '1',        /* put k1=v1 */
        0x00, 0x04, 'k',  'e',  'y',  '2',              /* delete key2 */
        0x01, 0x00, 0x00,                               /* put ""="" */
    };
    size_t n;
    const char *got = batch_contents(b, &n);
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(got, want, sizeof(want));
    assert_int_equal(lsm_batch_size(b), sizeof(want));
    assert_int_equal(lsm_batch_count(b), 3);
    assert_int_equal(batch_sequence(b), UINT64_C(0x0102030405060708));
    lsm_batch_free(b);
}

static void test_long_lengths_use_multibyte_varints(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    char key[200], val[300];
    memset(key, 'k', sizeof(key));
    memset(val, 'v', sizeof(val));
    assert_true(lsm_batch_put(b, key, sizeof(key), val, sizeof(val)));
    size_t n;
    const unsigned char *p = (const unsigned char *)batch_contents(b, &n);
    assert_int_equal(n, BATCH_HEADER + 1 + 2 + 200 + 2 + 300);
    assert_int_equal(p[12], 0x01);
    assert_int_equal(p[13], 0xc8); /* 200 = 0x48 | 0x80, then 0x01 */
    assert_int_equal(p[14], 0x01);
    assert_int_equal(p[15 + 200], 0xac); /* 300 = 0x2c | 0x80, then 0x02 */
    assert_int_equal(p[16 + 200], 0x02);
    lsm_batch_free(b);
}

/* Counts puts only (values too long for a logger's text). */
static void count_put(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    ((logger *)ctx)->calls++;
}

/* After lsm_batch_reserve(n), records up to n bytes fill the room made
 * once: the buffer is not moved (grown and copied) as the batch fills, and
 * the records read back. */
static void test_reserve_makes_room_once(void **state)
{
    (void)state;
    enum { N = 64, VLEN = 4096 };
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "h", 1, "x", 1));
    assert_true(lsm_batch_reserve(b, N * (VLEN + 16)));
    const char *room = b->rep.data;
    char k[16], v[VLEN];
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "k%03d", i);
        memset(v, 'a' + i % 26, VLEN);
        assert_true(lsm_batch_put(b, k, strlen(k), v, VLEN));
    }
    assert_ptr_equal(b->rep.data, room);
    assert_int_equal(lsm_batch_count(b), N + 1);
    logger l;
    memset(&l, 0, sizeof l);
    lsm_batch_handler h = {&l, count_put, log_del};
    assert_null(lsm_batch_iterate(b, &h));
    assert_int_equal(l.calls, N + 1);
    lsm_batch_free(b);
}

/* A big batch's memory, once the batch is freed, is kept (bufpool.h) and
 * is what the next big batch's reserve gets: no fresh pages to fault in. */
static void test_big_batch_memory_reused(void **state)
{
    (void)state;
    enum { BIG = 1 << 20 };
    lsm_batch *a = lsm_batch_new();
    assert_true(lsm_batch_reserve(a, BIG));
    const char *mem = a->rep.data;
    size_t cap = a->rep.cap, kept = bufpool_bytes();
    lsm_batch_free(a);
    assert_int_equal(bufpool_bytes(), kept + cap);
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "k", 1, "v", 1));
    assert_true(lsm_batch_reserve(b, BIG / 2));
    assert_ptr_equal(b->rep.data, mem);
    assert_int_equal(bufpool_bytes(), kept);
    logger l;
    assert_null(log_batch(b, &l));
    assert_string_equal(l.text, "P k=v\n"); /* its bytes moved along */
    lsm_batch_free(b);
    lsm_batch *small = lsm_batch_new(); /* a small one keeps nothing */
    kept = bufpool_bytes();
    lsm_batch_free(small);
    assert_int_equal(bufpool_bytes(), kept);
    bufpool_drain(); /* as a closed store does */
    assert_int_equal(bufpool_bytes(), 0);
}

static void test_empty_and_clear(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    assert_int_equal(lsm_batch_count(b), 0);
    assert_int_equal(lsm_batch_size(b), BATCH_HEADER);
    expect_log(b, "");
    assert_true(lsm_batch_put(b, "a", 1, "1", 1));
    batch_set_sequence(b, 77);
    lsm_batch_clear(b);
    assert_int_equal(lsm_batch_count(b), 0);
    assert_int_equal(lsm_batch_size(b), BATCH_HEADER);
    assert_int_equal(batch_sequence(b), 0);
    expect_log(b, "");
    assert_true(lsm_batch_delete(b, "z", 1));
    expect_log(b, "D z\n");
    lsm_batch_free(b);
    lsm_batch_free(NULL);
}

static void test_iterate_in_order(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "foo", 3, "bar", 3));
    assert_true(lsm_batch_delete(b, "foo", 3));
    assert_true(lsm_batch_put(b, "baz", 3, "", 0));
    assert_true(lsm_batch_put(b, "foo", 3, "again", 5));
    expect_log(b, "P foo=bar\nD foo\nP baz=\nP foo=again\n");
    assert_int_equal(lsm_batch_count(b), 4);
    lsm_batch_free(b);
}

static void test_append(void **state)
{
    (void)state;
    lsm_batch *a = lsm_batch_new(), *b = lsm_batch_new(), *e = lsm_batch_new();
    assert_true(lsm_batch_put(a, "a1", 2, "x", 1));
    batch_set_sequence(a, 500);
    assert_true(lsm_batch_delete(b, "b1", 2));
    assert_true(lsm_batch_put(b, "b2", 2, "y", 1));
    batch_set_sequence(b, 9);
    size_t asz = lsm_batch_size(a), bsz = lsm_batch_size(b);

    assert_true(lsm_batch_append(a, b));
    assert_int_equal(lsm_batch_count(a), 3);
    assert_int_equal(lsm_batch_size(a), asz + bsz - BATCH_HEADER);
    assert_int_equal(batch_sequence(a), 500); /* dst's header is kept */
    expect_log(a, "P a1=x\nD b1\nP b2=y\n");
    expect_log(b, "D b1\nP b2=y\n"); /* src untouched */

    assert_true(lsm_batch_append(a, e)); /* empty src: no change */
    assert_int_equal(lsm_batch_count(a), 3);
    assert_true(lsm_batch_append(e, b)); /* into empty dst */
    expect_log(e, "D b1\nP b2=y\n");

    assert_true(lsm_batch_append(b, b)); /* self-append */
    assert_int_equal(lsm_batch_count(b), 4);
    expect_log(b, "D b1\nP b2=y\nD b1\nP b2=y\n");
    lsm_batch_free(a);
    lsm_batch_free(b);
    lsm_batch_free(e);
}

static void test_append_count_overflow_refused(void **state)
{
    (void)state;
    lsm_batch *a = lsm_batch_new(), *b = lsm_batch_new();
    assert_true(lsm_batch_put(a, "a", 1, "1", 1));
    assert_true(lsm_batch_put(b, "b", 1, "2", 1));
    batch_set_count(a, UINT32_MAX);
    size_t before = lsm_batch_size(a);
    assert_false(lsm_batch_append(a, b));
    assert_false(lsm_batch_put(a, "c", 1, "3", 1));
    assert_int_equal(lsm_batch_size(a), before);
    assert_int_equal(lsm_batch_count(a), UINT32_MAX);
    lsm_batch_free(a);
    lsm_batch_free(b);
}

static void test_embedded_batch(void **state)
{
    (void)state;
    lsm_batch b;
    assert_true(batch_init(&b));
    assert_true(lsm_batch_put(&b, "k", 1, "v", 1));
    expect_log(&b, "P k=v\n");
    batch_destroy(&b);
}

static void test_set_contents_round_trip(void **state)
{
    (void)state;
    lsm_batch *a = lsm_batch_new(), *b = lsm_batch_new();
    assert_true(lsm_batch_put(a, "x", 1, "1", 1));
    assert_true(lsm_batch_delete(a, "y", 1));
    batch_set_sequence(a, 42);
    size_t n;
    const char *data = batch_contents(a, &n);
    assert_null(batch_set_contents(b, data, n));
    assert_int_equal(batch_sequence(b), 42);
    assert_int_equal(lsm_batch_count(b), 2);
    expect_log(b, "P x=1\nD y\n");

    ASSERT_FAILS(batch_set_contents(b, data, BATCH_HEADER - 1), LSM_CORRUPTION, NULL);
    expect_log(b, "P x=1\nD y\n"); /* a refused replacement changes nothing */
    lsm_batch_free(a);
    lsm_batch_free(b);
}

static void test_insert_into_memtable(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "k", 1, "old", 3));
    assert_true(lsm_batch_put(b, "j", 1, "jj", 2));
    assert_true(lsm_batch_delete(b, "k", 1));
    assert_true(lsm_batch_put(b, "k", 1, "new", 3));
    batch_set_sequence(b, 100);
    memtable *m = memtable_new();
    assert_null(batch_insert_into(b, m));
    assert_int_equal(memtable_entries(m), 4);

    char *v = NULL;
    size_t vn = 0;
    assert_int_equal(memtable_get(m, "k", 1, 99, &v, &vn), MEMTABLE_ABSENT);
    assert_int_equal(memtable_get(m, "k", 1, 100, &v, &vn), MEMTABLE_FOUND);
    assert_int_equal(vn, 3);
    assert_memory_equal(v, "old", 3);
    free(v);
    assert_int_equal(memtable_get(m, "k", 1, 102, &v, &vn), MEMTABLE_DELETED);
    assert_int_equal(memtable_get(m, "k", 1, 103, &v, &vn), MEMTABLE_FOUND);
    assert_memory_equal(v, "new", 3);
    free(v);
    assert_int_equal(memtable_get(m, "j", 1, 101, &v, &vn), MEMTABLE_FOUND);
    assert_memory_equal(v, "jj", 2);
    free(v);
    memtable_unref(m);
    lsm_batch_free(b);
}

static void expect_corrupt_iterate(const lsm_batch *b)
{
    logger l;
    lsm_status *s = log_batch(b, &l);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    assert_int_equal(l.calls, 0); /* validated before any call */
    lsm_status_free(s);
}

static void expect_corrupt_insert(const lsm_batch *b)
{
    memtable *m = memtable_new();
    lsm_status *s = batch_insert_into(b, m);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    assert_int_equal(memtable_entries(m), 0); /* nothing inserted */
    lsm_status_free(s);
    memtable_unref(m);
}

/* Contents replaced by exactly n bytes in an exact-size heap block, so
 * AddressSanitizer catches any read past the end. */
static void set_exact(lsm_batch *b, const void *data, size_t n)
{
    buf_free(&b->rep);
    b->rep.data = malloc(n ? n : 1);
    assert_non_null(b->rep.data);
    memcpy(b->rep.data, data, n);
    b->rep.len = b->rep.cap = n;
}

/* Contents replaced by the n bytes at raw, which iteration and insertion
 * must both refuse. */
static void expect_corrupt(lsm_batch *b, const void *raw, size_t n)
{
    set_exact(b, raw, n);
    expect_corrupt_iterate(b);
    expect_corrupt_insert(b);
}

static void test_every_truncation_is_corruption(void **state)
{
    (void)state;
    lsm_batch *good = lsm_batch_new(), *b = lsm_batch_new();
    char big[300];
    memset(big, 'q', sizeof(big));
    assert_true(lsm_batch_put(good, "alpha", 5, "one", 3));
    assert_true(lsm_batch_delete(good, "beta", 4));
    assert_true(lsm_batch_put(good, big, 130, big, sizeof(big)));
    size_t n;
    const char *data = batch_contents(good, &n);
    for (size_t cut = BATCH_HEADER; cut < n; cut++)
        expect_corrupt(b, data, cut);
    for (size_t cut = 0; cut < BATCH_HEADER; cut++) {
        ASSERT_FAILS(batch_set_contents(b, data, cut), LSM_CORRUPTION, NULL);
    }
    lsm_batch_free(good);
    lsm_batch_free(b);
}

static void test_specific_corruptions(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    unsigned char raw[64] = {0};

    /* count says 2, one record present */
    memcpy(raw + 8, "\x02\0\0\0", 4);
    memcpy(raw + 12, "\x01\x01k\x01v", 5);
    expect_corrupt(b, raw, 17);

    /* count says 0, one record present */
    memcpy(raw + 8, "\0\0\0\0", 4);
    expect_corrupt(b, raw, 17);

    /* unknown tag */
    memcpy(raw + 8, "\x01\0\0\0", 4);
    raw[12] = 0x02;
    expect_corrupt(b, raw, 17);

    /* a key length varint that never ends */
    memcpy(raw + 12, "\x01\xff\xff\xff\xff\xff\xff", 7);
    expect_corrupt(b, raw, 19);

    /* key length past the end */
    memcpy(raw + 12,
           "\x00\x7f"
           "abc",
           5);
    expect_corrupt(b, raw, 17);

    /* a key too long for an internal key (4 GiB - 1), claimed not held */
    memcpy(raw + 12, "\x00\xff\xff\xff\xff\x0f", 6);
    expect_corrupt(b, raw, 18);
    lsm_batch_free(b);
}

static void test_sequence_overflow_is_corruption(void **state)
{
    (void)state;
    lsm_batch *b = lsm_batch_new();
    assert_true(lsm_batch_put(b, "a", 1, "1", 1));
    assert_true(lsm_batch_put(b, "b", 1, "2", 1));
    batch_set_sequence(b, MAX_SEQUENCE);
    expect_corrupt_insert(b);
    batch_set_sequence(b, UINT64_MAX);
    expect_corrupt_insert(b);

    batch_set_sequence(b, MAX_SEQUENCE - 1); /* the last two sequences: fine */
    memtable *m = memtable_new();
    assert_null(batch_insert_into(b, m));
    assert_int_equal(memtable_entries(m), 2);
    memtable_unref(m);
    lsm_batch_free(b);
}

static uint64_t rnd_state;
static uint32_t rnd(void)
{
    return (uint32_t)tu_lcg31(&rnd_state);
}

/* Builds a random valid batch. */
static void random_batch(lsm_batch *b)
{
    lsm_batch_clear(b);
    char tmp[400];
    for (size_t i = 0; i < sizeof(tmp); i++)
        tmp[i] = (char)rnd();
    int records = (int)(rnd() % 8);
    for (int i = 0; i < records; i++) {
        size_t kl = rnd() % 2 ? rnd() % 8 : rnd() % 200;
        if (rnd() % 3 == 0)
            assert_true(lsm_batch_delete(b, tmp, kl));
        else
            assert_true(lsm_batch_put(b, tmp, kl, tmp + 7, rnd() % 2 ? rnd() % 8 : rnd() % 390));
    }
    batch_set_sequence(b, 1 + rnd() % 1000);
}

/* Whatever the bytes, the result is OK (then every record was delivered)
 * or LSM_CORRUPTION (then none was) — never a crash or an overread. */
static void check_fuzzed(lsm_batch *b)
{
    logger l;
    lsm_status *s = log_batch(b, &l);
    int code = lsm_status_code(s);
    assert_true(code == LSM_OK || code == LSM_CORRUPTION);
    if (code == LSM_OK)
        assert_int_equal((uint32_t)l.calls, lsm_batch_count(b));
    else
        assert_int_equal(l.calls, 0);
    lsm_status_free(s);

    memtable *m = memtable_new();
    s = batch_insert_into(b, m);
    if (s == NULL)
        assert_int_equal(memtable_entries(m), lsm_batch_count(b));
    else
        assert_int_equal(memtable_entries(m), 0);
    assert_true(s == NULL || lsm_status_code(s) == LSM_CORRUPTION);
    lsm_status_free(s);
    memtable_unref(m);
}

static void test_fuzz_contents(void **state)
{
    (void)state;
    rnd_state = 12345;
    lsm_batch *good = lsm_batch_new(), *b = lsm_batch_new();
    char data[8192]; /* > the largest random batch (~4.2 KB) + garbage */
    int ok = 0, corrupt = 0;
    for (int round = 0; round < 20000; round++) {
        random_batch(good);
        size_t n;
        const char *src = batch_contents(good, &n);
        memcpy(data, src, n);
        switch (rnd() % 4) {
        case 0: /* bit flips */
            for (int f = 1 + (int)(rnd() % 3); f > 0; f--)
                data[rnd() % n] ^= (char)(1u << (rnd() % 8));
            break;
        case 1: /* random bytes after the header */
            for (size_t i = BATCH_HEADER; i < n; i++)
                if (rnd() % 8 == 0)
                    data[i] = (char)rnd();
            break;
        case 2: /* truncate or extend with garbage */
            if (rnd() % 2)
                n = BATCH_HEADER + rnd() % (n - BATCH_HEADER + 1);
            else
                for (int extra = 1 + (int)(rnd() % 20); extra > 0; extra--)
                    data[n++] = (char)rnd();
            break;
        default: /* all garbage, random count */
            n = BATCH_HEADER + rnd() % 64;
            for (size_t i = 0; i < n; i++)
                data[i] = (char)rnd();
            data[8] = (char)(rnd() % 4);
            data[9] = data[10] = data[11] = 0;
            break;
        }
        set_exact(b, data, n);
        logger l;
        lsm_status *s = log_batch(b, &l);
        s == NULL ? ok++ : corrupt++;
        lsm_status_free(s);
        check_fuzzed(b);
    }
    /* Both outcomes must actually have been exercised. */
    assert_true(ok > 1000);
    assert_true(corrupt > 1000);
    lsm_batch_free(good);
    lsm_batch_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_bytes_exact),
        cmocka_unit_test(test_long_lengths_use_multibyte_varints),
        cmocka_unit_test(test_empty_and_clear),
        cmocka_unit_test(test_reserve_makes_room_once),
        cmocka_unit_test(test_big_batch_memory_reused),
        cmocka_unit_test(test_iterate_in_order),
        cmocka_unit_test(test_append),
        cmocka_unit_test(test_append_count_overflow_refused),
        cmocka_unit_test(test_embedded_batch),
        cmocka_unit_test(test_set_contents_round_trip),
        cmocka_unit_test(test_insert_into_memtable),
        cmocka_unit_test(test_every_truncation_is_corruption),
        cmocka_unit_test(test_specific_corruptions),
        cmocka_unit_test(test_sequence_overflow_is_corruption),
        cmocka_unit_test(test_fuzz_contents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
