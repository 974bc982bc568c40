/*
 * test_db_backup.c — incremental backups (lsm_backup & co.): a chain of
 * backups with writes between and a purge in the middle, each remaining
 * one restored and compared key by key with what the store held when it
 * was taken; a second backup after a small change copies a small part of
 * what the first did; a damaged byte in a shared table is found by verify
 * (file and offset) and refused by restore; a damaged list stops a purge;
 * a backup of a closed store; and an I/O error, a full disk or a power cut
 * at any env call of a backup leaves the store as it was, no partial
 * backup listed, and the earlier backup sound.
 */
#include "fixture.h"

#include "crc32c.h"
#include "fault_sweep.h"

#include <sys/wait.h>

enum { NKEYS = 2000, CHAIN = 5 };

static char live[300], bdir[300];

static int setup(void **state)
{
    tu_setup(state);
    tu_path(live, sizeof live, "live");
    tu_path(bdir, sizeof bdir, "backups");
    return 0;
}

/* Key i at generation gen: 200 bytes that do not compress, different
 * for each generation. */
static void put_key(lsm_db *db, int i, int gen)
{
    char k[32], v[200];
    snprintf(k, sizeof k, "key%05d", i);
    uint64_t r = (uint64_t)i * 1000003 + (uint64_t)gen * 7919 + 1;
    for (size_t n = 0; n < sizeof v; n += 8) {
        uint64_t x = tu_xorshift64(&r);
        memcpy(v + n, &x, 8);
    }
    ASSERT_OK(lsm_put(db, NULL, k, strlen(k), v, sizeof v));
}

static void put_range(lsm_db *db, int from, int to, int gen)
{
    for (int i = from; i < to; i++)
        put_key(db, i, gen);
}

static bool put_hex(buf *b, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char h[3];
        snprintf(h, sizeof h, "%02x", (unsigned char)p[i]);
        if (!buf_append(b, h, 2))
            return false;
    }
    return true;
}

/* Everything db holds, as one string "key=value\n..." in hex (malloc'd). */
static char *dump(lsm_db *db)
{
    buf b;
    buf_init(&b);
    lsm_iter *it = lsm_iter_new(db, NULL);
    assert_non_null(it);
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn, vn;
        const char *k = lsm_iter_key(it, &kn), *v = lsm_iter_value(it, &vn);
        assert_true(put_hex(&b, k, kn) && buf_append(&b, "=", 1) && put_hex(&b, v, vn) &&
                    buf_append(&b, "\n", 1));
    }
    ASSERT_OK(lsm_iter_status(it));
    lsm_iter_free(it);
    assert_true(buf_append(&b, "", 1));
    return b.data;
}

struct progress {
    uint64_t calls, done, total;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct progress *p = ctx;
    assert_true(done <= total && done >= p->done);
    p->calls++;
    p->done = done;
    p->total = total;
}

/* Restores backup id to a new directory; its contents must be want,
 * byte for byte, and it must open writable as an ordinary store. */
static void check_restore(uint64_t id, const char *want)
{
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored-%llu", tu_dir, (unsigned long long)id);
    struct progress p = {0};
    lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.progress = on_progress;
    o.progress_ctx = &p;
    ASSERT_OK(lsm_backup_restore(bdir, id, dest, &o));
    assert_true(p.calls > 0 && p.done == p.total);
    ASSERT_FAILS(lsm_backup_restore(bdir, id, dest, NULL), LSM_INVALID_ARGUMENT, "exists");
    lsm_db *db = tu_open_existing(dest, false);
    char *got = dump(db);
    if (strcmp(got, want) != 0)
        fail_msg("backup %llu restored: %zu bytes of keys and values, %zu expected",
                 (unsigned long long)id, strlen(got), strlen(want));
    free(got);
    tu_verify_clean(db);
    ASSERT_OK(lsm_put(db, NULL, "new", 3, "x", 1));
    ASSERT_OK(lsm_close(db));
    tu_rmtree(dest);
}

/* Writes between backups: gen g changes a tenth of the keys (a small
 * change after the first), adds some and deletes some. */
static void change(lsm_db *db, int g)
{
    put_range(db, g * 100, g * 100 + NKEYS / 50, g);
    put_range(db, NKEYS + g * 10, NKEYS + g * 10 + 10, g);
    char k[32];
    snprintf(k, sizeof k, "key%05d", 1900 + g);
    ASSERT_OK(lsm_delete(db, NULL, k, strlen(k)));
}

