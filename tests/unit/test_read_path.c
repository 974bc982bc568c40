/* test_read_path.c — the read path's fast paths checked against plain
 * references: block iterators walked at random (the record kept for
 * stepping backward, intervals and keys too large to record, a block
 * swapped under a record), the merging iterator's tournament over many
 * children in both directions, keycmp against bytes_compare/ikey_compare,
 * and the POSIX env's table files (read with pread and through the guarded
 * mapping, also when cut short: an error, never a signal). */
#include "testutil.h"

#include "block.h"
#include "dbformat.h"
#include "iter.h"
#include "keycmp.h"
#include "lsm.h"
#include "fault_env.h"
#include "memtable.h"

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return tu_xorshift64(&rng_state);
}

static int plain_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    return bytes_compare(a, alen, b, blen);
}

static int sign(int r)
{
    return (r > 0) - (r < 0);
}

/* ---------------------------------------------------------- entries */

typedef tu_kv kv;

static int kv_order(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    int r = bytes_compare(x->key, x->klen, y->key, y->klen);
    return r != 0 ? r : x->child - y->child;
}

/* n random sorted entries with distinct keys of 1..max_key bytes drawn
 * from a small alphabet (so neighbours share prefixes); returns how many. */
static size_t make_entries(kv *e, size_t n, size_t max_key, size_t max_val)
{
    for (size_t i = 0; i < n; i++) {
        e[i].klen = 1 + (size_t)(rnd() % max_key);
        e[i].key = malloc(e[i].klen);
        for (size_t j = 0; j < e[i].klen; j++)
            e[i].key[j] = (char)("ab\xff"[rnd() % 3]);
        e[i].vlen = (size_t)(rnd() % (max_val + 1));
        e[i].val = malloc(e[i].vlen + 1);
        for (size_t j = 0; j < e[i].vlen; j++)
            e[i].val[j] = (char)rnd();
        e[i].child = 0;
    }
    qsort(e, n, sizeof(*e), kv_order);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && bytes_compare(e[m - 1].key, e[m - 1].klen, e[i].key, e[i].klen) == 0) {
            free(e[i].key);
            free(e[i].val);
            continue;
        }
        e[m++] = e[i];
    }
    return m;
}

static void free_entries(kv *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(e[i].key);
        free(e[i].val);
    }
}

/* A block built from e[0..n) with the given restart interval. */
typedef struct built {
    block_builder bb;
    block b;
} built;

static void build(built *out, const kv *e, size_t n, int interval)
{
    block_builder_init(&out->bb, interval);
    for (size_t i = 0; i < n; i++)
        assert_true(block_builder_add(&out->bb, e[i].key, e[i].klen, e[i].val, e[i].vlen));
    const char *data;
    size_t size;
    assert_true(block_builder_finish(&out->bb, &data, &size));
    assert_true(block_parse(&out->b, data, size));
}

/* ------------------------------------------------- block random walks */

static void assert_block_at(const block_iter *it, const kv *e, size_t n, size_t pos)
{
    if (pos >= n) {
        assert_false(block_iter_valid(it));
        return;
    }
    assert_true(block_iter_valid(it));
    assert_int_equal(it->key_len, e[pos].klen);
    assert_memory_equal(it->key, e[pos].key, e[pos].klen);
    assert_int_equal(it->val_len, e[pos].vlen);
    if (e[pos].vlen)
        assert_memory_equal(it->val, e[pos].val, e[pos].vlen);
}

/* A random target: an entry's key, or a key that is mostly absent. */
static void random_target(const kv *e, size_t n, char *t, size_t cap, size_t *tlen)
{
    if (n > 0 && rnd() % 2) {
        const kv *k = &e[rnd() % n];
        *tlen = k->klen < cap ? k->klen : cap;
        memcpy(t, k->key, *tlen);
    } else {
        *tlen = (size_t)(rnd() % cap);
        for (size_t j = 0; j < *tlen; j++)
            t[j] = (char)("ab\xff"[rnd() % 3]);
    }
}

/* Mixes every move at random, mostly steps in runs of one direction (the
 * record's case), checking each position against the sorted entries.
 * Positions n and SIZE_MAX both mean "not valid". */
static void walk_block(block_iter *it, const kv *e, size_t n, int steps)
{
    size_t pos = n;
    char t[64];
    int run = 0;
    bool back = false;
    for (int s = 0; s < steps; s++) {
        if (pos >= n || run == 0) {
            unsigned op = (unsigned)(rnd() % 4);
            size_t tlen;
            if (op == 0) {
                block_iter_seek_first(it);
                pos = 0;
            } else if (op == 1) {
                block_iter_seek_last(it);
                pos = n ? n - 1 : n;
            } else {
                random_target(e, n, t, sizeof(t), &tlen);
                block_iter_seek(it, t, tlen);
                pos = tu_kv_lower_bound(e, n, t, tlen);
            }
            run = (int)(rnd() % 40);
            back = rnd() % 3 != 0;
        } else {
            bool step_back = rnd() % 8 == 0 ? !back : back;
            if (step_back) {
                block_iter_prev(it);
                pos = pos == 0 ? n : pos - 1;
            } else {
                block_iter_next(it);
                pos++;
            }
            run--;
        }
        assert_block_at(it, e, n, pos);
    }
    assert_null(block_iter_error(it));
}

static void block_walk_case(size_t n, int interval, size_t max_key, size_t max_val)
{
    kv *e = calloc(n ? n : 1, sizeof(*e));
    size_t m = make_entries(e, n, max_key, max_val);
    built b;
    build(&b, e, m, interval);
    block_iter it;
    block_iter_init(&it, plain_cmp);
    block_iter_set_block(&it, &b.b);
    walk_block(&it, e, m, 20000);
    block_iter_destroy(&it);
    block_builder_destroy(&b.bb);
    free_entries(e, m);
    free(e);
}

