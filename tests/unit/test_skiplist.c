/* test_skiplist.c — inserts search from the last insert's path (the
 * splice): sorted, reverse and random runs against a model, and what each
 * costs in comparisons. (Readers racing the writer: test_memtable.) */
#include "testutil.h"

#include "arena.h"
#include "skiplist.h"

#include <stdlib.h>

static long comparisons;

/* Keys are 8-byte big-endian numbers; the comparator counts its calls. */
static int counting_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    comparisons++;
    return bytes_compare(a, an, b, bn);
}

static void key_of(uint64_t v, char k[8])
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        k[i] = (char)(v & 0xff);
}

static void add(skiplist *sl, uint64_t v)
{
    char k[8];
    key_of(v, k);
    char *e = skiplist_alloc(sl, 1 + 8);
    assert_non_null(e);
    e[0] = 8;
    memcpy(e + 1, k, 8);
    skiplist_insert(sl, e);
}

static bool contains(const skiplist *sl, uint64_t v)
{
    char k[8];
    key_of(v, k);
    return skiplist_contains(sl, k, 8);
}

static uint64_t entry_value(const skiplist_pos *p)
{
    size_t n;
    const unsigned char *k = (const unsigned char *)skiplist_entry_key(skiplist_pos_entry(p), &n);
    assert_int_equal(n, 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | k[i];
    return v;
}

/* The model: which values of [0, MODEL_MAX) are in the list. */
enum { MODEL_MAX = 1 << 16 };

typedef struct fixture {
    arena a;
    skiplist sl;
    bool in[MODEL_MAX];
    size_t count;
    uint64_t rs;
} fixture;

static fixture *fixture_new(void)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    arena_init(&f->a, 0);
    assert_true(skiplist_init(&f->sl, &f->a, counting_cmp));
    f->rs = 42;
    return f;
}

static void fixture_free(fixture *f)
{
    arena_destroy(&f->a);
    free(f);
}

/* Inserts v unless present (the list refuses equal keys). */
static bool put(fixture *f, uint64_t v)
{
    if (f->in[v])
        return false;
    add(&f->sl, v);
    f->in[v] = true;
    f->count++;
    return true;
}

/* The list equals the model: both directions, and a seek to every value. */
static void check_model(fixture *f)
{
    skiplist_pos p;
    skiplist_pos_init(&p, &f->sl);
    skiplist_pos_seek_first(&p);
    for (uint64_t v = 0; v < MODEL_MAX; v++) {
        if (!f->in[v])
            continue;
        assert_true(skiplist_pos_valid(&p));
        assert_int_equal(entry_value(&p), v);
        skiplist_pos_next(&p);
    }
    assert_false(skiplist_pos_valid(&p));
    skiplist_pos_seek_last(&p);
    for (uint64_t v = MODEL_MAX; v-- > 0;) {
        if (!f->in[v])
            continue;
        assert_true(skiplist_pos_valid(&p));
        assert_int_equal(entry_value(&p), v);
        skiplist_pos_prev(&p);
    }
    assert_false(skiplist_pos_valid(&p));
    for (uint64_t v = 0; v < MODEL_MAX; v += 7)
        assert_int_equal(contains(&f->sl, v), f->in[v]);
}

/* Runs of every kind, interleaved, starting anywhere: ascending, descending,
 * random, ascending with gaps (keys already there in between), one key. */
static void test_runs_match_model(void **state)
{
    (void)state;
    fixture *f = fixture_new();
    for (int run = 0; run < 3000; run++) {
        uint64_t start = tu_lcg31(&f->rs) % MODEL_MAX;
        uint64_t len = 1 + tu_lcg31(&f->rs) % 40;
        unsigned kind = (unsigned)(tu_lcg31(&f->rs) % 5);
        for (uint64_t i = 0; i < len; i++) {
            uint64_t v = kind == 0   ? (start + i) % MODEL_MAX
                         : kind == 1 ? (start + MODEL_MAX - i) % MODEL_MAX
                         : kind == 2 ? tu_lcg31(&f->rs) % MODEL_MAX
                         : kind == 3 ? (start + 3 * i) % MODEL_MAX
                                     : start;
            put(f, v);
        }
        if (run % 500 == 0)
            check_model(f);
    }
    check_model(f);
    fixture_free(f);
}

