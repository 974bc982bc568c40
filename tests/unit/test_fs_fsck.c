/* test_fs_fsck.c — fsck on stores built and broken by hand: each damage is
 * reported by a check-only run (exit 4), repaired by -y (exit 1), and the
 * repaired store checks clean (exit 0). */
#include "fixture.h"

#include "alloc_fail.h"
#include "fsck.h"
#include "icount.h"
#include "lsm.h"
#include "inode_fixed.h"
#include "schema.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fixture {
    lsm_db *db;
} fixture;

static void put(fixture *fx, const schema_key *k, const void *v, size_t vlen)
{
    lsm_write_options wo = {.sync = false};
    lsm_status *s = lsm_put(fx->db, &wo, k->b, k->len, v, vlen);
    assert_null(s);
}

/* Inode ino's record r, with payload (a string, NULL: none) in it. */
static void put_rec(fixture *fx, uint64_t ino, const inode_rec *r, const char *payload)
{
    size_t plen = payload ? strlen(payload) : 0;
    char v[INODE_HDR_MAX + 64];
    size_t hlen = inode_encode_hdr(r, v);
    memcpy(v + hlen, payload ? payload : "", plen);
    schema_key k;
    key_inode(&k, ino);
    put(fx, &k, v, hlen + plen);
}

static void put_inode(fixture *fx, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t size,
                      uint64_t parent, uint64_t next_cookie, const char *payload)
{
    inode_rec r = {.mode = mode,
                   .nlink = nlink,
                   .size = size,
                   .generation = 1,
                   .parent = parent,
                   .next_cookie = next_cookie};
    if (S_ISREG(mode) && payload != NULL)
        r.flags = INODE_F_INLINE;
    put_rec(fx, ino, &r, payload);
}

/* A chunked regular file whose record counts `chunks` chunk keys (version
 * 1, count unknown, when chunks is INODE_CHUNKS_UNKNOWN). */
static void put_chunked(fixture *fx, uint64_t ino, uint64_t size, uint64_t chunks)
{
    inode_rec r = {
        .mode = S_IFREG | 0644, .nlink = 1, .size = size, .generation = 1, .chunks = chunks};
    char v[INODE_HDR_MAX];
    size_t len = chunks == INODE_CHUNKS_UNKNOWN ? inode_encode_fixed(&r, 1, v)
                                                : inode_encode_hdr(&r, v);
    schema_key k;
    key_inode(&k, ino);
    put(fx, &k, v, len);
}

static void put_entry(fixture *fx, uint64_t parent, const char *name, uint64_t ino, uint32_t mode,
                      uint64_t cookie)
{
    schema_key k;
    key_dirent(&k, parent, name, strlen(name));
    char dv[DIRENT_VAL_LEN];
    dirent_encode(&(dirent_val){.ino = ino, .type = (uint8_t)(mode >> 12), .cookie = cookie}, dv);
    put(fx, &k, dv, sizeof dv);
    char cv[COOKIE_VAL_HDR + SCHEMA_NAME_MAX];
    size_t cl = cookie_encode(ino, (uint8_t)(mode >> 12), name, strlen(name), cv);
    key_cookie(&k, parent, cookie);
    put(fx, &k, cv, cl);
}

/* A healthy filesystem: / with file "a" (inline "hi") and directory "d". */
static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    tu_setup(state);
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    assert_null(lsm_open(&o, tu_dir, &fx->db));
    schema_super sb = {.version = SCHEMA_VERSION, .chunk_size = 4096, .inline_limit = 1024};
    char sv[SCHEMA_SUPER_LEN], av[SCHEMA_ALLOC_LEN];
    super_encode(&sb, sv);
    alloc_encode(100, av);
    schema_key k;
    key_super(&k);
    put(fx, &k, sv, sizeof sv);
    key_alloc(&k);
    put(fx, &k, av, sizeof av);
    put_inode(fx, 1, S_IFDIR | 0755, 3, 2, 1, 5, NULL);
    put_inode(fx, 2, S_IFREG | 0644, 1, 2, 0, 0, "hi");
    put_inode(fx, 3, S_IFDIR | 0755, 2, 0, 1, 3, NULL);
    put_entry(fx, 1, "a", 2, S_IFREG, 3);
    put_entry(fx, 1, "d", 3, S_IFDIR, 4);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    lsm_status_free(lsm_close(fx->db));
    free(fx);
    return tu_teardown(state);
}

/* Runs fsck on the closed store with its report in *out (malloc'd; NULL:
 * not wanted) and its count of problems in *problems (NULL: not wanted). */
static int run_closed(fixture *fx, bool repair, char **out, int *problems)
{
    lsm_status_free(lsm_close(fx->db));
    fx->db = NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    fsck_options o = {.repair = repair, .out = f};
    fsck_result r;
    int rc = fsck_store(tu_dir, &o, &r);
    fclose(f);
    if (problems != NULL)
        *problems = r.problems;
    if (out != NULL)
        *out = text;
    else
        free(text);
    return rc;
}

