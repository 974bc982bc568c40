/* test_table.c — tables: build/read round trips (random keys and versions,
 * empty to 100 KiB values, compressible and incompressible data, several
 * block sizes, with and without filter, cache and compression); gets,
 * seeks and iteration both ways; a byte flipped anywhere (data blocks and
 * their trailers, filter, index, footer) and every truncation give a
 * corruption status, never a crash or a wrong answer; write errors stick;
 * the table cache over real files; concurrent readers. */
#include "testutil.h"

#include "cache.h"
#include "crc32c.h"
#include "dbformat.h"
#include "env.h"
#include "filename.h"
#include "status.h"
#include "table.h"
#include "table_cache.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rnd(void)
{
    return tu_xorshift64(&rng_state);
}

/* A wfile into `out` whose appends fail with ENOSPC after `fail_after` (< 0:
 * never). */
static tu_wfile *mem_wfile(buf *out, long fail_after)
{
    tu_wfile *w = tu_wfile_new(out);
    w->fail_after = fail_after;
    w->fail_errno = ENOSPC;
    return w;
}

/* ------------------------------------------------------------- model */

typedef struct entry {
    char *ikey;
    size_t klen;
    char *val;
    size_t vlen;
} entry;

typedef struct model {
    entry *e;
    size_t n;
    size_t raw_bytes; /* keys + values */
    size_t val_bytes;
} model;

enum value_kind { COMPRESSIBLE, INCOMPRESSIBLE };

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return ikey_compare(x->ikey, x->klen, y->ikey, y->klen);
}

static char *make_ikey(const char *u, size_t ulen, uint64_t seq, enum value_type t, size_t *n)
{
    char *k = malloc(ulen + IKEY_TRAILER);
    memcpy(k, u, ulen);
    encode_fixed64(k + ulen, pack_seq_type(seq, t));
    *n = ulen + IKEY_TRAILER;
    return k;
}

static size_t value_size(void)
{
    uint64_t r = rnd() % 1000;
    if (r < 100)
        return 0;
    if (r < 104)
        return 100 * 1024;
    return (size_t)(1 + rnd() % 300);
}

static void fill_value(char *v, size_t n, enum value_kind kind)
{
    if (kind == COMPRESSIBLE) {
        uint64_t seed = rnd() % 4;
        for (size_t i = 0; i < n; i++)
            v[i] = (char)("abcdefgh"[(i / 7 + seed) % 8]);
    } else {
        for (size_t i = 0; i < n; i++)
            v[i] = (char)rnd();
    }
}

/* nkeys random user keys (from a small alphabet, so they share prefixes),
 * each with 1..3 versions (newest first; some deletions). */
static model gen_model(size_t nkeys, enum value_kind kind)
{
    model m = {calloc(nkeys * 3 + 1, sizeof(entry)), 0, 0, 0};
    uint64_t seq = 1;
    for (size_t i = 0; i < nkeys; i++) {
        char u[64];
        size_t ulen = 1 + (size_t)(rnd() % 24);
        for (size_t j = 0; j < ulen; j++)
            u[j] = (char)('a' + rnd() % 4);
        int versions = 1 + (int)(rnd() % 3);
        for (int v = 0; v < versions; v++) {
            entry *e = &m.e[m.n++];
            bool del = rnd() % 8 == 0;
            e->ikey = make_ikey(u, ulen, seq++, del ? TYPE_DELETION : TYPE_VALUE, &e->klen);
            e->vlen = del ? 0 : value_size();
            e->val = malloc(e->vlen + 1);
            fill_value(e->val, e->vlen, kind);
            m.raw_bytes += e->klen + e->vlen;
            m.val_bytes += e->vlen;
        }
    }
    qsort(m.e, m.n, sizeof(entry), entry_cmp);
    /* A user key drawn twice just has more versions: sequences are unique,
     * so no two internal keys are equal and the order is strict. */
    return m;
}

static void free_model(model *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].ikey);
        free(m->e[i].val);
    }
    free(m->e);
}

static void build_table(const model *m, const table_options *o, buf *file)
{
    file->len = 0;
    lsm_wfile *w = &mem_wfile(file, -1)->base;
    table_builder *b = table_builder_new(o, w);
    assert_non_null(b);
    for (size_t i = 0; i < m->n; i++)
        assert_null(table_builder_add(b, m->e[i].ikey, m->e[i].klen, m->e[i].val, m->e[i].vlen));
    assert_null(table_builder_finish(b));
    assert_int_equal(table_builder_entries(b), m->n);
    assert_int_equal(table_builder_file_size(b), file->len);
    if (m->n > 0) {
        size_t n;
        const char *k = table_builder_smallest(b, &n);
        assert_int_equal(n, m->e[0].klen);
        assert_memory_equal(k, m->e[0].ikey, n);
        k = table_builder_largest(b, &n);
        assert_int_equal(n, m->e[m->n - 1].klen);
        assert_memory_equal(k, m->e[m->n - 1].ikey, n);
    }
    table_builder_free(b);
    assert_null(w->ops->close(w));
}

