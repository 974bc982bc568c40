/*
 * test_db_table_segments.c — lsm_options.table_segment: flushes and
 * compactions cut tables between segments (as the filesystem's files) once
 * a table (or, in a flush, the segment ahead) is long enough, so the tables
 * of one file written beside others at once hold only its keys and
 * lsm_delete_files_in_range drops them whole; short segments share tables;
 * a flush that fails for space leaves no table behind.
 */
#include "fixture.h"

#include "db_impl.h"
#include "fault_env.h"

#define CHUNK 1000                /* bytes per "chunk" value */
#define SEGMENT_BYTES (32u << 10) /* table_segment_bytes */
#define WBS (256u << 10)          /* write buffer: many flushes */
#define KEY_MAX 32

/* Keys: "F" + a 3-digit file number + a 6-digit chunk index (chunks), or
 * "I" + a file number (records). */
static size_t chunk_key(char *k, int file, int index)
{
    return (size_t)snprintf(k, KEY_MAX, "F%03d%06d", file, index);
}

static uint32_t first_byte(const void *key, size_t n)
{
    return n ? *(const unsigned char *)key : 0;
}

/* The file number of a chunk key + 1, 0 for any other key. */
static uint64_t file_of(const void *key, size_t n)
{
    const char *k = key;
    if (n < 4 || k[0] != 'F')
        return 0;
    return 1 + (uint64_t)((k[1] - '0') * 100 + (k[2] - '0') * 10 + (k[3] - '0'));
}

static lsm_db *open_segmented(lsm_env *env)
{
    lsm_options o;
    tu_db_options(&o, env, WBS);
    o.target_file_size = 4 * WBS;
    o.table_partition = first_byte;
    o.table_segment = file_of;
    o.table_segment_bytes = SEGMENT_BYTES;
    return tu_open_with(&o);
}

static void put_chunk(lsm_db *db, int file, int index)
{
    char k[KEY_MAX], v[CHUNK];
    uint64_t x = (uint64_t)file << 32 | (uint64_t)index | 1;
    for (size_t i = 0; i < sizeof v; i += 8) { /* incompressible */
        uint64_t r = tu_xorshift64(&x);
        memcpy(v + i, &r, sizeof v - i < 8 ? sizeof v - i : 8);
    }
    ASSERT_OK(lsm_put(db, NULL, k, chunk_key(k, file, index), v, sizeof v));
}

/* Files 1-3 written at once, a chunk of each in turn, and file 0 (a short
 * segment in every flush, just before file 1) now and then, with records. */
static void write_at_once(lsm_db *db, int chunks)
{
    for (int i = 0; i < chunks; i++) {
        for (int f = 1; f <= 3; f++)
            put_chunk(db, f, i);
        if (i % 25 == 0) {
            put_chunk(db, 0, i / 25);
            char k[KEY_MAX];
            int n = snprintf(k, sizeof k, "I%03d", i % 4);
            ASSERT_OK(lsm_put(db, NULL, k, (size_t)n, "rec", 3));
        }
    }
}

static void wait_flushed(lsm_db *db)
{
    for (int i = 0; i < 3000 && (tu_prop(db, "lsm.immutable-memtables") > 0 ||
                                 tu_prop(db, "lsm.background-busy") != 0);
         i++)
        usleep(1000);
}

/* The bytes file f's chunks take in tables. */
static uint64_t file_bytes(lsm_db *db, int f)
{
    char b[KEY_MAX], e[KEY_MAX];
    size_t bn = chunk_key(b, f, 0), en = chunk_key(e, f + 1, 0);
    return lsm_approximate_size(db, b, bn, e, en);
}

static lsm_status *drop_file(lsm_db *db, int f)
{
    char b[KEY_MAX], e[KEY_MAX];
    size_t bn = chunk_key(b, f, 0), en = chunk_key(e, f + 1, 0);
    return lsm_delete_files_in_range(db, b, bn, e, en);
}

static void count_mixed(void *ctx, const char *lo, const char *hi)
{
    *(int *)ctx += lo[0] == 'F' && memcmp(lo + 1, hi + 1, 3) != 0;
}

/* How many tables hold chunks of two files or more; *tables: how many
 * tables there are. */
static int mixed_tables(lsm_db *db, int *tables)
{
    int mixed = 0;
    *tables = tu_each_table(db, count_mixed, &mixed);
    return mixed;
}

/* Deletes what is left of file f's chunks (the caller's side of
 * lsm_delete_files_in_range) and checks file `other` is whole. */
static void check_after_drop(lsm_db *db, int f, int other, int chunks)
{
    char k[KEY_MAX];
    for (int i = 0; i < chunks; i++)
        ASSERT_OK(lsm_delete(db, NULL, k, chunk_key(k, f, i)));
    for (int i = 0; i < chunks; i++) {
        char *v = NULL;
        size_t vn = 0;
        ASSERT_OK(lsm_get(db, NULL, k, chunk_key(k, other, i), &v, &vn));
        assert_int_equal(vn, CHUNK);
        free(v);
    }
}

/* Three files written at once: most of each one's flushed bytes are in
 * tables of its own, so dropping its range frees them — also for file 1,
 * which follows a short segment in every flush (the cut before a long
 * segment). Before table_segment: every table held all three, none went. */