static void test_block_walks(void **state)
{
    (void)state;
    block_walk_case(0, 16, 8, 8);
    block_walk_case(1, 16, 8, 8);
    block_walk_case(500, 1, 12, 20); /* index blocks: every entry a restart */
    block_walk_case(500, 3, 12, 20);
    block_walk_case(800, 16, 20, 100); /* data blocks */
    block_walk_case(800, 64, 20, 10);  /* the largest interval recorded */
    block_walk_case(800, 65, 20, 10);  /* one more: rescans every step back */
    block_walk_case(600, 300, 40, 10);
}

/* Keys whose interval holds more bytes than the record takes. */
static void test_block_walk_long_keys(void **state)
{
    (void)state;
    enum { N = 200, KLEN = 3000 };
    kv *e = calloc(N, sizeof(*e));
    for (size_t i = 0; i < N; i++) {
        e[i].klen = KLEN;
        e[i].key = malloc(KLEN);
        memset(e[i].key, 'k', KLEN);
        snprintf(e[i].key + KLEN - 8, 8, "%07zu", i % 10000000); /* sorted, distinct */
        e[i].vlen = 3;
        e[i].val = malloc(3);
        memcpy(e[i].val, "val", 3);
    }
    built b;
    build(&b, e, N, 16);
    block_iter it;
    block_iter_init(&it, plain_cmp);
    block_iter_set_block(&it, &b.b);
    block_iter_seek_last(&it);
    for (size_t i = N; i-- > 0;) {
        assert_block_at(&it, e, N, i);
        block_iter_prev(&it);
    }
    assert_false(block_iter_valid(&it));
    walk_block(&it, e, N, 5000);
    block_iter_destroy(&it);
    block_builder_destroy(&b.bb);
    free_entries(e, N);
    free(e);
}

/* "k" + six digits of v + last: sorted like v. */
static void decimal_key(char *out, int v, char last)
{
    out[0] = 'k';
    for (int d = 6; d >= 1; d--, v /= 10)
        out[d] = (char)('0' + v % 10);
    out[7] = last;
}

/* Two blocks with the same layout (equal key and value lengths, equal
 * shared prefixes) but different keys: a record made over the first must
 * not answer for the second. */
static void test_block_record_not_reused(void **state)
{
    (void)state;
    enum { N = 100 };
    kv a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i].klen = b[i].klen = 8;
        a[i].key = malloc(8);
        b[i].key = malloc(8);
        decimal_key(a[i].key, 2 * i, 'a');
        decimal_key(b[i].key, 2 * i, 'b');
        a[i].vlen = b[i].vlen = 4;
        a[i].val = malloc(4);
        b[i].val = malloc(4);
        memcpy(a[i].val, "aaaa", 4);
        memcpy(b[i].val, "bbbb", 4);
    }
    built ba, bb;
    build(&ba, a, N, 16);
    build(&bb, b, N, 16);
    assert_int_equal(ba.b.size, bb.b.size);
    block_iter it;
    block_iter_init(&it, plain_cmp);
    block_iter_set_block(&it, &ba.b);
    block_iter_seek_last(&it);
    block_iter_prev(&it); /* records the last interval of a */
    assert_block_at(&it, a, N, N - 2);
    block_iter_set_block(&it, &bb.b);
    block_iter_seek_last(&it);
    for (int i = N - 1; i >= 0; i--) {
        assert_block_at(&it, b, N, (size_t)i);
        block_iter_prev(&it);
    }
    assert_false(block_iter_valid(&it));
    block_iter_destroy(&it);
    block_builder_destroy(&ba.bb);
    block_builder_destroy(&bb.bb);
    free_entries(a, N);
    free_entries(b, N);
}

/* ----------------------------------------------- merging random walks */

typedef struct merge_case {
    int nchild;
    kv *all; /* every entry of every child, in merged order */
    size_t n;
    built *blocks; /* one per child */
} merge_case;

/* nchild children of random sizes (some empty); keys repeat across
 * children, never within one. */
static void merge_case_make(merge_case *mc, int nchild, size_t per_child)
{
    mc->nchild = nchild;
    mc->all = calloc((size_t)nchild * per_child + 1, sizeof(kv));
    mc->blocks = calloc((size_t)nchild, sizeof(built));
    mc->n = 0;
    for (int c = 0; c < nchild; c++) {
        size_t want = rnd() % 4 == 0 ? 0 : (size_t)(rnd() % (per_child + 1));
        kv *e = mc->all + mc->n;
        size_t m = make_entries(e, want, 5, 12); /* short keys: many repeats */
        build(&mc->blocks[c], e, m, 1 + (int)(rnd() % 20));
        for (size_t i = 0; i < m; i++)
            e[i].child = c;
        mc->n += m;
    }
    qsort(mc->all, mc->n, sizeof(kv), kv_order);
}

static void merge_case_free(merge_case *mc)
{
    for (int c = 0; c < mc->nchild; c++)
        block_builder_destroy(&mc->blocks[c].bb);
    free_entries(mc->all, mc->n);
    free(mc->all);
    free(mc->blocks);
}

static void assert_merged_at(iter *it, const merge_case *mc, size_t pos)
{
    if (pos >= mc->n) {
        assert_false(iter_valid(it));
        return;
    }
    assert_true(iter_valid(it));
    const kv *e = &mc->all[pos];
    size_t kn, vn;
    const char *k = iter_key(it, &kn), *v = iter_value(it, &vn);
    assert_int_equal(kn, e->klen);
    assert_memory_equal(k, e->key, kn);
    /* Equal keys come from different children: the value tells which. */
    assert_int_equal(vn, e->vlen);
    if (vn)
        assert_memory_equal(v, e->val, vn);
}