/* A model of nkeys keys with values cut to max_val bytes (SIZE_MAX: as
 * drawn), and in *file (initialised here) the table built from it. */
static model model_table(size_t nkeys, enum value_kind kind, size_t max_val, const table_options *o,
                         buf *file)
{
    model m = gen_model(nkeys, kind);
    for (size_t i = 0; i < m.n; i++)
        if (m.e[i].vlen > max_val)
            m.e[i].vlen = max_val;
    buf_init(file);
    build_table(&m, o, file);
    return m;
}

static lsm_status *open_mem(const char *data, size_t n, cache *c, sstable **t)
{
    return table_open(&tu_rfile_new(data, n)->base, n, 7, c, t);
}

/* ------------------------------------------------------------- checks */

static void assert_entry(iter *it, const entry *e)
{
    assert_true(iter_valid(it));
    size_t kn, vn;
    const char *k = iter_key(it, &kn), *v = iter_value(it, &vn);
    assert_int_equal(kn, e->klen);
    assert_memory_equal(k, e->ikey, kn);
    assert_int_equal(vn, e->vlen);
    if (vn)
        assert_memory_equal(v, e->val, vn);
}

static size_t lower_bound(const model *m, const char *k, size_t n)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ikey_compare(m->e[mid].ikey, m->e[mid].klen, k, n) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void check_iteration(sstable *t, const model *m, const lsm_read_options *ro)
{
    iter *it = table_iter_new(t, ro, NULL, NULL);
    assert_non_null(it);
    iter_seek_first(it);
    for (size_t i = 0; i < m->n; i++) {
        assert_entry(it, &m->e[i]);
        iter_next(it);
    }
    assert_false(iter_valid(it));
    iter_seek_last(it);
    for (size_t i = m->n; i-- > 0;) {
        assert_entry(it, &m->e[i]);
        iter_prev(it);
    }
    assert_false(iter_valid(it));
    /* Seeks to every key, with a step back and forth across blocks. */
    for (size_t i = 0; i < m->n; i++) {
        iter_seek(it, m->e[i].ikey, m->e[i].klen);
        assert_entry(it, &m->e[i]);
        if (i > 0) {
            iter_prev(it);
            assert_entry(it, &m->e[i - 1]);
            iter_next(it);
            assert_entry(it, &m->e[i]);
        }
    }
    /* Random targets: (random user key, random seq). */
    for (int r = 0; r < 300; r++) {
        char u[32];
        size_t ulen = (size_t)(rnd() % 26);
        for (size_t j = 0; j < ulen; j++)
            u[j] = (char)('a' + rnd() % 4);
        size_t n;
        char *k = make_ikey(u, ulen, rnd() % (m->n * 2 + 2), TYPE_SEEK, &n);
        size_t want = lower_bound(m, k, n);
        iter_seek(it, k, n);
        if (want == m->n)
            assert_false(iter_valid(it));
        else
            assert_entry(it, &m->e[want]);
        free(k);
    }
    assert_null(iter_status(it));
    iter_free(it);
}

typedef struct found {
    int calls;
    char *key, *val;
    size_t klen, vlen;
} found;

static void on_found(void *ctx, const char *k, size_t kn, const char *v, size_t vn)
{
    found *f = ctx;
    f->calls++;
    free(f->key);
    free(f->val);
    f->key = malloc(kn);
    memcpy(f->key, k, kn);
    f->klen = kn;
    f->val = malloc(vn + 1);
    memcpy(f->val, v, vn);
    f->vlen = vn;
}

static void found_reset(found *f)
{
    free(f->key);
    free(f->val);
    memset(f, 0, sizeof(*f));
}

