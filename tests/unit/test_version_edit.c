/*
 * test_version_edit.c — MANIFEST records: a file's entry and deletion counts
 * round-trip, a record written before the counts existed still decodes (its
 * counts unknown, 0), counts naming no file of the edit are corrupt, and a
 * field this version does not know says a newer version wrote it.
 */
#include "testutil.h"

#include "dbformat.h"
#include "version_edit.h"

/* An internal key for user key k. */
static void ikey(buf *b, const char *k)
{
    assert_true(buf_put_ikey(b, k, strlen(k), 7, TYPE_VALUE));
}

static file_meta *meta(uint64_t number, uint64_t keys, uint64_t deletions)
{
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    ikey(&lo, "a");
    ikey(&hi, "z");
    file_meta *f = file_meta_new(number, 4096, lo.data, lo.len, hi.data, hi.len);
    assert_non_null(f);
    f->keys = keys;
    f->deletions = deletions;
    buf_free(&lo);
    buf_free(&hi);
    return f;
}

/* The edit's i-th added file: level, number, size, keys, deletions. */
static void assert_added(const version_edit *d, int i, int level, uint64_t number, uint64_t size,
                         uint64_t keys, uint64_t deletions)
{
    assert_true(i < d->nadded);
    assert_int_equal(d->added[i].level, level);
    assert_int_equal(d->added[i].f->number, number);
    assert_int_equal(d->added[i].f->size, size);
    assert_int_equal(d->added[i].f->keys, keys);
    assert_int_equal(d->added[i].f->deletions, deletions);
}

static void test_counts_round_trip(void **state)
{
    (void)state;
    version_edit e, d;
    version_edit_init(&e);
    assert_true(version_edit_add_file(&e, 1, meta(12, 1000, 600)));
    assert_true(version_edit_add_file(&e, 2, meta(13, 0, 0))); /* unknown: no counts */
    buf out;
    buf_init(&out);
    assert_true(version_edit_encode(&e, &out));
    ASSERT_OK(version_edit_decode(&d, out.data, out.len));
    assert_int_equal(d.nadded, 2);
    assert_added(&d, 0, 1, 12, 4096, 1000, 600);
    assert_added(&d, 1, 2, 13, 4096, 0, 0);
    version_edit_destroy(&d);
    version_edit_destroy(&e);
    buf_free(&out);
}

/* A new-file record as a MANIFEST before the counts wrote it, byte by byte:
 * tag 7, level, number, size, smallest, largest. */
static void test_old_record_decodes(void **state)
{
    (void)state;
    buf rec, k;
    buf_init(&rec);
    buf_init(&k);
    ikey(&k, "m");
    assert_true(buf_put_varint32(&rec, 7) && buf_put_varint32(&rec, 3) &&
                buf_put_varint64(&rec, 42) && buf_put_varint64(&rec, 8192) &&
                buf_put_length_prefixed(&rec, k.data, k.len) &&
                buf_put_length_prefixed(&rec, k.data, k.len));
    version_edit d;
    ASSERT_OK(version_edit_decode(&d, rec.data, rec.len));
    assert_int_equal(d.nadded, 1);
    assert_added(&d, 0, 3, 42, 8192, 0, 0);
    version_edit_destroy(&d);
    buf_free(&rec);
    buf_free(&k);
}

static void expect_corrupt(const buf *rec)
{
    version_edit d;
    lsm_status *s = version_edit_decode(&d, rec->data, rec->len);
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    lsm_status_free(s);
}

static void test_bad_counts_are_corrupt(void **state)
{
    (void)state;
    buf rec;
    buf_init(&rec);
    /* Counts for file 5, which the edit never added. */
    assert_true(buf_put_varint32(&rec, 8) && buf_put_varint64(&rec, 5) &&
                buf_put_varint64(&rec, 10) && buf_put_varint64(&rec, 1));
    expect_corrupt(&rec);
    /* More deletions than keys. */
    version_edit e;
    version_edit_init(&e);
    assert_true(version_edit_add_file(&e, 1, meta(5, 10, 11)));
    rec.len = 0;
    assert_true(version_edit_encode(&e, &rec));
    expect_corrupt(&rec);
    /* Truncated inside the counts. */
    e.added[0].f->deletions = 3;
    rec.len = 0;
    assert_true(version_edit_encode(&e, &rec));
    rec.len--;
    expect_corrupt(&rec);
    version_edit_destroy(&e);
    buf_free(&rec);
}

/* A field a newer version added (tag 9, whatever follows) is refused as
 * newer, not called damage (fsck would then "repair" a sound store). */
static void test_unknown_field_is_newer(void **state)
{
    (void)state;
    buf rec;
    buf_init(&rec);
    assert_true(buf_put_varint32(&rec, 2) && buf_put_varint64(&rec, 7) &&
                buf_put_varint32(&rec, 9) && buf_put_varint64(&rec, 1));
    version_edit d;
    lsm_status *s = version_edit_decode(&d, rec.data, rec.len);
    assert_non_null(s);
    assert_int_equal(lsm_status_code(s), LSM_NOT_SUPPORTED);
    assert_non_null(strstr(lsm_status_message(s), "newer"));
    lsm_status_free(s);
    buf_free(&rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_round_trip),
        cmocka_unit_test(test_old_record_decodes),
        cmocka_unit_test(test_bad_counts_are_corrupt),
        cmocka_unit_test(test_unknown_field_is_newer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