static void merge_walk_case(int nchild, size_t per_child, int steps)
{
    merge_case mc;
    merge_case_make(&mc, nchild, per_child);
    iter **kids = calloc((size_t)nchild, sizeof(iter *));
    for (int c = 0; c < nchild; c++)
        assert_non_null(kids[c] = block_iter_new(&mc.blocks[c].b, plain_cmp));
    iter *it = iter_new_merging(kids, nchild, plain_cmp);
    free(kids);

    size_t pos = mc.n;
    char t[8];
    for (int s = 0; s < steps; s++) {
        unsigned op = (unsigned)(rnd() % 16);
        if (pos >= mc.n || op < 3) {
            size_t tlen;
            switch (rnd() % 3) {
            case 0:
                iter_seek_first(it);
                pos = 0;
                break;
            case 1:
                iter_seek_last(it);
                pos = mc.n ? mc.n - 1 : mc.n;
                break;
            default:
                random_target(mc.all, mc.n, t, sizeof(t), &tlen);
                iter_seek(it, t, tlen);
                pos = tu_kv_lower_bound(mc.all, mc.n, t, tlen);
            }
        } else if (op < 9) {
            iter_next(it);
            pos++;
        } else {
            iter_prev(it);
            pos = pos == 0 ? mc.n : pos - 1;
        }
        assert_merged_at(it, &mc, pos);
    }
    assert_null(iter_status(it));
    iter_free(it);
    merge_case_free(&mc);
}

static void test_merge_walks(void **state)
{
    (void)state;
    for (int nchild = 1; nchild <= 17; nchild++)
        merge_walk_case(nchild, 60, 3000);
    merge_walk_case(40, 30, 20000);
}

/* Full scans both ways over children that all hold the same keys: the
 * tie order (lower child first going forward) must hold at every step. */
static void test_merge_all_ties(void **state)
{
    (void)state;
    enum { CHILDREN = 9, KEYS = 50 };
    built blocks[CHILDREN];
    kv e[KEYS];
    char vals[CHILDREN][KEYS][2];
    iter *kids[CHILDREN];
    for (int c = 0; c < CHILDREN; c++) {
        for (int k = 0; k < KEYS; k++) {
            e[k].key = malloc(4);
            e[k].key[0] = (char)('0' + k / 100);
            e[k].key[1] = (char)('0' + k / 10 % 10);
            e[k].key[2] = (char)('0' + k % 10);
            e[k].klen = 3;
            vals[c][k][0] = (char)('A' + c);
            vals[c][k][1] = (char)k;
            e[k].val = vals[c][k];
            e[k].vlen = 2;
        }
        build(&blocks[c], e, KEYS, 4);
        for (int k = 0; k < KEYS; k++)
            free(e[k].key);
        kids[c] = block_iter_new(&blocks[c].b, plain_cmp);
    }
    iter *it = iter_new_merging(kids, CHILDREN, plain_cmp);
    size_t vn;
    iter_seek_first(it);
    for (int k = 0; k < KEYS; k++)
        for (int c = 0; c < CHILDREN; c++) {
            assert_true(iter_valid(it));
            assert_memory_equal(iter_value(it, &vn), vals[c][k], 2);
            iter_next(it);
        }
    assert_false(iter_valid(it));
    iter_seek_last(it);
    for (int k = KEYS - 1; k >= 0; k--)
        for (int c = CHILDREN - 1; c >= 0; c--) {
            assert_true(iter_valid(it));
            assert_memory_equal(iter_value(it, &vn), vals[c][k], 2);
            iter_prev(it);
        }
    assert_false(iter_valid(it));
    /* Turning around in the middle of a run of ties. */
    iter_seek(it, "010", 3);
    for (int c = 0; c < 4; c++)
        iter_next(it);
    assert_memory_equal(iter_value(it, &vn), vals[4][10], 2);
    iter_prev(it);
    assert_memory_equal(iter_value(it, &vn), vals[3][10], 2);
    iter_prev(it);
    iter_prev(it);
    iter_prev(it);
    assert_memory_equal(iter_value(it, &vn), vals[0][10], 2);
    iter_prev(it);
    assert_memory_equal(iter_value(it, &vn), vals[CHILDREN - 1][9], 2);
    iter_next(it);
    assert_memory_equal(iter_value(it, &vn), vals[0][10], 2);
    iter_free(it);
    for (int c = 0; c < CHILDREN; c++)
        block_builder_destroy(&blocks[c].bb);
}

/* ------------------------------------------------------------ keycmp */

static size_t random_bytes(char *p, size_t max, const char *shared, size_t slen)
{
    size_t n = (size_t)(rnd() % (max + 1));
    for (size_t i = 0; i < n; i++)
        p[i] = i < slen && rnd() % 8 != 0 ? shared[i] : (char)("\x00\x01\x7f\x80\xff"[rnd() % 5]);
    return n;
}

static void test_keycmp_matches_reference(void **state)
{
    (void)state;
    char shared[48], a[48], b[48];
    for (int r = 0; r < 200000; r++) {
        size_t slen = random_bytes(shared, sizeof(shared), "", 0);
        size_t an = random_bytes(a, sizeof(a), shared, slen);
        size_t bn = rnd() % 4 == 0 ? an : random_bytes(b, sizeof(b), shared, slen);
        if (bn == an && rnd() % 4 == 0)
            memcpy(b, a, an); /* equal keys too */
        assert_int_equal(sign(keycmp_bytes(a, an, b, bn)), sign(bytes_compare(a, an, b, bn)));
        if (an >= IKEY_TRAILER && bn >= IKEY_TRAILER)
            assert_int_equal(sign(keycmp_ikey(a, an, b, bn)), sign(ikey_compare(a, an, b, bn)));
    }
}

/* ------------------------------------------- memtable walked backward */

/* Steps back through the memtable follow back links, not a search from the
 * head: while one thread inserts, a full backward walk must still see, in
 * order, every entry that was in before the walk began. */
enum { BACK_ENTRIES = 30000 };

typedef struct back_conc {
    memtable *m;
    atomic_bool done;
} back_conc;

static void *back_writer(void *arg)
{
    back_conc *c = arg;
    uint64_t rs = 77;
    for (uint64_t seq = 1; seq <= BACK_ENTRIES; seq++) {
        char key[12];
        uint64_t k = tu_xorshift64(&rs) % 1000000000u;
        for (int d = 11; d >= 0; d--, k /= 10)
            key[d] = (char)('0' + k % 10);
        if (!memtable_add(c->m, seq, TYPE_VALUE, key, sizeof(key), "v", 1))
            return "memtable_add failed";
    }
    atomic_store(&c->done, true);
    return NULL;
}