/* Gets at every entry's own sequence and just below it. */
static void check_gets(sstable *t, const model *m, const lsm_read_options *ro)
{
    found f = {0};
    for (size_t i = 0; i < m->n; i++) {
        const entry *e = &m->e[i];
        size_t ulen = e->klen - IKEY_TRAILER;
        uint64_t seq = ikey_tag(e->ikey, e->klen) >> 8;
        size_t n;
        char *k = make_ikey(e->ikey, ulen, seq, TYPE_SEEK, &n);
        assert_null(table_get(t, ro, k, n, on_found, &f));
        assert_int_equal(f.calls, 1);
        assert_int_equal(f.klen, e->klen);
        assert_memory_equal(f.key, e->ikey, e->klen);
        assert_int_equal(f.vlen, e->vlen);
        if (e->vlen)
            assert_memory_equal(f.val, e->val, e->vlen);
        found_reset(&f);
        free(k);
        /* Below this version: the next (older) version of the same key,
         * or nothing. */
        k = make_ikey(e->ikey, ulen, seq - 1, TYPE_SEEK, &n);
        assert_null(table_get(t, ro, k, n, on_found, &f));
        bool older =
            i + 1 < m->n &&
            bytes_compare(m->e[i + 1].ikey, m->e[i + 1].klen - IKEY_TRAILER, e->ikey, ulen) == 0;
        assert_int_equal(f.calls, older ? 1 : 0);
        if (older)
            assert_memory_equal(f.key, m->e[i + 1].ikey, m->e[i + 1].klen);
        found_reset(&f);
        free(k);
    }
    /* Absent user keys (digits never appear in generated keys). */
    for (int r = 0; r < 1000; r++) {
        char u[16];
        int ulen = snprintf(u, sizeof(u), "%d", r);
        size_t n;
        char *k = make_ikey(u, (size_t)ulen, MAX_SEQUENCE, TYPE_SEEK, &n);
        assert_null(table_get(t, ro, k, n, on_found, &f));
        assert_int_equal(f.calls, 0);
        free(k);
    }
}

static void check_offsets(sstable *t, const model *m, size_t file_size)
{
    uint64_t prev = 0;
    for (size_t i = 0; i < m->n; i++) {
        uint64_t off = table_approximate_offset(t, m->e[i].ikey, m->e[i].klen);
        assert_true(off >= prev);
        assert_true(off < file_size);
        prev = off;
    }
    size_t n;
    char *k = make_ikey("zzzzzzzzzzzzzzzzzzzzzzzzzzzzz", 29, 1, TYPE_SEEK, &n);
    uint64_t end = table_approximate_offset(t, k, n);
    assert_true(end >= prev && end < file_size);
    if (m->raw_bytes > 100000)
        assert_true(end > file_size / 2);
    free(k);
}

/* Opens the table in file and checks every entry of m by iteration and by
 * point reads. */
static void check_table(const buf *file, const model *m)
{
    sstable *t;
    assert_null(open_mem(file->data, file->len, NULL, &t));
    check_iteration(t, m, NULL);
    check_gets(t, m, NULL);
    table_free(t);
}

static void round_trip(size_t nkeys, enum value_kind kind, const table_options *o, bool use_cache)
{
    buf file;
    model m = model_table(nkeys, kind, SIZE_MAX, o, &file);
    if (o->compression && kind == COMPRESSIBLE)
        assert_true(file.len < m.raw_bytes / 2);
    if (kind == INCOMPRESSIBLE)
        assert_true(file.len >= m.val_bytes); /* stored raw, not inflated by lz4 */
    cache *c = use_cache ? cache_new(1 << 20) : NULL;
    sstable *t;
    assert_null(open_mem(file.data, file.len, c, &t));
    lsm_read_options ro = {NULL, false, true};
    check_iteration(t, &m, &ro);
    check_gets(t, &m, &ro);
    check_offsets(t, &m, file.len);
    if (c != NULL) {
        uint64_t hits, misses;
        cache_stats(c, &hits, &misses);
        assert_true(hits > 0);
        assert_true(cache_total_charge(c) > 0);
        /* fill_cache = false reads around the cache */
        cache_prune(c);
        lsm_read_options nofill = {NULL, true, false};
        check_iteration(t, &m, &nofill);
        assert_int_equal(cache_total_charge(c), 0);
    }
    check_iteration(t, &m, NULL);
    table_free(t);
    cache_free(c);
    buf_free(&file);
    free_model(&m);
}

static void test_round_trip(void **state)
{
    (void)state;
    table_options o = {4096, 10, true};
    round_trip(2000, COMPRESSIBLE, &o, true);
    round_trip(2000, INCOMPRESSIBLE, &o, true);
    o.compression = false;
    round_trip(1000, COMPRESSIBLE, &o, false);
    o = (table_options){1, 10, true}; /* one entry per block */
    round_trip(300, COMPRESSIBLE, &o, true);
    o = (table_options){64 << 10, 0, true}; /* big blocks, no filter */
    round_trip(2000, INCOMPRESSIBLE, &o, true);
    o = (table_options){200, 4, false};
    round_trip(500, INCOMPRESSIBLE, &o, false);
}

