/* test_cache.c — the sharded LRU cache: hits and misses, LRU eviction
 * order, capacity by charge, handles pinning entries, erase, replacement,
 * a zero capacity, and concurrent use from 4 threads (run it under
 * SAN=thread too). */
#include "testutil.h"

#include <stdatomic.h>

#include "cache.h"

/* Values are small integers boxed on the heap; the deleter logs them. */
#define MAX_LOG 256
static int deleted[MAX_LOG];
static int ndeleted;

static void log_deleter(const char *key, size_t klen, void *value)
{
    (void)key;
    (void)klen;
    if (ndeleted < MAX_LOG)
        deleted[ndeleted] = *(int *)value;
    ndeleted++;
    free(value);
}

static int *box(int v)
{
    int *p = malloc(sizeof(*p));
    assert_non_null(p);
    *p = v;
    return p;
}

/* Keys are small integers spelled in decimal; returns the length. */
static size_t key_of(int key, char k[16])
{
    return (size_t)snprintf(k, 16, "%d", key);
}

static void put(cache *c, int key, int value, size_t charge)
{
    char k[16];
    cache_handle *h = cache_insert(c, k, key_of(key, k), box(value), charge, log_deleter);
    assert_non_null(h);
    cache_release(c, h);
}

/* The handle of key's entry (NULL if absent), to be released. */
static cache_handle *pin(cache *c, int key)
{
    char k[16];
    return cache_lookup(c, k, key_of(key, k));
}

/* The value cached for key, or -1 (the handle is released at once). */
static int get(cache *c, int key)
{
    cache_handle *h = pin(c, key);
    if (h == NULL)
        return -1;
    int v = *(int *)cache_value(h);
    cache_release(c, h);
    return v;
}

static void erase(cache *c, int key)
{
    char k[16];
    cache_erase(c, k, key_of(key, k));
}

static int setup(void **state)
{
    (void)state;
    ndeleted = 0;
    return 0;
}

static void test_hit_and_miss(void **state)
{
    (void)state;
    cache *c = cache_new(1000);
    assert_int_equal(get(c, 100), -1);
    put(c, 100, 101, 1);
    assert_int_equal(get(c, 100), 101);
    assert_int_equal(get(c, 200), -1);
    put(c, 200, 201, 1);
    assert_int_equal(get(c, 100), 101);
    assert_int_equal(get(c, 200), 201);
    put(c, 100, 102, 1); /* replaces */
    assert_int_equal(get(c, 100), 102);
    assert_int_equal(ndeleted, 1);
    assert_int_equal(deleted[0], 101);
    uint64_t hits, misses;
    cache_stats(c, &hits, &misses);
    assert_int_equal(hits, 4);
    assert_int_equal(misses, 2);
    assert_int_equal(cache_total_charge(c), 2);
    cache_free(c);
    assert_int_equal(ndeleted, 3);
}

static void test_lru_order(void **state)
{
    (void)state;
    cache *c = cache_new_sharded(3, 0);
    put(c, 1, 10, 1);
    put(c, 2, 20, 1);
    put(c, 3, 30, 1);
    assert_int_equal(get(c, 1), 10); /* 1 is now the most recent */
    put(c, 4, 40, 1);                /* evicts 2, the least recent */
    assert_int_equal(ndeleted, 1);
    assert_int_equal(deleted[0], 20);
    assert_int_equal(get(c, 2), -1);
    assert_int_equal(get(c, 3), 30); /* order now: 1 4 3 */
    put(c, 5, 50, 1);                /* evicts 1 */
    assert_int_equal(deleted[1], 10);
    put(c, 6, 60, 1); /* evicts 4 */
    assert_int_equal(deleted[2], 40);
    assert_int_equal(get(c, 3), 30);
    assert_int_equal(get(c, 5), 50);
    assert_int_equal(get(c, 6), 60);
    assert_int_equal(ndeleted, 3);
    cache_free(c);
}

