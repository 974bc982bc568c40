/* test_fs_schema.c — the lsmfs on-disk encodings: round trips, key order,
 * and rejection of malformed values (data from disk is untrusted). */
#include "testutil.h"

#include "schema.h"

#include <sys/stat.h>

static int keycmp(const schema_key *a, const schema_key *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->b, b->b, n);
    return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

static void test_chunk_keys_sort_numerically(void **state)
{
    (void)state;
    schema_key a, b, c;
    key_chunk(&a, 5, 255);
    key_chunk(&b, 5, 256);
    key_chunk(&c, 6, 0);
    assert_true(keycmp(&a, &b) < 0);
    assert_true(keycmp(&b, &c) < 0);
    uint64_t ino, idx;
    assert_true(key_parse_chunk(b.b, b.len, &ino, &idx));
    assert_int_equal(ino, 5);
    assert_int_equal(idx, 256);
    assert_false(key_parse_chunk(b.b, b.len - 1, &ino, &idx));
}

static void test_range_covers_only_one_inode(void **state)
{
    (void)state;
    schema_key start, end, x, other;
    key_range(&start, &end, K_XATTR, 7);
    key_xattr(&x, 7, "user.zzzz", 9);
    key_xattr(&other, 8, "a", 1);
    assert_true(keycmp(&start, &x) < 0);
    assert_true(keycmp(&x, &end) < 0);
    assert_true(keycmp(&end, &other) <= 0);
    key_range(&start, &end, K_CHUNK, UINT64_MAX);
    assert_int_equal(end.len, 1);
    assert_int_equal(end.b[0], K_CHUNK + 1);
}

static void test_dirent_and_cookie_round_trip(void **state)
{
    (void)state;
    schema_key k;
    key_dirent(&k, 42, "hello", 5);
    uint64_t parent;
    const char *name;
    size_t nlen;
    assert_true(key_parse_dirent(k.b, k.len, &parent, &name, &nlen));
    assert_int_equal(parent, 42);
    assert_int_equal(nlen, 5);
    assert_memory_equal(name, "hello", 5);

    char v[DIRENT_VAL_LEN];
    dirent_val d = {.ino = 99, .type = S_IFDIR >> 12, .cookie = 12345}, back;
    dirent_encode(&d, v);
    assert_true(dirent_decode(v, sizeof v, &back));
    assert_int_equal(back.ino, 99);
    assert_int_equal(back.type, S_IFDIR >> 12);
    assert_int_equal(back.cookie, 12345);
    assert_false(dirent_decode(v, sizeof v - 1, &back));

    char cv[COOKIE_VAL_HDR + SCHEMA_NAME_MAX];
    size_t cl = cookie_encode(99, 8, "name", 4, cv);
    uint64_t ino;
    uint8_t type;
    assert_true(cookie_decode(cv, cl, &ino, &type, &name, &nlen));
    assert_int_equal(ino, 99);
    assert_int_equal(type, 8);
    assert_int_equal(nlen, 4);
    assert_memory_equal(name, "name", 4);
    assert_false(cookie_decode(cv, COOKIE_VAL_HDR, &ino, &type, &name, &nlen));
}

static void test_inode_round_trip_with_payload(void **state)
{
    (void)state;
    inode_rec r = {.mode = S_IFREG | 0640,
                   .uid = 1000,
                   .gid = 100,
                   .flags = INODE_F_INLINE,
                   .nlink = 3,
                   .size = 5,
                   .rdev = 0,
                   .generation = 1,
                   .atime = {.sec = -5, .nsec = 999999999},
                   .mtime = {.sec = 1 << 30, .nsec = 1},
                   .ctime = {.sec = 7, .nsec = 0},
                   .parent = 0,
                   .next_cookie = 0};
    char v[INODE_HDR_LEN + 5];
    inode_encode_hdr(&r, v);
    memcpy(v + INODE_HDR_LEN, "abcde", 5);
    inode_rec back;
    const char *p;
    size_t plen;
    assert_true(inode_decode(v, sizeof v, &back, &p, &plen));
    assert_int_equal(plen, 5);
    assert_memory_equal(p, "abcde", 5);
    assert_int_equal(back.mode, r.mode);
    assert_int_equal(back.uid, 1000);
    assert_int_equal(back.nlink, 3);
    assert_int_equal(back.atime.sec, -5);
    assert_int_equal(back.atime.nsec, 999999999);
    assert_int_equal(back.mtime.sec, 1 << 30);
    assert_int_equal(back.flags, INODE_F_INLINE);
}

/* A record of version 2 carries the chunk count; one of version 1 (the
 * header without it, then the payload) reads with the count unknown. */