/* One whole walk; NULL or what went wrong. */
static const char *walk_all(iter *it, bool forward, uint64_t at_least)
{
    char prev[32];
    size_t prev_n = 0;
    uint64_t seen = 0;
    forward ? iter_seek_first(it) : iter_seek_last(it);
    for (; iter_valid(it); forward ? iter_next(it) : iter_prev(it)) {
        size_t n;
        const char *k = iter_key(it, &n);
        if (n != 20)
            return "bad key";
        if (prev_n && (forward ? 1 : -1) * ikey_compare(prev, prev_n, k, n) >= 0)
            return "out of order";
        memcpy(prev, k, n);
        prev_n = n;
        seen++;
    }
    return seen >= at_least ? NULL : "an entry inserted before the walk was missed";
}

static void *back_reader(void *arg)
{
    back_conc *c = arg;
    iter *it = memtable_iter_new(c->m);
    const char *err = NULL;
    bool finished;
    int walks = 0;
    do {
        finished = atomic_load(&c->done);
        uint64_t before = memtable_entries(c->m);
        err = walk_all(it, walks++ % 3 != 0, before);
    } while (err == NULL && !finished);
    iter_free(it);
    return (void *)err;
}

static void test_memtable_backward_while_inserting(void **state)
{
    (void)state;
    back_conc c;
    assert_non_null(c.m = memtable_new());
    atomic_init(&c.done, false);
    pthread_t w, r[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&r[i], NULL, back_reader, &c), 0);
    assert_int_equal(pthread_create(&w, NULL, back_writer, &c), 0);
    void *res;
    assert_int_equal(pthread_join(w, &res), 0);
    if (res != NULL)
        fail_msg("writer: %s", (const char *)res);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(r[i], &res), 0);
        if (res != NULL)
            fail_msg("reader %d: %s", i, (const char *)res);
    }
    iter *it = memtable_iter_new(c.m);
    assert_null(walk_all(it, false, BACK_ENTRIES));
    iter_free(it);
    memtable_unref(c.m);
}

/* ------------------------------------------------- memtable key filter */

/* Gets consult each memtable's filter before its skiplist: it must never
 * hide a key, for keys of any length, far past the number it was sized
 * for, and while a writer inserts (every key published before the lookup
 * is found). */
enum { FILTER_KEYS = 200000 };

static size_t filter_key(uint64_t i, char *k)
{
    /* Lengths 0..40 with shared prefixes, distinct for distinct i. */
    size_t len = (size_t)(i % 41);
    int n = snprintf(k, 64, "%llu/", (unsigned long long)i);
    for (size_t j = (size_t)n; j < len + (size_t)n; j++)
        k[j] = (char)('a' + (i + j) % 26);
    return len + (size_t)n;
}

typedef struct filter_conc {
    memtable *m;
    _Atomic uint64_t published; /* keys [0, published) are in */
} filter_conc;

static void *filter_writer(void *arg)
{
    filter_conc *c = arg;
    for (uint64_t i = 0; i < FILTER_KEYS; i++) {
        char k[64];
        size_t n = filter_key(i, k);
        if (!memtable_add(c->m, i + 1, i % 7 ? TYPE_VALUE : TYPE_DELETION, k, n, "v", 1))
            return "memtable_add failed";
        atomic_store_explicit(&c->published, i + 1, memory_order_release);
    }
    return NULL;
}

static void *filter_reader(void *arg)
{
    filter_conc *c = arg;
    uint64_t rs = 5;
    uint64_t have;
    do {
        have = atomic_load_explicit(&c->published, memory_order_acquire);
        if (have == 0)
            continue;
        uint64_t i = tu_xorshift64(&rs) % have;
        char k[64], *v = NULL;
        size_t n = filter_key(i, k), vn;
        enum memtable_get_result r = memtable_get(c->m, k, n, MAX_SEQUENCE, &v, &vn);
        free(v);
        if (r != (i % 7 ? MEMTABLE_FOUND : MEMTABLE_DELETED))
            return "a published key was not found";
    } while (have < FILTER_KEYS);
    return NULL;
}

static void test_memtable_filter_hides_nothing(void **state)
{
    (void)state;
    filter_conc c;
    assert_non_null(c.m = memtable_new());
    atomic_init(&c.published, 0);
    pthread_t w, r;
    assert_int_equal(pthread_create(&r, NULL, filter_reader, &c), 0);
    assert_int_equal(pthread_create(&w, NULL, filter_writer, &c), 0);
    void *res;
    assert_int_equal(pthread_join(w, &res), 0);
    if (res != NULL)
        fail_msg("writer: %s", (const char *)res);
    assert_int_equal(pthread_join(r, &res), 0);
    if (res != NULL)
        fail_msg("reader: %s", (const char *)res);
    /* Every key, and an empty memtable answering for none. */
    memtable *empty = memtable_new();
    assert_non_null(empty);
    for (uint64_t i = 0; i < FILTER_KEYS; i++) {
        char k[64], *v = NULL;
        size_t n = filter_key(i, k), vn;
        assert_int_equal(memtable_get(c.m, k, n, MAX_SEQUENCE, &v, &vn),
                         i % 7 ? MEMTABLE_FOUND : MEMTABLE_DELETED);
        free(v);
        assert_int_equal(memtable_get(empty, k, n, MAX_SEQUENCE, &v, &vn), MEMTABLE_ABSENT);
    }
    memtable_unref(empty);
    memtable_unref(c.m);
}

/* ------------------------------------------------- the whole store */

/* A store whose keys sit in the memtable, many level-0 tables and deeper
 * levels at once (tiny buffers and tables), holding several versions and
 * deletions of each key, walked at random through lsm_iter against a model
 * of what it holds; an iterator made before a round of writes keeps seeing
 * the state it started at. */
enum { STORE_KEYS = 2000 };

typedef struct store_model {
    char val[STORE_KEYS][128]; /* "" = absent */
} store_model;

