/* test_fs_dcache.c — a directory's entries in memory (fs/dcache.c): every
 * operation checked against a plain reference model, through growth,
 * removals, compaction and name collisions. */
#include "testutil.h"

#include "dcache.h"
#include "schema.h"

#define MODEL_MAX 4096

/* The reference: a flat array in cookie order, dead entries kept. */
typedef struct ref_ent {
    char name[SCHEMA_NAME_MAX + 1];
    size_t nlen;
    uint64_t cookie, ino;
    uint8_t type;
    uint32_t hint;
    bool live;
} ref_ent;

typedef struct model {
    ref_ent e[MODEL_MAX];
    size_t n, live;
    uint64_t next_cookie;
} model;

static ref_ent *ref_find(model *m, const char *name, size_t nlen)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].live && m->e[i].nlen == nlen && memcmp(m->e[i].name, name, nlen) == 0)
            return &m->e[i];
    return NULL;
}

/* Collects a scan into a reference-shaped array. */
typedef struct collected {
    ref_ent e[MODEL_MAX];
    size_t n, stop_after;
} collected;

static int collect(void *ctx, uint64_t cookie, uint64_t ino, uint8_t type, const char *name,
                   size_t nlen, uint32_t hint)
{
    collected *c = ctx;
    assert_true(c->n < MODEL_MAX);
    ref_ent *e = &c->e[c->n++];
    memcpy(e->name, name, nlen);
    e->nlen = nlen;
    e->cookie = cookie;
    e->ino = ino;
    e->type = type;
    e->hint = hint;
    return c->stop_after != 0 && c->n == c->stop_after ? 7 : 0;
}

/* The scan from `from` must list exactly the model's live entries with
 * cookie >= from, in order. */
static void check_scan(const dcache *c, model *m, uint64_t from)
{
    static collected got;
    got.n = 0;
    got.stop_after = 0;
    assert_int_equal(dcache_scan(c, from, collect, &got), 0);
    size_t j = 0;
    for (size_t i = 0; i < m->n; i++) {
        const ref_ent *w = &m->e[i];
        if (!w->live || w->cookie < from)
            continue;
        assert_true(j < got.n);
        assert_int_equal(got.e[j].cookie, w->cookie);
        assert_int_equal(got.e[j].ino, w->ino);
        assert_int_equal(got.e[j].type, w->type);
        assert_int_equal(got.e[j].hint, w->hint);
        assert_int_equal(got.e[j].nlen, w->nlen);
        assert_memory_equal(got.e[j].name, w->name, w->nlen);
        j++;
    }
    assert_int_equal(j, got.n);
}

static void check_all(const dcache *c, model *m, uint64_t *rng)
{
    assert_int_equal(dcache_count(c), m->live);
    for (size_t i = 0; i < m->n; i++) { /* every name ever added */
        const ref_ent *w = ref_find(m, m->e[i].name, m->e[i].nlen);
        uint64_t ino, cookie;
        uint8_t type;
        bool found = dcache_find(c, m->e[i].name, m->e[i].nlen, &ino, &type, &cookie);
        assert_int_equal(found, w != NULL);
        if (found) {
            assert_int_equal(ino, w->ino);
            assert_int_equal(type, w->type);
            assert_int_equal(cookie, w->cookie);
        }
    }
    check_scan(c, m, 0);
    check_scan(c, m, m->n ? m->e[tu_xorshift64(rng) % m->n].cookie : 0);
    check_scan(c, m, m->next_cookie);
}

/* Names drawn from a small alphabet and short lengths collide often (the
 * same name added, removed, added again) and also hash alike. */
static size_t draw_name(uint64_t *rng, char *out)
{
    size_t nlen = 1 + tu_xorshift64(rng) % 3;
    if (tu_xorshift64(rng) % 16 == 0)
        nlen = 200 + tu_xorshift64(rng) % (SCHEMA_NAME_MAX - 199);
    for (size_t i = 0; i < nlen; i++)
        out[i] = (char)('a' + tu_xorshift64(rng) % 6);
    return nlen;
}