/* run_closed, then the store is opened again for the test. */
static int run(fixture *fx, bool repair, int *problems)
{
    int rc = run_closed(fx, repair, NULL, problems);
    lsm_options lo;
    lsm_options_init(&lo);
    assert_null(lsm_open(&lo, tu_dir, &fx->db));
    return rc;
}

/* Check-only finds it, -y fixes it, and then all is clean. */
static void expect_repaired(fixture *fx)
{
    int problems = 0;
    assert_int_equal(run(fx, false, &problems), FSCK_UNFIXED);
    assert_true(problems > 0);
    assert_int_equal(run(fx, true, NULL), FSCK_FIXED);
    assert_int_equal(run(fx, false, &problems), FSCK_CLEAN);
    assert_int_equal(problems, 0);
}

static bool exists(fixture *fx, const schema_key *k)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    char *v = NULL;
    size_t vlen;
    lsm_status *s = lsm_get(fx->db, &ro, k->b, k->len, &v, &vlen);
    free(v);
    bool found = s == NULL;
    lsm_status_free(s);
    return found;
}

/* The inode a directory entry names; 0 if there is no such entry. */
static uint64_t lookup(fixture *fx, uint64_t parent, const char *name)
{
    schema_key k;
    key_dirent(&k, parent, name, strlen(name));
    char *v = NULL;
    size_t vlen;
    lsm_status *s = lsm_get(fx->db, NULL, k.b, k.len, &v, &vlen);
    if (lsm_status_code(s) == LSM_NOT_FOUND) {
        lsm_status_free(s);
        return 0;
    }
    ASSERT_OK(s);
    dirent_val d;
    assert_true(dirent_decode(v, vlen, &d));
    free(v);
    return d.ino;
}

/* Inode ino's stored record; its inline payload as a string into *payload
 * (malloc'd) unless payload is NULL. */
static inode_rec stored_rec_payload(fixture *fx, uint64_t ino, char **payload)
{
    schema_key k;
    key_inode(&k, ino);
    char *v = NULL;
    size_t vlen;
    ASSERT_OK(lsm_get(fx->db, NULL, k.b, k.len, &v, &vlen));
    inode_rec r;
    const char *p;
    size_t plen;
    assert_true(inode_decode(v, vlen, &r, &p, &plen));
    if (payload != NULL) {
        *payload = strndup(p, plen);
        assert_non_null(*payload);
    }
    free(v);
    return r;
}

static inode_rec stored_rec(fixture *fx, uint64_t ino)
{
    return stored_rec_payload(fx, ino, NULL);
}

/* The link count stored in inode ino's record. */
static uint32_t stored_nlink(fixture *fx, uint64_t ino)
{
    return stored_rec(fx, ino).nlink;
}

static void test_clean(void **state)
{
    assert_int_equal(run(*state, false, NULL), FSCK_CLEAN);
}

/* A current inode count record (fs/icount.h) is no unknown key; one that
 * disagrees with the inode records is deleted (the next mount counts). */
static void test_inode_count_record_checked(void **state)
{
    fixture *fx = *state;
    assert_int_equal(icount_save(fx->db, 3), 0);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    assert_int_equal(icount_save(fx->db, 5), 0);
    expect_repaired(fx);
    bool current = true;
    uint64_t count;
    assert_int_equal(icount_current(fx->db, &current, &count), 0);
    assert_false(current);
}

static void test_dangling_entry_dropped(void **state)
{
    fixture *fx = *state;
    put_entry(fx, 1, "ghost", 77, S_IFREG, 5);
    put_inode(fx, 1, S_IFDIR | 0755, 3, 3, 1, 6, NULL);
    expect_repaired(fx);
    assert_int_equal(lookup(fx, 1, "ghost"), 0);
}

/* A short record of either form (compact, or fixed as older lsmfs wrote
 * it) is damage fsck names and deletes, with the entry naming it. */
static void test_short_records_of_each_version(void **state)
{
    fixture *fx = *state;
    inode_rec r = {.mode = S_IFREG | 0644, .nlink = 1, .size = 0, .generation = 1};
    char v[INODE_HDR_MAX];
    for (int form = 0; form < 2; form++) {
        size_t n = form == 0 ? inode_encode_hdr(&r, v) : inode_encode_fixed(&r, 2, v);
        schema_key k;
        key_inode(&k, 9);
        put(fx, &k, v, n - 1);
        put_entry(fx, 1, "short", 9, S_IFREG, 5);
        put_inode(fx, 1, S_IFDIR | 0755, 3, 3, 1, 6, NULL);
        expect_repaired(fx);
        assert_false(exists(fx, &k));
        assert_int_equal(lookup(fx, 1, "short"), 0);
    }
}

static void test_unreachable_inode_reconnected(void **state)
{
    fixture *fx = *state;
    put_inode(fx, 9, S_IFREG | 0600, 1, 2, 0, 0, "xy");
    expect_repaired(fx);
    uint64_t lost_found = lookup(fx, 1, "lost+found");
    assert_true(lost_found != 0);
    assert_int_equal(lookup(fx, lost_found, "#9"), 9);
}