static void test_backup_chain(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(live, NULL, 128 << 10);
    put_range(db, 0, NKEYS, 0);
    char *want[CHAIN + 1] = {0};
    lsm_backup_info info[CHAIN + 1];
    for (int b = 1; b <= CHAIN; b++) {
        if (b > 1)
            change(db, b);
        want[b] = dump(db);
        struct progress p = {0};
        lsm_backup_options o;
        lsm_backup_options_init(&o);
        o.progress = on_progress;
        o.progress_ctx = &p;
        ASSERT_OK(lsm_backup(db, bdir, &o, &info[b]));
        assert_int_equal(info[b].id, b);
        assert_true(p.calls > 0 && p.done == p.total && p.total == info[b].copied_bytes);
        print_message("backup %d: %llu files, %llu bytes, %llu copied\n", b,
                      (unsigned long long)info[b].files, (unsigned long long)info[b].bytes,
                      (unsigned long long)info[b].copied_bytes);
        if (b == 3) { /* keep 2 and 3 */
            uint64_t removed = 0;
            ASSERT_OK(lsm_backup_purge(bdir, 2, NULL, &removed));
            assert_int_equal(removed, 1);
        }
    }
    /* The second backup after a small change copied a small part. */
    assert_true(info[1].copied_bytes > 100000);
    assert_true(info[2].copied_bytes * 4 < info[1].copied_bytes);
    ASSERT_OK(lsm_close(db));
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    assert_int_equal(n, CHAIN - 1);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(list[i].id, i + 2);
        assert_int_equal(list[i].seq, info[i + 2].seq);
        assert_int_equal(list[i].bytes, info[i + 2].bytes);
    }
    free(list);
    ASSERT_OK(lsm_backup_verify(bdir, 0, NULL, tu_fail_report, NULL));
    ASSERT_FAILS(lsm_backup_restore(bdir, 1, "/nonexistent-parent/x", NULL), LSM_IO_ERROR, NULL);
    for (int b = 2; b <= CHAIN; b++)
        check_restore((uint64_t)b, want[b]);
    for (int b = 1; b <= CHAIN; b++)
        free(want[b]);
}

/* ------------------------------------------------------------- damage */

/* Path of the largest file in bdir/shared. */
static void largest_shared(char *out, size_t cap)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/shared", bdir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    off_t best = -1;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        char p[700];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > best) {
            best = st.st_size;
            snprintf(out, cap, "shared/%s", e->d_name);
        }
    }
    closedir(d);
    assert_true(best > 3 * 65536);
}

static void collect(void *ctx, const char *msg)
{
    int *n = ctx;
    (*n)++;
    print_message("verify: %s\n", msg);
}

static void test_backup_damage_found(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(live, NULL, 1 << 20);
    put_range(db, 0, NKEYS * 4, 0);
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
    ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    put_range(db, 0, 10, 1);
    ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    ASSERT_OK(lsm_close(db));
    char rel[300], path[700];
    largest_shared(rel, sizeof rel);
    snprintf(path, sizeof path, "%s/%s", bdir, rel);
    tu_xor_byte(path, 2 * 65536 + 1234, 0x20);
    int reports = 0;
    lsm_status *s = lsm_backup_verify(bdir, 1, NULL, collect, &reports);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    if (!tu_mentions(s, rel) || !tu_mentions(s, "offset 131072"))
        fail_msg("verify: %s (%s at offset 131072 expected)", lsm_status_message(s), rel);
    lsm_status_free(s);
    assert_int_equal(reports, 1);
    /* Both backups share it: verify of all names it in each. */
    reports = 0;
    ASSERT_FAILS(lsm_backup_verify(bdir, 0, NULL, collect, &reports), LSM_CORRUPTION, rel);
    assert_int_equal(reports, 2);
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored", tu_dir);
    ASSERT_FAILS(lsm_backup_restore(bdir, 2, dest, NULL), LSM_CORRUPTION, rel);
    struct stat st;
    assert_int_equal(stat(dest, &st), -1);
    /* A truncated one is named too, at its end. */
    assert_int_equal(truncate(path, 65536), 0);
    ASSERT_FAILS(lsm_backup_verify(bdir, 1, NULL, NULL, NULL), LSM_CORRUPTION, "offset 65536");
    assert_int_equal(unlink(path), 0);
    ASSERT_FAILS(lsm_backup_verify(bdir, 1, NULL, NULL, NULL), LSM_CORRUPTION, "missing");
}

