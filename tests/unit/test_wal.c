/* test_wal.c — the WAL format: fragments and block boundaries, round trips,
 * torn tails, corruption in the middle, garbage, zero-filled tails. */
#include "testutil.h"

#include "coding.h"
#include "crc32c.h"
#include "env.h"
#include "status.h"
#include "wal.h"

#define BLOCK WAL_BLOCK_SIZE
#define HDR WAL_HEADER_SIZE

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    return tu_xorshift64(&rng_state);
}

/* ------------------------------------------------------------ helpers */

/* Record i's contents: deterministic from (seed, i, len). */
static void fill_record(char *p, size_t len, uint32_t seed, size_t i)
{
    uint64_t x = (seed * 0x9e3779b97f4a7c15ull) ^ (i + 1) * 0xbf58476d1ce4e5b9ull;
    for (size_t k = 0; k < len; k++)
        p[k] = (char)tu_xorshift64(&x);
}

/* A log of records in memory, with each record's physical extent. */
struct log {
    buf data;
    size_t n;
    size_t *len;   /* record lengths */
    uint64_t *beg; /* wal_offset before the record (may include padding) */
    uint64_t *end; /* wal_offset after it */
    char **rec;    /* record contents */
    uint32_t seed;
};

static void log_build(struct log *lg, const size_t *lens, size_t n, uint32_t seed)
{
    memset(lg, 0, sizeof(*lg));
    buf_init(&lg->data);
    lg->n = n;
    lg->seed = seed;
    lg->len = calloc(n ? n : 1, sizeof(size_t));
    lg->beg = calloc(n ? n : 1, sizeof(uint64_t));
    lg->end = calloc(n ? n : 1, sizeof(uint64_t));
    lg->rec = calloc(n ? n : 1, sizeof(char *));
    assert_true(lg->len && lg->beg && lg->end && lg->rec);
    wal_writer *w = wal_writer_new(&tu_wfile_new(&lg->data)->base, 0);
    assert_non_null(w);
    for (size_t i = 0; i < n; i++) {
        lg->len[i] = lens[i];
        lg->rec[i] = malloc(lens[i] ? lens[i] : 1);
        assert_non_null(lg->rec[i]);
        fill_record(lg->rec[i], lens[i], seed, i);
        lg->beg[i] = wal_offset(w);
        assert_null(wal_add_record(w, lg->rec[i], lens[i]));
        lg->end[i] = wal_offset(w);
    }
    assert_int_equal(wal_offset(w), lg->data.len);
    assert_null(wal_writer_close(w));
}

static void log_free(struct log *lg)
{
    buf_free(&lg->data);
    free(lg->len);
    free(lg->beg);
    free(lg->end);
    for (size_t i = 0; i < lg->n; i++)
        free(lg->rec[i]);
    free(lg->rec);
}

static bool record_is(const struct log *lg, size_t i, const char *rec, size_t n)
{
    return n == lg->len[i] && (n == 0 || memcmp(lg->rec[i], rec, n) == 0);
}

/* The position of the first header of record i (after any block padding). */
static uint64_t first_header(const struct log *lg, size_t i)
{
    uint64_t b = lg->beg[i];
    if (BLOCK - b % BLOCK < HDR)
        b += BLOCK - b % BLOCK;
    return b;
}

/* Reads everything from bytes; returns the status of the first failure (the
 * caller frees it), the number of records read, and checks each record read
 * against lg in order (each must be a record of lg, later than the last). The
 * indexes read are stored in got_idx if given. */
static lsm_status *read_all(const struct log *lg, const char *bytes, size_t len, bool paranoid,
                            size_t *nread, size_t *got_idx, wal_reader_stats *st)
{
    wal_reader *r = wal_reader_new(&tu_sfile_new(bytes, len)->base, "test.log", paranoid);
    assert_non_null(r);
    size_t next = 0, count = 0;
    lsm_status *s = NULL;
    for (;;) {
        const char *rec;
        size_t n;
        bool eof;
        s = wal_read_record(r, &rec, &n, &eof);
        if (s != NULL || eof)
            break;
        assert_non_null(rec);
        /* Find which record this is: the next one that matches. */
        size_t i = next;
        while (i < lg->n && !record_is(lg, i, rec, n))
            i++;
        assert_true(i < lg->n);
        if (got_idx)
            got_idx[count] = i;
        count++;
        next = i + 1;
        assert_true(count <= lg->n);
    }
    if (st)
        *st = *wal_reader_stats_get(r);
    assert_int_equal(wal_reader_stats_get(r)->records, count);
    if (s == NULL) { /* eof is sticky */
        const char *rec;
        size_t n;
        bool eof;
        assert_null(wal_read_record(r, &rec, &n, &eof));
        assert_true(eof);
    }
    wal_reader_free(r);
    *nread = count;
    return s;
}

