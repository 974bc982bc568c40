/*
 * test_db_recovery.c — what recovery does with a damaged log, and the
 * read-only open: replay keeps a prefix and stops at the first damage;
 * damage followed by good records refuses the open (naming log and byte)
 * unless salvage_log; a zero hole ends the log quietly; a read_only open
 * changes no byte of the store and refuses every write.
 */
#include "fixture.h"

#include "fault_env.h"
#include "lsm.h"
#include "wal.h"

#include <sys/wait.h>
#include <unistd.h>

static char copy[64];

/* Keys a crashing child writes: over RADOS (an OSD op per unsynced write)
 * fewer, still a log of more than one 32 KiB block. */
#define NKEYS (tu_on_rados() ? 1500 : 3000)
/* On RADOS, the crashing child's lease: the next open waits it out. */
#define CHILD_LEASE_MS 2000
/* Offsets the damage sweep flips a bit at: fewer over RADOS. */
#define DAMAGE_OFFSETS (tu_on_rados() ? 7 : 23)
/* argv[1] of the child (see child_writes). */
#define CHILD_ARG "--crashing-writer"

static int setup(void **state)
{
    tu_mkdtemp(copy, sizeof(copy), "reccopy");
    return tu_setup(state);
}

static int teardown(void **state)
{
    tu_rmtree(copy);
    return tu_teardown(state);
}

static void key_of(char k[32], const char *prefix, int i)
{
    snprintf(k, 32, "%s%05d", prefix, i);
}

/* The child (a fresh process: a RADOS client does not survive a fork, and
 * forked ones would share its random address): writes n keys (values are
 * the keys, every 100th synced) and exits without closing, so the log
 * holds them all. No cmocka here. */
static bool child_writes(const char *d, const char *prefix, int n)
{
    lsm_options o;
    tu_db_options(&o, NULL, 8u << 20);
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, d, &db);
    char k[32];
    for (int i = 0; s == NULL && i < n; i++) {
        key_of(k, prefix, i);
        lsm_write_options wo = {.sync = i % 100 == 0};
        s = lsm_put(db, &wo, k, strlen(k), k, strlen(k));
    }
    if (s != NULL)
        fprintf(stderr, "child writing %s: %s\n", d, lsm_status_message(s));
    return s == NULL;
}

