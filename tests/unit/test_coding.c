/* test_coding.c — fixed-width and varint encodings, the growable buffer, and
 * CRC32C (both paths, known vectors, masking). */
#include "testutil.h"

#include "coding.h"
#include "crc32c.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return tu_xorshift64(&rng_state);
}

static const uint64_t edge64[] = {0,
                                  1,
                                  127,
                                  128,
                                  255,
                                  256,
                                  16383,
                                  16384,
                                  (1u << 21) - 1,
                                  1u << 21,
                                  (1u << 28) - 1,
                                  1u << 28,
                                  UINT32_MAX - 1,
                                  UINT32_MAX,
                                  (uint64_t)UINT32_MAX + 1,
                                  (1ull << 35) - 1,
                                  1ull << 35,
                                  (1ull << 56) - 1,
                                  1ull << 63,
                                  UINT64_MAX - 1,
                                  UINT64_MAX};

static void test_fixed_little_endian(void **state)
{
    (void)state;
    char b[8];
    encode_fixed32(b, 0x04030201u);
    assert_memory_equal(b, "\x01\x02\x03\x04", 4);
    assert_int_equal(decode_fixed32(b), 0x04030201u);
    encode_fixed64(b, 0x0807060504030201ull);
    assert_memory_equal(b, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    assert_true(decode_fixed64(b) == 0x0807060504030201ull);
}

/* Decodes a varint64 (wide) or a varint32 into *v (left alone on failure). */
static const char *decode_varint(const char *p, const char *limit, uint64_t *v, bool wide)
{
    if (wide)
        return decode_varint64(p, limit, v);
    uint32_t v32 = (uint32_t)*v;
    const char *end = decode_varint32(p, limit, &v32);
    *v = v32;
    return end;
}

/* Encodes v as a varint64 (wide) or a varint32 and decodes it back from an
 * exactly sized heap copy, so that a read past the end is caught by the
 * sanitizers; every cut short of the whole encoding must be refused. */
static void check_varint(uint64_t v, bool wide)
{
    char b[VARINT64_MAX];
    char *end = wide ? encode_varint64(b, v) : encode_varint32(b, (uint32_t)v);
    int len = (int)(end - b);
    assert_int_equal(len, varint_length(v));
    assert_true(len >= 1 && len <= (wide ? VARINT64_MAX : VARINT32_MAX));
    char *exact = tu_exact_copy(b, (size_t)len);
    uint64_t got = ~v;
    assert_ptr_equal(decode_varint(exact, exact + len, &got, wide), exact + len);
    assert_true(got == v);
    for (int cut = 0; cut < len; cut++)
        assert_null(decode_varint(exact, exact + cut, &got, wide));
    free(exact);
}

static void test_varint_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(edge64) / sizeof(edge64[0]); i++) {
        check_varint(edge64[i], true);
        if (edge64[i] <= UINT32_MAX)
            check_varint(edge64[i], false);
    }
    for (int i = 0; i < 20000; i++) {
        uint64_t v = rnd() >> (rnd() % 64); /* all magnitudes */
        check_varint(v, true);
        check_varint((uint32_t)v, false);
    }
}

static void test_varint_lengths(void **state)
{
    (void)state;
    assert_int_equal(varint_length(0), 1);
    assert_int_equal(varint_length(127), 1);
    assert_int_equal(varint_length(128), 2);
    assert_int_equal(varint_length(UINT32_MAX), 5);
    assert_int_equal(varint_length(UINT64_MAX), 10);
}

static void test_varint_sequence(void **state)
{
    (void)state;
    /* Many varints back to back decode to the same values in order. */
    enum { N = 1000 };
    uint64_t vals[N];
    char *b = malloc(N * VARINT64_MAX);
    assert_non_null(b);
    char *p = b;
    for (int i = 0; i < N; i++) {
        vals[i] = rnd() >> (rnd() % 64);
        p = encode_varint64(p, vals[i]);
    }
    const char *q = b, *limit = p;
    for (int i = 0; i < N; i++) {
        uint64_t v;
        q = decode_varint64(q, limit, &v);
        assert_non_null(q);
        assert_true(v == vals[i]);
    }
    assert_ptr_equal(q, limit);
    free(b);
}