/* Asserts the whole log reads back cleanly. */
static void check_clean(const struct log *lg)
{
    size_t nread;
    wal_reader_stats st;
    size_t *idx = calloc(lg->n + 1, sizeof(size_t));
    assert_non_null(idx);
    assert_null(read_all(lg, lg->data.data, lg->data.len, true, &nread, idx, &st));
    assert_int_equal(nread, lg->n);
    for (size_t i = 0; i < nread; i++)
        assert_int_equal(idx[i], i);
    assert_false(st.torn_tail);
    assert_int_equal(st.torn_tail_bytes, 0);
    assert_int_equal(st.dropped_bytes, 0);
    assert_int_equal(st.corruptions, 0);
    free(idx);
}

/* Writes records of these lengths and checks the log reads back cleanly. */
static void round_trip(const size_t *lens, size_t n, uint32_t seed)
{
    struct log lg;
    log_build(&lg, lens, n, seed);
    check_clean(&lg);
    log_free(&lg);
}

struct frag {
    uint32_t crc;
    size_t len;
    int type;
};

static struct frag frag_at(const struct log *lg, uint64_t off)
{
    const char *h = lg->data.data + off;
    struct frag f;
    f.crc = crc32c_unmask(decode_fixed32(h));
    f.len = (unsigned char)h[4] | (size_t)(unsigned char)h[5] << 8;
    f.type = (unsigned char)h[6];
    /* The stored crc covers the type byte, then the payload. */
    assert_int_equal(f.crc, crc32c_extend(crc32c(h + 6, 1), h + HDR, f.len));
    return f;
}

/* Checks that the fragment at off has this type and payload length. */
static void expect_frag(const struct log *lg, uint64_t off, int type, size_t len)
{
    struct frag f = frag_at(lg, off);
    assert_int_equal(f.type, type);
    assert_int_equal(f.len, len);
}

/* -------------------------------------------------------------- tests */

static void test_full_record_layout(void **state)
{
    (void)state;
    size_t lens[] = {100, 0, 5};
    struct log lg;
    log_build(&lg, lens, 3, 1);
    assert_int_equal(lg.data.len, 3 * HDR + 105);
    expect_frag(&lg, 0, WAL_FULL, 100);
    expect_frag(&lg, HDR + 100, WAL_FULL, 0);
    check_clean(&lg);
    log_free(&lg);
}

static void test_first_middle_last_layout(void **state)
{
    (void)state;
    /* 2.5 blocks: FIRST, MIDDLE, LAST. */
    size_t big = 2 * BLOCK + BLOCK / 2;
    size_t lens[] = {big, 10};
    struct log lg;
    log_build(&lg, lens, 2, 2);
    size_t last = big - 2 * (BLOCK - HDR);
    expect_frag(&lg, 0, WAL_FIRST, BLOCK - HDR);
    expect_frag(&lg, BLOCK, WAL_MIDDLE, BLOCK - HDR);
    expect_frag(&lg, 2 * BLOCK, WAL_LAST, last);
    expect_frag(&lg, 2 * BLOCK + HDR + last, WAL_FULL, 10);
    check_clean(&lg);
    log_free(&lg);
}

static void test_first_last_layout(void **state)
{
    (void)state;
    size_t lens[] = {BLOCK}; /* just over one block's payload */
    struct log lg;
    log_build(&lg, lens, 1, 3);
    expect_frag(&lg, 0, WAL_FIRST, BLOCK - HDR);
    expect_frag(&lg, BLOCK, WAL_LAST, HDR);
    check_clean(&lg);
    log_free(&lg);
}

static void test_many_blocks(void **state)
{
    (void)state;
    /* A record over 5 blocks starting mid-block, then small ones. */
    size_t lens[] = {1000, 5 * BLOCK + 123, 1, 2, 3};
    struct log lg;
    log_build(&lg, lens, 5, 4);
    int middles = 0;
    for (uint64_t off = BLOCK; off < lg.end[1]; off += BLOCK) {
        struct frag f = frag_at(&lg, off);
        middles += f.type == WAL_MIDDLE;
    }
    assert_int_equal(middles, 4);
    check_clean(&lg);
    log_free(&lg);
}

static void test_record_exactly_fills_block(void **state)
{
    (void)state;
    size_t lens[] = {BLOCK - HDR, BLOCK - HDR, 7, BLOCK - 2 * HDR - 7, 0};
    struct log lg;
    log_build(&lg, lens, 5, 5);
    assert_int_equal(lg.end[0], BLOCK);
    assert_int_equal(frag_at(&lg, 0).type, WAL_FULL);
    assert_int_equal(lg.end[1], 2 * BLOCK);
    assert_int_equal(frag_at(&lg, BLOCK).type, WAL_FULL);
    assert_int_equal(lg.end[3], 3 * BLOCK);
    assert_int_equal(lg.beg[4], 3 * BLOCK);
    check_clean(&lg);
    log_free(&lg);
}