static void test_inode_chunk_count_and_version_1(void **state)
{
    (void)state;
    inode_rec r = {.mode = S_IFREG | 0644, .nlink = 1, .size = 1 << 20, .chunks = 77};
    char v[INODE_HDR_LEN + 3];
    inode_encode_hdr(&r, v);
    inode_rec back;
    const char *p;
    size_t plen;
    assert_true(inode_decode(v, INODE_HDR_LEN, &back, &p, &plen));
    assert_int_equal(back.chunks, 77);
    assert_int_equal(plen, 0);
    /* Version 1: the same fields without the count, then "xyz". */
    v[0] = 1;
    memcpy(v + INODE_HDR_V1_LEN, "xyz", 3);
    assert_true(inode_decode(v, INODE_HDR_V1_LEN + 3, &back, &p, &plen));
    assert_true(back.chunks == INODE_CHUNKS_UNKNOWN);
    assert_int_equal(back.size, 1 << 20);
    assert_int_equal(plen, 3);
    assert_memory_equal(p, "xyz", 3);
    assert_false(inode_decode(v, INODE_HDR_V1_LEN - 1, &back, &p, &plen));
}

static void test_inode_decode_rejects_damage(void **state)
{
    (void)state;
    inode_rec r = {.mode = S_IFDIR | 0755, .nlink = 2};
    char v[INODE_HDR_LEN];
    inode_encode_hdr(&r, v);
    inode_rec back;
    const char *p;
    size_t plen;
    assert_false(inode_decode(v, INODE_HDR_LEN - 1, &back, &p, &plen)); /* truncated */
    v[0] = 9;                                                           /* unknown version */
    assert_false(inode_decode(v, sizeof v, &back, &p, &plen));
    inode_encode_hdr(&r, v);
    memset(v + 1 + 20 + 24 + 8, 0xff, 4); /* atime nsec out of range */
    assert_false(inode_decode(v, sizeof v, &back, &p, &plen));
}

static void test_superblock_versions(void **state)
{
    (void)state;
    schema_super s = {.version = SCHEMA_VERSION,
                      .chunk_size = 65536,
                      .inline_limit = 4096,
                      .ctime_sec = 123,
                      .ctime_nsec = 4};
    char v[SCHEMA_SUPER_LEN];
    super_encode(&s, v);
    schema_super back;
    assert_int_equal(super_decode(v, sizeof v, &back), SUPER_OK);
    assert_int_equal(back.chunk_size, 65536);
    assert_int_equal(back.inline_limit, 4096);
    assert_int_equal(back.ctime_sec, 123);
    assert_int_equal(back.reserve_pct, 0);

    /* The root reserve, and a superblock written before it had one. */
    s.reserve_pct = 7;
    s.resuid = 8;
    s.resgid = 9;
    super_encode(&s, v);
    assert_int_equal(super_decode(v, sizeof v, &back), SUPER_OK);
    assert_true(back.reserve_pct == 7 && back.resuid == 8 && back.resgid == 9);
    assert_int_equal(super_decode(v, SCHEMA_SUPER_V1_LEN, &back), SUPER_OK);
    assert_true(back.reserve_pct == 0 && back.resuid == 0 && back.resgid == 0);
    s.reserve_pct = SCHEMA_MAX_RESERVE_PCT + 1;
    super_encode(&s, v);
    assert_int_equal(super_decode(v, sizeof v, &back), SUPER_BAD);
    s.reserve_pct = 0;

    s.version = SCHEMA_VERSION + 1;
    super_encode(&s, v);
    assert_int_equal(super_decode(v, sizeof v, &back), SUPER_NEWER);

    s.version = SCHEMA_VERSION;
    s.chunk_size = 5000; /* not a power of two */
    super_encode(&s, v);
    assert_int_equal(super_decode(v, sizeof v, &back), SUPER_BAD);

    v[0] = 'X';
    assert_int_equal(super_decode(v, sizeof v, &back), SUPER_NOT_LSMFS);
    assert_int_equal(super_decode(v, 3, &back), SUPER_NOT_LSMFS);
}

static void test_params(void **state)
{
    (void)state;
    const char *why;
    assert_true(super_params_valid(4096, 0, &why));
    assert_true(super_params_valid(1u << 20, 1u << 20, &why));
    assert_false(super_params_valid(2048, 0, &why));
    assert_false(super_params_valid(65536, 65537, &why));
    assert_false(super_params_valid(2u << 20, 0, &why));
}

static void test_alloc_record(void **state)
{
    (void)state;
    char v[SCHEMA_ALLOC_LEN];
    alloc_encode(1ULL << 40, v);
    uint64_t n;
    assert_true(alloc_decode(v, sizeof v, &n));
    assert_int_equal(n, 1ULL << 40);
    assert_false(alloc_decode(v, 7, &n));
    alloc_encode(0, v);
    assert_false(alloc_decode(v, sizeof v, &n)); /* below the first inode */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_keys_sort_numerically),
        cmocka_unit_test(test_range_covers_only_one_inode),
        cmocka_unit_test(test_dirent_and_cookie_round_trip),
        cmocka_unit_test(test_inode_round_trip_with_payload),
        cmocka_unit_test(test_inode_decode_rejects_damage),
        cmocka_unit_test(test_inode_chunk_count_and_version_1),
        cmocka_unit_test(test_superblock_versions),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_alloc_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