static void store_key(int i, char *k)
{
    /* Shared prefixes of several lengths: "pre/" + 3 bytes + a tail. */
    snprintf(k, 16, "pre/%03u/%u", (unsigned)i / 10 % 1000, (unsigned)i % 10);
}

/* The present keys of m, in key order, as indices; returns how many. */
static int model_order(const store_model *m, int *out)
{
    char keys[STORE_KEYS][16];
    int n = 0;
    for (int i = 0; i < STORE_KEYS; i++) {
        store_key(i, keys[i]);
        if (m->val[i][0])
            out[n++] = i;
    }
    for (int a = 1; a < n; a++) /* insertion sort on the key text */
        for (int b = a; b > 0 && strcmp(keys[out[b - 1]], keys[out[b]]) > 0; b--) {
            int t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return n;
}

static void write_round(lsm_db *db, store_model *m, int ops)
{
    for (int o = 0; o < ops; o++) {
        int i = (int)(rnd() % STORE_KEYS);
        char k[16];
        store_key(i, k);
        if (rnd() % 5 == 0) {
            ASSERT_OK(lsm_delete(db, NULL, k, strlen(k)));
            m->val[i][0] = '\0';
        } else {
            int len = snprintf(m->val[i], sizeof(m->val[i]), "v%llu.",
                               (unsigned long long)(rnd() % 100000));
            int pad = 20 + (int)(rnd() % 100); /* values make the flushes */
            memset(m->val[i] + len, 'a' + (int)(rnd() % 26), (size_t)pad);
            m->val[i][len + pad] = '\0';
            ASSERT_OK(lsm_put(db, NULL, k, strlen(k), m->val[i], strlen(m->val[i])));
        }
    }
}

static void assert_iter_at(lsm_iter *it, const store_model *m, const int *order, int n, int pos)
{
    if (pos < 0 || pos >= n) {
        assert_false(lsm_iter_valid(it));
        return;
    }
    assert_true(lsm_iter_valid(it));
    char k[16];
    store_key(order[pos], k);
    size_t kn, vn;
    const char *key = lsm_iter_key(it, &kn), *v = lsm_iter_value(it, &vn);
    assert_int_equal(kn, strlen(k));
    assert_memory_equal(key, k, kn);
    assert_int_equal(vn, strlen(m->val[order[pos]]));
    assert_memory_equal(v, m->val[order[pos]], vn);
}

static void walk_store(lsm_iter *it, const store_model *m, int steps)
{
    int order[STORE_KEYS];
    int n = model_order(m, order), pos = -1;
    for (int s = 0; s < steps; s++) {
        unsigned op = (unsigned)(rnd() % 20);
        if (pos < 0 || pos >= n || op < 2) {
            int r = (int)(rnd() % 3);
            if (r == 0) {
                lsm_iter_seek_first(it);
                pos = 0;
            } else if (r == 1) {
                lsm_iter_seek_last(it);
                pos = n - 1;
            } else {
                int i = (int)(rnd() % STORE_KEYS);
                char k[16];
                store_key(i, k);
                size_t kl = strlen(k) - rnd() % 3; /* often a prefix: between keys */
                lsm_iter_seek(it, k, kl);
                pos = 0;
                char o[16];
                while (pos < n &&
                       (store_key(order[pos], o), bytes_compare(o, strlen(o), k, kl) < 0))
                    pos++;
            }
        } else if (op < 11) {
            lsm_iter_next(it);
            pos++;
        } else {
            lsm_iter_prev(it);
            pos--;
        }
        assert_iter_at(it, m, order, n, pos);
    }
    ASSERT_OK(lsm_iter_status(it));
}

/* A fresh directory for a store, and options that create it. */
static void new_store_dir(char *dir, size_t cap, lsm_options *o)
{
    tu_mkdtemp(dir, cap, "readpath");
    tu_db_options(o, NULL, 0);
}

static void test_store_walks(void **state)
{
    (void)state;
    char dir[128];
    lsm_options o;
    new_store_dir(dir, sizeof(dir), &o);
    /* Small tables: the rounds below must leave several tables in several
     * levels whatever the background threads' timing (with 32 KiB tables
     * the peak was often exactly the 6 checked below, sometimes less; with
     * 8 KiB it is 9-12). */
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 8 << 10;
    o.block_size = 512;
    o.block_cache_size = 64 << 10;
    lsm_db *db;
    ASSERT_OK(lsm_open(&o, dir, &db));
    store_model *m = calloc(1, sizeof(*m)), *then = calloc(1, sizeof(*m));
    uint64_t most_tables = 0, most_l0 = 0;
    for (int round = 0; round < 12; round++) {
        write_round(db, m, 2500);
        lsm_iter *it = lsm_iter_new(db, NULL);
        assert_non_null(it);
        uint64_t tables = 0, l0 = tu_prop(db, "lsm.num-files-at-level0");
        for (int l = 0; l < 7; l++) {
            char name[40];
            snprintf(name, sizeof(name), "lsm.num-files-at-level%d", l);
            tables += tu_prop(db, name);
        }
        most_tables = tables > most_tables ? tables : most_tables;
        most_l0 = l0 > most_l0 ? l0 : most_l0;
        walk_store(it, m, 3000);
        *then = *m;
        write_round(db, m, 300); /* not seen by it */
        walk_store(it, then, 1000);
        lsm_iter_free(it);
        if (round == 6)
            ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    }
    /* The walks did cross memtable, level-0 tables and deeper tables. */
    assert_true(most_l0 >= 1);
    assert_true(most_tables >= 6);
    ASSERT_OK(lsm_close(db));
    free(m);
    free(then);
    tu_rmtree(dir);
}

/* ------------------------------------------------------- table files */

/* Reads of every kind at offsets around the file's size: point reads
 * (read_point, through the mapping once mapped) or plain preads. */
static void check_reads_as(lsm_rfile *rf, bool point, const char *data, size_t size)
{
    char got[5000];
    size_t n;
    uint64_t offs[] = {0, 1, 4095, 4096, size / 2, size - 4000, size - 1, size, size + 1, 1u << 30};
    size_t lens[] = {0, 1, 7, 4096, sizeof(got)};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
        for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
            uint64_t off = offs[i];
            size_t want = off >= size ? 0 : (size - off < lens[j] ? size - off : lens[j]);
            n = SIZE_MAX;
            ASSERT_OK(point ? env_read_point(rf, off, got, lens[j], &n)
                            : rf->ops->pread(rf, off, got, lens[j], &n));
            assert_int_equal(n, want);
            if (want)
                assert_memory_equal(got, data + off, want);
        }
}