static void test_wrong_link_count_fixed(void **state)
{
    fixture *fx = *state;
    put_inode(fx, 2, S_IFREG | 0644, 5, 2, 0, 0, "hi");
    expect_repaired(fx);
    assert_int_equal(stored_nlink(fx, 2), 1);
}

static void test_chunk_beyond_size_deleted(void **state)
{
    fixture *fx = *state;
    put_chunked(fx, 4, 100, 1); /* 100 bytes, one chunk */
    put_entry(fx, 3, "f", 4, S_IFREG, 3);
    put_inode(fx, 3, S_IFDIR | 0755, 2, 1, 1, 4, NULL);
    schema_key k;
    key_chunk(&k, 4, 0);
    put(fx, &k, "data", 4);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    key_chunk(&k, 4, 3); /* bytes 12288.. of a 100-byte file */
    put(fx, &k, "junk", 4);
    expect_repaired(fx);
    assert_false(exists(fx, &k));
    key_chunk(&k, 4, 0);
    assert_true(exists(fx, &k));
}

/* A record's chunk count that disagrees with the chunk keys is reported
 * and set to the keys' count (before: never checked, and st_blocks lied);
 * a chunk deleted as beyond the size is not counted; a record of version 1
 * (count unknown) is no problem. */
static void test_chunk_count_fixed(void **state)
{
    fixture *fx = *state;
    put_chunked(fx, 4, 3 * 4096, 5);
    put_entry(fx, 3, "f", 4, S_IFREG, 3);
    put_inode(fx, 3, S_IFDIR | 0755, 2, 1, 1, 4, NULL);
    schema_key k;
    key_chunk(&k, 4, 0);
    put(fx, &k, "data", 4);
    key_chunk(&k, 4, 2);
    put(fx, &k, "data", 4);
    key_chunk(&k, 4, 9); /* beyond the size: deleted, not counted */
    put(fx, &k, "junk", 4);
    char *out = NULL;
    assert_int_equal(run_closed(fx, false, &out, NULL), FSCK_UNFIXED);
    if (strstr(out, "inode 4: chunk count 5, should be 2") == NULL)
        fail_msg("no chunk count problem reported:\n%.600s", out);
    free(out);
    expect_repaired(fx);
    assert_int_equal(stored_rec(fx, 4).chunks, 2);
    put_chunked(fx, 4, 3 * 4096, INODE_CHUNKS_UNKNOWN);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    put_inode(fx, 2, S_IFREG | 0644, 1, 2, 0, 0, "hi"); /* inline: no chunk */
    inode_rec r = stored_rec(fx, 2);
    r.chunks = 1;
    put_rec(fx, 2, &r, "hi");
    expect_repaired(fx);
    assert_int_equal(stored_rec(fx, 2).chunks, 0);
}

/* A regular inline file of format 4: its bytes apart under 'L' ino
 * (schema.h's inode_bytes_apart), none when bytes is NULL. */
static void put_apart(fixture *fx, uint64_t ino, uint64_t size, const char *bytes)
{
    inode_rec r = {.mode = S_IFREG | 0644, .nlink = 1, .size = size, .generation = 1,
                   .flags = INODE_F_INLINE};
    inode_rec_place(&r);
    char v[INODE_HDR_MAX];
    schema_key k;
    key_inode(&k, ino);
    put(fx, &k, v, inode_encode_hdr(&r, v));
    key_inline(&k, ino);
    if (bytes != NULL)
        put(fx, &k, bytes, strlen(bytes));
}

/* fsck's report of a check-only run, malloc'd; the store is open again. */
static char *report(fixture *fx)
{
    char *out = NULL;
    assert_int_equal(run_closed(fx, false, &out, NULL), FSCK_UNFIXED);
    lsm_options lo;
    lsm_options_init(&lo);
    assert_null(lsm_open(&lo, tu_dir, &fx->db));
    return out;
}

static void expect_reported(fixture *fx, const char *what)
{
    char *out = report(fx);
    if (strstr(out, what) == NULL)
        fail_msg("'%s' not reported:\n%.600s", what, out);
    free(out);
    expect_repaired(fx);
}

/* The 'L' key of a file whose bytes are apart: found clean; one of no
 * inode, of an empty file or of a file whose record holds its bytes is
 * stray and deleted; one longer than the file is trimmed; one missing is
 * damage, repaired as an empty one (the file reads as zeros). Before:
 * fsck knew no 'L' key (deleted it as of an unknown kind) and took a
 * record missing it as clean. */