static void random_step(dcache *c, model *m, uint64_t *rng)
{
    char name[SCHEMA_NAME_MAX];
    size_t nlen = draw_name(rng, name);
    ref_ent *w = ref_find(m, name, nlen);
    uint64_t ino = tu_xorshift64(rng), op = tu_xorshift64(rng) % 10;
    uint8_t type = (uint8_t)(tu_xorshift64(rng) % 16);
    uint32_t hint = (uint32_t)tu_xorshift64(rng);
    if (op < 6 && m->n < MODEL_MAX) {
        m->next_cookie += 1 + tu_xorshift64(rng) % 3;
        int err = dcache_add(c, name, nlen, ino, type, m->next_cookie, hint);
        assert_int_equal(err, w ? EEXIST : 0);
        if (w == NULL) {
            ref_ent *e = &m->e[m->n++];
            *e = (ref_ent){.nlen = nlen,
                           .cookie = m->next_cookie,
                           .ino = ino,
                           .type = type,
                           .hint = hint,
                           .live = true};
            memcpy(e->name, name, nlen);
            m->live++;
        }
    } else if (op < 9) {
        assert_int_equal(dcache_remove(c, name, nlen), w ? 0 : ENOENT);
        if (w != NULL) {
            w->live = false;
            m->live--;
        }
    } else {
        assert_int_equal(dcache_retarget(c, name, nlen, ino, type, hint), w ? 0 : ENOENT);
        if (w != NULL) {
            w->ino = ino;
            w->type = type;
            w->hint = hint;
        }
    }
}

static void test_random_against_model(void **state)
{
    (void)state;
    static model m;
    memset(&m, 0, sizeof m);
    m.next_cookie = SCHEMA_FIRST_COOKIE;
    uint64_t rng = 0x5eed5eedULL;
    dcache *c = dcache_new();
    assert_non_null(c);
    for (int step = 0; step < 20000 && m.n < MODEL_MAX; step++) {
        random_step(c, &m, &rng);
        if (step % 97 == 0)
            check_all(c, &m, &rng);
    }
    check_all(c, &m, &rng);
    dcache_free(c);
}

/* Thousands of entries added and most removed again: compaction keeps the
 * survivors, their order and cookies, and the memory held shrinks back. */
static void test_grow_and_compact(void **state)
{
    (void)state;
    static model m;
    memset(&m, 0, sizeof m);
    uint64_t rng = 42;
    dcache *c = dcache_new();
    assert_non_null(c);
    for (size_t i = 0; i < MODEL_MAX; i++) {
        ref_ent *e = &m.e[m.n++];
        e->nlen = (size_t)snprintf(e->name, sizeof e->name, "file%06zu", i);
        e->cookie = 10 + 2 * i;
        e->ino = 1000 + i;
        e->type = 8;
        e->hint = (uint32_t)i;
        e->live = true;
        m.live++;
        assert_int_equal(dcache_add(c, e->name, e->nlen, e->ino, e->type, e->cookie, e->hint), 0);
    }
    size_t full = dcache_bytes(c);
    for (size_t i = 0; i < MODEL_MAX; i++) {
        if (i % 10 == 3)
            continue;
        assert_int_equal(dcache_remove(c, m.e[i].name, m.e[i].nlen), 0);
        m.e[i].live = false;
        m.live--;
    }
    check_all(c, &m, &rng);
    assert_true(dcache_bytes(c) <= full); /* the slot table was rebuilt smaller */
    dcache_free(c);
}

static void test_rejects_bad_input(void **state)
{
    (void)state;
    dcache *c = dcache_new();
    assert_non_null(c);
    char big[SCHEMA_NAME_MAX + 1];
    memset(big, 'x', sizeof big);
    assert_int_equal(dcache_add(c, "a", 0, 1, 8, 5, 0), EINVAL);
    assert_int_equal(dcache_add(c, big, sizeof big, 1, 8, 5, 0), EINVAL);
    assert_int_equal(dcache_add(c, big, SCHEMA_NAME_MAX, 1, 8, 5, 0), 0);
    assert_int_equal(dcache_add(c, "b", 1, 2, 8, 5, 0), EINVAL); /* cookie not above */
    assert_int_equal(dcache_add(c, "b", 1, 2, 8, 4, 0), EINVAL);
    assert_int_equal(dcache_add(c, "b", 1, 2, 8, 6, 0), 0);
    assert_int_equal(dcache_remove(c, "c", 1), ENOENT);
    assert_int_equal(dcache_retarget(c, "c", 1, 3, 4, 0), ENOENT);
    collected *got = calloc(1, sizeof *got);
    assert_non_null(got);
    got->stop_after = 1;
    assert_int_equal(dcache_scan(c, 0, collect, got), 7); /* fn's stop value */
    assert_int_equal(got->n, 1);
    free(got);
    assert_int_equal(dcache_count(c), 2);
    dcache_free(c);
}

/* ---- names aimed at one probe sequence of the old unkeyed FNV-1a ---- */

#define CRAFTED 40000
#define CRAFT_BITS 17 /* slots for CRAFTED names: 2^17 (dcache.c slots_for) */
#define FNV_PRIME 1099511628211ull