/* lz4 is given up on after a run of blocks it cannot shrink and tried
 * again now and then: a table whose first half does not compress and whose
 * second half does comes out with that second half compressed, and reads
 * back exactly. */
static void test_compression_resumes(void **state)
{
    (void)state;
    table_options o = {4096, 10, true};
    model m = gen_model(3000, INCOMPRESSIBLE);
    size_t tail = 0;
    for (size_t i = m.n / 2; i < m.n; i++) {
        fill_value(m.e[i].val, m.e[i].vlen, COMPRESSIBLE);
        tail += m.e[i].vlen;
    }
    assert_true(tail > 1000000);
    buf file;
    buf_init(&file);
    build_table(&m, &o, &file);
    assert_true(file.len >= m.val_bytes - tail);    /* the first half raw */
    assert_true(file.len < m.raw_bytes - tail / 2); /* the second half compressed */
    check_table(&file, &m);
    buf_free(&file);
    free_model(&m);
}

/* Every block is compressed on its own (table_builder.c keeps lz4's state
 * from block to block): values that repeat only across blocks, one 3 KiB
 * random value in every entry, one entry a block, would shrink to nothing
 * with the previous block as history, and each block could then not be
 * decoded alone. They stay raw and every entry reads back, by point reads
 * in any order and by iteration. */
static void test_blocks_compressed_independently(void **state)
{
    (void)state;
    table_options o = {1, 10, true}; /* one entry per block */
    model m = gen_model(300, INCOMPRESSIBLE);
    char same[3072];
    fill_value(same, sizeof same, INCOMPRESSIBLE);
    m.val_bytes = 0;
    for (size_t i = 0; i < m.n; i++) {
        if (m.e[i].vlen == 0)
            continue;
        free(m.e[i].val);
        m.e[i].val = malloc(sizeof same);
        memcpy(m.e[i].val, same, sizeof same);
        m.e[i].vlen = sizeof same;
        m.val_bytes += sizeof same;
    }
    buf file;
    buf_init(&file);
    build_table(&m, &o, &file);
    assert_true(file.len >= m.val_bytes); /* nothing to gain within a block */
    check_table(&file, &m);
    buf_free(&file);
    free_model(&m);
}

static void test_empty_and_single(void **state)
{
    (void)state;
    table_options o = {4096, 10, true};
    model m = {calloc(2, sizeof(entry)), 0, 0, 0};
    buf file;
    buf_init(&file);
    build_table(&m, &o, &file);
    check_table(&file, &m);

    m.e[0].ikey = make_ikey("only", 4, 5, TYPE_VALUE, &m.e[0].klen);
    m.e[0].val = malloc(1);
    m.e[0].vlen = 0;
    m.n = 1;
    build_table(&m, &o, &file);
    check_table(&file, &m);
    buf_free(&file);
    free_model(&m);
}

/* Keys of all 0xff bytes and keys where the separator cannot be shortened. */
static void test_separator_edges(void **state)
{
    (void)state;
    static const char *users[] = {"a",  "a\x01", "a\xfe", "a\xff",    "a\xff\xff",
                                  "ab", "b",     "\xff",  "\xff\xff", "\xff\xff\xff"};
    size_t nu = sizeof(users) / sizeof(users[0]);
    model m = {calloc(nu, sizeof(entry)), nu, 0, 0};
    for (size_t i = 0; i < nu; i++) {
        m.e[i].ikey = make_ikey(users[i], strlen(users[i]), 100 + i, TYPE_VALUE, &m.e[i].klen);
        m.e[i].val = malloc(200);
        m.e[i].vlen = 200;
        memset(m.e[i].val, (int)i, 200);
    }
    qsort(m.e, m.n, sizeof(entry), entry_cmp);
    table_options o = {1, 10, false};
    buf file;
    buf_init(&file);
    build_table(&m, &o, &file);
    check_table(&file, &m);
    buf_free(&file);
    free_model(&m);
}

/* --------------------------------------------------------- corruption */

typedef struct layout {
    uint64_t filter_off, filter_size, index_off, index_size, footer_off;
} layout;

static layout read_layout(const buf *file)
{
    const char *f = file->data + file->len - TABLE_FOOTER_SIZE;
    layout l = {decode_fixed64(f), decode_fixed64(f + 8), decode_fixed64(f + 16),
                decode_fixed64(f + 24), file->len - TABLE_FOOTER_SIZE};
    return l;
}

/* Uses a damaged table every way. Nothing may crash or return data that is
 * not the model's; something must report corruption. Returns true if the
 * damage was reported. */
