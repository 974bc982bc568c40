/* test_fs_schema.c — the lsmfs on-disk encodings: round trips, key order,
 * and rejection of malformed values (data from disk is untrusted). */
#include "testutil.h"

#include "inode_fixed.h"
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

static void assert_rec_equal(const inode_rec *a, const inode_rec *b)
{
    assert_int_equal(a->mode, b->mode);
    assert_int_equal(a->uid, b->uid);
    assert_int_equal(a->gid, b->gid);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->nlink, b->nlink);
    assert_true(a->size == b->size && a->rdev == b->rdev && a->generation == b->generation);
    assert_true(a->parent == b->parent && a->next_cookie == b->next_cookie);
    assert_true(a->chunks == b->chunks);
    const ts *ta[] = {&a->atime, &a->mtime, &a->ctime}, *tb[] = {&b->atime, &b->mtime, &b->ctime};
    for (int i = 0; i < 3; i++) {
        assert_true(ta[i]->sec == tb[i]->sec);
        assert_int_equal(ta[i]->nsec, tb[i]->nsec);
    }
}

/* Records that exercise every field's range and every time flag. */
static const inode_rec sample_recs[] = {
    {.mode = S_IFREG | 0640,
     .uid = 1000,
     .gid = 100,
     .flags = INODE_F_INLINE,
     .nlink = 3,
     .size = 5,
     .generation = 1,
     .atime = {-5, 999999999},
     .mtime = {1 << 30, 1},
     .ctime = {7, 0}},
    {.mode = S_IFDIR | 0755,
     .nlink = 2,
     .generation = 1,
     .parent = 1,
     .next_cookie = 3,
     .atime = {1764950000, 5},
     .mtime = {1764950000, 5},
     .ctime = {1764950000, 5}},
    {.mode = S_IFREG | 04755,
     .uid = UINT32_MAX,
     .gid = UINT32_MAX,
     .flags = UINT32_MAX,
     .nlink = UINT32_MAX,
     .size = UINT64_MAX,
     .rdev = UINT64_MAX,
     .generation = UINT64_MAX,
     .parent = UINT64_MAX,
     .next_cookie = UINT64_MAX,
     .chunks = INODE_CHUNKS_UNKNOWN,
     .atime = {INT64_MIN, 999999999},
     .mtime = {INT64_MAX, 0},
     .ctime = {INT64_MIN, 1}},
    {.mode = S_IFCHR | 0600,
     .rdev = 0x0103,
     .nlink = 1,
     .atime = {0, 0},
     .mtime = {0, 0},
     .ctime = {0, 0}},
};
#define NSAMPLES (sizeof sample_recs / sizeof *sample_recs)

static void test_inode_round_trip_with_payload(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSAMPLES; i++) {
        char v[INODE_HDR_MAX + 5];
        size_t n = inode_encode_hdr(&sample_recs[i], v);
        assert_true(n <= INODE_HDR_MAX);
        assert_int_equal(v[0], INODE_REC_VERSION);
        memcpy(v + n, "abcde", 5);
        inode_rec back;
        const char *p;
        size_t plen;
        assert_true(inode_decode(v, n + 5, &back, &p, &plen));
        assert_int_equal(plen, 5);
        assert_memory_equal(p, "abcde", 5);
        assert_rec_equal(&back, &sample_recs[i]);
    }
}

/* A small file's header: ~75 bytes less than the fixed 105. */
static void test_inode_header_is_compact(void **state)
{
    (void)state;
    ts created = {1764950000, 123456789}, written = {1764950001, 987654321};
    inode_rec r = {.mode = S_IFREG | 0644,
                   .uid = 1000,
                   .gid = 1000,
                   .flags = INODE_F_INLINE,
                   .nlink = 1,
                   .size = 1024,
                   .generation = 1,
                   .atime = created,
                   .mtime = written,
                   .ctime = written};
    char v[INODE_HDR_MAX];
    assert_true(inode_encode_hdr(&r, v) <= 34);
    r.atime = written; /* all three equal: one time stored */
    assert_true(inode_encode_hdr(&r, v) <= 29);
}

/* Records of versions 1 and 2 (fixed fields, as older lsmfs wrote them)
 * read as they are; version 1 has no chunk count. */