/* Mean comparisons per insert of n keys from next(i). */
static double insert_cost(fixture *f, int n, uint64_t (*next)(fixture *, int))
{
    long before = comparisons;
    int done = 0;
    for (int i = 0; i < n; i++)
        done += put(f, next(f, i));
    assert_int_equal(done, n);
    return (double)(comparisons - before) / n;
}

/* Mean comparisons of a search from the head (skiplist_contains) for the
 * same kind of keys: what an insert cost before the splice. */
static double search_cost(fixture *f, int n, uint64_t (*next)(fixture *, int))
{
    long before = comparisons;
    for (int i = 0; i < n; i++)
        (void)contains(&f->sl, next(f, i));
    return (double)(comparisons - before) / n;
}

enum { PREFILL = 20000, RUN = 4000 };

/* The list holds the even values below 2 * PREFILL. */
static fixture *prefilled(void)
{
    fixture *f = fixture_new();
    for (uint64_t v = 0; v < 2 * PREFILL; v += 2)
        put(f, v);
    return f;
}

static uint64_t odd_up(fixture *f, int i)
{
    (void)f;
    return 2 * (uint64_t)(PREFILL / 4 + i) + 1; /* between two present keys */
}

static uint64_t odd_down(fixture *f, int i)
{
    (void)f;
    return 2 * (uint64_t)(PREFILL / 4 + RUN - i) + 1;
}

static uint64_t past_end(fixture *f, int i)
{
    (void)f;
    return 2 * (uint64_t)PREFILL + (uint64_t)i; /* after every key */
}

static uint64_t random_odd(fixture *f, int i)
{
    (void)i;
    uint64_t v;
    do
        v = 2 * (tu_lcg31(&f->rs) % PREFILL) + 1;
    while (f->in[v]);
    return v;
}

/* A sorted run costs O(1) comparisons per key, also where every new key
 * lands between two old ones; a search from the head costs O(log n). */
static void test_sorted_run_is_linear(void **state)
{
    (void)state;
    fixture *f = prefilled();
    double head = search_cost(f, RUN, odd_up);
    double up = insert_cost(f, RUN, odd_up);
    double append = insert_cost(f, RUN, past_end);
    print_message("comparisons per insert: ascending %.2f, appending %.2f (search from the "
                  "head %.2f)\n",
                  up, append, head);
    assert_true(head > 15);
    assert_true(up <= 8 && up < head / 3);
    assert_true(append <= 3);
    check_model(f);
    fixture_free(f);
}

static void test_reverse_run_is_linear(void **state)
{
    (void)state;
    fixture *f = prefilled();
    double head = search_cost(f, RUN, odd_down);
    double down = insert_cost(f, RUN, odd_down);
    print_message("comparisons per insert: descending %.2f (search from the head %.2f)\n", down,
                  head);
    assert_true(down <= 12 && down < head / 3);
    check_model(f);
    fixture_free(f);
}

/* Random keys get no help from the splice: they are searched from the head
 * (the climb to a level that brackets the key would add to that). */
static void test_random_inserts_cost_about_a_search(void **state)
{
    (void)state;
    fixture *f = prefilled();
    uint64_t rs = f->rs;
    double head = search_cost(f, RUN, random_odd);
    f->rs = rs;
    double rnd = insert_cost(f, RUN, random_odd);
    print_message("comparisons per insert: random %.2f (search from the head %.2f)\n", rnd, head);
    assert_true(rnd <= 1.05 * head);
    check_model(f);
    fixture_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_match_model),
        cmocka_unit_test(test_sorted_run_is_linear),
        cmocka_unit_test(test_reverse_run_is_linear),
        cmocka_unit_test(test_random_inserts_cost_about_a_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