static void test_block_tail_0_to_7(void **state)
{
    (void)state;
    for (size_t left = 0; left <= HDR + 1; left++) {
        /* A first record leaving `left` bytes in block 0, then a second. */
        size_t lens[] = {BLOCK - HDR - left, 20, 30};
        struct log lg;
        log_build(&lg, lens, 3, (uint32_t)(10 + left));
        assert_int_equal(lg.end[0], BLOCK - left);
        if (left < HDR) {
            /* Zero-filled trailer; the next record starts the next block. */
            for (size_t k = 0; k < left; k++)
                assert_int_equal(lg.data.data[BLOCK - left + k], 0);
            assert_int_equal(frag_at(&lg, BLOCK).type, WAL_FULL);
            assert_int_equal(lg.end[1], BLOCK + HDR + 20);
        } else if (left == HDR) {
            /* Room for a header only: an empty FIRST, then the LAST. */
            expect_frag(&lg, BLOCK - HDR, WAL_FIRST, 0);
            assert_int_equal(frag_at(&lg, BLOCK).type, WAL_LAST);
        } else {
            expect_frag(&lg, BLOCK - left, WAL_FIRST, left - HDR);
        }
        check_clean(&lg);
        log_free(&lg);
    }
}

static void test_empty_records(void **state)
{
    (void)state;
    size_t lens[] = {0, 0, 3, 0, BLOCK - 3 * HDR - 3 - HDR, 0, 0};
    round_trip(lens, 7, 6);
    /* A log of only empty records, some landing exactly at block ends. */
    size_t n = BLOCK / HDR * 2 + 3;
    size_t *zl = calloc(n, sizeof(size_t));
    assert_non_null(zl);
    round_trip(zl, n, 7);
    free(zl);
}

static void test_random_round_trip(void **state)
{
    (void)state;
    enum { N = 3000 };
    size_t *lens = malloc(N * sizeof(size_t));
    assert_non_null(lens);
    for (size_t i = 0; i < N; i++) {
        uint64_t r = rnd() % 100;
        lens[i] = r < 70 ? rnd() % 200 : r < 95 ? rnd() % 5000 : rnd() % (3 * BLOCK);
    }
    round_trip(lens, N, 8);
    free(lens);
}

static void test_writer_resumes_at_offset(void **state)
{
    (void)state;
    buf data;
    buf_init(&data);
    wal_writer *w = wal_writer_new(&tu_wfile_new(&data)->base, 0);
    assert_null(wal_add_record(w, "one", 3));
    char big[BLOCK];
    memset(big, 'x', sizeof(big));
    assert_null(wal_add_record(w, big, BLOCK - 100));
    uint64_t off = wal_offset(w);
    assert_null(wal_writer_close(w));
    /* A new writer continuing the same log mid-block. */
    w = wal_writer_new(&tu_wfile_new(&data)->base, off);
    assert_int_equal(wal_offset(w), off);
    assert_null(wal_add_record(w, big, 500)); /* crosses into block 1 */
    assert_null(wal_add_record(w, "two", 3));
    assert_int_equal(wal_offset(w), data.len);
    assert_null(wal_writer_close(w));

    wal_reader *r = wal_reader_new(&tu_sfile_new(data.data, data.len)->base, "resume", true);
    const char *rec;
    size_t n;
    bool eof;
    const char *want[] = {"one", big, big, "two"};
    size_t want_len[] = {3, BLOCK - 100, 500, 3};
    for (int i = 0; i < 4; i++) {
        assert_null(wal_read_record(r, &rec, &n, &eof));
        assert_false(eof);
        assert_int_equal(n, want_len[i]);
        assert_memory_equal(rec, want[i], n);
    }
    assert_null(wal_read_record(r, &rec, &n, &eof));
    assert_true(eof);
    wal_reader_free(r);
    buf_free(&data);
}

static void test_writer_forwards_flush_sync(void **state)
{
    (void)state;
    buf data;
    buf_init(&data);
    tu_wfile *f = tu_wfile_new(&data);
    wal_writer *w = wal_writer_new(&f->base, 0);
    assert_null(wal_add_record(w, "a", 1));
    assert_int_equal(f->syncs + f->flushes, 0); /* adding neither flushes nor syncs */
    assert_null(wal_flush(w));
    assert_int_equal(f->flushes, 1);
    assert_null(wal_sync(w));
    assert_int_equal(f->syncs, 1);
    assert_null(wal_writer_close(w));
    buf_free(&data);
}

/* A small record is one append (one pwrite on a log without a mapping:
 * every metadata change of a mail spool); a large one is not copied to
 * join its header. The bytes are the same either way. */