static void test_varint_malformed(void **state)
{
    (void)state;
    uint32_t v32;
    uint64_t v64;
    /* Empty input. */
    const char one[1] = {0};
    assert_null(decode_varint32(one, one, &v32));
    assert_null(decode_varint64(one, one, &v64));
    /* Continuation bit on the last available byte: truncated. */
    const char trunc[3] = {(char)0x80, (char)0x80, (char)0x80};
    assert_null(decode_varint32(trunc, trunc + 3, &v32));
    assert_null(decode_varint64(trunc, trunc + 3, &v64));
    /* Overlong: a sixth byte for a varint32, an eleventh for a varint64. */
    const char over32[6] = {(char)0xff, (char)0xff, (char)0xff, (char)0xff, (char)0x8f, 0x00};
    assert_null(decode_varint32(over32, over32 + 6, &v32));
    char over64[11];
    memset(over64, 0xff, 10);
    over64[10] = 0x01;
    assert_null(decode_varint64(over64, over64 + 11, &v64));
    /* Five bytes whose value exceeds 32 bits. */
    const char big32[5] = {(char)0xff, (char)0xff, (char)0xff, (char)0xff, 0x1f};
    assert_null(decode_varint32(big32, big32 + 5, &v32));
    /* ... but the largest 32-bit value is accepted. */
    const char max32[5] = {(char)0xff, (char)0xff, (char)0xff, (char)0xff, 0x0f};
    assert_ptr_equal(decode_varint32(max32, max32 + 5, &v32), max32 + 5);
    assert_int_equal(v32, UINT32_MAX);
    /* Garbage never reads past the limit (exact heap buffers, sanitizers). */
    for (int i = 0; i < 20000; i++) {
        size_t n = rnd() % 12;
        char *g = malloc(n ? n : 1);
        assert_non_null(g);
        for (size_t k = 0; k < n; k++)
            g[k] = (char)rnd();
        const char *e32 = decode_varint32(g, g + n, &v32);
        const char *e64 = decode_varint64(g, g + n, &v64);
        assert_true(e32 == NULL || (e32 > g && e32 <= g + n));
        assert_true(e64 == NULL || (e64 > g && e64 <= g + n));
        free(g);
    }
}

static void test_length_prefixed(void **state)
{
    (void)state;
    buf b;
    buf_init(&b);
    assert_true(buf_put_length_prefixed(&b, "hello", 5));
    assert_true(buf_put_length_prefixed(&b, "", 0));
    const char *data;
    uint32_t len;
    const char *p = decode_length_prefixed(b.data, b.data + b.len, &data, &len);
    assert_non_null(p);
    assert_int_equal(len, 5);
    assert_memory_equal(data, "hello", 5);
    p = decode_length_prefixed(p, b.data + b.len, &data, &len);
    assert_ptr_equal(p, b.data + b.len);
    assert_int_equal(len, 0);
    /* A length running past the limit. */
    assert_null(decode_length_prefixed(b.data, b.data + 5, &data, &len));
    const char bad[2] = {0x7f, 'x'};
    assert_null(decode_length_prefixed(bad, bad + 2, &data, &len));
    buf_free(&b);
}