/* A damaged list: verify names it, purge removes nothing. */
static void test_backup_damaged_list(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(live, NULL, 64 << 10);
    for (int b = 0; b < 3; b++) {
        put_range(db, b * 300, b * 300 + 300, b);
        ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    }
    ASSERT_OK(lsm_close(db));
    char meta[400];
    snprintf(meta, sizeof meta, "%s/meta/3", bdir);
    tu_xor_byte(meta, 20, 0x01);
    ASSERT_FAILS(lsm_backup_verify(bdir, 0, NULL, NULL, NULL), LSM_CORRUPTION, "meta/3");
    char *before = tu_dir_digest(bdir);
    ASSERT_FAILS(lsm_backup_purge(bdir, 1, NULL, NULL), LSM_CORRUPTION, "meta/3");
    tu_assert_dir_unchanged(bdir, before);
    free(before);
    ASSERT_OK(lsm_backup_verify(bdir, 2, NULL, tu_fail_report, NULL));
}

/* meta/1 replaced by text (with a valid "end" CRC when seal). */
static void write_meta(const char *text, size_t n, bool seal)
{
    char path[400];
    snprintf(path, sizeof path, "%s/meta/1", bdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    if (seal)
        fprintf(f, "end %08x\n", crc32c(text, n));
    fclose(f);
}

/* Lists that are cut short or well sealed but wrong are refused as
 * damaged, never trusted (nor crashed on). */
static void test_backup_bad_lists(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(live, NULL, 64 << 10);
    put_range(db, 0, 300, 0);
    ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    ASSERT_OK(lsm_close(db));
    char path[400], *good;
    snprintf(path, sizeof path, "%s/meta/1", bdir);
    size_t n;
    ASSERT_OK(env_read_file(lsm_env_default(), path, &good, &n));
    lsm_backup_info *list;
    size_t nl;
    for (size_t len = 0; len < n; len++) {
        write_meta(good, len, false);
        ASSERT_FAILS(lsm_backup_list(bdir, NULL, &list, &nl), LSM_CORRUPTION, "meta/1");
    }
    const char *head = "lsmfs-backup 1\nid 1\nseq 5\ntime 1\ncopied 0\n";
    const char *bad[] = {
        "file S 000005.ldb 10 00000000\n",                   /* no chunk CRC */
        "file S 000005.ldb 10 00000000 00000000 00000000\n", /* one too many */
        "file P 000005.ldb 10 00000000 00000000\n",          /* a table kept private */
        "file S CURRENT 10 00000000 00000000\n",             /* shared, not a table */
        "file P ../CURRENT 10 00000000 00000000\n",          /* a path */
        "file P .hidden 10 00000000 00000000\n",
        "file P CURRENT -1 00000000 00000000\n",
        "file P CURRENT 18446744073709551616 00000000\n",
        "file P CURRENT 1000000000000000 00000000 00000000\n", /* chunks missing */
        "file P CURRENT 10 0000000 00000000\n",
        "file X CURRENT 10 00000000 00000000\n",
        "id 2\n",
        "what 1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        int len = snprintf(text, sizeof text, "%s%s", head, bad[i]);
        write_meta(text, (size_t)len, true);
        lsm_status *s = lsm_backup_list(bdir, NULL, &list, &nl);
        if (lsm_status_code(s) != LSM_CORRUPTION)
            fail_msg("list accepted: %s", bad[i]);
        lsm_status_free(s);
    }
    write_meta(good, n, false);
    ASSERT_OK(lsm_backup_verify(bdir, 1, NULL, tu_fail_report, NULL));
    free(good);
}

/* A closed store at live of 500 keys: what it holds (malloc'd, dump). */
static char *closed_store(void)
{
    lsm_db *db = tu_open_db(live, NULL, 64 << 10);
    put_range(db, 0, 500, 0);
    char *want = dump(db);
    ASSERT_OK(lsm_close(db));
    return want;
}

/* A closed store, backed up through a read-only open; and an open one. */
static void test_backup_of_closed_store(void **state)
{
    (void)state;
    char *want = closed_store();
    lsm_db *db;
    char *before = tu_dir_digest(live);
    lsm_backup_info info;
    ASSERT_OK(lsm_backup_store(live, bdir, NULL, &info));
    tu_assert_dir_unchanged(live, before);
    free(before);
    assert_int_equal(info.id, 1);
    assert_int_equal(info.copied_bytes, info.bytes);
    /* Unchanged: only the MANIFEST and CURRENT are copied again. */
    db = tu_open_existing(live, true);
    ASSERT_OK(lsm_backup(db, bdir, NULL, &info));
    ASSERT_OK(lsm_close(db));
    assert_int_equal(info.id, 2);
    assert_true(info.copied_bytes < 4096);
    check_restore(1, want);
    check_restore(2, want);
    free(want);
    /* A store open for writing is refused (its LOCK is held). */
    db = tu_open_db(live, NULL, 0);
    ASSERT_FAILS(lsm_backup_store(live, bdir, NULL, NULL), LSM_BUSY, NULL);
    ASSERT_OK(lsm_close(db));
}

/* The store and the backup directory in envs of their own (RADOS and a
 * local disk, say): each part goes through its env only — the store env
 * never writes, the backup env never reads the store, and the other way
 * round for a restore — and a failed read of the store or a failed sync
 * of the restored store fails the backup or restore, leaving nothing
 * listed or in place. */
static void test_backup_two_envs(void **state)
{
    (void)state;
    char *want = closed_store();
    lsm_db *db;
    fault_env *fs = fault_env_new(lsm_env_default()), *fb = fault_env_new(lsm_env_default());
    lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.env = fault_env_env(fb);
    o.store_env = fault_env_env(fs);
    fault_env_fail(fs, FAULT_WRITE | FAULT_CREATE | FAULT_RENAME | FAULT_SYNC_DIR, NULL, EIO, 0, -1);
    fault_env_fail(fb, FAULT_READ, "/live/", EIO, 0, -1);
    lsm_backup_info info;
    ASSERT_OK(lsm_backup_store(live, bdir, &o, &info));
    assert_int_equal(info.id, 1);
    fault_env_clear_failures(fs);
    fault_env_clear_failures(fb);
    fault_env_fail(fs, FAULT_READ, ".ldb", EIO, 0, -1); /* the store's tables */
    ASSERT_FAILS(lsm_backup_store(live, bdir, &o, NULL), LSM_IO_ERROR, NULL);
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    free(list);
    assert_int_equal(n, 1);

    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored-two", tu_dir);
    fault_env_clear_failures(fs);
    fault_env_fail(fs, FAULT_SYNC, NULL, EIO, 2, -1);
    ASSERT_FAILS(lsm_backup_restore(bdir, 1, dest, &o), LSM_IO_ERROR, NULL);
    assert_int_equal(access(dest, F_OK), -1);
    fault_env_clear_failures(fs);
    fault_env_fail(fs, FAULT_READ, "/backups/", EIO, 0, -1);
    fault_env_fail(fb, FAULT_WRITE | FAULT_CREATE | FAULT_RENAME | FAULT_SYNC_DIR, NULL, EIO, 0, -1);
    ASSERT_OK(lsm_backup_restore(bdir, 1, dest, &o));
    fault_env_free(fs);
    fault_env_free(fb);
    db = tu_open_existing(dest, false);
    char *got = dump(db);
    assert_string_equal(got, want);
    free(got);
    free(want);
    ASSERT_OK(lsm_close(db));
}

/* ------------------------------------------------------------- faults */

enum { SWEEP_KEYS = 300 };

/* The shared files listed backups name, and the files in shared/: equal
 * after a purge (nothing a cut-off backup left survives it). */
static void assert_shared_clean(void)
{
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    free(list);
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cat meta/* | "
             "awk '$1 == \"file\" && $2 == \"S\" {print $3, $4, $5}' | sort -u | wc -l; "
             "ls -A shared | wc -l; ls -A private | tr '\\n' ' '; echo; ls -A meta | tr '\\n' ' '; "
             "echo",
             bdir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char a[64] = "", b[64] = "", priv[256] = "", meta[256] = "";
    assert_non_null(fgets(a, sizeof a, p));
    assert_non_null(fgets(b, sizeof b, p));
    assert_non_null(fgets(priv, sizeof priv, p));
    assert_non_null(fgets(meta, sizeof meta, p));
    pclose(p);
    if (atoi(a) != atoi(b) || strcmp(priv, meta) != 0)
        fail_msg("after purge: %d shared files listed, %d in shared/; private: %s meta: %s",
                 atoi(a), atoi(b), priv, meta);
}

static lsm_status *backup_op(void *db)
{
    return lsm_backup(db, bdir, NULL, NULL);
}

/* One run: backup 2 of a store with fault k at call index of stream.
 * Returns false once the backup makes fewer calls. */
static bool sweep_one(int stream, uint64_t index, enum fault_kind k, void *ctx)
{
    const char *want1 = ctx;
    tu_dir_empty();
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_db *db = tu_open_db(live, fault_env_env(fe), 64 << 10);
    put_range(db, 0, SWEEP_KEYS, 0);
    ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    put_range(db, 0, SWEEP_KEYS / 10, 1);
    ASSERT_OK(lsm_sync(db));
    char *want2 = dump(db);
    tu_faulted f;
    tu_fault_run(fe, stream, index, k, backup_op, db, &f);
    tu_fault_not_claimed(&f, k, "backups", "the backup");
    /* A failed sync of meta/ after the list was renamed into place: the
     * backup is complete, listed, and the error says so. */
    bool listed = f.done || tu_mentions(f.s, "complete and listed");
    lsm_status_free(f.s);
    if (f.done && !f.cut) /* a backup reported done is durable */
        ASSERT_OK(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db));
    fault_env_free(fe);
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    free(list);
    if (f.cut) /* what the call returned no one saw: the list's rename survived or not */
        listed = n == 2;
    if (n != (listed ? 2u : 1u))
        fail_msg("%s at %s %s: %zu backups listed", fault_kind_name(k), fault_call_name(f.c),
                 f.path, n);
    ASSERT_OK(lsm_backup_verify(bdir, 0, NULL, tu_fail_report, NULL));
    check_restore(1, want1);
    if (listed)
        check_restore(2, want2);
    /* The live store holds what it held (a power cut keeps what was synced). */
    db = tu_open_existing(live, false);
    char *got = dump(db);
    assert_string_equal(got, want2);
    free(got);
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    ASSERT_OK(lsm_backup_purge(bdir, 10, NULL, NULL));
    assert_shared_clean();
    free(want2);
    return f.fired || stream == FAULT_STREAM_OTHER;
}

static void test_backup_fault_sweep(void **state)
{
    (void)state;
    /* What backup 1 holds, from a run without faults. */
    lsm_db *db = tu_open_db(live, NULL, 64 << 10);
    put_range(db, 0, SWEEP_KEYS, 0);
    char *want1 = dump(db);
    ASSERT_OK(lsm_close(db));
    const enum fault_kind kinds[] = {FAULT_EIO, FAULT_ENOSPC, FAULT_POWER_CUT};
    /* The flush of the checkpoint's cut runs on the background thread. */
    int runs = tu_fault_sweep(kinds, sizeof kinds / sizeof kinds[0], 8, sweep_one, want1);
    free(want1);
    print_message("%d faulted backups\n", runs);
}

/* Three backups of a growing store (no faults), compacted before each so
 * that each holds tables the others do not; want[b] what backup b holds. */
static void three_backups(char *want[4])
{
    lsm_db *db = tu_open_db(live, NULL, 64 << 10);
    for (int b = 1; b <= 3; b++) {
        put_range(db, (b - 1) * 100, (b - 1) * 100 + 200, b);
        ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0));
        want[b] = dump(db);
        ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    }
    ASSERT_OK(lsm_close(db));
}