static void test_inline_data_apart_checked(void **state)
{
    fixture *fx = *state;
    put_apart(fx, 2, 5, "hello");
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    schema_key k;
    key_inline(&k, 2);
    put(fx, &k, "hello, world", 12);
    expect_reported(fx, "inline data of inode 2 runs past the file size");
    char *v = NULL;
    size_t vlen;
    ASSERT_OK(lsm_get(fx->db, NULL, k.b, k.len, &v, &vlen));
    assert_true(vlen == 5 && memcmp(v, "hello", 5) == 0);
    free(v);

    key_inline(&k, 77);
    put(fx, &k, "x", 1);
    expect_reported(fx, "stray inline data of inode 77 (no such inode)");
    assert_false(exists(fx, &k));

    put_apart(fx, 2, 0, NULL);
    key_inline(&k, 2);
    put(fx, &k, "", 0);
    expect_reported(fx, "stray inline data of inode 2 (an empty file)");
    assert_false(exists(fx, &k));

    put_inode(fx, 2, S_IFREG | 0644, 1, 2, 0, 0, "hi"); /* bytes in the record */
    put(fx, &k, "hi", 2);
    expect_reported(fx, "stray inline data of inode 2 (not a file with its inline data apart)");
    assert_false(exists(fx, &k));
    char *payload = NULL;
    stored_rec_payload(fx, 2, &payload);
    assert_string_equal(payload, "hi");
    free(payload);

    put_apart(fx, 2, 5, NULL);
    expect_reported(fx, "inode 2: inline data missing (reads as zeros)");
    ASSERT_OK(lsm_get(fx->db, NULL, k.b, k.len, &v, &vlen));
    assert_int_equal(vlen, 0);
    free(v);
}

/* A record whose bytes are apart keeps no payload: one found in it is
 * dropped by the rewrite, the 'L' key left. */
static void test_apart_record_keeps_no_payload(void **state)
{
    fixture *fx = *state;
    put_apart(fx, 2, 2, "hi");
    inode_rec r = stored_rec(fx, 2);
    put_rec(fx, 2, &r, "hi");
    expect_reported(fx, "inode 2: inline data longer than allowed");
    char *payload = NULL;
    r = stored_rec_payload(fx, 2, &payload);
    assert_string_equal(payload, "");
    free(payload);
    assert_true(inode_bytes_apart(&r));
    schema_key k;
    key_inline(&k, 2);
    assert_true(exists(fx, &k));
}

static void test_unlinked_inode_gets_orphan_mark(void **state)
{
    fixture *fx = *state;
    put_inode(fx, 8, S_IFREG | 0644, 0, 0, 0, 0, NULL);
    expect_repaired(fx);
    schema_key k;
    key_orphan(&k, 8);
    assert_true(exists(fx, &k));
}

/* The unlink that marks an orphan leaves its record as it was: a marked
 * inode without names is an orphan whatever its link count (neither
 * reconnected nor "fixed"); a marked inode that still has a name loses its
 * mark. */
static void test_orphan_mark_decides_over_link_count(void **state)
{
    fixture *fx = *state;
    put_inode(fx, 8, S_IFREG | 0644, 1, 2, 0, 0, "hi");
    schema_key k;
    key_orphan(&k, 8);
    put(fx, &k, "", 0);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    assert_int_equal(stored_nlink(fx, 8), 1);
    assert_int_equal(lookup(fx, 1, "lost+found"), 0);
    key_orphan(&k, 2); /* "a", named by / */
    put(fx, &k, "", 0);
    expect_repaired(fx);
    assert_false(exists(fx, &k));
    key_orphan(&k, 8);
    assert_true(exists(fx, &k));
}

static void test_missing_readdir_index_added(void **state)
{
    fixture *fx = *state;
    schema_key k;
    key_cookie(&k, 1, 3);
    lsm_write_options wo = {.sync = false};
    assert_null(lsm_delete(fx->db, &wo, k.b, k.len));
    expect_repaired(fx);
    assert_true(exists(fx, &k));
}

static void put_xattr(fixture *fx, uint64_t ino, const char *name, const char *val)
{
    schema_key k;
    key_xattr(&k, ino, name, strlen(name));
    put(fx, &k, val, strlen(val));
}

/* Xattrs an earlier version stored outside the namespaces lsmfs keeps
 * (system.* but the two ACL names, others): -n reports them and writes
 * nothing, -y deletes them and keeps the rest (before: not reported). */
static void test_unsupported_xattr_deleted(void **state)
{
    fixture *fx = *state;
    inode_rec r = {.mode = S_IFREG | 0644,
                   .nlink = 1,
                   .size = 2,
                   .generation = 1,
                   .flags = INODE_F_INLINE | INODE_F_XATTR};
    put_rec(fx, 2, &r, "hi");
    put_xattr(fx, 2, "user.ok", "1");
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    put_xattr(fx, 2, "system.evil", "2");
    put_xattr(fx, 2, "lsmfs.old", "3");
    lsm_status_free(lsm_close(fx->db));
    fx->db = NULL;
    char *before = tu_dir_digest(tu_dir);
    char *out = NULL;
    int problems = 0;
    assert_int_equal(run_closed(fx, false, &out, &problems), FSCK_UNFIXED);
    tu_assert_dir_unchanged(tu_dir, before);
    free(before);
    assert_int_equal(problems, 2);
    assert_non_null(strstr(out, "'system.evil' is in no namespace lsmfs keeps"));
    assert_non_null(strstr(out, "'lsmfs.old'"));
    free(out);
    assert_int_equal(run_closed(fx, true, NULL, NULL), FSCK_FIXED);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    schema_key k;
    key_xattr(&k, 2, "system.evil", strlen("system.evil"));
    assert_false(exists(fx, &k));
    key_xattr(&k, 2, "lsmfs.old", strlen("lsmfs.old"));
    assert_false(exists(fx, &k));
    key_xattr(&k, 2, "user.ok", strlen("user.ok"));
    assert_true(exists(fx, &k));
}

