/* test_fs_store_usage.c — statfs's used bytes (fs/store_usage.c): the
 * store directory is listed at most every STORE_USAGE_LIST_MS, the store's
 * accounting (WAL and table bytes) follows writes in between, a listing
 * past the bound equals the directory, and a listing that fails keeps the
 * last one and is tried again. */
#include "testutil.h"

#include "fault_env.h"
#include "store_usage.h"

#include <dirent.h>
#include <sys/stat.h>

#define MS 1000000ULL
#define BOUND_NS ((uint64_t)STORE_USAGE_LIST_MS * MS)

static char dir[256];
static fault_env *fe;
static lsm_db *db;
static store_usage u;

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof dir, "usage");
    fe = fault_env_new(lsm_env_default());
    db = tu_open_db(dir, fault_env_env(fe), 1 << 20);
    store_usage_init(&u);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    store_usage_destroy(&u);
    lsm_status_free(lsm_close(db));
    fault_env_free(fe);
    tu_rmtree(dir);
    return 0;
}

/* What the directory's files hold but RESERVE, from stat(2) (not the
 * fault env's hidden copies, which it does not list). */
static uint64_t dir_bytes(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    uint64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char p[512];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && strcmp(e->d_name, "RESERVE") != 0 && stat(p, &st) == 0 && S_ISREG(st.st_mode))
            n += (uint64_t)st.st_size;
    }
    closedir(d);
    return n;
}

/* Puts `kib` KiB of values that do not compress. */
static void put_kib(int first, int kib)
{
    char v[1024];
    uint64_t seed = (uint64_t)first + 1;
    for (int i = 0; i < kib; i++) {
        for (size_t j = 0; j < sizeof v; j++)
            v[j] = (char)tu_xorshift64(&seed);
        char k[32];
        snprintf(k, sizeof k, "k%08d", first + i);
        ASSERT_OK(lsm_put(db, NULL, k, strlen(k), v, sizeof v));
    }
}

/* Waits until no flush or compaction runs or is due. */
static void idle(void)
{
    for (int i = 0; i < 1000 && tu_prop(db, "lsm.background-jobs") > 0; i++)
        usleep(10000);
    assert_int_equal(tu_prop(db, "lsm.background-jobs"), 0);
}

static uint64_t usage_at(uint64_t now_ns)
{
    return store_usage_bytes(&u, db, fault_env_env(fe), dir, now_ns);
}

/* Within the bound: no env call at all, and the writes are counted. */
static void test_accounting_between_listings(void **state)
{
    (void)state;
    uint64_t t0 = 5 * BOUND_NS;
    put_kib(0, 64);
    uint64_t b0 = usage_at(t0);
    assert_int_equal(b0, dir_bytes());
    put_kib(1000, 512);
    fault_env_count_start(fe, NULL, NULL);
    uint64_t b = usage_at(t0 + BOUND_NS - 1);
    assert_int_equal(fault_env_calls(fe, FAULT_STREAM_MAIN), 0); /* not listed */
    fault_env_count_stop(fe);
    assert_true(b >= b0 + 512 * 1024);
}

/* Past the bound the directory is listed again: the answer is its size. */
static void test_listing_past_the_bound(void **state)
{
    (void)state;
    uint64_t t0 = 5 * BOUND_NS;
    uint64_t b0 = usage_at(t0);
    put_kib(0, 2048); /* past the write buffer: flushes write tables */
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    idle();
    fault_env_count_start(fe, NULL, NULL);
    uint64_t b = usage_at(t0 + BOUND_NS);
    assert_true(fault_env_calls(fe, FAULT_STREAM_MAIN) > 0);
    fault_env_count_stop(fe);
    assert_int_equal(b, dir_bytes());
    assert_true(b >= b0 + 2048 * 1024 / 2);
}

/* A listing that fails keeps the last one plus the accounting, and the
 * next call lists again. */
static void test_failed_listing_kept(void **state)
{
    (void)state;
    uint64_t t0 = 5 * BOUND_NS;
    uint64_t b0 = usage_at(t0);
    assert_true(b0 > 0);
    put_kib(0, 256);
    fault_env_count_start(fe, NULL, NULL);
    fault_env_arm(fe, FAULT_STREAM_MAIN, 0, FAULT_EIO); /* get_children */
    uint64_t b = usage_at(t0 + BOUND_NS);
    enum fault_call c;
    char path[256];
    assert_true(fault_env_fired(fe, &c, path, sizeof path));
    assert_int_equal(c, FC_LIST);
    fault_env_count_stop(fe);
    assert_true(b >= b0 + 256 * 1024);
    fault_env_count_start(fe, NULL, NULL);
    idle();
    b = usage_at(t0 + BOUND_NS + 1); /* tried again at once */
    assert_true(fault_env_calls(fe, FAULT_STREAM_MAIN) > 0);
    fault_env_count_stop(fe);
    assert_int_equal(b, dir_bytes());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accounting_between_listings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listing_past_the_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_listing_kept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