static lsm_backup_options faulty(fault_env *fe)
{
    lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.env = fault_env_env(fe);
    return o;
}

/* One purge --keep 1 with fault k at call index: every backup still
 * listed verifies and restores; the newest is always there. */
static bool purge_one(uint64_t index, enum fault_kind k)
{
    tu_dir_empty();
    char *want[4];
    three_backups(want);
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_backup_options o = faulty(fe);
    fault_env_count_start(fe, NULL, NULL);
    fault_env_arm(fe, FAULT_STREAM_MAIN, index, k);
    lsm_status_free(lsm_backup_purge(bdir, 1, &o, NULL));
    bool fired = fault_env_fired(fe, NULL, NULL, 0);
    fault_env_count_stop(fe);
    fault_env_free(fe);
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    assert_true(n >= 1 && list[n - 1].id == 3);
    ASSERT_OK(lsm_backup_verify(bdir, 0, NULL, tu_fail_report, NULL));
    for (size_t i = 0; i < n; i++)
        check_restore(list[i].id, want[list[i].id]);
    free(list);
    ASSERT_OK(lsm_backup_purge(bdir, 1, NULL, NULL));
    assert_shared_clean();
    for (int b = 1; b <= 3; b++)
        free(want[b]);
    return fired;
}

/* One restore of backup 2 with fault k at call index: dest is complete
 * or absent; nothing but it (and a hidden leftover after a cut) is left. */