static void check_reads(lsm_rfile *rf, const char *data, size_t size)
{
    check_reads_as(rf, false, data, size);
    check_reads_as(rf, true, data, size);
}

static void write_bytes(const char *path, const char *data, size_t n)
{
    ASSERT_OK(env_write_file_sync(lsm_env_default(), path, data, n));
}

static void test_rfile_reads(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    char dir[128], path[192], empty[192];
    tu_mkdtemp(dir, sizeof(dir), "readpath");
    snprintf(path, sizeof(path), "%s/000007.ldb", dir);
    snprintf(empty, sizeof(empty), "%s/empty", dir);
    enum { SIZE = 300001 };
    char *data = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++)
        data[i] = (char)rnd();
    write_bytes(path, data, SIZE);
    write_bytes(empty, "", 0);

    lsm_rfile *rf, *mapped;
    ASSERT_OK(env->new_rfile(env, path, &rf));
    ASSERT_OK(env->new_rfile(env, path, &mapped));
    ASSERT_OK(mapped->ops->map(mapped, SIZE));
    check_reads(rf, data, SIZE);
    check_reads(mapped, data, SIZE);
    /* Unlinking does not take the bytes away from an open reader. */
    assert_int_equal(unlink(path), 0);
    check_reads(rf, data, SIZE);
    check_reads(mapped, data, SIZE);
    rf->ops->close(rf);
    mapped->ops->close(mapped);

    ASSERT_OK(env->new_rfile(env, empty, &rf));
    char c;
    size_t n = 1;
    ASSERT_OK(rf->ops->pread(rf, 0, &c, 1, &n));
    assert_int_equal(n, 0);
    rf->ops->close(rf);

    ASSERT_FAILS(env->new_rfile(env, path, &rf), LSM_IO_ERROR, path); /* gone */
    free(data);
    tu_rmtree(dir);
}

struct reader_arg {
    lsm_rfile *rf;
    const char *data;
    size_t size;
    uint64_t seed;
    int bad;
};

static void *reader(void *p)
{
    struct reader_arg *a = p;
    char b[700];
    for (int i = 0; i < 20000; i++) {
        uint64_t off = tu_xorshift64(&a->seed) % a->size;
        size_t n, want = a->size - off < sizeof(b) ? a->size - off : sizeof(b);
        lsm_status *s = i % 2 ? env_read_point(a->rf, off, b, sizeof(b), &n)
                              : a->rf->ops->pread(a->rf, off, b, sizeof(b), &n);
        if (s != NULL || n != want || memcmp(b, a->data + off, n) != 0)
            a->bad++;
        lsm_status_free(s);
    }
    return NULL;
}

static void test_rfile_threads(void **state)
{
    (void)state;
    enum { SIZE = 1 << 20, THREADS = 4 };
    lsm_env *env = lsm_env_default();
    char dir[128], path[192];
    tu_mkdtemp(dir, sizeof(dir), "readpath");
    snprintf(path, sizeof(path), "%s/table", dir);
    char *data = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++)
        data[i] = (char)(i ^ (i >> 9));
    write_bytes(path, data, SIZE);
    lsm_rfile *rf;
    ASSERT_OK(env->new_rfile(env, path, &rf));
    ASSERT_OK(rf->ops->map(rf, SIZE));
    struct reader_arg args[THREADS];
    for (int i = 0; i < THREADS; i++)
        args[i] = (struct reader_arg){rf, data, SIZE, (uint64_t)i + 11, 0};
    tu_run_threads(THREADS, reader, args, sizeof(args[0]));
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(args[i].bad, 0);
    rf->ops->close(rf);
    free(data);
    tu_rmtree(dir);
}

/* A new file dir/name (dir: a new temporary directory; dir and path hold
 * 128 and 192 bytes) of size random bytes, which it returns (malloc'd). */
static char *random_file(char *dir, char *path, const char *name, size_t size)
{
    tu_mkdtemp(dir, 128, "readpath");
    snprintf(path, 192, "%s/%s", dir, name);
    char *data = malloc(size);
    for (size_t i = 0; i < size; i++)
        data[i] = (char)rnd();
    write_bytes(path, data, size);
    return data;
}

/* A file cut short behind an open reader's back reads short, past the cut
 * as at the end of the file: no signal, no stale bytes. */
static void test_rfile_cut_short(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    char dir[128], path[192];
    enum { SIZE = 200000, CUT = 70001 };
    char *data = random_file(dir, path, "000009.ldb", SIZE);
    lsm_rfile *rf;
    ASSERT_OK(env->new_rfile(env, path, &rf));
    check_reads(rf, data, SIZE);
    assert_int_equal(truncate(path, CUT), 0);
    check_reads(rf, data, CUT);
    rf->ops->close(rf);
    free(data);
    tu_rmtree(dir);
}

/* The same cut under a mapped file: a point read of a page wholly past the
 * cut is EIO, as from a disk — through a bare mapping it raised SIGBUS and
 * killed the process. Below the cut the bytes are right, and preads read
 * short as ever. */