static void test_small_record_is_one_append(void **state)
{
    (void)state;
    buf data;
    buf_init(&data);
    tu_wfile *f = tu_wfile_new(&data);
    wal_writer *w = wal_writer_new(&f->base, 0);
    static char big[3 * BLOCK];
    fill_record(big, sizeof big, 7, 0);
    assert_null(wal_add_record(w, big, 300));
    assert_int_equal(f->appends, 1);
    assert_null(wal_add_record(w, big, 8192));
    assert_int_equal(f->appends, 2);
    assert_null(wal_add_record(w, big, 8193));
    assert_int_equal(f->appends, 4);
    assert_null(wal_writer_close(w));
    /* The same log as the reader expects it. */
    wal_reader *r = wal_reader_new(&tu_sfile_new(data.data, data.len)->base, "test.log", true);
    assert_non_null(r);
    size_t lens[] = {300, 8192, 8193};
    for (size_t i = 0; i < 3; i++) {
        const char *rec;
        size_t n;
        bool eof;
        assert_null(wal_read_record(r, &rec, &n, &eof));
        assert_false(eof);
        assert_int_equal(n, lens[i]);
        assert_memory_equal(rec, big, n);
    }
    wal_reader_free(r);
    buf_free(&data);
}

static void test_writer_append_failure_is_sticky(void **state)
{
    (void)state;
    buf data;
    buf_init(&data);
    tu_wfile *f = tu_wfile_new(&data);
    f->fail_after = 1; /* the first record (header and payload in one), then fail */
    wal_writer *w = wal_writer_new(&f->base, 0);
    assert_null(wal_add_record(w, "first", 5));
    uint64_t off = wal_offset(w);
    ASSERT_FAILS(wal_add_record(w, "second", 6), LSM_IO_ERROR, NULL);
    assert_int_equal(wal_offset(w), off); /* nothing counted as written */
    f->fail_after = -1;
    /* The log now ends in half a record: nothing may follow it. */
    ASSERT_FAILS(wal_add_record(w, "third", 5), LSM_IO_ERROR, NULL);
    assert_null(wal_writer_close(w));
    buf_free(&data);
}

static void test_reader_io_error(void **state)
{
    (void)state;
    size_t lens[] = {BLOCK, BLOCK, 100};
    struct log lg;
    log_build(&lg, lens, 3, 9);
    tu_sfile *f = tu_sfile_new(lg.data.data, lg.data.len);
    f->fail_at_read = 1; /* the second block */
    wal_reader *r = wal_reader_new(&f->base, "ioerr.log", false);
    const char *rec;
    size_t n;
    bool eof;
    lsm_status *s = wal_read_record(r, &rec, &n, &eof);
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR); /* not corruption */
    assert_non_null(strstr(lsm_status_message(s), "ioerr.log"));
    lsm_status_free(s);
    /* The error stays. */
    ASSERT_FAILS(wal_read_record(r, &rec, &n, &eof), LSM_IO_ERROR, NULL);
    wal_reader_free(r);
    log_free(&lg);
}

/* Cuts the log at every length inside the extent of the last record and
 * checks it reads as a torn tail: no error (even paranoid), every earlier
 * record intact. `stride` > 1 samples, but always covers every length
 * within 16 bytes of a block boundary. */
static void check_torn_tail(const size_t *lens, size_t n, uint32_t seed, size_t stride)
{
    struct log lg;
    log_build(&lg, lens, n, seed);
    uint64_t start = lg.beg[n - 1], hdr = first_header(&lg, n - 1), end = lg.end[n - 1];
    size_t *idx = calloc(n, sizeof(size_t));
    assert_non_null(idx);
    int tested = 0;
    for (uint64_t cut = start; cut < end; cut++) {
        uint64_t in_block = cut % BLOCK;
        if (stride > 1 && (cut - start) % stride != 0 && in_block > 16 && in_block < BLOCK - 16)
            continue;
        tested++;
        for (int paranoid = 0; paranoid <= 1; paranoid++) {
            size_t nread;
            wal_reader_stats st;
            lsm_status *s = read_all(&lg, lg.data.data, (size_t)cut, paranoid, &nread, idx, &st);
            if (s != NULL)
                fail_msg("cut at %llu: %s", (unsigned long long)cut, lsm_status_message(s));
            assert_int_equal(nread, n - 1);
            for (size_t i = 0; i + 1 < n; i++)
                assert_int_equal(idx[i], i);
            assert_int_equal(st.corruptions, 0);
            assert_int_equal(st.dropped_bytes, 0);
            /* Bytes of the last record that reached the file; zero bytes
             * alone are indistinguishable from padding. */
            bool any = false;
            for (uint64_t k = hdr; k < cut; k++)
                any |= lg.data.data[k] != 0;
            assert_int_equal(st.torn_tail, any);
            if (any) {
                assert_true(st.torn_tail_bytes <= cut - hdr);
                assert_true(st.torn_tail_bytes + HDR > cut - hdr);
            } else {
                assert_int_equal(st.torn_tail_bytes, 0);
            }
        }
    }
    assert_true(tested > 0);
    free(idx);
    log_free(&lg);
}