static bool restore_one(uint64_t index, enum fault_kind k, const char *want)
{
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored", tu_dir);
    fault_env *fe = fault_env_new(lsm_env_default());
    lsm_backup_options o = faulty(fe);
    fault_env_count_start(fe, NULL, NULL);
    fault_env_arm(fe, FAULT_STREAM_MAIN, index, k);
    lsm_status *s = lsm_backup_restore(bdir, 2, dest, &o);
    enum fault_call call = FC_COUNT;
    bool fired = fault_env_fired(fe, &call, NULL, 0);
    fault_env_count_stop(fe);
    if (s == NULL && k != FAULT_POWER_CUT) /* done means durable */
        ASSERT_OK(fault_env_power_cut(fe));
    fault_env_free(fe);
    /* A failed unlock comes after the work (the lock goes with the close). */
    if (s == NULL && k != FAULT_POWER_CUT && fired && call != FC_UNLOCK)
        fail_msg("%s at call %llu: the restore reported success", fault_kind_name(k),
                 (unsigned long long)index);
    lsm_status_free(s);
    struct stat st;
    if (stat(dest, &st) == 0) {
        lsm_db *db = tu_open_existing(dest, true);
        char *got = dump(db);
        assert_string_equal(got, want);
        free(got);
        ASSERT_OK(lsm_close(db));
        tu_rmtree(dest);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -v -x -e live -e backups -e '.restored.tmp-.*'",
             tu_dir);
    assert_int_not_equal(system(cmd), 0); /* grep found nothing else */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/.restored.tmp-*", tu_dir);
    assert_int_equal(system(cmd), 0);
    return fired;
}