static void put_super(fixture *fx, uint32_t version)
{
    schema_super sb = {.version = version, .chunk_size = 4096, .inline_limit = 1024};
    char sv[SCHEMA_SUPER_LEN];
    super_encode(&sb, sv);
    schema_key k;
    key_super(&k);
    put(fx, &k, sv, sizeof sv);
}

static uint32_t stored_format(fixture *fx)
{
    schema_key k;
    key_super(&k);
    char *v = NULL;
    size_t vlen;
    ASSERT_OK(lsm_get(fx->db, NULL, k.b, k.len, &v, &vlen));
    schema_super sb;
    assert_int_equal(super_decode(v, vlen, &sb), SUPER_OK);
    free(v);
    return sb.version;
}

/* fsck -y on a store of format 1 that rewrites an inode record (of version
 * 3) marks the store current (SCHEMA_VERSION) in the same repair, as a
 * read-write mount does (before: the store stayed format 1 with records an
 * older lsmfs reads as damage); a repair that writes no record leaves the
 * format. The rewritten record keeps its inline bytes where they were (in
 * it: schema.h's inode_bytes_apart). */
static void test_repair_marks_format(void **state)
{
    fixture *fx = *state;
    put_super(fx, 1);
    schema_key k;
    key_xattr(&k, 77, "user.x", 6); /* of a missing inode: deleted */
    put(fx, &k, "v", 1);
    expect_repaired(fx);
    assert_int_equal(stored_format(fx), 1);
    inode_rec r = {
        .mode = S_IFREG | 0644, .nlink = 5, .size = 2, .generation = 1, .flags = INODE_F_INLINE};
    char v[INODE_HDR_V2_LEN + 2];
    inode_encode_fixed(&r, 1, v); /* version 1: the header without the chunk count */
    memcpy(v + INODE_HDR_V1_LEN, "hi", 2);
    key_inode(&k, 2);
    put(fx, &k, v, INODE_HDR_V1_LEN + 2);
    char *out = NULL;
    assert_int_equal(run_closed(fx, true, &out, NULL), FSCK_FIXED);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    assert_int_equal(stored_format(fx), SCHEMA_VERSION);
    char marked[64];
    snprintf(marked, sizeof marked, "store format 1 marked %d", SCHEMA_VERSION);
    assert_non_null(strstr(out, marked));
    free(out);
    assert_int_equal(stored_nlink(fx, 2), 1);
    assert_int_equal(stored_rec(fx, 2).chunks, 0); /* known now: an inline file has none */
    char *val = NULL;
    size_t vlen;
    ASSERT_OK(lsm_get(fx->db, NULL, k.b, k.len, &val, &vlen));
    assert_int_equal(val[0], INODE_REC_VERSION);
    free(val);
}

static void test_not_lsmfs_is_operational_error(void **state)
{
    fixture *fx = *state;
    schema_key k;
    key_super(&k);
    put(fx, &k, "garbage!garbage!", 16);
    assert_int_equal(run(fx, false, NULL), FSCK_OPERATIONAL);
}

/* ------------------------------------------- damage below the filesystem */

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

enum table_damage { DAMAGE_FOOTER, DAMAGE_INDEX, DAMAGE_TRUNCATE, DAMAGE_DELETE };

/* The healthy filesystem's table, damaged: fsck must never call the store
 * clean or repaired (before: "reading the store: ... 0 problems", exit 0). */
static void expect_table_damage_reported(fixture *fx, enum table_damage how)
{
    /* The superblock in one table, a second file in another (the one
     * damaged): the store opens and the scan meets the damage. */
    lsm_status_free(lsm_close(fx->db));
    lsm_options lo;
    lsm_options_init(&lo);
    assert_null(lsm_open(&lo, tu_dir, &fx->db));
    put_inode(fx, 4, S_IFREG | 0644, 1, 2, 0, 0, "ok");
    put_entry(fx, 1, "b", 4, S_IFREG, 5);
    put_inode(fx, 1, S_IFDIR | 0755, 3, 3, 1, 6, NULL);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    lsm_status_free(lsm_close(fx->db));
    fx->db = NULL;
    char table[400];
    tu_newest_file(tu_dir, "ldb", table, sizeof table);
    off_t size = file_size(table);
    switch (how) {
    case DAMAGE_FOOTER:
        tu_xor_byte(table, size - 10, 0x5a);
        break;
    case DAMAGE_INDEX:
        tu_xor_byte(table, size - 60, 0x5a); /* just before the 48-byte footer: the index block */
        break;
    case DAMAGE_TRUNCATE:
        assert_int_equal(truncate(table, size / 2), 0);
        break;
    case DAMAGE_DELETE:
        assert_int_equal(unlink(table), 0);
        break;
    }
    const char *name = strrchr(table, '/') + 1;
    char number[16];
    snprintf(number, sizeof number, "%.6s", name);
    for (int repair = 0; repair <= 1; repair++) {
        char *out = NULL;
        int rc = run_closed(fx, repair, &out, NULL);
        if (rc != FSCK_UNFIXED && rc != FSCK_OPERATIONAL)
            fail_msg("damage %d, repair %d: exit %d, report:\n%s", how, repair, rc, out);
        if (rc == FSCK_UNFIXED && strstr(out, number) == NULL)
            fail_msg("damage %d: the report does not name table %s:\n%s", how, number, out);
        free(out);
    }
}