/* One FNV-1a step; mod 2^k it depends on the low k bits of h only. */
static uint64_t fnv_step(uint64_t h, unsigned char b)
{
    return (h ^ b) * FNV_PRIME;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = fnv_step(h, (unsigned char)s[i]);
    return h;
}

static bool name_byte(unsigned b)
{
    return b != 0 && b != '/';
}

/* Appends to names (NAME_LEN-byte slots) the names "pNNNNN-" b1 b2 b3 whose
 * FNV-1a has its low CRAFT_BITS bits zero: every table size up to 2^17
 * puts them all in slot 0. From (b1, b2) the state's low bits s are
 * tabled; the last byte then needs (s ^ b3) * P == 0, i.e. s == b3. */
#define NAME_LEN 10
static size_t craft_prefix(unsigned prefix, char (*names)[NAME_LEN], size_t have, size_t want,
                           uint32_t *by_state)
{
    const uint64_t mask = (1ull << CRAFT_BITS) - 1;
    char p[NAME_LEN];
    snprintf(p, sizeof p, "p%05u-", prefix);
    uint64_t h0 = fnv1a(p, 7);
    memset(by_state, 0xff, sizeof(uint32_t) << CRAFT_BITS);
    for (unsigned b1 = 1; b1 < 256; b1++)
        for (unsigned b2 = 1; b2 < 256; b2++)
            if (name_byte(b1) && name_byte(b2))
                by_state[fnv_step(fnv_step(h0, (unsigned char)b1), (unsigned char)b2) & mask] =
                    b1 << 8 | b2;
    for (unsigned b3 = 1; b3 < 256 && have < want; b3++) {
        uint32_t hit = by_state[b3];
        if (!name_byte(b3) || hit == UINT32_MAX)
            continue;
        memcpy(names[have], p, 7);
        names[have][7] = (char)(hit >> 8);
        names[have][8] = (char)(hit & 0xff);
        names[have][9] = (char)b3;
        have++;
    }
    return have;
}

/* The longest probe of a listing of n names (NAME_LEN bytes each). */
static size_t longest_probe_of(char (*names)[NAME_LEN], size_t n)
{
    dcache *c = dcache_new();
    assert_non_null(c);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(dcache_add(c, names[i], NAME_LEN, 100 + i, 8, 10 + i, 0), 0);
    size_t longest = dcache_longest_probe(c);
    uint64_t ino, cookie;
    uint8_t type;
    assert_true(dcache_find(c, names[n / 2], NAME_LEN, &ino, &type, &cookie));
    assert_int_equal(ino, 100 + n / 2);
    dcache_free(c);
    return longest;
}

/* 40,000 names that all share FNV-1a's probe sequence (found in well under
 * a second, as an attacker would) cost no more than 40,000 random names:
 * the longest probe is of the same order (under the unkeyed hash it was
 * all 40,000 of them, and each create scanned them all). A fixed key makes
 * the check repeatable; the daemon's key is random. */
static void test_crafted_names_cost_as_random(void **state)
{
    (void)state;
    dcache_set_key(0x0123456789abcdefull, 0xfedcba9876543210ull);
    char(*crafted)[NAME_LEN] = calloc(CRAFTED, NAME_LEN);
    char(*random)[NAME_LEN] = calloc(CRAFTED, NAME_LEN);
    uint32_t *by_state = malloc(sizeof(uint32_t) << CRAFT_BITS);
    assert_true(crafted != NULL && random != NULL && by_state != NULL);
    size_t n = 0;
    for (unsigned prefix = 0; n < CRAFTED && prefix < 100000; prefix++)
        n = craft_prefix(prefix, crafted, n, CRAFTED, by_state);
    assert_int_equal(n, CRAFTED);
    for (size_t i = 0; i < CRAFTED; i++)
        assert_int_equal(fnv1a(crafted[i], NAME_LEN) & ((1u << CRAFT_BITS) - 1), 0);
    uint64_t rng = 7;
    for (size_t i = 0; i < CRAFTED; i++)
        for (size_t j = 0; j < NAME_LEN; j++)
            random[i][j] = (char)('a' + tu_xorshift64(&rng) % 26);
    size_t worst_crafted = longest_probe_of(crafted, CRAFTED);
    size_t worst_random = longest_probe_of(random, CRAFTED);
    print_message("longest probe: crafted %zu, random %zu\n", worst_crafted, worst_random);
    assert_true(worst_crafted <= 2 * worst_random + 8);
    free(by_state);
    free(random);
    free(crafted);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_grow_and_compact),
        cmocka_unit_test(test_rejects_bad_input),
        cmocka_unit_test(test_crafted_names_cost_as_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