static bool exercise_damaged(const char *data, size_t n, const model *m, cache *c)
{
    sstable *t;
    lsm_status *st = open_mem(data, n, c, &t);
    if (st != NULL) {
        assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
        lsm_status_free(st);
        return true;
    }
    bool reported = false;
    iter *it = table_iter_new(t, NULL, NULL, NULL);
    size_t i = 0;
    for (iter_seek_first(it); iter_valid(it); iter_next(it), i++) {
        assert_true(i < m->n);
        assert_entry(it, &m->e[i]); /* whatever is yielded is right */
    }
    st = iter_status(it);
    if (st != NULL) {
        assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
        lsm_status_free(st);
        reported = true;
    } else {
        assert_int_equal(i, m->n);
    }
    size_t j = m->n;
    for (iter_seek_last(it); iter_valid(it); iter_prev(it)) {
        assert_true(j > 0);
        assert_entry(it, &m->e[--j]);
    }
    iter_free(it);

    found f = {0};
    for (size_t k = 0; k < m->n; k++) {
        const entry *e = &m->e[k];
        st = table_get(t, NULL, e->ikey, e->klen, on_found, &f);
        if (st != NULL) {
            assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
            lsm_status_free(st);
            reported = true;
        } else {
            assert_int_equal(f.calls, 1); /* the filter still has it */
            assert_int_equal(f.vlen, e->vlen);
            if (e->vlen)
                assert_memory_equal(f.val, e->val, e->vlen);
        }
        found_reset(&f);
    }
    table_free(t);
    if (c != NULL)
        cache_prune(c); /* the next copy must be read, not found cached */
    return reported;
}

static void flip_everywhere(bool compression)
{
    table_options o = {256, 10, compression};
    buf file;
    model m = model_table(60, COMPRESSIBLE, 64, &o, &file); /* small: no 100 KiB values */
    if (compression) {                                      /* lz4 blocks are among those damaged */
        buf plain;
        buf_init(&plain);
        table_options po = o;
        po.compression = false;
        build_table(&m, &po, &plain);
        assert_true(file.len < plain.len * 3 / 4);
        buf_free(&plain);
    }
    layout l = read_layout(&file);
    assert_true(l.filter_size > 0 && l.index_off > l.filter_off);
    cache *c = cache_new(1 << 16);
    size_t regions[4] = {0};
    char *copy = malloc(file.len);
    for (size_t off = 0; off < file.len; off++) {
        memcpy(copy, file.data, file.len);
        copy[off] ^= (char)(1u << (off % 8));
        int region = off < l.filter_off ? 0 : off < l.index_off ? 1 : off < l.footer_off ? 2 : 3;
        /* Every flipped byte is caught: checksums cover all of it. */
        if (exercise_damaged(copy, file.len, &m, c))
            regions[region]++;
        else
            fail_msg("flip at offset %zu (region %d) went unnoticed", off, region);
    }
    assert_true(regions[0] > 0 && regions[1] > 0 && regions[2] > 0 && regions[3] == 48);
    free(copy);
    cache_free(c);
    buf_free(&file);
    free_model(&m);
}

static void test_flip_every_byte(void **state)
{
    (void)state;
    flip_everywhere(true);
    flip_everywhere(false);
}

static void test_truncated(void **state)
{
    (void)state;
    table_options o = {512, 10, true};
    buf file;
    model m = model_table(50, INCOMPRESSIBLE, 50, &o, &file);
    for (size_t len = 0; len < file.len; len++) {
        sstable *t;
        lsm_status *st = open_mem(file.data, len, NULL, &t);
        assert_non_null(st); /* the footer is not where it should be */
        assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
        lsm_status_free(st);
        /* The version says the file is whole, but it is short: reads of
         * the missing part come back short. */
        st = table_open(&tu_rfile_new(file.data, len)->base, file.len, 9, NULL, &t);
        if (st == NULL) {
            fail_msg("open of a table cut to %zu bytes succeeded", len);
        }
        assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
        lsm_status_free(st);
    }
    buf_free(&file);
    free_model(&m);
}