static void test_damaged_footer_is_an_error(void **state)
{
    expect_table_damage_reported(*state, DAMAGE_FOOTER);
}

static void test_damaged_index_is_an_error(void **state)
{
    expect_table_damage_reported(*state, DAMAGE_INDEX);
}

static void test_truncated_table_is_an_error(void **state)
{
    expect_table_damage_reported(*state, DAMAGE_TRUNCATE);
}

static void test_deleted_table_is_an_error(void **state)
{
    expect_table_damage_reported(*state, DAMAGE_DELETE);
}

/* Without -y a problem line says what is wrong, not a repair it does not do
 * (before: "error: inode 2: link count 5, should be 1: fixing it"). */
static void test_check_only_promises_no_fix(void **state)
{
    fixture *fx = *state;
    put_inode(fx, 2, S_IFREG | 0644, 5, 2, 0, 0, "hi");
    put_entry(fx, 1, "ghost", 77, S_IFREG, 5);
    char *out = NULL;
    assert_int_equal(run_closed(fx, false, &out, NULL), FSCK_UNFIXED);
    assert_non_null(strstr(out, "link count 5, should be 1"));
    assert_null(strstr(out, "fixing"));
    assert_null(strstr(out, "dropping"));
    free(out);
    assert_int_equal(run_closed(fx, true, &out, NULL), FSCK_FIXED);
    assert_non_null(strstr(out, "fixing: inode 2: link count 5, should be 1: fixing it"));
    free(out);
}

/* A child leaves the store with its log unflushed (a crash): a dangling
 * entry, in the log only. */
static void crash_with_dangling_entry(fixture *fx)
{
    lsm_status_free(lsm_close(fx->db));
    fx->db = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lsm_options o;
        lsm_options_init(&o);
        lsm_db *db = NULL;
        if (lsm_open(&o, tu_dir, &db) != NULL)
            _exit(1);
        fx->db = db;
        for (int i = 0; i < 300; i++) {
            char name[16];
            snprintf(name, sizeof name, "g%03d", i);
            schema_key k;
            key_dirent(&k, 1, name, strlen(name));
            char dv[DIRENT_VAL_LEN];
            dirent_encode(&(dirent_val){.ino = 500 + (uint64_t)i, .type = 8, .cookie = 10}, dv);
            lsm_write_options wo = {.sync = true};
            if (lsm_put(db, &wo, k.b, k.len, dv, sizeof dv) != NULL)
                _exit(1);
        }
        _exit(0); /* no close: the log stays */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* fsck -n reads an unflushed log without replaying it into tables: not a
 * byte of the store changes (before: it wrote tables, a MANIFEST, CURRENT
 * and deleted the log). */
static void test_check_only_changes_nothing(void **state)
{
    fixture *fx = *state;
    crash_with_dangling_entry(fx);
    char *before = tu_dir_digest(tu_dir);
    assert_int_equal(run_closed(fx, false, NULL, NULL), FSCK_UNFIXED);
    tu_assert_dir_unchanged(tu_dir, before);
    free(before);
}

/* A damaged log: -n names it and the byte, changes nothing, exits 4 (before:
 * it said nothing of the log, and the damage was made permanent); -y keeps
 * the prefix (exit 1), after which the store checks clean. */
static void test_damaged_log_named_and_salvaged(void **state)
{
    fixture *fx = *state;
    crash_with_dangling_entry(fx);
    char log[400];
    tu_newest_file(tu_dir, "log", log, sizeof log);
    tu_xor_byte(log, 4000, 0x5a);
    char *before = tu_dir_digest(tu_dir);
    char *out = NULL;
    assert_int_equal(run_closed(fx, false, &out, NULL), FSCK_UNFIXED);
    tu_assert_dir_unchanged(tu_dir, before);
    free(before);
    const char *name = strrchr(log, '/') + 1;
    if (strstr(out, "would drop: the log records left out touched ") == NULL)
        fail_msg("the report does not say which inodes the lost records touched:\n%.600s", out);
    if (strstr(out, name) == NULL || strstr(out, "at byte") == NULL)
        fail_msg("the report does not name %s and the byte:\n%.300s", log, out);
    free(out);
    assert_int_equal(run_closed(fx, true, &out, NULL), FSCK_FIXED);
    assert_non_null(strstr(out, name));
    free(out);
    assert_int_equal(run_closed(fx, false, &out, NULL), FSCK_CLEAN); /* log gone, entries fixed */
    free(out);
    lsm_options lo;
    lsm_options_init(&lo);
    assert_null(lsm_open(&lo, tu_dir, &fx->db));
}

/* fsck_live on the open store (as a mount's daemon runs it): its code, its
 * report in *out (malloc'd), its problems. */
static int run_live(fixture *fx, char **out, int *problems)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    fsck_result r;
    int rc = fsck_live(fx->db, tu_dir, f, &r);
    fclose(f);
    *problems = r.problems;
    *out = text;
    return rc;
}