static void test_torn_tail_small_record(void **state)
{
    (void)state;
    size_t lens[] = {10, 300, 200};
    check_torn_tail(lens, 3, 20, 1);
}

static void test_torn_tail_across_block(void **state)
{
    (void)state;
    /* The last record starts 700 bytes before a block end: FIRST + LAST. */
    size_t lens[] = {BLOCK - HDR - 700, 1500};
    check_torn_tail(lens, 2, 21, 1);
}

static void test_torn_tail_after_padding(void **state)
{
    (void)state;
    /* The last record begins after a zero trailer of 3 bytes. */
    size_t lens[] = {BLOCK - HDR - 3, 100};
    check_torn_tail(lens, 2, 22, 1);
}

static void test_torn_tail_empty_first(void **state)
{
    (void)state;
    /* Exactly a header's room: the last record's FIRST is empty. */
    size_t lens[] = {BLOCK - 2 * HDR, 50};
    check_torn_tail(lens, 2, 23, 1);
}

static void test_torn_tail_three_blocks(void **state)
{
    (void)state;
    size_t lens[] = {100, 200, 3 * BLOCK + 5000};
    check_torn_tail(lens, 3, 24, 61);
}

/* Builds a log of `n` records of about 1000 bytes (several blocks). */
static void build_medium(struct log *lg, size_t n, uint32_t seed)
{
    size_t *lens = malloc(n * sizeof(size_t));
    assert_non_null(lens);
    for (size_t i = 0; i < n; i++)
        lens[i] = 500 + rnd() % 1000;
    log_build(lg, lens, n, seed);
    free(lens);
}

/* Flips a bit at `pos` (well before the end) and checks both modes. */
static void check_middle_damage(const struct log *lg, uint64_t pos, bool zero_block)
{
    if (!zero_block) {
        /* Only bytes some checksum covers: not the zero trailer of a block. */
        bool covered = false;
        for (size_t i = 0; i < lg->n && !covered; i++)
            covered = pos >= first_header(lg, i) && pos < lg->end[i];
        if (!covered)
            return;
    }
    char *bad = malloc(lg->data.len);
    assert_non_null(bad);
    memcpy(bad, lg->data.data, lg->data.len);
    uint64_t blk = pos / BLOCK;
    if (zero_block)
        memset(bad + blk * BLOCK, 0, BLOCK);
    else
        bad[pos] ^= (char)(1 << (rnd() % 8));

    size_t nread;
    wal_reader_stats st;
    lsm_status *s = read_all(lg, bad, lg->data.len, true, &nread, NULL, &st);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    assert_non_null(strstr(lsm_status_message(s), "test.log"));
    assert_non_null(strstr(lsm_status_message(s), "byte "));
    lsm_status_free(s);

    size_t *idx = calloc(lg->n, sizeof(size_t));
    assert_non_null(idx);
    s = read_all(lg, bad, lg->data.len, false, &nread, idx, &st);
    assert_null(s);
    assert_true(st.corruptions >= 1);
    assert_true(st.dropped_bytes > 0);
    assert_false(st.torn_tail);
    assert_true(nread < lg->n);
    /* Everything wholly before the damaged block and everything starting
     * after it was returned. */
    size_t k = 0;
    for (size_t i = 0; i < lg->n; i++) {
        bool before = lg->end[i] <= blk * BLOCK;
        bool after = first_header(lg, i) >= (blk + 1) * BLOCK;
        while (k < nread && idx[k] < i)
            k++;
        if (before || after) {
            assert_true(k < nread);
            assert_int_equal(idx[k], i);
        }
    }
    free(idx);
    free(bad);
}

static void test_bit_flips_in_middle(void **state)
{
    (void)state;
    struct log lg;
    build_medium(&lg, 200, 30); /* about 6 blocks */
    assert_true(lg.data.len > 5 * BLOCK);
    /* Payload bytes, header bytes (crc, length, type) of fragments in the
     * first blocks, and a few random positions. */
    uint64_t hdr = first_header(&lg, 40);
    uint64_t spots[] = {100,      hdr,   hdr + 3,   hdr + 4,       hdr + 5,      hdr + 6,
                        hdr + 20, BLOCK, BLOCK + 1, 2 * BLOCK + 4, 3 * BLOCK + 6};
    for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++)
        check_middle_damage(&lg, spots[i], false);
    for (int i = 0; i < 200; i++)
        check_middle_damage(&lg, rnd() % (4 * BLOCK), false);
    log_free(&lg);
}

static void test_zeroed_block_in_middle(void **state)
{
    (void)state;
    struct log lg;
    build_medium(&lg, 200, 31);
    check_middle_damage(&lg, BLOCK + 10, true);
    check_middle_damage(&lg, 0, true);
    log_free(&lg);
}