static void test_inode_fixed_versions_read(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSAMPLES; i++) {
        char v[INODE_HDR_V2_LEN + 3];
        size_t n = inode_encode_fixed(&sample_recs[i], 2, v);
        assert_int_equal(n, INODE_HDR_V2_LEN);
        memcpy(v + n, "xyz", 3);
        inode_rec back;
        const char *p;
        size_t plen;
        assert_true(inode_decode(v, n + 3, &back, &p, &plen));
        assert_rec_equal(&back, &sample_recs[i]);
        assert_int_equal(plen, 3);
        n = inode_encode_fixed(&sample_recs[i], 1, v);
        assert_int_equal(n, INODE_HDR_V1_LEN);
        memcpy(v + n, "xyz", 3);
        assert_true(inode_decode(v, n + 3, &back, &p, &plen));
        assert_true(back.chunks == INODE_CHUNKS_UNKNOWN);
        assert_true(back.size == sample_recs[i].size);
        assert_int_equal(plen, 3);
        assert_memory_equal(p, "xyz", 3);
        assert_false(inode_decode(v, INODE_HDR_V1_LEN - 1, &back, &p, &plen));
    }
}

/* Where an inline file's bytes are (schema.h's one rule): a record
 * written now puts an inline file's apart ('L' ino, a key of its own
 * after the records, in tables of their own: partition 2), every
 * other inode's nowhere new; a record of any version without the flag
 * (format 1-3 stores) holds them; the key exists while the size is not 0. */
static void test_inline_bytes_apart_rule(void **state)
{
    (void)state;
    inode_rec r = {.mode = S_IFREG | 0644, .flags = INODE_F_INLINE | INODE_F_XATTR, .size = 3};
    assert_false(inode_bytes_apart(&r)); /* as read from an older store */
    char v[INODE_HDR_V2_LEN + 3];
    for (int version = 1; version <= 2; version++) {
        size_t n = inode_encode_fixed(&r, version, v);
        memcpy(v + n, "abc", 3);
        inode_rec back;
        const char *p;
        size_t plen;
        assert_true(inode_decode(v, n + 3, &back, &p, &plen));
        assert_false(inode_bytes_apart(&back));
        assert_true(plen == 3 && memcmp(p, "abc", 3) == 0);
    }
    inode_rec_place(&r);
    assert_int_equal(r.flags, INODE_F_INLINE | INODE_F_XATTR | INODE_F_APART);
    assert_true(inode_bytes_apart(&r) && inode_has_inline_key(&r));
    char h[INODE_HDR_MAX];
    inode_rec back;
    const char *p;
    size_t plen;
    assert_true(inode_decode(h, inode_encode_hdr(&r, h), &back, &p, &plen));
    assert_true(inode_bytes_apart(&back) && plen == 0);
    r.size = 0;
    assert_true(inode_bytes_apart(&r));
    assert_false(inode_has_inline_key(&r));
    r.flags &= ~INODE_F_INLINE; /* un-inlined to chunk 0 */
    inode_rec_place(&r);
    assert_int_equal(r.flags, INODE_F_XATTR);
    inode_rec other[] = {{.mode = S_IFLNK | 0777, .flags = INODE_F_APART | INODE_F_INLINE},
                         {.mode = S_IFDIR | 0755, .flags = INODE_F_APART}};
    for (size_t i = 0; i < 2; i++) {
        inode_rec_place(&other[i]);
        assert_false(other[i].flags & INODE_F_APART);
        assert_false(inode_bytes_apart(&other[i]));
    }
    schema_key rec, bytes, next;
    key_inode(&rec, UINT64_MAX);
    key_inline(&bytes, 0);
    key_orphan(&next, 0);
    assert_true(keycmp(&rec, &bytes) < 0 && keycmp(&bytes, &next) < 0);
    key_inline(&bytes, 42);
    uint64_t ino;
    assert_true(key_parse_ino(bytes.b, bytes.len, K_INLINE, &ino) && ino == 42);
    assert_int_equal(schema_table_partition(bytes.b, bytes.len), 2);
    assert_int_equal(schema_table_partition(rec.b, rec.len), 0);
    assert_int_equal(schema_table_partition(next.b, next.len), 0);
    assert_int_equal(schema_table_segment(bytes.b, bytes.len), 0);
}