/* Data blocks lost after open: iteration and gets report it. */
static void test_read_errors(void **state)
{
    (void)state;
    table_options o = {1024, 10, true};
    buf file;
    model m = model_table(200, COMPRESSIBLE, SIZE_MAX, &o, &file);
    tu_rfile *f = tu_rfile_new(file.data, file.len);
    sstable *t;
    assert_null(table_open(&f->base, file.len, 3, NULL, &t));
    f->fail_reads = true;
    iter *it = table_iter_new(t, NULL, NULL, NULL);
    iter_seek_first(it);
    assert_false(iter_valid(it));
    ASSERT_FAILS(iter_status(it), LSM_IO_ERROR, NULL);
    iter_seek_first(it); /* errors stick */
    assert_false(iter_valid(it));
    iter_free(it);
    found fd = {0};
    lsm_status *st = table_get(t, NULL, m.e[0].ikey, m.e[0].klen, on_found, &fd);
    assert_int_equal(lsm_status_code(st), LSM_IO_ERROR);
    assert_int_equal(fd.calls, 0);
    lsm_status_free(st);
    /* Truncated under an open table: short reads are corruption. */
    f->fail_reads = false;
    f->len /= 2;
    it = table_iter_new(t, NULL, NULL, NULL);
    size_t i = 0;
    for (iter_seek_first(it); iter_valid(it); iter_next(it))
        assert_entry(it, &m.e[i++]);
    st = iter_status(it);
    assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
    assert_non_null(strstr(lsm_status_message(st), "table 000003"));
    lsm_status_free(st);
    iter_free(it);
    /* A get of the lost half (a compressed block, read alone): the same. */
    fd.calls = 0;
    st = table_get(t, NULL, m.e[m.n - 1].ikey, m.e[m.n - 1].klen, on_found, &fd);
    assert_int_equal(lsm_status_code(st), LSM_CORRUPTION);
    assert_int_equal(fd.calls, 0);
    lsm_status_free(st);
    table_free(t);
    buf_free(&file);
    free_model(&m);
}

/* A forward scan reads many blocks per pread (readahead), not one each;
 * a backward scan and gets read block by block; a read that fails or
 * comes up short mid-scan is reported as before. */
static void test_scan_reads_ahead(void **state)
{
    (void)state;
    table_options o = {1024, 10, true};
    buf file;
    model m = model_table(3000, INCOMPRESSIBLE, SIZE_MAX, &o, &file);
    assert_true(file.len > 1024 * 1024); /* over 1000 blocks, several buffers */
    tu_rfile *f = tu_rfile_new(file.data, file.len);
    sstable *t;
    assert_null(table_open(&f->base, file.len, 3, NULL, &t));
    size_t opened = f->reads, i = 0;
    iter *it = table_iter_new(t, NULL, NULL, NULL);
    for (iter_seek_first(it); iter_valid(it); iter_next(it))
        assert_entry(it, &m.e[i++]);
    assert_int_equal(i, m.n);
    ASSERT_OK(iter_status(it));
    size_t blocks_min = file.len / 2048; /* blocks of ~1 KiB, values to 100 KiB */
    if (f->reads - opened > blocks_min / 8)
        fail_msg("%zu preads for a scan of %zu bytes", f->reads - opened, file.len);
    /* Without filling the cache: raw blocks are used where they lie in the
     * readahead buffer, the same entries come back, and a damaged byte in
     * one is caught. */
    lsm_read_options nofill = {NULL, true, false};
    iter *vit = table_iter_new(t, &nofill, NULL, NULL);
    i = 0;
    for (iter_seek_first(vit); iter_valid(vit); iter_next(vit))
        assert_entry(vit, &m.e[i++]);
    assert_int_equal(i, m.n);
    ASSERT_OK(iter_status(vit));
    iter_free(vit);
    f->data[file.len / 4] ^= 1; /* inside a data block read ahead */
    vit = table_iter_new(t, &nofill, NULL, NULL);
    for (iter_seek_first(vit); iter_valid(vit); iter_next(vit))
        ;
    ASSERT_FAILS(iter_status(vit), LSM_CORRUPTION, "checksum");
    iter_free(vit);
    f->data[file.len / 4] ^= 1;
    /* Backwards: block by block, still right. */
    i = m.n;
    for (iter_seek_last(it); iter_valid(it); iter_prev(it))
        assert_entry(it, &m.e[--i]);
    assert_int_equal(i, 0);
    ASSERT_OK(iter_status(it));
    /* A read failing mid-scan. */
    iter_seek_first(it);
    for (int k = 0; k < 500 && iter_valid(it); k++)
        iter_next(it);
    f->fail_reads = true;
    while (iter_valid(it))
        iter_next(it);
    ASSERT_FAILS(iter_status(it), LSM_IO_ERROR, NULL);
    iter_free(it);
    f->fail_reads = false;
    /* Cut short under the scan: what precedes the cut reads right, then
     * corruption. */
    f->len = file.len * 2 / 3;
    it = table_iter_new(t, NULL, NULL, NULL);
    i = 0;
    for (iter_seek_first(it); iter_valid(it); iter_next(it))
        assert_entry(it, &m.e[i++]);
    assert_true(i > 0 && i < m.n);
    ASSERT_FAILS(iter_status(it), LSM_CORRUPTION, "table 000003");
    iter_free(it);
    table_free(t);
    buf_free(&file);
    free_model(&m);
}