static void test_live_clean(void **state)
{
    char *out;
    int problems;
    assert_int_equal(run_live(*state, &out, &problems), FSCK_CLEAN);
    assert_int_equal(problems, 0);
    assert_string_equal(out, "");
    free(out);
}

/* The live check finds what fsck -n finds, and writes nothing: the store's
 * sequence stays, the dangling entry stays. */
static void test_live_finds_and_writes_nothing(void **state)
{
    fixture *fx = *state;
    put_entry(fx, 1, "ghost", 77, S_IFREG, 5);
    put_inode(fx, 1, S_IFDIR | 0755, 3, 3, 1, 6, NULL);
    uint64_t seq0, seq1;
    assert_true(lsm_property_u64(fx->db, "lsm.sequence", &seq0));
    char *out;
    int problems;
    assert_int_equal(run_live(fx, &out, &problems), FSCK_UNFIXED);
    assert_true(problems >= 1);
    assert_non_null(strstr(out, "ghost"));
    free(out);
    assert_true(lsm_property_u64(fx->db, "lsm.sequence", &seq1));
    assert_int_equal(seq0, seq1);
    assert_int_equal(lookup(fx, 1, "ghost"), 77);
}

/* ------------------------------------------------------- out of memory */

enum { WIDE_DIRS = 150, WIDE_FILES = 8, WIDE_DIR0 = 10, WIDE_FILE0 = 1000 };

/* The healthy filesystem grown past fsck's first array sizes: 1,353
 * inodes and entries, 151 directories under / (walked at once). */
static void grow_wide_tree(fixture *fx)
{
    schema_key k;
    char av[SCHEMA_ALLOC_LEN];
    alloc_encode(100000, av);
    key_alloc(&k);
    put(fx, &k, av, sizeof av);
    for (uint64_t d = 0; d < WIDE_DIRS; d++) {
        uint64_t dino = WIDE_DIR0 + d;
        char name[32];
        snprintf(name, sizeof name, "w%03llu", (unsigned long long)d);
        put_entry(fx, 1, name, dino, S_IFDIR, 5 + d);
        put_inode(fx, dino, S_IFDIR | 0755, 2, WIDE_FILES, 1, 3 + WIDE_FILES, NULL);
        for (uint64_t f = 0; f < WIDE_FILES; f++) {
            uint64_t fino = WIDE_FILE0 + d * WIDE_FILES + f;
            snprintf(name, sizeof name, "f%llu", (unsigned long long)f);
            put_inode(fx, fino, S_IFREG | 0644, 1, 2, 0, 0, "hi");
            put_entry(fx, dino, name, fino, S_IFREG, 3 + f);
        }
    }
    put_inode(fx, 1, S_IFDIR | 0755, 3 + WIDE_DIRS, 2 + WIDE_DIRS, 1, 5 + WIDE_DIRS, NULL);
}

/* fsck with any one of its allocations failing reports an operational
 * error or the store clean, never a problem it did not find, never a crash
 * (its arrays once recorded a doubled size before the realloc that failed,
 * and the walk then wrote past its stack). */
static void test_out_of_memory_is_an_error(void **state)
{
    fixture *fx = *state;
    grow_wide_tree(fx);
    assert_int_equal(run(fx, false, NULL), FSCK_CLEAN);
    lsm_status_free(lsm_close(fx->db));
    fx->db = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    fsck_options o = {.repair = false, .out = devnull};
    fsck_result r;
    lsm_alloc_hook_arm(LSM_ALLOC_MAIN, 0);
    assert_int_equal(fsck_store(tu_dir, &o, &r), FSCK_CLEAN);
    lsm_alloc_hook_disarm();
    uint64_t total = lsm_alloc_hook_count(LSM_ALLOC_MAIN);
    assert_true(total > 0);
    int failed = 0;
    for (uint64_t n = 1; n <= total; n++) {
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        int rc = fsck_store(tu_dir, &o, &r);
        lsm_alloc_hook_disarm();
        if (rc != FSCK_CLEAN && rc != FSCK_OPERATIONAL)
            fail_msg("allocation %llu of %llu failing: fsck returned %d",
                     (unsigned long long)n, (unsigned long long)total, rc);
        failed += rc == FSCK_OPERATIONAL;
    }
    fclose(devnull);
    assert_true(failed > 0);
    lsm_options lo;
    lsm_options_init(&lo);
    assert_null(lsm_open(&lo, tu_dir, &fx->db));
}