static void test_inode_decode_rejects_damage(void **state)
{
    (void)state;
    inode_rec r = sample_recs[0];
    char v[INODE_HDR_MAX];
    inode_rec back;
    const char *p;
    size_t plen;
    size_t n = inode_encode_hdr(&r, v);
    assert_false(inode_decode(v, n - 1, &back, &p, &plen)); /* truncated */
    assert_false(inode_decode(v, 0, &back, &p, &plen));
    v[0] = 9; /* unknown version */
    assert_false(inode_decode(v, n, &back, &p, &plen));
    inode_encode_hdr(&r, v);
    v[1] |= 0x20; /* unknown time flag */
    assert_false(inode_decode(v, n, &back, &p, &plen));
    inode_encode_fixed(&r, 2, v);
    memset(v + 1 + 20 + 24 + 8, 0xff, 4); /* atime nsec out of range */
    assert_false(inode_decode(v, INODE_HDR_V2_LEN, &back, &p, &plen));
    r.atime.nsec = 1000000000; /* and in the compact form */
    n = inode_encode_hdr(&r, v);
    assert_false(inode_decode(v, n, &back, &p, &plen));
}

/* Each prefix and each single-byte change (every value of the byte) of
 * records of every version: decoded to a record whose payload lies inside
 * the value, or refused. Run under ASan (make test SAN=1) an over-read
 * shows up as an error, so the decoder's bounds are checked too. */
static void fuzz_one(const char *rec, size_t len)
{
    inode_rec back;
    const char *p;
    size_t plen;
    for (size_t cut = 0; cut <= len; cut++) {
        char *copy = malloc(cut ? cut : 1); /* exact size: ASan sees an over-read */
        assert_non_null(copy);
        memcpy(copy, rec, cut);
        if (inode_decode(copy, cut, &back, &p, &plen))
            assert_true(p >= copy && p + plen == copy + cut);
        free(copy);
    }
    char *copy = malloc(len);
    assert_non_null(copy);
    for (size_t i = 0; i < len; i++) {
        for (int b = 0; b < 256; b++) {
            memcpy(copy, rec, len);
            copy[i] = (char)b;
            if (inode_decode(copy, len, &back, &p, &plen)) {
                assert_true(p >= copy && p + plen == copy + len);
                assert_true(back.atime.nsec < 1000000000u && back.mtime.nsec < 1000000000u &&
                            back.ctime.nsec < 1000000000u);
            }
        }
    }
    free(copy);
}

static void test_inode_decode_fuzz(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSAMPLES; i++) {
        char v[INODE_HDR_MAX + 4];
        size_t n = inode_encode_hdr(&sample_recs[i], v);
        memcpy(v + n, "data", 4);
        fuzz_one(v, n + 4);
        for (int ver = 1; ver <= 2; ver++) {
            n = inode_encode_fixed(&sample_recs[i], ver, v);
            fuzz_one(v, n);
        }
    }
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

/* The kinds' table is in key order (lsmctl compacts [kind, next kind)),
 * holds every kind once, and nothing else is known. */
static void test_kinds_listed_in_key_order(void **state)
{
    (void)state;
    for (size_t i = 1; i < schema_nkinds; i++)
        assert_true((unsigned char)schema_kinds[i - 1].kind < (unsigned char)schema_kinds[i].kind);
    static const char every[] = {K_SUPER,  K_ALLOC, K_INODE, K_INLINE, K_DIRENT,
                                 K_COOKIE, K_CHUNK, K_XATTR, K_ORPHAN, K_ICOUNT};
    assert_int_equal(schema_nkinds, sizeof every);
    for (size_t i = 0; i < sizeof every; i++)
        assert_true(schema_kind_known(every[i]));
    assert_false(schema_kind_known('Z'));
    assert_false(schema_kind_known(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_listed_in_key_order),
        cmocka_unit_test(test_chunk_keys_sort_numerically),
        cmocka_unit_test(test_range_covers_only_one_inode),
        cmocka_unit_test(test_dirent_and_cookie_round_trip),
        cmocka_unit_test(test_inode_round_trip_with_payload),
        cmocka_unit_test(test_inode_decode_rejects_damage),
        cmocka_unit_test(test_inode_header_is_compact),
        cmocka_unit_test(test_inode_fixed_versions_read),
        cmocka_unit_test(test_inline_bytes_apart_rule),
        cmocka_unit_test(test_inode_decode_fuzz),
        cmocka_unit_test(test_superblock_versions),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_alloc_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