static void test_not_a_table(void **state)
{
    (void)state;
    char junk[4096];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)rnd();
    sstable *t;
    ASSERT_FAILS(open_mem(junk, sizeof(junk), NULL, &t), LSM_CORRUPTION, NULL);
    /* A well-formed footer of a future format version. */
    table_options o = {4096, 10, true};
    buf file;
    model m = model_table(10, COMPRESSIBLE, SIZE_MAX, &o, &file);
    char *f = file.data + file.len - TABLE_FOOTER_SIZE;
    encode_fixed32(f + 32, TABLE_FORMAT_VERSION + 1);
    encode_fixed32(f + 36, crc32c_mask(crc32c(f, 36)));
    ASSERT_FAILS(open_mem(file.data, file.len, NULL, &t), LSM_NOT_SUPPORTED, NULL);
    buf_free(&file);
    free_model(&m);
}

static void test_write_errors_stick(void **state)
{
    (void)state;
    model m = gen_model(500, INCOMPRESSIBLE);
    table_options o = {1024, 10, true};
    buf file;
    buf_init(&file);
    lsm_wfile *w = &mem_wfile(&file, 3)->base;
    table_builder *b = table_builder_new(&o, w);
    lsm_status *first = NULL;
    size_t i;
    for (i = 0; i < m.n && first == NULL; i++)
        first = table_builder_add(b, m.e[i].ikey, m.e[i].klen, m.e[i].val, m.e[i].vlen);
    assert_non_null(first);
    assert_int_equal(lsm_status_code(first), LSM_NO_SPACE);
    lsm_status_free(first);
    assert_true(i < m.n); /* the failure came early: a later add is refused */
    ASSERT_FAILS(table_builder_add(b, m.e[i].ikey, m.e[i].klen, m.e[i].val, 1), LSM_NO_SPACE, NULL);
    ASSERT_FAILS(table_builder_finish(b), LSM_NO_SPACE, NULL);
    table_builder_free(b);
    w->ops->close(w);

    /* Failing while finishing (filter, index or footer write). */
    for (long ok = 0; ok < 8; ok++) {
        model s = gen_model(3, COMPRESSIBLE);
        file.len = 0;
        tu_wfile *mw = mem_wfile(&file, 1000);
        w = &mw->base;
        b = table_builder_new(&o, w);
        for (i = 0; i < s.n; i++)
            assert_null(table_builder_add(b, s.e[i].ikey, s.e[i].klen, s.e[i].val,
                                          s.e[i].vlen < 10 ? s.e[i].vlen : 10));
        mw->fail_after = ok;
        lsm_status *fin = table_builder_finish(b);
        if (fin == NULL) {
            assert_true(ok >= 7); /* data, filter, index: 2 appends each; footer 1 */
        } else {
            assert_int_equal(lsm_status_code(fin), LSM_NO_SPACE);
            lsm_status_free(fin);
        }
        table_builder_free(b);
        w->ops->close(w);
        free_model(&s);
    }
    buf_free(&file);
    free_model(&m);
}

/* ------------------------------------------------- table cache, threads */

static void write_file(const char *path, const buf *data)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data->data, 1, data->len, f), data->len);
    assert_int_equal(fclose(f), 0);
}