/* A store in d whose live log holds n keys `prefix`NNNNN (a process crash). */
static void crash_after_writes(const char *d, const char *prefix, int n)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char count[16];
        snprintf(count, sizeof count, "%d", n);
        execl("/proc/self/exe", program_invocation_name, CHILD_ARG, d, prefix, count,
              (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tu_wait_unlocked(d);
}

/* A crash after writing n keys k00000.. (crash_after_writes): the live
 * log's path into log, and its bytes in use returned. */
static long crash_with_log(int n, char *log, size_t cap)
{
    crash_after_writes(tu_dir, "k", n);
    tu_newest_file(tu_dir, "log", log, cap);
    return tu_used_bytes(log);
}

static void zero_range(const char *path, long off, long len)
{
    char *z = calloc(1, (size_t)len);
    assert_non_null(z);
    tu_pwrite(path, off, z, (size_t)len);
    free(z);
}

struct reports {
    char text[4096];
    int n;
};

static void collect_report(void *ctx, const char *msg)
{
    struct reports *r = ctx;
    r->n++;
    size_t used = strlen(r->text);
    snprintf(r->text + used, sizeof r->text - used, "%s\n", msg);
}

static lsm_status *open_with_env(const char *d, bool salvage, bool ro, struct reports *rep,
                                 lsm_env *env, lsm_db **db)
{
    lsm_options o;
    lsm_options_init(&o);
    o.env = env;
    o.salvage_log = salvage;
    o.read_only = ro;
    o.report = collect_report;
    o.report_ctx = rep;
    return lsm_open(&o, d, db);
}

static lsm_status *open_with(const char *d, bool salvage, bool ro, struct reports *rep,
                             lsm_db **db)
{
    return open_with_env(d, salvage, ro, rep, tu_env(), db);
}

/* The keys `prefix`0.. present form a prefix, every value as written (never
 * a value that was not written). Returns its length. */
static int prefix_len(lsm_db *db, const char *prefix, int n)
{
    char k[32];
    int have = -1;
    for (int i = 0; i < n; i++) {
        key_of(k, prefix, i);
        char *v = NULL;
        size_t vn = 0;
        lsm_status *s = lsm_get(db, NULL, k, strlen(k), &v, &vn);
        if (lsm_status_code(s) == LSM_NOT_FOUND) {
            lsm_status_free(s);
            if (have < 0)
                have = i;
            continue;
        }
        ASSERT_OK(s);
        if (have >= 0)
            fail_msg("%s present after %d keys absent: not a prefix", k, have);
        if (vn != strlen(k) || memcmp(v, k, vn) != 0)
            fail_msg("%s: a value never written", k);
        free(v);
    }
    return have < 0 ? n : have;
}

/* The child's crash after n writes kept `got` of them (a prefix): all of
 * them locally (the OS had them); on RADOS at least those up to its last
 * sync (what the OSDs had not acknowledged may be gone, as after a power
 * cut). */
static void assert_crash_kept(int got, int n)
{
    int synced = n > 0 ? (n - 1) / 100 * 100 + 1 : 0; /* child_writes syncs every 100th */
    if (tu_on_rados() ? got < synced || got > n : got != n)
        fail_msg("the crash after %d writes (%d synced) kept %d", n, synced, got);
}

/* After a recovery that kept `kept` keys k.., a crash after n new keys
 * n..: a plain open has both (the old log's damage or hole is not met
 * again, or stops nothing of the new log). */
static void assert_next_crash_keeps(int kept, int n)
{
    crash_after_writes(tu_dir, "n", n);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    ASSERT_OK(open_with(tu_dir, false, false, &rep, &db));
    assert_int_equal(prefix_len(db, "k", NKEYS), kept);
    assert_crash_kept(prefix_len(db, "n", n), n);
    ASSERT_OK(lsm_close(db));
}

/* ------------------------------------------------------------------ tests */

/* One flipped byte in the middle of the live log: the open refuses and
 * names the log and the byte (before: the damaged records were skipped and
 * the ones after them applied). */
static void test_mid_log_damage_refuses(void **state)
{
    (void)state;
    char log[400];
    long used = crash_with_log(NKEYS, log, sizeof log);
    tu_xor_byte(log, used / 3, 0x20);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    lsm_status *s = open_with(tu_dir, false, false, &rep, &db);
    assert_null(db);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    const char *base = strrchr(log, '/') + 1;
    assert_non_null(strstr(lsm_status_message(s), base));
    assert_non_null(strstr(lsm_status_message(s), "at byte"));
    lsm_status_free(s);
    /* refusing changed nothing: the same refusal again */
    s = open_with(tu_dir, false, false, &rep, &db);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    lsm_status_free(s);
}

/* A flipped bit in the log's only block, good records after it in the same
 * block: damage in the middle, not a torn tail (before the reader looked
 * for the next good fragment, the rest of the block was dropped quietly,
 * synced records with it). */
static void test_damage_in_last_block_refuses(void **state)
{
    (void)state;
    char log[400];
    long used = crash_with_log(300, log, sizeof log);
    assert_true(used < 32768);
    tu_xor_byte(log, used / 3, 0x04);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    lsm_status *s = open_with(tu_dir, false, false, &rep, &db);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    lsm_status_free(s);
}

/* salvage_log keeps the prefix before the damage, reports what it dropped,
 * and writes the prefix out so the next plain open succeeds with the same
 * data; new writes then survive a crash. */
static void test_salvage_keeps_prefix(void **state)
{
    (void)state;
    char log[400];
    long used = crash_with_log(NKEYS, log, sizeof log);
    tu_xor_byte(log, used / 2, 0x01);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    ASSERT_OK(open_with(tu_dir, true, false, &rep, &db));
    int kept = prefix_len(db, "k", NKEYS);
    assert_true(kept > 0 && kept < NKEYS);
    assert_int_equal(rep.n, 1);
    assert_non_null(strstr(rep.text, strrchr(log, '/') + 1));
    assert_non_null(strstr(rep.text, "record(s)"));
    ASSERT_OK(lsm_close(db));
    rep.n = 0;
    ASSERT_OK(open_with(tu_dir, false, false, &rep, &db));
    assert_int_equal(prefix_len(db, "k", NKEYS), kept);
    assert_int_equal(rep.n, 0);
    ASSERT_OK(lsm_close(db));
    assert_next_crash_keeps(kept, 500);
}

/* Zeros (a page never written back before a power cut) followed by good
 * records end the log there: the open succeeds with the prefix, without
 * salvage; writes after it survive the next crash although the hole is
 * still in the old log (before: the records after the hole applied). */
static void zero_hole_ends_log(int nkeys, bool one_block)
{
    char log[400];
    long used = crash_with_log(nkeys, log, sizeof log);
    assert_true(one_block == (used <= WAL_BLOCK_SIZE));
    long hole = (used / 2) & ~4095L;
    zero_range(log, hole, 4096);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    ASSERT_OK(open_with(tu_dir, false, false, &rep, &db));
    int kept = prefix_len(db, "k", nkeys);
    assert_true(kept > 0 && kept < nkeys);
    assert_int_equal(rep.n, 1);
    assert_non_null(strstr(rep.text, "zero-filled hole"));
    /* a crash with the new writes in the new log only */
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_put(db, &wo, "after", 5, "x", 1));
    ASSERT_OK(lsm_close(db));
    assert_next_crash_keeps(kept, 300);
}