/* The inline payload stored in inode ino's record, or "" (malloc'd). */
static char *stored_payload(fixture *fx, uint64_t ino)
{
    char *payload;
    stored_rec_payload(fx, ino, &payload);
    return payload;
}

/* fsck -y with any one of its allocations failing repairs a wrong link
 * count or gives up (keeping what it wrote before); the file's inline data
 * stays either way (a repair once rewrote the record with no payload when
 * reading it back failed). */
static void test_out_of_memory_repair_keeps_payloads(void **state)
{
    fixture *fx = *state;
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    fsck_options o = {.repair = true, .out = devnull};
    fsck_result r;
    uint64_t n = 0;
    int fixed = 0, gave_up = 0;
    bool damaged = false, fired = true, last_gave_up = false;
    for (n = 1; fired; n++) { /* until allocation n is past the run's last */
        if (!damaged) {
            if (fx->db == NULL) {
                lsm_options lo;
                lsm_options_init(&lo);
                assert_null(lsm_open(&lo, tu_dir, &fx->db));
            }
            put_inode(fx, 2, S_IFREG | 0644, 5, 2, 0, 0, "hi"); /* nlink 5: wrong */
            lsm_status_free(lsm_close(fx->db));
            fx->db = NULL;
            damaged = true;
        }
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        int rc = fsck_store(tu_dir, &o, &r);
        lsm_alloc_hook_disarm();
        fired = lsm_alloc_hook_fired();
        if (rc == FSCK_OPERATIONAL) {
            gave_up++; /* the repairs written before it gave up, if any, stay */
            last_gave_up = true;
            continue;
        }
        if (rc != FSCK_FIXED && !(rc == FSCK_CLEAN && last_gave_up))
            fail_msg("allocation %llu failing: fsck -y returned %d", (unsigned long long)n, rc);
        last_gave_up = false;
        fixed++;
        damaged = false;
        lsm_options lo;
        lsm_options_init(&lo);
        assert_null(lsm_open(&lo, tu_dir, &fx->db));
        char *payload = stored_payload(fx, 2);
        if (strcmp(payload, "hi") != 0)
            fail_msg("allocation %llu failing: fsck -y repaired file 2 into \"%s\"",
                     (unsigned long long)n, payload);
        free(payload);
        uint32_t nlink = stored_nlink(fx, 2);
        if (nlink != 1)
            fail_msg("allocation %llu failing: fsck -y returned %d and left link count %u",
                     (unsigned long long)n, rc, nlink);
    }
    fclose(devnull);
    assert_true(gave_up > 0 && fixed > 0); /* the last run, unfailed, repaired */
    if (fx->db == NULL) {
        lsm_options lo;
        lsm_options_init(&lo);
        assert_null(lsm_open(&lo, tu_dir, &fx->db));
    }
    char *payload = stored_payload(fx, 2);
    assert_string_equal(payload, "hi");
    free(payload);
}

/* A test on a fresh healthy filesystem (see setup). */
#define FSCK_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FSCK_TEST(test_clean),
        FSCK_TEST(test_inode_count_record_checked),
        FSCK_TEST(test_dangling_entry_dropped),
        FSCK_TEST(test_short_records_of_each_version),
        FSCK_TEST(test_unreachable_inode_reconnected),
        FSCK_TEST(test_wrong_link_count_fixed),
        FSCK_TEST(test_chunk_beyond_size_deleted),
        FSCK_TEST(test_chunk_count_fixed),
        FSCK_TEST(test_inline_data_apart_checked),
        FSCK_TEST(test_apart_record_keeps_no_payload),
        FSCK_TEST(test_unlinked_inode_gets_orphan_mark),
        FSCK_TEST(test_orphan_mark_decides_over_link_count),
        FSCK_TEST(test_missing_readdir_index_added),
        FSCK_TEST(test_unsupported_xattr_deleted),
        FSCK_TEST(test_repair_marks_format),
        FSCK_TEST(test_not_lsmfs_is_operational_error),
        FSCK_TEST(test_damaged_footer_is_an_error),
        FSCK_TEST(test_damaged_index_is_an_error),
        FSCK_TEST(test_truncated_table_is_an_error),
        FSCK_TEST(test_deleted_table_is_an_error),
        FSCK_TEST(test_check_only_promises_no_fix),
        FSCK_TEST(test_check_only_changes_nothing),
        FSCK_TEST(test_damaged_log_named_and_salvaged),
        FSCK_TEST(test_live_clean),
        FSCK_TEST(test_live_finds_and_writes_nothing),
        FSCK_TEST(test_out_of_memory_is_an_error),
        FSCK_TEST(test_out_of_memory_repair_keeps_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