static void test_files_written_at_once_dropped(void **state)
{
    (void)state;
    enum { CHUNKS = 1500 };
    lsm_db *db = open_segmented(NULL);
    write_at_once(db, CHUNKS);
    wait_flushed(db);
    for (int f = 1; f <= 2; f++) {
        uint64_t before = file_bytes(db, f), dropped = tu_prop(db, "lsm.tables-dropped");
        ASSERT_OK(drop_file(db, f));
        uint64_t after = file_bytes(db, f);
        if (tu_prop(db, "lsm.tables-dropped") < dropped + 4 || after > before / 4)
            fail_msg("file %d: %llu tables dropped, its table bytes %llu -> %llu", f,
                     (unsigned long long)(tu_prop(db, "lsm.tables-dropped") - dropped),
                     (unsigned long long)before, (unsigned long long)after);
        check_after_drop(db, f, 3, CHUNKS);
    }
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
}

/* A compaction's output is cut the same way: after compacting everything,
 * a file's range drops whole. */
static void test_compaction_output_cut(void **state)
{
    (void)state;
    enum { CHUNKS = 1200 };
    lsm_db *db = open_segmented(NULL);
    write_at_once(db, CHUNKS);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    assert_int_equal(tu_prop(db, "lsm.num-files-at-level0"), 0);
    int tables = 0;
    assert_true(mixed_tables(db, &tables) <= 2); /* file 0's short run, and the edge */
    uint64_t before = file_bytes(db, 2);
    ASSERT_OK(drop_file(db, 2));
    uint64_t after = file_bytes(db, 2);
    if (after > before / 8)
        fail_msg("file 2 after a full compaction: table bytes %llu -> %llu of %d tables",
                 (unsigned long long)before, (unsigned long long)after, tables);
    check_after_drop(db, 2, 1, CHUNKS);
    ASSERT_OK(lsm_close(db));
}

/* Short segments (small files) are not a table each: they share tables
 * up to table_segment_bytes. */
static void test_short_segments_share_tables(void **state)
{
    (void)state;
    enum { FILES = 600, PER = 3 }; /* 3 KB a file, 1.8 MB in all */
    lsm_db *db = open_segmented(NULL);
    for (int f = 0; f < FILES; f++)
        for (int i = 0; i < PER; i++)
            put_chunk(db, f, i);
    wait_flushed(db);
    int tables = 0;
    (void)mixed_tables(db, &tables);
    int most = (int)((uint64_t)FILES * PER * CHUNK / SEGMENT_BYTES) +
               2 * (int)tu_prop(db, "lsm.flushes") + 4;
    if (tables > most)
        fail_msg("%d short segments in %d tables (at most %d wanted)", FILES, tables, most);
    ASSERT_OK(lsm_close(db));
}

/* The tables on disk while no flush or compaction attempt runs: one that
 * runs has tables of its own on disk until its failure sweeps them (the
 * flush thread retries every full_disk_retry_us). White-box: holds mu. */
static int tables_between_attempts(lsm_db *db)
{
    mutex_lock(&db->mu);
    while (db->flushing || db->compacting)
        cond_wait(&db->room_cv, &db->mu);
    int n = tu_tables_on_disk();
    mutex_unlock(&db->mu);
    return n;
}

/* A flush that met a full disk after some of its tables were written
 * leaves none of them behind, however often it is retried (they held the
 * space the retry and the deletes need: a full disk did not empty). */
static void test_failed_flush_leaves_no_tables(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), WBS);
    o.table_partition = first_byte;
    o.table_segment = file_of;
    o.table_segment_bytes = SEGMENT_BYTES;
    o.full_disk_retry_us = 10000;
    lsm_db *db = tu_open_with(&o);
    write_at_once(db, 60);                                   /* 180 KB: one memtable, five tables */
    fault_env_fail(fe, FAULT_WRITE, ".ldb", ENOSPC, 30, -1); /* in the third table */
    lsm_status *s = lsm_compact_range(db, "A", 1, "A", 1);   /* flushes */
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    usleep(300000); /* retries */
    assert_true(tu_prop(db, "lsm.full-disk-events") >= 3);
    int live = 0;
    (void)mixed_tables(db, &live);
    int on_disk = tables_between_attempts(db);
    if (on_disk != live)
        fail_msg("after a failed flush: %d tables on disk, %d live", on_disk, live);
    fault_env_clear_failures(fe);
    /* An attempt that began before the disk was freed may still fail once. */
    s = lsm_compact_range(db, "A", 1, "A", 1);
    for (int i = 0; i < 100 && lsm_status_code(s) == LSM_NO_SPACE; i++) {
        lsm_status_free(s);
        usleep(10000);
        s = lsm_compact_range(db, "A", 1, "A", 1);
    }
    ASSERT_OK(s);
    assert_true(tu_prop(db, "lsm.num-files-at-level0") + tu_prop(db, "lsm.num-files-at-level1") +
                    tu_prop(db, "lsm.num-files-at-level2") >=
                4);
    check_after_drop(db, 1, 2, 60);
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_files_written_at_once_dropped),
        TU_TEST(test_compaction_output_cut),
        TU_TEST(test_short_segments_share_tables),
        TU_TEST(test_failed_flush_leaves_no_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