static void test_zero_hole_ends_log(void **state)
{
    (void)state;
    zero_hole_ends_log(NKEYS, false);
}

/* The same with the whole log in its last (only) block: the records after
 * the hole are found there too (before: dropped as a torn tail, unreported,
 * with no epoch). */
static void test_zero_hole_in_last_block_ends_log(void **state)
{
    (void)state;
    zero_hole_ends_log(600, true);
}

/* Every file of the store as in `before` (tu_dir_digest's; freed here) —
 * past its first line, the directory's mtime, which shows a file that came
 * and went — and the store opens. */
static void expect_files_as_before(char *before, struct reports *rep)
{
    char *after = tu_dir_digest(tu_dir);
    if (strcmp(strchr(after, '\n'), strchr(before, '\n')) != 0)
        fail_msg("the files changed:\nbefore:\n%s\nafter:\n%s", before, after);
    free(after);
    free(before);
    lsm_db *db = NULL;
    ASSERT_OK(open_with(tu_dir, false, false, rep, &db));
    ASSERT_OK(lsm_close(db));
}

/* An open that drops records (a zero hole) and then cannot write the
 * epoch into its new log (a full disk) fails and leaves no new file: a
 * refused mount leaves the files as they were (before: an empty
 * NNNNNN.log each time). */
static void test_failed_epoch_leaves_no_log(void **state)
{
    (void)state;
    char log[400];
    long used = crash_with_log(NKEYS, log, sizeof log);
    zero_range(log, (used / 2) & ~4095L, 4096);
    char *before = tu_dir_digest(tu_dir);
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    fault_env_fail(fe, FAULT_WRITE, ".log", ENOSPC, 0, -1);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    lsm_status *s = open_with_env(tu_dir, false, false, &rep, fault_env_env(fe), &db);
    assert_null(db);
    assert_int_equal(lsm_status_code(s), LSM_NO_SPACE);
    lsm_status_free(s);
    fault_env_free(fe);
    expect_files_as_before(before, &rep);
}

/* An open whose flush of the recovered records fails (a table write meets
 * EIO) leaves the files as they were: before, each such open left an empty
 * NNNNNN.log that every later open replayed and synced. */
static void test_failed_recovery_flush_leaves_no_log(void **state)
{
    (void)state;
    char log[400];
    crash_with_log(NKEYS, log, sizeof log);
    char *before = tu_dir_digest(tu_dir);
    fault_env *fe = fault_env_new(tu_env());
    assert_non_null(fe);
    fault_env_fail(fe, FAULT_WRITE, ".ldb", EIO, 0, -1);
    struct reports rep = {{0}, 0};
    for (int i = 0; i < 3; i++) {
        lsm_db *db = NULL;
        lsm_status *s = open_with_env(tu_dir, false, false, &rep, fault_env_env(fe), &db);
        assert_null(db);
        assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
        lsm_status_free(s);
    }
    fault_env_free(fe);
    expect_files_as_before(before, &rep);
}

/* Flipped bits at many offsets of the log, each on a fresh copy: no open
 * ever serves a value that was never written nor a key after a missing one;
 * each open either refuses naming the log, or keeps a prefix. */
static void test_damage_sweep_never_wrong_data(void **state)
{
    (void)state;
    char log[400];
    long used = crash_with_log(NKEYS, log, sizeof log);
    const char *base = strrchr(log, '/') + 1;
    int refused = 0, opened = 0;
    for (long off = 3; off < used; off += used / DAMAGE_OFFSETS + 7) {
        tu_rmtree(copy);
        tu_copy_dir(tu_dir, copy);
        char clog[600];
        snprintf(clog, sizeof clog, "%s/%s", copy, base);
        tu_xor_byte(clog, off, 1 << (off % 8));
        struct reports rep = {{0}, 0};
        lsm_db *db = NULL;
        lsm_status *s = open_with(copy, false, false, &rep, &db);
        if (s != NULL) {
            assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
            assert_non_null(strstr(lsm_status_message(s), base));
            lsm_status_free(s);
            refused++;
            continue;
        }
        opened++;
        (void)prefix_len(db, "k", NKEYS);
        ASSERT_OK(lsm_close(db));
    }
    assert_true(refused > 0);
}

/* A flipped bit in the MANIFEST's only record: the refusal says where and
 * what was expected (before: "MANIFEST-000002: empty MANIFEST"). */