static void test_table_cache(void **state)
{
    (void)state;
    char tmpdir[64];
    tu_mkdtemp(tmpdir, sizeof(tmpdir), "table");
    table_options o = {4096, 10, true};
    model m[3];
    buf file;
    buf_init(&file);
    for (int i = 0; i < 3; i++) {
        m[i] = gen_model(300, i == 1 ? INCOMPRESSIBLE : COMPRESSIBLE);
        build_table(&m[i], &o, &file);
        char *path = table_file_name(tmpdir, (uint64_t)i + 1);
        write_file(path, &file);
        free(path);
    }
    cache *bc = cache_new(1 << 20);
    table_cache *tc = table_cache_new(lsm_env_default(), tmpdir, bc, 1, false); /* one open at a time */
    assert_non_null(tc);
    found f = {0};
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++) {
            const entry *e = &m[i].e[m[i].n / 2];
            uint64_t fsize = 0; /* round 0: ask the env */
            if (round == 1) {
                char *path = table_file_name(tmpdir, (uint64_t)i + 1);
                assert_null(lsm_env_default()->file_size(lsm_env_default(), path, &fsize));
                free(path);
            }
            assert_null(
                table_cache_get(tc, NULL, (uint64_t)i + 1, fsize, e->ikey, e->klen, on_found, &f));
            assert_int_equal(f.calls, 1);
            assert_int_equal(f.vlen, e->vlen);
            found_reset(&f);
        }
    }
    /* Iterators pin their tables even past the capacity of 1. */
    iter *its[3];
    for (int i = 0; i < 3; i++)
        its[i] = table_cache_iter(tc, NULL, (uint64_t)i + 1, 0);
    for (int i = 0; i < 3; i++) {
        size_t k = 0;
        for (iter_seek_first(its[i]); iter_valid(its[i]); iter_next(its[i]))
            assert_entry(its[i], &m[i].e[k++]);
        assert_int_equal(k, m[i].n);
        assert_null(iter_status(its[i]));
    }
    /* Evicting a table in use: the iterator keeps working. */
    table_cache_evict(tc, 1);
    iter_seek_last(its[0]);
    assert_entry(its[0], &m[0].e[m[0].n - 1]);
    for (int i = 0; i < 3; i++)
        iter_free(its[i]);

    uint64_t off;
    assert_null(table_cache_approximate_offset(tc, 2, 0, m[1].e[m[1].n - 1].ikey,
                                               m[1].e[m[1].n - 1].klen, &off));
    assert_true(off > 0);

    /* A missing table: an error, and an empty iterator carrying it. */
    lsm_status *st = table_cache_get(tc, NULL, 99, 0, m[0].e[0].ikey, m[0].e[0].klen, on_found, &f);
    assert_non_null(st);
    lsm_status_free(st);
    iter *it = table_cache_iter(tc, NULL, 99, 1000);
    iter_seek_first(it);
    assert_false(iter_valid(it));
    st = iter_status(it);
    assert_non_null(st);
    lsm_status_free(st);
    iter_free(it);
    /* A damaged file: corruption through the cache too. */
    char *path = table_file_name(tmpdir, 4);
    file.len = 100;
    memset(file.data, 0, 100);
    write_file(path, &file);
    ASSERT_FAILS(table_cache_get(tc, NULL, 4, 0, m[0].e[0].ikey, m[0].e[0].klen, on_found, &f),
                 LSM_CORRUPTION, NULL);
    free(path);

    table_cache_free(tc);
    cache_free(bc);
    for (int i = 0; i < 3; i++)
        free_model(&m[i]);
    tu_rmtree(tmpdir);
    buf_free(&file);
}

typedef struct reader {
    sstable *t;
    const model *m;
    uint64_t seed;
    long wrong;
} reader;

static void *read_work(void *arg)
{
    reader *r = arg;
    uint64_t x = r->seed;
    found f = {0};
    for (int i = 0; i < 3000; i++) {
        const entry *e = &r->m->e[tu_xorshift64(&x) % r->m->n];
        lsm_status *st = table_get(r->t, NULL, e->ikey, e->klen, on_found, &f);
        if (st != NULL || f.calls != 1 || f.vlen != e->vlen ||
            (e->vlen && memcmp(f.val, e->val, e->vlen) != 0))
            r->wrong++;
        lsm_status_free(st);
        found_reset(&f);
        if (i % 500 == 0) { /* and a short scan */
            iter *it = table_iter_new(r->t, NULL, NULL, NULL);
            iter_seek(it, e->ikey, e->klen);
            for (int k = 0; k < 50 && iter_valid(it); k++)
                iter_next(it);
            lsm_status *s2 = iter_status(it);
            if (s2 != NULL)
                r->wrong++;
            lsm_status_free(s2);
            iter_free(it);
        }
    }
    return NULL;
}

static void test_concurrent_readers(void **state)
{
    (void)state;
    table_options o = {2048, 10, true};
    buf file;
    model m = model_table(1000, COMPRESSIBLE, SIZE_MAX, &o, &file);
    cache *c = cache_new(64 << 10); /* small: constant eviction */
    sstable *t;
    assert_null(open_mem(file.data, file.len, c, &t));
    reader r[4];
    for (int i = 0; i < 4; i++)
        r[i] = (reader){t, &m, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 7), 0};
    tu_run_threads(4, read_work, r, sizeof(r[0]));
    for (int i = 0; i < 4; i++)
        assert_int_equal(r[i].wrong, 0);
    table_free(t);
    cache_free(c);
    buf_free(&file);
    free_model(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_compression_resumes),
        cmocka_unit_test(test_blocks_compressed_independently),
        cmocka_unit_test(test_empty_and_single), cmocka_unit_test(test_separator_edges),
        cmocka_unit_test(test_flip_every_byte),  cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_read_errors),      cmocka_unit_test(test_scan_reads_ahead),
        cmocka_unit_test(test_not_a_table),      cmocka_unit_test(test_write_errors_stick),
        cmocka_unit_test(test_table_cache),      cmocka_unit_test(test_concurrent_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