static void test_purge_and_restore_fault_sweep(void **state)
{
    (void)state;
    const enum fault_kind kinds[] = {FAULT_EIO, FAULT_POWER_CUT};
    int runs = 0;
    for (size_t k = 0; k < 2; k++)
        for (uint64_t i = 0; purge_one(i, kinds[k]); i++)
            runs++;
    tu_dir_empty();
    char *want[4];
    three_backups(want);
    const enum fault_kind rkinds[] = {FAULT_EIO, FAULT_ENOSPC, FAULT_POWER_CUT};
    for (size_t k = 0; k < 3; k++)
        for (uint64_t i = 0; restore_one(i, rkinds[k], want[2]); i++)
            runs++;
    for (int b = 1; b <= 3; b++)
        free(want[b]);
    print_message("%d faulted purges and restores\n", runs);
}

/* Another process holding the directory's LOCK as a purge or a backup
 * does: verify and restore refuse (LSM_BUSY) rather than read files a
 * purge may be removing; list still answers. Once it is gone, both work. */
static void test_verify_and_restore_refused_during_purge(void **state)
{
    (void)state;
    lsm_db *db = tu_open_db(live, NULL, 1 << 20);
    put_range(db, 0, NKEYS, 0);
    ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    ASSERT_OK(lsm_close(db));
    int ready[2], done[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the purger: holds LOCK until told */
        close(ready[0]);
        close(done[1]);
        char lock_path[400];
        snprintf(lock_path, sizeof lock_path, "%s/LOCK", bdir);
        lsm_env *env = lsm_env_default();
        lsm_filelock *lock = NULL;
        lsm_status *s = env->lock_file(env, lock_path, &lock);
        char c = s == NULL ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) != 1)
            _exit(2);
        _exit(s == NULL ? 0 : 1);
    }
    close(ready[1]);
    close(done[0]);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored", tu_dir);
    ASSERT_FAILS(lsm_backup_verify(bdir, 0, NULL, NULL, NULL), LSM_BUSY, "in use");
    ASSERT_FAILS(lsm_backup_restore(bdir, 1, dest, NULL), LSM_BUSY, "in use");
    struct stat st;
    assert_int_equal(stat(dest, &st), -1);
    lsm_backup_info *list = NULL;
    size_t n = 0;
    ASSERT_OK(lsm_backup_list(bdir, NULL, &list, &n));
    assert_int_equal(n, 1);
    free(list);
    assert_int_equal(write(done[1], "x", 1), 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
    close(done[1]);
    ASSERT_OK(lsm_backup_verify(bdir, 0, NULL, NULL, NULL));
    ASSERT_OK(lsm_backup_restore(bdir, 1, dest, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_backup_chain, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_two_envs, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_damage_found, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_damaged_list, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_bad_lists, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_of_closed_store, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_fault_sweep, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_purge_and_restore_fault_sweep, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_verify_and_restore_refused_during_purge, setup,
                                        tu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