static void test_buf(void **state)
{
    (void)state;
    buf b;
    buf_init(&b);
    assert_int_equal(b.len, 0);
    assert_true(buf_append(&b, "", 0));
    for (int i = 0; i < 1000; i++)
        assert_true(buf_append(&b, "abc", 3));
    assert_int_equal(b.len, 3000);
    assert_true(b.cap >= b.len);
    assert_memory_equal(b.data + 2997, "abc", 3);
    size_t before = b.len;
    assert_true(buf_put_fixed32(&b, 0xdeadbeef));
    assert_true(buf_put_fixed64(&b, 0x0123456789abcdefull));
    assert_true(buf_put_varint32(&b, 300));
    assert_true(buf_put_varint64(&b, UINT64_MAX));
    const char *p = b.data + before;
    assert_int_equal(decode_fixed32(p), 0xdeadbeef);
    assert_true(decode_fixed64(p + 4) == 0x0123456789abcdefull);
    uint32_t v32;
    uint64_t v64;
    p = decode_varint32(p + 12, b.data + b.len, &v32);
    assert_int_equal(v32, 300);
    p = decode_varint64(p, b.data + b.len, &v64);
    assert_true(v64 == UINT64_MAX);
    assert_ptr_equal(p, b.data + b.len);
    assert_true(buf_reserve(&b, 1 << 20));
    assert_true(b.cap - b.len >= (1u << 20));
    buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

static void test_bytes_compare(void **state)
{
    (void)state;
    assert_int_equal(bytes_compare("a", 1, "a", 1), 0);
    assert_true(bytes_compare("a", 1, "b", 1) < 0);
    assert_true(bytes_compare("b", 1, "a", 1) > 0);
    assert_true(bytes_compare("a", 1, "ab", 2) < 0);
    assert_true(bytes_compare("ab", 2, "a", 1) > 0);
    assert_true(bytes_compare("", 0, "a", 1) < 0);
    assert_int_equal(bytes_compare("", 0, "", 0), 0);
    assert_true(bytes_compare("\xff", 1, "\x01", 1) > 0); /* unsigned bytes */
}

/* ----------------------------------------------------------------- crc */

static void test_crc32c_vectors(void **state)
{
    (void)state;
    /* RFC 3720 (iSCSI) appendix B.4 and the classic check value. */
    assert_int_equal(crc32c("123456789", 9), 0xe3069283u);
    assert_int_equal(crc32c_extend_portable(0, "123456789", 9), 0xe3069283u);
    unsigned char b[32];
    memset(b, 0, sizeof(b));
    assert_int_equal(crc32c(b, 32), 0x8a9136aau);
    assert_int_equal(crc32c_extend_portable(0, b, 32), 0x8a9136aau);
    memset(b, 0xff, sizeof(b));
    assert_int_equal(crc32c(b, 32), 0x62a8ab43u);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    assert_int_equal(crc32c(b, 32), 0x46dd794eu);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)(31 - i);
    assert_int_equal(crc32c(b, 32), 0x113fdb5cu);
    assert_int_equal(crc32c("", 0), 0);
}

static void test_crc32c_extend(void **state)
{
    (void)state;
    const char *s = "hello world, this is a longer string for the crc";
    size_t n = strlen(s);
    uint32_t whole = crc32c(s, n);
    for (size_t cut = 0; cut <= n; cut++) {
        assert_int_equal(crc32c_extend(crc32c(s, cut), s + cut, n - cut), whole);
        assert_int_equal(
            crc32c_extend_portable(crc32c_extend_portable(0, s, cut), s + cut, n - cut), whole);
    }
    assert_int_not_equal(crc32c("a", 1), crc32c("foo", 3));
}

static void test_crc32c_hw_matches_portable(void **state)
{
    (void)state;
    enum { MAX = 4096 };
    unsigned char *data = malloc(MAX + 16);
    assert_non_null(data);
    for (int i = 0; i < MAX + 16; i++)
        data[i] = (unsigned char)rnd();
    /* Every small length at every alignment, then random slices. */
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 0; n <= 64; n++)
            assert_int_equal(crc32c_extend(0x12345678u, data + off, n),
                             crc32c_extend_portable(0x12345678u, data + off, n));
    for (int i = 0; i < 2000; i++) {
        size_t off = rnd() % 16, n = rnd() % MAX;
        uint32_t seed = (uint32_t)rnd();
        assert_int_equal(crc32c_extend(seed, data + off, n),
                         crc32c_extend_portable(seed, data + off, n));
    }
    free(data);
}

static void test_crc32c_mask(void **state)
{
    (void)state;
    uint32_t crc = crc32c("foo", 3);
    assert_int_not_equal(crc32c_mask(crc), crc);
    assert_int_not_equal(crc32c_mask(crc32c_mask(crc)), crc);
    assert_int_equal(crc32c_unmask(crc32c_mask(crc)), crc);
    assert_int_equal(crc32c_unmask(crc32c_unmask(crc32c_mask(crc32c_mask(crc)))), crc);
    for (int i = 0; i < 10000; i++) {
        uint32_t v = (uint32_t)rnd();
        assert_int_equal(crc32c_unmask(crc32c_mask(v)), v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_little_endian),
        cmocka_unit_test(test_varint_round_trip),
        cmocka_unit_test(test_varint_lengths),
        cmocka_unit_test(test_varint_sequence),
        cmocka_unit_test(test_varint_malformed),
        cmocka_unit_test(test_length_prefixed),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_bytes_compare),
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_extend),
        cmocka_unit_test(test_crc32c_hw_matches_portable),
        cmocka_unit_test(test_crc32c_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