static void test_rfile_mapped_cut_short(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    char dir[128], path[192];
    enum { SIZE = 200000, CUT = 65536 };
    char *data = random_file(dir, path, "000010.ldb", SIZE);
    lsm_rfile *rf;
    ASSERT_OK(env->new_rfile(env, path, &rf));
    ASSERT_OK(rf->ops->map(rf, SIZE));
    check_reads(rf, data, SIZE);
    assert_int_equal(truncate(path, CUT), 0);
    check_reads_as(rf, false, data, CUT);
    char got[4096];
    size_t n = SIZE_MAX;
    ASSERT_OK(env_read_point(rf, CUT - 4096, got, 4096, &n));
    assert_int_equal(n, 4096);
    assert_memory_equal(got, data + CUT - 4096, 4096);
    const uint64_t past[] = {CUT, CUT - 100, SIZE - 4096, 150000};
    for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++) {
        n = SIZE_MAX;
        ASSERT_FAILS(env_read_point(rf, past[i], got, 4096, &n), LSM_IO_ERROR, path);
        assert_int_equal(n, 0);
    }
    /* The thread's guard is disarmed and SIGBUS unblocked again: the next
     * good read works, and the next bad one is caught again. */
    ASSERT_OK(env_read_point(rf, 0, got, 4096, &n));
    assert_memory_equal(got, data, 4096);
    ASSERT_FAILS(env_read_point(rf, CUT, got, 1, &n), LSM_IO_ERROR, "Input/output error");
    rf->ops->close(rf);
    free(data);
    tu_rmtree(dir);
}

static sigjmp_buf chained_jump;
static volatile sig_atomic_t chained;

static void chained_handler(int sig)
{
    (void)sig;
    chained++;
    siglongjmp(chained_jump, 1);
}

/* A SIGBUS outside a guarded copy goes to the handler installed before the
 * store's (here the test's; by default the one that kills the process):
 * one raised by hand, and one from a bare mapping of a file cut short. A
 * guarded read still fails cleanly after. */
static void test_sigbus_chains(void **state)
{
    (void)state;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = chained_handler;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGBUS, &sa, &old), 0);
    lsm_env *env = lsm_env_default();
    char dir[128], path[192];
    tu_mkdtemp(dir, sizeof(dir), "readpath");
    snprintf(path, sizeof(path), "%s/000011.ldb", dir);
    enum { SIZE = 3 * 4096 };
    char data[SIZE];
    memset(data, 'x', SIZE);
    write_bytes(path, data, SIZE);
    lsm_rfile *rf;
    ASSERT_OK(env->new_rfile(env, path, &rf));
    ASSERT_OK(rf->ops->map(rf, SIZE)); /* the store's handler goes in over the test's */
    struct sigaction now;
    assert_int_equal(sigaction(SIGBUS, NULL, &now), 0);
    assert_true(now.sa_handler != chained_handler);

    chained = 0;
    if (sigsetjmp(chained_jump, 1) == 0)
        raise(SIGBUS);
    assert_int_equal(chained, 1);

    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    volatile const char *bare = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(bare != MAP_FAILED);
    assert_int_equal(truncate(path, 0), 0);
    if (sigsetjmp(chained_jump, 1) == 0)
        (void)bare[SIZE - 1];
    assert_int_equal(chained, 2);
    munmap((void *)bare, SIZE);
    close(fd);

    char got[16];
    size_t n;
    ASSERT_FAILS(env_read_point(rf, 4096, got, sizeof(got), &n), LSM_IO_ERROR, path);
    assert_int_equal(chained, 2);
    rf->ops->close(rf);
    assert_int_equal(sigaction(SIGBUS, &old, NULL), 0);
    tu_rmtree(dir);
}

/* How test_table_cut's store reads its tables. */
enum cut_mode {
    CUT_PREAD,     /* mapped_reads off */
    CUT_MAPPED,    /* the default: point reads through the guarded mapping */
    CUT_FAULT_ENV, /* mapped, through the fault env (its map and read_point) */
    CUT_MAP_FAILS, /* through the fault env, every map failing: pread */
};

enum { CUT_KEYS = 4000, CUT_VLEN = 100 };

/* Cuts every table in dir to half its size behind the store's back. */

static int cut_tables(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int tables = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 4, ".ldb") != 0)
            continue;
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(truncate(path, st.st_size / 2), 0);
        tables++;
    }
    closedir(d);
    return tables;
}

/* Gets every key: each gives the right value or an error, never a wrong
 * value or a crash. Counts the errors by code. */
static void get_all(lsm_db *db, int *io_errors, int *corruptions)
{
    char key[32], val[CUT_VLEN];
    *io_errors = *corruptions = 0;
    for (int i = 0; i < CUT_KEYS; i++) {
        snprintf(key, sizeof(key), "key%06d", i);
        memset(val, 'a' + i % 26, CUT_VLEN);
        char *v = NULL;
        size_t n = 0;
        lsm_status *s = lsm_get(db, NULL, key, strlen(key), &v, &n);
        if (s == NULL) {
            assert_int_equal(n, CUT_VLEN);
            assert_memory_equal(v, val, CUT_VLEN);
            free(v);
        } else if (lsm_status_code(s) == LSM_IO_ERROR) {
            assert_true(tu_mentions(s, "Input/output error"));
            (*io_errors)++;
        } else {
            assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
            (*corruptions)++;
        }
        lsm_status_free(s);
    }
}

/* Opens a store of uncompressed tables whose every read goes to the file,
 * puts CUT_KEYS keys into tables and gets each once (opening every table). */
static lsm_db *open_filled(const char *dir, lsm_options *o)
{
    o->compression = false;
    o->block_cache_size = 1024; /* holds no 4 KiB block */
    lsm_db *db;
    ASSERT_OK(lsm_open(o, dir, &db));
    char key[32], val[CUT_VLEN];
    for (int i = 0; i < CUT_KEYS; i++) {
        snprintf(key, sizeof(key), "key%06d", i);
        memset(val, 'a' + i % 26, CUT_VLEN);
        ASSERT_OK(lsm_put(db, NULL, key, strlen(key), val, CUT_VLEN));
    }
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    int io_errors, corruptions;
    get_all(db, &io_errors, &corruptions);
    assert_int_equal(io_errors + corruptions, 0);
    return db;
}

/* In a child whose SIGBUS handler was the default one: maps path through
 * the env (the store's handler goes in), then reads a bare mapping of the
 * file cut to nothing. Never returns. */
