/* test_fs_fsinfo.c — fs_info_scan (lsmctl info's numbers): the superblock
 * and the inodes counted by type; a store that is not lsmfs, and a table
 * read that fails, are errors that say so. */
#include "fixture.h"

#include "fault_env.h"
#include "fsinfo.h"
#include "lsm.h"
#include "schema.h"

#include <sys/stat.h>

static fault_env *fe;

static lsm_db *open_db(void)
{
    return tu_open(fault_env_env(fe), 0);
}

static void put(lsm_db *db, const schema_key *k, const void *v, size_t vlen)
{
    ASSERT_OK(lsm_put(db, NULL, k->b, k->len, v, vlen));
}

static void put_inode(lsm_db *db, uint64_t ino, uint32_t mode, uint64_t size)
{
    inode_rec r = {.mode = mode, .nlink = 1, .size = size, .generation = 1};
    char v[INODE_HDR_MAX];
    size_t hlen = inode_encode_hdr(&r, v);
    schema_key k;
    key_inode(&k, ino);
    put(db, &k, v, hlen);
}

/* A superblock, the root, two files (10 and 5000 bytes), a directory, a
 * symlink and a fifo, one of the files marked orphan; in tables. */
static int setup(void **state)
{
    tu_setup(state);
    fe = fault_env_new(lsm_env_default());
    lsm_db *db = open_db();
    schema_super sb = {.version = SCHEMA_VERSION, .chunk_size = 8192, .inline_limit = 1000,
                       .ctime_sec = 1700000000};
    char sv[SCHEMA_SUPER_LEN];
    super_encode(&sb, sv);
    schema_key k;
    key_super(&k);
    put(db, &k, sv, sizeof sv);
    put_inode(db, 1, S_IFDIR | 0755, 4);
    put_inode(db, 2, S_IFREG | 0644, 10);
    put_inode(db, 3, S_IFREG | 0644, 5000);
    put_inode(db, 4, S_IFDIR | 0755, 0);
    put_inode(db, 5, S_IFLNK | 0777, 3);
    put_inode(db, 6, S_IFIFO | 0644, 0);
    key_orphan(&k, 3);
    put(db, &k, "", 0);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    ASSERT_OK(lsm_close(db));
    return 0;
}

static int teardown(void **state)
{
    fault_env_free(fe);
    return tu_teardown(state);
}

static void test_counts(void **state)
{
    (void)state;
    lsm_db *db = open_db();
    struct lsmfs_info in;
    char err[256] = "";
    assert_int_equal(fs_info_scan(db, tu_dir, &in, err, sizeof err), 0);
    assert_int_equal(in.format, SCHEMA_VERSION);
    assert_int_equal(in.chunk_size, 8192);
    assert_int_equal(in.inline_limit, 1000);
    assert_int_equal(in.created, 1700000000);
    assert_int_equal(in.files, 2);
    assert_int_equal(in.dirs, 2);
    assert_int_equal(in.symlinks, 1);
    assert_int_equal(in.others, 1);
    assert_int_equal(in.orphans, 1);
    assert_int_equal(in.file_bytes, 5010);
    ASSERT_OK(lsm_close(db));
}

/* A table read that fails during the scan (the superblock read before it
 * from the cache): EIO, with a message naming the store and the scan. */
static void test_read_error(void **state)
{
    (void)state;
    lsm_db *db = open_db();
    for (uint64_t i = 100; i < 3000; i++) /* inodes in blocks of their own */
        put_inode(db, i, S_IFREG | 0644, i);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    ASSERT_OK(lsm_close(db));
    db = open_db();
    schema_key k;
    key_super(&k);
    char *v = NULL;
    size_t vlen;
    ASSERT_OK(lsm_get(db, NULL, k.b, k.len, &v, &vlen)); /* now cached */
    free(v);
    fault_env_fail(fe, FAULT_READ, ".ldb", EIO, 0, -1);
    struct lsmfs_info in;
    char err[256] = "";
    assert_int_equal(fs_info_scan(db, tu_dir, &in, err, sizeof err), EIO);
    assert_non_null(strstr(err, tu_dir));
    assert_non_null(strstr(err, "reading the inodes"));
    fault_env_clear_failures(fe);
    ASSERT_OK(lsm_close(db));
}

/* A store without a superblock is not lsmfs. */
static void test_not_lsmfs(void **state)
{
    (void)state;
    lsm_db *db = open_db();
    schema_key k;
    key_super(&k);
    ASSERT_OK(lsm_delete(db, NULL, k.b, k.len));
    struct lsmfs_info in;
    char err[256] = "";
    assert_int_equal(fs_info_scan(db, tu_dir, &in, err, sizeof err), EINVAL);
    assert_non_null(strstr(err, "not an lsmfs filesystem"));
    ASSERT_OK(lsm_close(db));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_lsmfs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