static void test_capacity_by_charge(void **state)
{
    (void)state;
    cache *c = cache_new_sharded(100, 0);
    assert_int_equal(cache_capacity(c), 100);
    put(c, 1, 1, 40);
    put(c, 2, 2, 40);
    assert_int_equal(cache_total_charge(c), 80);
    put(c, 3, 3, 30); /* 110 > 100: the oldest goes */
    assert_int_equal(get(c, 1), -1);
    assert_int_equal(cache_total_charge(c), 70);
    put(c, 4, 4, 100); /* alone fills it: everything else goes */
    assert_int_equal(get(c, 2), -1);
    assert_int_equal(get(c, 3), -1);
    assert_int_equal(get(c, 4), 4);
    assert_int_equal(cache_total_charge(c), 100);
    /* Many small entries: the charge never exceeds capacity for long. */
    for (int i = 100; i < 1000; i++) {
        put(c, i, i, 7);
        assert_true(cache_total_charge(c) <= 100);
    }
    cache_free(c);

    /* Sharded: the whole stays within capacity (+ rounding per shard). */
    c = cache_new(1600);
    for (int i = 0; i < 10000; i++)
        put(c, i, i, 10);
    assert_true(cache_total_charge(c) <= 1600);
    assert_true(cache_total_charge(c) >= 1000); /* and is actually used */
    cache_free(c);
}

static void test_handles_pin(void **state)
{
    (void)state;
    cache *c = cache_new_sharded(10, 0);
    put(c, 1, 11, 1);
    cache_handle *h = pin(c, 1);
    assert_non_null(h);
    for (int i = 2; i < 100; i++) /* far past capacity */
        put(c, i, 1000 + i, 1);
    assert_int_equal(*(int *)cache_value(h), 11);
    assert_int_equal(get(c, 1), 11); /* still cached: it was never evictable */
    for (int i = 0; i < ndeleted; i++)
        assert_int_not_equal(deleted[i], 11);
    cache_release(c, h);
    for (int i = 100; i < 120; i++) /* now it can go */
        put(c, i, 1000 + i, 1);
    assert_int_equal(get(c, 1), -1);
    cache_free(c);
}

static void test_erase(void **state)
{
    (void)state;
    cache *c = cache_new(100);
    put(c, 1, 100, 1);
    put(c, 2, 200, 1);
    erase(c, 3); /* absent: nothing happens */
    assert_int_equal(ndeleted, 0);
    erase(c, 1);
    assert_int_equal(ndeleted, 1);
    assert_int_equal(deleted[0], 100);
    assert_int_equal(get(c, 1), -1);
    assert_int_equal(get(c, 2), 200);

    /* Erased while pinned: gone from the cache, alive for the holder. */
    cache_handle *h = pin(c, 2);
    erase(c, 2);
    assert_int_equal(get(c, 2), -1);
    assert_int_equal(ndeleted, 1);
    assert_int_equal(*(int *)cache_value(h), 200);
    cache_release(c, h);
    assert_int_equal(ndeleted, 2);
    assert_int_equal(cache_total_charge(c), 0);
    cache_free(c);
}

/* Replacing a pinned entry: the holder keeps the old value. */
static void test_replace_pinned(void **state)
{
    (void)state;
    cache *c = cache_new(100);
    put(c, 1, 10, 1);
    cache_handle *h = pin(c, 1);
    put(c, 1, 11, 1);
    assert_int_equal(*(int *)cache_value(h), 10);
    assert_int_equal(get(c, 1), 11);
    assert_int_equal(ndeleted, 0);
    cache_release(c, h);
    assert_int_equal(ndeleted, 1);
    assert_int_equal(deleted[0], 10);
    cache_free(c);
}

static void test_zero_capacity(void **state)
{
    (void)state;
    cache *c = cache_new(0);
    cache_handle *h = cache_insert(c, "k", 1, box(7), 1, log_deleter);
    assert_non_null(h);
    assert_int_equal(*(int *)cache_value(h), 7);
    assert_null(cache_lookup(c, "k", 1)); /* never kept */
    cache_release(c, h);
    assert_int_equal(ndeleted, 1);
    assert_null(cache_lookup(c, "k", 1));
    cache_free(c);
}