static void test_damaged_manifest_says_where(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(tu_dir, NULL, 0);
    ASSERT_OK(lsm_close(db));
    char path[400], **names;
    int n;
    ASSERT_OK(tu_env()->get_children(tu_env(), tu_dir, &names, &n));
    path[0] = '\0';
    for (int i = 0; i < n; i++)
        if (strncmp(names[i], "MANIFEST-", 9) == 0)
            snprintf(path, sizeof path, "%s/%s", tu_dir, names[i]);
    env_free_children(names, n);
    assert_true(path[0] != '\0');
    tu_xor_byte(path, 9, 0x01);
    struct reports rep = {{0}, 0};
    lsm_status *s = open_with(tu_dir, false, true, &rep, &db);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    assert_non_null(strstr(lsm_status_message(s), "at byte 0"));
    assert_non_null(strstr(lsm_status_message(s), "expected"));
    lsm_status_free(s);
}

/* ------------------------------------------------------------- read-only */

/* A read_only open of a store with an unflushed log serves every key from
 * memory, changes no byte (no LOCK created either), and refuses writes and
 * compactions with LSM_READ_ONLY. */
static void test_read_only_changes_nothing(void **state)
{
    (void)state;
    crash_after_writes(tu_dir, "k", NKEYS);
    char lock[400];
    tu_path(lock, sizeof lock, "LOCK");
    if (tu_env()->file_exists(tu_env(), lock)) /* none on RADOS: the lease is the directory's */
        ASSERT_OK(tu_env()->remove_file(tu_env(), lock));
    char *before = tu_dir_digest(tu_dir);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    ASSERT_OK(open_with(tu_dir, false, true, &rep, &db));
    assert_crash_kept(prefix_len(db, "k", NKEYS), NKEYS);
    lsm_write_options wo = {.sync = false};
    lsm_status *s = lsm_put(db, &wo, "x", 1, "y", 1);
    assert_int_equal(lsm_status_code(s), LSM_READ_ONLY);
    assert_int_equal(lsm_status_errno(s), EROFS);
    lsm_status_free(s);
    s = lsm_delete(db, &wo, "k00001", 6);
    assert_int_equal(lsm_status_code(s), LSM_READ_ONLY);
    lsm_status_free(s);
    ASSERT_OK(lsm_sync(db)); /* nothing of this handle to make durable */
    s = lsm_compact_range(db, NULL, 0, NULL, 0);
    assert_int_equal(lsm_status_code(s), LSM_READ_ONLY);
    lsm_status_free(s);
    ASSERT_OK(lsm_verify(db, NULL, NULL));
    ASSERT_OK(lsm_close(db));
    tu_assert_dir_unchanged(tu_dir, before);
    free(before);
}

/* read_only on a damaged log: refuses as a read-write open would, or with
 * salvage_log serves the prefix from memory; neither changes a byte. */
static void test_read_only_damaged_log(void **state)
{
    (void)state;
    char log[400];
    long used = crash_with_log(NKEYS, log, sizeof log);
    tu_xor_byte(log, used / 2, 0x10);
    char *before = tu_dir_digest(tu_dir);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    lsm_status *s = open_with(tu_dir, false, true, &rep, &db);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    lsm_status_free(s);
    ASSERT_OK(open_with(tu_dir, true, true, &rep, &db));
    int kept = prefix_len(db, "k", NKEYS);
    assert_true(kept > 0 && kept < NKEYS);
    ASSERT_OK(lsm_close(db));
    tu_assert_dir_unchanged(tu_dir, before);
    free(before);
}

/* A read-only open shares the lock with other readers' intent but not with
 * a writer: a read-write open in use makes it busy. */
static void test_read_only_respects_writer_lock(void **state)
{
    (void)state;
    lsm_db *w = tu_open_db(tu_dir, NULL, 0);
    struct reports rep = {{0}, 0};
    lsm_db *db = NULL;
    lsm_status *s = open_with(tu_dir, false, true, &rep, &db);
    assert_int_equal(lsm_status_code(s), LSM_BUSY);
    lsm_status_free(s);
    ASSERT_OK(lsm_close(w));
    ASSERT_OK(open_with(tu_dir, false, true, &rep, &db));
    ASSERT_OK(lsm_close(db));
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], CHILD_ARG) == 0) {
        tu_rados_lease_ms = CHILD_LEASE_MS;
        _exit(child_writes(argv[2], argv[3], atoi(argv[4])) ? 0 : 1);
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_mid_log_damage_refuses),
        T(test_damage_in_last_block_refuses),
        T(test_salvage_keeps_prefix),
        T(test_zero_hole_ends_log),
        T(test_zero_hole_in_last_block_ends_log),
        T(test_failed_epoch_leaves_no_log),
        T(test_failed_recovery_flush_leaves_no_log),
        T(test_damage_sweep_never_wrong_data),
        T(test_damaged_manifest_says_where),
        T(test_read_only_changes_nothing),
        T(test_read_only_damaged_log),
        T(test_read_only_respects_writer_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