/* Appends a hand-made fragment with a correct checksum. */
static void put_frag(buf *b, int type, const char *data, size_t n)
{
    char h[HDR];
    encode_fixed32(h, crc32c_mask(crc32c_extend(crc32c((char[]){(char)type}, 1), data, n)));
    h[4] = (char)(n & 0xff);
    h[5] = (char)(n >> 8);
    h[6] = (char)type;
    assert_true(buf_append(b, h, HDR));
    assert_true(buf_append(b, data, n));
}

/* Reads a hand-made log; returns records joined by '|' and the stats. */
static lsm_status *read_joined(const buf *b, bool paranoid, char *out, size_t cap,
                               wal_reader_stats *st)
{
    wal_reader *r = wal_reader_new(&tu_sfile_new(b->data, b->len)->base, "hand.log", paranoid);
    out[0] = '\0';
    lsm_status *s;
    for (;;) {
        const char *rec;
        size_t n;
        bool eof;
        s = wal_read_record(r, &rec, &n, &eof);
        if (s != NULL || eof)
            break;
        size_t l = strlen(out);
        assert_true(l + n + 2 < cap);
        memcpy(out + l, rec, n);
        out[l + n] = '|';
        out[l + n + 1] = '\0';
    }
    *st = *wal_reader_stats_get(r);
    wal_reader_free(r);
    return s;
}

/* Checks a hand-made log with damage followed by good records. */
static void check_hand_middle(const buf *b, const char *want, uint64_t dropped, int at)
{
    char out[256];
    wal_reader_stats st;
    lsm_status *s = read_joined(b, true, out, sizeof(out), &st);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    char where[32];
    snprintf(where, sizeof(where), "byte %d ", at);
    if (strstr(lsm_status_message(s), where) == NULL)
        fail_msg("want \"%s\" in: %s", where, lsm_status_message(s));
    lsm_status_free(s);
    assert_null(read_joined(b, false, out, sizeof(out), &st));
    assert_string_equal(out, want);
    assert_int_equal(st.corruptions, 1);
    assert_int_equal(st.dropped_bytes, dropped);
    assert_false(st.torn_tail);
}

static void check_hand_tail(const buf *b, const char *want, uint64_t torn)
{
    char out[256];
    wal_reader_stats st;
    for (int paranoid = 0; paranoid <= 1; paranoid++) {
        assert_null(read_joined(b, paranoid, out, sizeof(out), &st));
        assert_string_equal(out, want);
        assert_int_equal(st.corruptions, 0);
        assert_true(st.torn_tail);
        assert_int_equal(st.torn_tail_bytes, torn);
    }
}

/* A hand-made log: fragments with correct checksums, and how it reads. */
struct hand_frag {
    int type;
    const char *data; /* NULL ends the log */
};
struct hand_log {
    struct hand_frag frags[5];
    const char *want; /* the records read back, each followed by '|' */
    uint64_t bytes;   /* damage in the middle: bytes dropped; at the end: torn off */
    int at;           /* damage in the middle: the offset paranoid mode names */
};

static void build_hand(buf *b, const struct hand_frag *f)
{
    buf_init(b);
    for (; f->data != NULL; f++)
        put_frag(b, f->type, f->data, strlen(f->data));
}

static void test_orphan_and_unfinished_fragments(void **state)
{
    (void)state;
    static const struct hand_log middle[] = {
        /* An orphan MIDDLE in the middle. */
        {{{WAL_FULL, "a"}, {WAL_MIDDLE, "xx"}, {WAL_FULL, "b"}}, "a|b|", HDR + 2, HDR + 1},
        /* An orphan LAST in the middle. */
        {{{WAL_FULL, "a"}, {WAL_LAST, "xyz"}, {WAL_FIRST, "b"}, {WAL_LAST, "c"}},
         "a|bc|",
         HDR + 3,
         HDR + 1},
        /* A FIRST without LAST, then a new FIRST. */
        {{{WAL_FIRST, "p1"}, {WAL_MIDDLE, "p2"}, {WAL_FIRST, "q1"}, {WAL_LAST, "q2"}},
         "q1q2|",
         2 * (HDR + 2),
         0},
        /* A FIRST without LAST, then a FULL. */
        {{{WAL_FULL, "a"}, {WAL_FIRST, "p"}, {WAL_FULL, "b"}}, "a|b|", HDR + 1, HDR + 1},
        /* An unknown type with a good checksum. */
        {{{WAL_FULL, "a"}, {9, "zz"}, {WAL_FULL, "b"}}, "a|b|", HDR + 2, HDR + 1},
    };
    /* At the end instead: torn tails. */
    static const struct hand_log tail[] = {
        {{{WAL_FULL, "a"}, {WAL_FIRST, "p1"}, {WAL_MIDDLE, "p2"}}, "a|", 2 * (HDR + 2), 0},
        {{{WAL_FULL, "a"}, {WAL_LAST, "p"}}, "a|", HDR + 1, 0},
    };
    buf b;
    for (size_t i = 0; i < sizeof(middle) / sizeof(middle[0]); i++) {
        build_hand(&b, middle[i].frags);
        check_hand_middle(&b, middle[i].want, middle[i].bytes, middle[i].at);
        buf_free(&b);
    }
    for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++) {
        build_hand(&b, tail[i].frags);
        check_hand_tail(&b, tail[i].want, tail[i].bytes);
        buf_free(&b);
    }
}

