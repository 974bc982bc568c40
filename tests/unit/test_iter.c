/* test_iter.c — the empty and the merging iterator, checked against a
 * reference model of the merged order over array-backed children. */
#include "testutil.h"

#include "coding.h"
#include "iter.h"
#include "status.h"

/* ------------------------------------------------- array-backed iterator */

#define MAX_ENTRIES 64

typedef struct arr_iter {
    iter base;
    int n, pos; /* pos == n or -1: not valid */
    const char *keys[MAX_ENTRIES];
    char vals[MAX_ENTRIES][32]; /* "child/pos": identifies the entry */
    int fail_at;                /* landing on this index fails (-1: never) */
    lsm_status *err;
    int *freed; /* incremented on free */
} arr_iter;

static void ai_land(arr_iter *a, int pos)
{
    if (a->err != NULL) { /* once failed, stays invalid */
        a->pos = -1;
        return;
    }
    if (pos >= 0 && pos == a->fail_at) {
        a->err = status_new(LSM_IO_ERROR, "child failed at %d", pos);
        pos = -1;
    }
    a->pos = pos;
}
static bool ai_valid(const iter *it)
{
    const arr_iter *a = (const arr_iter *)it;
    return a->pos >= 0 && a->pos < a->n;
}
static void ai_seek_first(iter *it)
{
    ai_land((arr_iter *)it, 0);
}
static void ai_seek_last(iter *it)
{
    ai_land((arr_iter *)it, ((arr_iter *)it)->n - 1);
}
static void ai_seek(iter *it, const char *key, size_t n)
{
    arr_iter *a = (arr_iter *)it;
    int i = 0;
    while (i < a->n && bytes_compare(a->keys[i], strlen(a->keys[i]), key, n) < 0)
        i++;
    ai_land(a, i);
}
static void ai_next(iter *it)
{
    assert_true(ai_valid(it));
    ai_land((arr_iter *)it, ((arr_iter *)it)->pos + 1);
}
static void ai_prev(iter *it)
{
    assert_true(ai_valid(it));
    ai_land((arr_iter *)it, ((arr_iter *)it)->pos - 1);
}
static const char *ai_key(const iter *it, size_t *n)
{
    const arr_iter *a = (const arr_iter *)it;
    assert_true(ai_valid(it));
    *n = strlen(a->keys[a->pos]);
    return a->keys[a->pos];
}
static const char *ai_value(const iter *it, size_t *n)
{
    const arr_iter *a = (const arr_iter *)it;
    assert_true(ai_valid(it));
    *n = strlen(a->vals[a->pos]);
    return a->vals[a->pos];
}
static lsm_status *ai_status(const iter *it)
{
    return status_copy(((const arr_iter *)it)->err);
}
static void ai_free(iter *it)
{
    arr_iter *a = (arr_iter *)it;
    if (a->freed)
        ++*a->freed;
    lsm_status_free(a->err);
    free(a);
}
static const struct iter_ops arr_ops = {ai_valid, ai_seek_first, ai_seek_last, ai_seek,   ai_next,
                                        ai_prev,  ai_key,        ai_value,     ai_status, ai_free};

/* keys must be sorted and outlive the iterator. */
static arr_iter *arr_new(int child, const char **keys, int n)
{
    assert_true(n <= MAX_ENTRIES);
    arr_iter *a = calloc(1, sizeof(*a));
    assert_non_null(a);
    a->base.ops = &arr_ops;
    a->n = n;
    a->pos = -1;
    a->fail_at = -1;
    for (int i = 0; i < n; i++) {
        a->keys[i] = keys[i];
        snprintf(a->vals[i], sizeof(a->vals[i]), "%d/%d", child, i);
    }
    return a;
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    return bytes_compare(a, an, b, bn);
}

/* --------------------------------------------------------- the model */

/* The merged stream: every (key, child, pos) sorted by key, child, pos. */
typedef struct entry {
    const char *key;
    char val[32];
    int child, pos;
} entry;

static int entry_cmp(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    int c = strcmp(a->key, b->key);
    if (c == 0)
        c = a->child != b->child ? a->child - b->child : a->pos - b->pos;
    return c;
}

static void expect_at(iter *it, const entry *model, int n, int idx)
{
    if (idx < 0 || idx >= n) {
        assert_false(iter_valid(it));
        return;
    }
    assert_true(iter_valid(it));
    size_t kn, vn;
    const char *k = iter_key(it, &kn);
    const char *v = iter_value(it, &vn);
    if (kn != strlen(model[idx].key) || memcmp(k, model[idx].key, kn) != 0 ||
        vn != strlen(model[idx].val) || memcmp(v, model[idx].val, vn) != 0)
        fail_msg("at %d: got %.*s (%.*s), want %s (%s)", idx, (int)kn, k, (int)vn, v,
                 model[idx].key, model[idx].val);
}

