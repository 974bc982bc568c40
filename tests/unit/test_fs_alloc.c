/* test_fs_alloc.c — the inode allocator's start: a damaged or unreadable
 * record is refused with a message that says what is wrong and where. */
#include "fixture.h"

#include "alloc.h"
#include "lsm.h"
#include "schema.h"

static void put_alloc(lsm_db *db, const char *v, size_t n)
{
    schema_key k;
    key_alloc(&k);
    ASSERT_OK(lsm_put(db, NULL, k.b, k.len, v, n));
}

/* A good record starts the allocator; no message. */
static void test_good_record(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(tu_dir, NULL, 0);
    char v[SCHEMA_ALLOC_LEN];
    alloc_encode(100, v);
    put_alloc(db, v, sizeof v);
    ino_alloc a;
    char err[256] = "";
    assert_int_equal(alloc_init(&a, db, err, sizeof err), 0);
    alloc_destroy(&a);
    ASSERT_OK(lsm_close(db));
}

/* A record of the wrong length says so, with what was expected (before:
 * "damaged inode allocator record", nothing more). */
static void test_damaged_record_says_what(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(tu_dir, NULL, 0);
    put_alloc(db, "1234567", 7);
    ino_alloc a;
    char err[256] = "";
    assert_int_equal(alloc_init(&a, db, err, sizeof err), EIO);
    alloc_destroy(&a);
    assert_non_null(strstr(err, "7 bytes"));
    assert_non_null(strstr(err, "expected 8"));
    ASSERT_OK(lsm_close(db));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_good_record),
        TU_TEST(test_damaged_record_says_what),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