static void test_fragment_one_past_block(void **state)
{
    (void)state;
    /* Block 0: a filler, then a fragment claiming one byte more than the
     * block holds, with a checksum that is right if that byte (the first of
     * block 1) is included. It must be rejected; block 1 still read. */
    buf next;
    buf_init(&next);
    put_frag(&next, WAL_FULL, "after", 5);
    buf b;
    buf_init(&b);
    char *filler = malloc(BLOCK);
    assert_non_null(filler);
    memset(filler, 'f', BLOCK);
    put_frag(&b, WAL_FULL, filler, BLOCK - 20 - HDR);
    assert_int_equal(b.len, BLOCK - 20);
    char payload[14];
    memset(payload, 'x', 13);
    payload[13] = next.data[0];
    put_frag(&b, WAL_FULL, payload, 14);
    b.len -= 1; /* the last payload byte is the next block's first */
    assert_int_equal(b.len, BLOCK);
    assert_true(buf_append(&b, next.data, next.len));
    char out[BLOCK + 64];
    wal_reader_stats st;
    assert_null(read_joined(&b, false, out, sizeof(out), &st));
    assert_int_equal(strlen(out), BLOCK - 20 - HDR + 1 + 6);
    assert_string_equal(out + BLOCK - 20 - HDR, "|after|");
    assert_int_equal(st.corruptions, 1);
    assert_int_equal(st.dropped_bytes, 20);
    free(filler);
    buf_free(&b);
    buf_free(&next);
}

static void test_zero_filled_tail(void **state)
{
    (void)state;
    size_t lens[] = {100, 2 * BLOCK, 50};
    struct log lg;
    log_build(&lg, lens, 3, 40);
    /* Zeros after the data, as left by preallocation or a filesystem that
     * extended the file: partial block, then whole blocks. */
    size_t sizes[] = {1, HDR - 1, HDR, 100, BLOCK, 3 * BLOCK + 77};
    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
        size_t len = lg.data.len + sizes[z];
        char *d = calloc(1, len);
        assert_non_null(d);
        memcpy(d, lg.data.data, lg.data.len);
        size_t nread;
        wal_reader_stats st;
        assert_null(read_all(&lg, d, len, true, &nread, NULL, &st));
        assert_int_equal(nread, 3);
        assert_false(st.torn_tail);
        assert_int_equal(st.torn_tail_bytes, 0);
        assert_int_equal(st.corruptions, 0);
        assert_int_equal(st.dropped_bytes, 0);
        /* A torn record before the zeros is still a torn tail. */
        memcpy(d + lg.data.len, "\x12\x34\x56\x78\x20\x00\x01", HDR < sizes[z] ? HDR : sizes[z]);
        assert_null(read_all(&lg, d, len, true, &nread, NULL, &st));
        assert_int_equal(nread, 3);
        assert_true(st.torn_tail);
        free(d);
    }
    /* An all-zero file is an empty log. */
    char *zeros = calloc(1, 2 * BLOCK);
    size_t nread;
    wal_reader_stats st;
    assert_null(read_all(&lg, zeros, 2 * BLOCK, true, &nread, NULL, &st));
    assert_int_equal(nread, 0);
    assert_false(st.torn_tail);
    assert_null(read_all(&lg, zeros, 0, true, &nread, NULL, &st));
    assert_int_equal(nread, 0);
    free(zeros);
    log_free(&lg);
}