static void touch_cut_mapping(const char *path)
{
    signal(SIGBUS, SIG_DFL);
    alarm(20); /* a fault handed back and forth forever must not hang the test */
    lsm_env *env = lsm_env_default();
    lsm_rfile *rf;
    lsm_status *s = env->new_rfile(env, path, &rf);
    if (s != NULL || rf->ops->map(rf, 4096) != NULL)
        _exit(2);
    int fd = open(path, O_RDONLY);
    volatile const char *bare = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || bare == MAP_FAILED || truncate(path, 0) != 0)
        _exit(3);
    (void)bare[0];
    _exit(0);
}

/* Under the default handler, a SIGBUS outside a guarded copy still kills
 * the process by SIGBUS, as without the store's handler. */
static void test_sigbus_default_still_kills(void **state)
{
    (void)state;
    char dir[128], path[192];
    char *data = random_file(dir, path, "000012.ldb", 4096);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        touch_cut_mapping(path);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGBUS);
    free(data);
    tu_rmtree(dir);
}

/* Every table of a store cut to half while the store has them open. With
 * pread a block past the cut reads short (LSM_CORRUPTION); through the
 * mapping it is the EIO of a disk error (a bare mapping raised SIGBUS and
 * killed the process); a block ending in the cut's last page reads zeros
 * there and fails its checksum either way. */
static void check_table_cut(enum cut_mode mode)
{
    char dir[128];
    lsm_options o;
    new_store_dir(dir, sizeof(dir), &o);
    fault_env *fe = NULL;
    if (mode == CUT_FAULT_ENV || mode == CUT_MAP_FAILS) {
        fe = fault_env_new(lsm_env_default());
        o.env = fault_env_env(fe);
    }
    if (mode == CUT_MAP_FAILS)
        fault_env_fail(fe, FAULT_MAP, ".ldb", EIO, 0, -1);
    o.mapped_reads = mode != CUT_PREAD;
    lsm_db *db = open_filled(dir, &o);
    assert_true(cut_tables(dir) > 0);
    int io_errors, corruptions;
    get_all(db, &io_errors, &corruptions);
    if (mode == CUT_PREAD || mode == CUT_MAP_FAILS) {
        assert_int_equal(io_errors, 0);
        assert_true(corruptions > 0);
    } else {
        assert_true(io_errors > 0);
    }
    lsm_close(db);
    fault_env_free(fe);
    tu_rmtree(dir);
}

/* check_table_cut in the mode *state points at. */
static void test_table_cut(void **state)
{
    check_table_cut(*(const enum cut_mode *)*state);
}

static const enum cut_mode cut_modes[] = {CUT_PREAD, CUT_MAPPED, CUT_FAULT_ENV, CUT_MAP_FAILS};

/* A table cut short while the store was closed is damage the reads name
 * (LSM_CORRUPTION, "truncated"), as with pread: it is not mapped. Cut
 * while mapped it is EIO (test_table_cut). */
static void test_table_cut_before_open(void **state)
{
    (void)state;
    char dir[128];
    lsm_options o;
    new_store_dir(dir, sizeof(dir), &o);
    lsm_db *db = open_filled(dir, &o);
    ASSERT_OK(lsm_close(db));
    assert_true(cut_tables(dir) > 0);
    ASSERT_OK(lsm_open(&o, dir, &db));
    int io_errors, corruptions;
    get_all(db, &io_errors, &corruptions);
    assert_int_equal(io_errors, 0);
    assert_true(corruptions > 0);
    char *v = NULL;
    size_t n;
    ASSERT_FAILS(lsm_get(db, NULL, "key003999", 9, &v, &n), LSM_CORRUPTION, "truncated");
    lsm_close(db);
    tu_rmtree(dir);
}

/* An injected read error reaches a get through the mapping too: the fault
 * env's read faults cover read_point. */
static void test_mapped_read_fault(void **state)
{
    (void)state;
    char dir[128];
    lsm_options o;
    new_store_dir(dir, sizeof(dir), &o);
    fault_env *fe = fault_env_new(lsm_env_default());
    o.env = fault_env_env(fe);
    lsm_db *db = open_filled(dir, &o);
    fault_env_fail(fe, FAULT_READ, ".ldb", EIO, 0, -1);
    char *v = NULL;
    size_t n;
    ASSERT_FAILS(lsm_get(db, NULL, "key001234", 9, &v, &n), LSM_IO_ERROR, "injected");
    fault_env_clear_failures(fe);
    ASSERT_OK(lsm_get(db, NULL, "key001234", 9, &v, &n));
    free(v);
    lsm_close(db);
    fault_env_free(fe);
    tu_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_walks),
        cmocka_unit_test(test_block_walk_long_keys),
        cmocka_unit_test(test_block_record_not_reused),
        cmocka_unit_test(test_merge_walks),
        cmocka_unit_test(test_merge_all_ties),
        cmocka_unit_test(test_keycmp_matches_reference),
        cmocka_unit_test(test_memtable_backward_while_inserting),
        cmocka_unit_test(test_memtable_filter_hides_nothing),
        cmocka_unit_test(test_store_walks),
        cmocka_unit_test(test_rfile_reads),
        cmocka_unit_test(test_rfile_threads),
        cmocka_unit_test(test_rfile_cut_short),
        cmocka_unit_test(test_rfile_mapped_cut_short),
        cmocka_unit_test(test_sigbus_chains),
        cmocka_unit_test(test_sigbus_default_still_kills),
        {"test_table_cut (pread)", test_table_cut, NULL, NULL, (void *)&cut_modes[CUT_PREAD]},
        {"test_table_cut (mapped)", test_table_cut, NULL, NULL, (void *)&cut_modes[CUT_MAPPED]},
        {"test_table_cut (fault env)", test_table_cut, NULL, NULL,
         (void *)&cut_modes[CUT_FAULT_ENV]},
        {"test_table_cut (map fails)", test_table_cut, NULL, NULL,
         (void *)&cut_modes[CUT_MAP_FAILS]},
        cmocka_unit_test(test_table_cut_before_open),
        cmocka_unit_test(test_mapped_read_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
