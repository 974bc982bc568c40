/* test_fs_store_open.c — store_open (fs/store_open.h): a store of a newer
 * format is refused before any write (not one env call that writes); a
 * store that is no lsmfs opens only for STORE_OPEN_ANY; and every env call
 * of a read-write open's read-only format check failed in turn (EIO, and
 * ENOSPC where it applies) gives an error or a sound open, never a crash,
 * and the store opens afterwards with its superblock. */
#include "fixture.h"

#include "fault_env.h"
#include "schema.h"
#include "store_open.h"

/* A store in dir holding a superblock of format `version` (0: none). */
static void make_store(uint32_t version)
{
    lsm_db *db = tu_open_db(tu_dir, NULL, 1 << 20);
    if (version != 0) {
        schema_super sb = {.version = version,
                           .chunk_size = SCHEMA_DEFAULT_CHUNK,
                           .inline_limit = SCHEMA_DEFAULT_INLINE};
        char v[SCHEMA_SUPER_LEN];
        super_encode(&sb, v);
        schema_key k;
        key_super(&k);
        assert_null(lsm_put(db, NULL, k.b, k.len, v, sizeof v));
    }
    assert_null(lsm_close(db));
}

/* Env calls that write: counted by the trace. */
static void count_writes(void *ctx, int stream, uint64_t index, enum fault_call c,
                         const char *path)
{
    (void)stream;
    (void)index;
    (void)path;
    switch (c) {
    case FC_CREATE:
    case FC_APPEND:
    case FC_FLUSH:
    case FC_SYNC:
    case FC_PREALLOC:
    case FC_REMOVE:
    case FC_RENAME:
    case FC_MKDIR:
    case FC_RMDIR:
    case FC_SYNC_FILE:
    case FC_SYNC_DIR:
    case FC_TRUNCATE:
    case FC_LINK:
        (*(int *)ctx)++;
        break;
    default:
        break;
    }
}

static void test_newer_format_refused_before_any_write(void **state)
{
    (void)state;
    make_store(SCHEMA_VERSION + 1);
    char *before = tu_dir_digest(tu_dir);
    fault_env *fe = fault_env_new(lsm_env_default());
    assert_non_null(fe);
    int writes = 0;
    fault_env_count_start(fe, count_writes, &writes);
    store_open_req r = {.dir = tu_dir, .env = fault_env_env(fe), .ctx = "test"};
    lsm_db *db;
    schema_super sb;
    char err[1024];
    assert_int_equal(store_open(&r, &db, &sb, err, sizeof err), EPROTONOSUPPORT);
    fault_env_count_stop(fe);
    assert_null(db);
    char want[256];
    snprintf(want, sizeof want,
             ": lsmfs format version %d is newer than this lsmfs supports (%d): upgrade lsmfs",
             SCHEMA_VERSION + 1, SCHEMA_VERSION);
    if (strstr(err, want) == NULL)
        fail_msg("refusal: %s", err);
    assert_int_equal(writes, 0);
    fault_env_free(fe);
    tu_assert_dir_unchanged(tu_dir, before);
    free(before);
}

static void test_not_lsmfs_only_with_any(void **state)
{
    (void)state;
    make_store(0);
    store_open_req r = {.dir = tu_dir, .flags = STORE_OPEN_RO, .ctx = "test"};
    lsm_db *db;
    schema_super sb;
    char err[1024];
    assert_int_equal(store_open(&r, &db, &sb, err, sizeof err), EINVAL);
    assert_null(db);
    assert_non_null(strstr(err, "not an lsmfs filesystem"));
    r.flags = STORE_OPEN_RW | STORE_OPEN_ANY;
    assert_int_equal(store_open(&r, &db, &sb, err, sizeof err), 0);
    assert_int_equal(sb.version, 0);
    assert_null(lsm_close(db));
}

/* One open (flags) and close through fe (NULL: the default env, and it
 * must succeed). */
static void open_close(fault_env *fe, int flags)
{
    store_open_req r = {
        .dir = tu_dir, .flags = flags, .env = fe != NULL ? fault_env_env(fe) : NULL, .ctx = "test"};
    lsm_db *db;
    schema_super sb;
    char err[1024] = "";
    int e = store_open(&r, &db, &sb, err, sizeof err);
    if (e == 0) {
        assert_int_equal(sb.version, SCHEMA_VERSION);
        lsm_status_free(lsm_close(db));
    } else {
        assert_null(db);
        assert_true(err[0] != '\0');
    }
    if (fe == NULL && e != 0)
        fail_msg("%s", err);
}

#define MAX_CALLS 4096
struct calls {
    enum fault_call c[MAX_CALLS];
    uint64_t n;
};

static void record(void *ctx, int stream, uint64_t index, enum fault_call c, const char *path)
{
    (void)path;
    struct calls *k = ctx;
    if (stream == FAULT_STREAM_MAIN && index < MAX_CALLS) {
        k->c[index] = c;
        k->n = index + 1;
    }
}

static void test_every_call_failed_in_turn(void **state)
{
    (void)state;
    make_store(SCHEMA_VERSION);
    fault_env *fe = fault_env_new(lsm_env_default());
    assert_non_null(fe);
    fault_env_set_max_sleep_us(fe, 1000);
    /* The format check is a read-only open: its calls, and the first of
     * the read-write open after it (the rest is lsm_open's own, which
     * test_io_sweep covers). */
    static struct calls calls;
    fault_env_count_start(fe, record, &calls);
    open_close(fe, STORE_OPEN_RO | STORE_OPEN_SALVAGE);
    fault_env_count_stop(fe);
    uint64_t check = calls.n;
    fault_env_count_start(fe, record, &calls);
    open_close(fe, STORE_OPEN_RW);
    fault_env_count_stop(fe);
    assert_true(check > 3 && calls.n > check);
    int fired = 0;
    for (uint64_t i = 0; i < calls.n && i < check + 8; i++)
        for (enum fault_kind k = FAULT_EIO; k <= FAULT_ENOSPC; k++) {
            if (!fault_kind_applies(k, calls.c[i]))
                continue;
            fault_env_count_start(fe, NULL, NULL);
            fault_env_arm(fe, FAULT_STREAM_MAIN, i, k);
            open_close(fe, STORE_OPEN_RW);
            fired += fault_env_fired(fe, NULL, NULL, 0);
            fault_env_count_stop(fe);
            open_close(NULL, STORE_OPEN_RW); /* afterwards the store opens as before */
        }
    assert_true(fired >= (int)check);
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_newer_format_refused_before_any_write),
        TU_TEST(test_not_lsmfs_only_with_any),
        TU_TEST(test_every_call_failed_in_turn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