static void test_random_garbage_never_crashes(void **state)
{
    (void)state;
    struct log lg;
    size_t lens[48];
    for (size_t i = 0; i < 48; i++)
        lens[i] = rnd() % 8 == 0 ? rnd() % (2 * BLOCK) : rnd() % 300;
    lens[5] = BLOCK + 1000; /* at least one record of several fragments */
    log_build(&lg, lens, 48, 50);
    size_t maxlen = lg.data.len + 2 * BLOCK;
    char *d = malloc(maxlen);
    assert_non_null(d);
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = lg.data.len;
        memcpy(d, lg.data.data, len);
        switch (iter % 5) {
        case 0: /* a few random bytes */
            for (int k = 1 + (int)(rnd() % 8); k > 0; k--)
                d[rnd() % len] = (char)rnd();
            break;
        case 1: /* a random run overwritten */
        {
            size_t at = rnd() % len, n = rnd() % 200;
            for (size_t k = at; k < at + n && k < len; k++)
                d[k] = (char)rnd();
            break;
        }
        case 2: /* random truncation plus byte flips */
            len = rnd() % len;
            for (int k = (int)(rnd() % 3); k > 0 && len > 0; k--)
                d[rnd() % len] ^= (char)(1 << (rnd() % 8));
            break;
        case 3: /* headers with wild lengths and types */
            for (int k = 0; k < 4; k++) {
                size_t at = rnd() % (len - HDR);
                d[at + 4] = (char)rnd();
                d[at + 5] = (char)rnd();
                d[at + 6] = (char)(rnd() % 8);
            }
            break;
        default: /* pure noise of random length */
            len = rnd() % maxlen;
            for (size_t k = 0; k < len; k++)
                d[k] = (char)rnd();
            break;
        }
        for (int paranoid = 0; paranoid <= 1; paranoid++) {
            size_t nread;
            wal_reader_stats st;
            /* read_all checks every record returned is one of the log's, in
             * order; any status must be a corruption (never an I/O error). */
            lsm_status *s = read_all(&lg, d, len, paranoid, &nread, NULL, &st);
            if (s != NULL) {
                assert_true(paranoid);
                assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
                lsm_status_free(s);
            }
            assert_true(st.dropped_bytes + st.torn_tail_bytes <= len);
        }
    }
    free(d);
    log_free(&lg);
}

static void test_real_file_round_trip(void **state)
{
    (void)state;
    char dir[64];
    tu_mkdtemp(dir, sizeof(dir), "wal");
    char path[128];
    snprintf(path, sizeof(path), "%s/000001.log", dir);
    lsm_env *env = lsm_env_default();
    lsm_wfile *f;
    assert_null(env->new_wfile(env, path, &f));
    assert_null(f->ops->preallocate(f, 1 << 20, WFILE_MAPPED));
    wal_writer *w = wal_writer_new(f, 0);
    enum { N = 500 };
    size_t lens[N];
    char *rec = malloc(3 * BLOCK);
    assert_non_null(rec);
    for (size_t i = 0; i < N; i++) {
        lens[i] = i % 50 == 0 ? 2 * BLOCK + i : i * 7 % 1000;
        fill_record(rec, lens[i], 60, i);
        assert_null(wal_add_record(w, rec, lens[i]));
        if (i % 100 == 0)
            assert_null(wal_sync(w));
    }
    uint64_t total = wal_offset(w);
    assert_null(wal_writer_close(w));
    uint64_t size;
    assert_null(env->file_size(env, path, &size));
    assert_int_equal(size, total);

    lsm_sfile *sf;
    assert_null(env->new_sfile(env, path, &sf));
    wal_reader *r = wal_reader_new(sf, path, true);
    for (size_t i = 0; i < N; i++) {
        const char *got;
        size_t n;
        bool eof;
        assert_null(wal_read_record(r, &got, &n, &eof));
        assert_false(eof);
        assert_int_equal(n, lens[i]);
        fill_record(rec, lens[i], 60, i);
        assert_memory_equal(got, rec, n);
    }
    const char *got;
    size_t n;
    bool eof;
    assert_null(wal_read_record(r, &got, &n, &eof));
    assert_true(eof);
    assert_int_equal(wal_reader_stats_get(r)->records, N);
    wal_reader_free(r);
    free(rec);
    assert_null(env->remove_file(env, path));
    assert_null(env->remove_dir(env, dir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_record_layout),
        cmocka_unit_test(test_first_middle_last_layout),
        cmocka_unit_test(test_first_last_layout),
        cmocka_unit_test(test_many_blocks),
        cmocka_unit_test(test_record_exactly_fills_block),
        cmocka_unit_test(test_block_tail_0_to_7),
        cmocka_unit_test(test_empty_records),
        cmocka_unit_test(test_random_round_trip),
        cmocka_unit_test(test_writer_resumes_at_offset),
        cmocka_unit_test(test_writer_forwards_flush_sync),
        cmocka_unit_test(test_small_record_is_one_append),
        cmocka_unit_test(test_writer_append_failure_is_sticky),
        cmocka_unit_test(test_reader_io_error),
        cmocka_unit_test(test_torn_tail_small_record),
        cmocka_unit_test(test_torn_tail_across_block),
        cmocka_unit_test(test_torn_tail_after_padding),
        cmocka_unit_test(test_torn_tail_empty_first),
        cmocka_unit_test(test_torn_tail_three_blocks),
        cmocka_unit_test(test_bit_flips_in_middle),
        cmocka_unit_test(test_zeroed_block_in_middle),
        cmocka_unit_test(test_orphan_and_unfinished_fragments),
        cmocka_unit_test(test_fragment_one_past_block),
        cmocka_unit_test(test_zero_filled_tail),
        cmocka_unit_test(test_random_garbage_never_crashes),
        cmocka_unit_test(test_real_file_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