static int lower_bound(const entry *model, int n, const char *key)
{
    int i = 0;
    while (i < n && strcmp(model[i].key, key) < 0)
        i++;
    return i;
}

static const char *const alphabet[] = {"a", "b", "ba", "bb", "c", "d", "da", "e", "f", "g"};
enum { NALPHA = sizeof(alphabet) / sizeof(alphabet[0]) };

static uint64_t rs;
static unsigned rnd(unsigned n)
{
    return (unsigned)(tu_lcg31(&rs) % n);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct setup {
    const char *keys[5][MAX_ENTRIES];
    int counts[5];
    entry model[5 * MAX_ENTRIES];
    int n;
} setup;

/* Random sorted children (some empty; duplicates within and across), and
 * the model of their merge. */
static void random_setup(setup *s, int nchild)
{
    s->n = 0;
    for (int c = 0; c < nchild; c++) {
        int cnt = rnd(4) == 0 ? 0 : (int)rnd(12);
        for (int i = 0; i < cnt; i++)
            s->keys[c][i] = alphabet[rnd(NALPHA)];
        qsort(s->keys[c], (size_t)cnt, sizeof(char *), str_cmp);
        s->counts[c] = cnt;
        for (int i = 0; i < cnt; i++) {
            entry *e = &s->model[s->n++];
            e->key = s->keys[c][i];
            e->child = c;
            e->pos = i;
            snprintf(e->val, sizeof(e->val), "%d/%d", c, i);
        }
    }
    qsort(s->model, (size_t)s->n, sizeof(entry), entry_cmp);
}

static iter *merge_setup(setup *s, int nchild)
{
    iter *children[5];
    for (int c = 0; c < nchild; c++)
        children[c] = &arr_new(c, s->keys[c], s->counts[c])->base;
    return iter_new_merging(children, nchild, cmp_bytes);
}

/* Runs check on `rounds` random merges of each size from 1 to 5 children,
 * drawn from `seed`. */
static void for_random_merges(uint64_t seed, int rounds, void (*check)(iter *it, const setup *s))
{
    rs = seed;
    for (int nchild = 1; nchild <= 5; nchild++) {
        for (int round = 0; round < rounds; round++) {
            setup s;
            random_setup(&s, nchild);
            iter *it = merge_setup(&s, nchild);
            check(it, &s);
            iter_free(it);
        }
    }
}

/* ---------------------------------------------------------------- tests */

static void test_empty_iterator(void **state)
{
    (void)state;
    iter *it = iter_new_empty(NULL);
    assert_non_null(it);
    iter_seek_first(it);
    assert_false(iter_valid(it));
    iter_seek_last(it);
    assert_false(iter_valid(it));
    iter_seek(it, "x", 1);
    assert_false(iter_valid(it));
    assert_null(iter_status(it));
    iter_free(it);

    it = iter_new_empty(status_new(LSM_CORRUPTION, "bad block"));
    assert_false(iter_valid(it));
    lsm_status *s = iter_status(it);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    assert_string_equal(lsm_status_message(s), "bad block");
    lsm_status_free(s);
    iter_free(it);
}

static void scan_both_directions(iter *it, const setup *s)
{
    iter_seek_first(it);
    for (int i = 0; i < s->n; i++, iter_next(it))
        expect_at(it, s->model, s->n, i);
    expect_at(it, s->model, s->n, s->n);
    iter_seek_last(it);
    for (int i = s->n - 1; i >= 0; i--, iter_prev(it))
        expect_at(it, s->model, s->n, i);
    expect_at(it, s->model, s->n, -1);
    assert_null(iter_status(it));
}

static void test_full_scans_both_directions(void **state)
{
    (void)state;
    for_random_merges(1, 200, scan_both_directions);
}

/* Random next/prev/seek with direction changes anywhere, against the model. */
static void random_walk(iter *it, const setup *s)
{
    int idx = -1;
    for (int step = 0; step < 60; step++) {
        bool valid = idx >= 0 && idx < s->n;
        unsigned op = rnd(10);
        if (valid && op < 4) {
            iter_next(it);
            idx++;
        } else if (valid && op < 8) {
            iter_prev(it);
            idx--;
        } else if (op == 8) {
            const char *k = rnd(5) == 0 ? "zz" : alphabet[rnd(NALPHA)];
            iter_seek(it, k, strlen(k));
            idx = lower_bound(s->model, s->n, k);
        } else if (rnd(2)) {
            iter_seek_first(it);
            idx = 0;
        } else {
            iter_seek_last(it);
            idx = s->n - 1;
        }
        expect_at(it, s->model, s->n, idx);
    }
}

static void test_random_walks(void **state)
{
    (void)state;
    for_random_merges(2, 300, random_walk);
}

/* The same key in three children: lower index first going forward, and the
 * exact reverse going backward, across direction switches. */
static void test_duplicates_across_children(void **state)
{
    (void)state;
    const char *c0[] = {"a", "b"}, *c1[] = {"b"}, *c2[] = {"b", "c"};
    iter *children[3] = {&arr_new(0, c0, 2)->base, &arr_new(1, c1, 1)->base,
                         &arr_new(2, c2, 2)->base};
    iter *it = iter_new_merging(children, 3, cmp_bytes);
    const char *fwd[] = {"0/0", "0/1", "1/0", "2/0", "2/1"};
    size_t n;
    iter_seek_first(it);
    for (int i = 0; i < 5; i++, iter_next(it))
        assert_string_equal(fwd[i], iter_value(it, &n));
    assert_false(iter_valid(it));
    iter_seek_last(it);
    for (int i = 4; i >= 0; i--, iter_prev(it))
        assert_string_equal(fwd[i], iter_value(it, &n));

    iter_seek(it, "b", 1); /* at 0/1 */
    assert_string_equal(iter_value(it, &n), "0/1");
    iter_next(it); /* 1/0 */
    iter_prev(it); /* back to 0/1 */
    assert_string_equal(iter_value(it, &n), "0/1");
    iter_next(it);
    iter_next(it); /* 2/0 */
    assert_string_equal(iter_value(it, &n), "2/0");
    iter_prev(it);
    assert_string_equal(iter_value(it, &n), "1/0");
    iter_next(it);
    assert_string_equal(iter_value(it, &n), "2/0");
    iter_free(it);
}

static void test_empty_children(void **state)
{
    (void)state;
    int freed = 0;
    iter *children[4];
    for (int i = 0; i < 4; i++) {
        arr_iter *a = arr_new(i, NULL, 0);
        a->freed = &freed;
        children[i] = &a->base;
    }
    iter *it = iter_new_merging(children, 4, cmp_bytes);
    iter_seek_first(it);
    assert_false(iter_valid(it));
    iter_seek_last(it);
    assert_false(iter_valid(it));
    iter_seek(it, "a", 1);
    assert_false(iter_valid(it));
    assert_null(iter_status(it));
    iter_free(it);
    assert_int_equal(freed, 4); /* children are owned by the merge */

    it = iter_new_merging(NULL, 0, cmp_bytes);
    iter_seek_first(it);
    assert_false(iter_valid(it));
    assert_null(iter_status(it));
    iter_free(it);
}

static void test_child_errors_propagated(void **state)
{
    (void)state;
    const char *c0[] = {"a", "c", "e"}, *c1[] = {"b", "d", "f"}, *c2[] = {"x"};
    arr_iter *a0 = arr_new(0, c0, 3), *a1 = arr_new(1, c1, 3), *a2 = arr_new(2, c2, 1);
    a1->fail_at = 1; /* "d" cannot be read */
    iter *children[3] = {&a0->base, &a1->base, &a2->base};
    iter *it = iter_new_merging(children, 3, cmp_bytes);
    iter_seek_first(it);
    size_t n;
    const char *want[] = {"a", "b", "c", "e", "x"}; /* child 1 stops at its error */
    for (int i = 0; i < 5; i++, iter_next(it)) {
        assert_true(iter_valid(it));
        assert_memory_equal(iter_key(it, &n), want[i], 1);
    }
    assert_false(iter_valid(it));
    lsm_status *s = iter_status(it);
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    assert_string_equal(lsm_status_message(s), "child failed at 1");
    lsm_status_free(s);

    /* Two failed children: the lower index's error is reported. */
    a2->err = status_new(LSM_CORRUPTION, "child 2 broken");
    s = iter_status(it);
    assert_string_equal(lsm_status_message(s), "child failed at 1");
    lsm_status_free(s);
    lsm_status_free(a1->err);
    a1->err = NULL;
    ASSERT_FAILS(iter_status(it), LSM_CORRUPTION, NULL);
    iter_free(it);
}

static void test_single_child_passes_through(void **state)
{
    (void)state;
    const char *c0[] = {"k"};
    iter *child = &arr_new(0, c0, 1)->base;
    iter *children[1] = {child};
    iter *it = iter_new_merging(children, 1, cmp_bytes);
    iter_seek_last(it);
    size_t n;
    assert_true(iter_valid(it));
    assert_memory_equal(iter_key(it, &n), "k", 1);
    iter_free(it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_iterator),
        cmocka_unit_test(test_full_scans_both_directions),
        cmocka_unit_test(test_random_walks),
        cmocka_unit_test(test_duplicates_across_children),
        cmocka_unit_test(test_empty_children),
        cmocka_unit_test(test_child_errors_propagated),
        cmocka_unit_test(test_single_child_passes_through),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