static void test_prune_and_ids(void **state)
{
    (void)state;
    cache *c = cache_new(100);
    put(c, 1, 1, 1);
    put(c, 2, 2, 1);
    cache_handle *h = pin(c, 2);
    cache_prune(c);
    assert_int_equal(get(c, 1), -1);
    assert_int_equal(get(c, 2), 2); /* pinned: kept */
    cache_release(c, h);
    uint64_t a = cache_new_id(c), b = cache_new_id(c);
    assert_true(a != 0 && b != a);
    cache_free(c);
}

/* ------------------------------------------------------- concurrency */

#define THREADS 4
#define KEYS 2000
#define OPS 200000

typedef struct boxed {
    uint32_t key;
    uint32_t check; /* key ^ magic: a mixed-up value shows */
} boxed;

static atomic_long created, destroyed, bad_deletes;

/* Runs on worker threads: cmocka's asserts must stay on the main one. */
static void count_deleter(const char *key, size_t klen, void *value)
{
    boxed *b = value;
    uint32_t k = 0;
    if (klen == sizeof(k))
        memcpy(&k, key, sizeof(k));
    if (klen != sizeof(k) || b->key != k)
        atomic_fetch_add(&bad_deletes, 1);
    free(b);
    atomic_fetch_add(&destroyed, 1);
}

typedef struct worker {
    cache *c;
    uint64_t seed;
    long bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    uint64_t x = w->seed;
    cache_handle *held[8] = {0};
    for (int i = 0; i < OPS; i++) {
        tu_xorshift64(&x);
        uint32_t key = (uint32_t)(x % KEYS);
        int op = (int)((x >> 32) % 10);
        if (op < 6) {
            cache_handle *h = cache_lookup(w->c, (char *)&key, sizeof(key));
            if (h) {
                boxed *b = cache_value(h);
                if (b->key != key || b->check != (key ^ 0x5a5a5a5au))
                    w->bad++;
                int slot = (int)((x >> 40) % 8); /* hold some handles a while */
                if (held[slot])
                    cache_release(w->c, held[slot]);
                held[slot] = h;
            }
        } else if (op < 9) {
            boxed *b = malloc(sizeof(*b));
            b->key = key;
            b->check = key ^ 0x5a5a5a5au;
            atomic_fetch_add(&created, 1);
            cache_handle *h =
                cache_insert(w->c, (char *)&key, sizeof(key), b, 1 + key % 5, count_deleter);
            cache_release(w->c, h);
        } else {
            cache_erase(w->c, (char *)&key, sizeof(key));
        }
    }
    for (int s = 0; s < 8; s++)
        if (held[s])
            cache_release(w->c, held[s]);
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    atomic_store(&created, 0);
    atomic_store(&destroyed, 0);
    cache *c = cache_new(1500); /* well under the ~6000 charge of all keys */
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++)
        w[i] = (worker){c, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), 0};
    tu_run_threads(THREADS, work, w, sizeof(w[0]));
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(w[i].bad, 0);
    assert_true(cache_total_charge(c) <= 1500 + 16 * 5);
    uint64_t hits, misses;
    cache_stats(c, &hits, &misses);
    assert_true(hits > 0 && misses > 0);
    assert_true(atomic_load(&destroyed) < atomic_load(&created));
    cache_free(c);
    /* Every value ever inserted was deleted exactly once. */
    assert_int_equal(atomic_load(&destroyed), atomic_load(&created));
    assert_int_equal(atomic_load(&bad_deletes), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_hit_and_miss, setup),
        cmocka_unit_test_setup(test_lru_order, setup),
        cmocka_unit_test_setup(test_capacity_by_charge, setup),
        cmocka_unit_test_setup(test_handles_pin, setup),
        cmocka_unit_test_setup(test_erase, setup),
        cmocka_unit_test_setup(test_replace_pinned, setup),
        cmocka_unit_test_setup(test_zero_capacity, setup),
        cmocka_unit_test_setup(test_prune_and_ids, setup),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
