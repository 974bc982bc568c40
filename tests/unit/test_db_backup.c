/*
 * test_db_backup.c — incremental backups (lsm_backup & co.): a chain of
 * backups with writes between and a purge in the middle, each remaining
 * one restored and compared key by key with what the store held when it
 * was taken; a second backup after a small change copies a small part of
 * what the first did; a damaged byte in a shared table is found by verify
 * (file and offset) and refused by restore; a damaged list stops a purge;
 * a backup of a closed store; and an I/O error, a full disk or a power cut
 * at any env call of a backup leaves the store as it was, no partial
 * backup listed, and the earlier backup sound. Over RADOS (LSM_TEST_ENV=
 * rados) the store and the backups are in the pool (in test_backup_two_envs
 * the backups are on the local disk), and the fault sweeps take every
 * FAULT_STRIDE-th call, EIO and power cuts only.
 */
#include "fixture.h"

#include "crc32c.h"
#include "fault_sweep.h"

#include <sys/wait.h>
#include <ftw.h>

enum { NKEYS = 2000, CHAIN = 5 };
/* The sweeps' stride: every call locally, a sample over RADOS (a faulted
 * run costs seconds there). */
#define FAULT_STRIDE (tu_on_rados() ? 97u : 1u)
/* The lengths a list is cut at: every one locally, every 13th over RADOS. */
#define CUT_STRIDE (tu_on_rados() ? 13u : 1u)
/* The fault kinds swept: the first two (EIO, a power cut) over RADOS. */
#define FAULT_KINDS_SWEPT(n) (tu_on_rados() ? 2u : (n))

/* Options for a backup directory in the test env (a store on RADOS has
 * its backups there). */
static const lsm_backup_options *bo(void)
{
    static lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.env = tu_env();
    return &o;
}

static char live[300], bdir[300];

static int setup(void **state)
{
    tu_setup(state);
    tu_path(live, sizeof live, "live");
    tu_path(bdir, sizeof bdir, "backups");
    return 0;
}

/* Key i at generation gen: 200 bytes that do not compress, different
 * for each generation; added to b. */
static void put_key(lsm_batch *b, int i, int gen)
{
    char k[32], v[200];
    snprintf(k, sizeof k, "key%05d", i);
    uint64_t r = (uint64_t)i * 1000003 + (uint64_t)gen * 7919 + 1;
    for (size_t n = 0; n < sizeof v; n += 8) {
        uint64_t x = tu_xorshift64(&r);
        memcpy(v + n, &x, 8);
    }
    assert_true(lsm_batch_put(b, k, strlen(k), v, sizeof v));
}

/* Keys [from, to) at generation gen, a write each (over RADOS, where a
 * write is an OSD op, 50 a write). */
static void put_range(lsm_db *db, int from, int to, int gen)
{
    int per = tu_on_rados() ? 50 : 1;
    for (int i = from; i < to; i += per) {
        lsm_batch *b = lsm_batch_new();
        assert_non_null(b);
        for (int j = i; j < i + per && j < to; j++)
            put_key(b, j, gen);
        ASSERT_OK(lsm_write(db, NULL, b));
        lsm_batch_free(b);
    }
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
    lsm_backup_options o = *bo();
    o.progress = on_progress;
    o.progress_ctx = &p;
    ASSERT_OK(lsm_backup_restore(bdir, id, dest, &o));
    assert_true(p.calls > 0 && p.done == p.total);
    ASSERT_FAILS(lsm_backup_restore(bdir, id, dest, bo()), LSM_INVALID_ARGUMENT, "exists");
    lsm_db *db = tu_open_existing(dest, false);
    char *got = tu_dump_db(db);
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
        want[b] = tu_dump_db(db);
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
            ASSERT_OK(lsm_backup_purge(bdir, 2, bo(), &removed));
            assert_int_equal(removed, 1);
        }
    }
    /* The second backup after a small change copied a small part. */
    assert_true(info[1].copied_bytes > 100000);
    assert_true(info[2].copied_bytes * 4 < info[1].copied_bytes);
    ASSERT_OK(lsm_close(db));
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, bo(), &list, &n));
    assert_int_equal(n, CHAIN - 1);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(list[i].id, i + 2);
        assert_int_equal(list[i].seq, info[i + 2].seq);
        assert_int_equal(list[i].bytes, info[i + 2].bytes);
    }
    free(list);
    ASSERT_OK(lsm_backup_verify(bdir, 0, bo(), tu_fail_report, NULL));
    ASSERT_FAILS(lsm_backup_restore(bdir, 1, "/nonexistent-parent/x", bo()), LSM_IO_ERROR, NULL);
    for (int b = 2; b <= CHAIN; b++)
        check_restore((uint64_t)b, want[b]);
    for (int b = 1; b <= CHAIN; b++)
        free(want[b]);
}

/* ------------------------------------------------------------- damage */

/* Path of the largest file in bdir/shared. */
static void largest_shared(char *out, size_t cap)
{
    char dir[400], **names;
    snprintf(dir, sizeof dir, "%s/shared", bdir);
    int n;
    ASSERT_OK(tu_env()->get_children(tu_env(), dir, &names, &n));
    uint64_t best = 0;
    for (int i = 0; i < n; i++) {
        char p[700];
        uint64_t size;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        ASSERT_OK(tu_env()->file_size(tu_env(), p, &size));
        if (size > best) {
            best = size;
            snprintf(out, cap, "shared/%s", names[i]);
        }
    }
    env_free_children(names, n);
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
    lsm_status *s = lsm_backup_verify(bdir, 1, bo(), collect, &reports);
    assert_int_equal(lsm_status_code(s), LSM_CORRUPTION);
    if (!tu_mentions(s, rel) || !tu_mentions(s, "offset 131072"))
        fail_msg("verify: %s (%s at offset 131072 expected)", lsm_status_message(s), rel);
    lsm_status_free(s);
    assert_int_equal(reports, 1);
    /* Both backups share it: verify of all names it in each. */
    reports = 0;
    ASSERT_FAILS(lsm_backup_verify(bdir, 0, bo(), collect, &reports), LSM_CORRUPTION, rel);
    assert_int_equal(reports, 2);
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored", tu_dir);
    ASSERT_FAILS(lsm_backup_restore(bdir, 2, dest, bo()), LSM_CORRUPTION, rel);
    assert_false(tu_env()->file_exists(tu_env(), dest));
    /* A truncated one is named too, at its end. */
    ASSERT_OK(tu_env()->truncate_file(tu_env(), path, 65536));
    ASSERT_FAILS(lsm_backup_verify(bdir, 1, bo(), NULL, NULL), LSM_CORRUPTION, "offset 65536");
    ASSERT_OK(tu_env()->remove_file(tu_env(), path));
    ASSERT_FAILS(lsm_backup_verify(bdir, 1, bo(), NULL, NULL), LSM_CORRUPTION, "missing");
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
    ASSERT_FAILS(lsm_backup_verify(bdir, 0, bo(), NULL, NULL), LSM_CORRUPTION, "meta/3");
    char *before = tu_dir_digest(bdir);
    ASSERT_FAILS(lsm_backup_purge(bdir, 1, bo(), NULL), LSM_CORRUPTION, "meta/3");
    tu_assert_dir_unchanged(bdir, before);
    free(before);
    ASSERT_OK(lsm_backup_verify(bdir, 2, bo(), tu_fail_report, NULL));
}

/* meta/1 replaced by text (with a valid "end" CRC when seal). */
static void write_meta(const char *text, size_t n, bool seal)
{
    char path[400];
    snprintf(path, sizeof path, "%s/meta/1", bdir);
    char *data = malloc(n + 32);
    assert_non_null(data);
    memcpy(data, text, n);
    size_t len = n + (seal ? (size_t)sprintf(data + n, "end %08x\n", crc32c(text, n)) : 0);
    ASSERT_OK(env_write_file_sync(tu_env(), path, data, len));
    free(data);
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
    good = tu_read_file(path, &n);
    lsm_backup_info *list;
    size_t nl;
    for (size_t len = 0; len < n; len += CUT_STRIDE) {
        write_meta(good, len, false);
        ASSERT_FAILS(lsm_backup_list(bdir, bo(), &list, &nl), LSM_CORRUPTION, "meta/1");
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
        lsm_status *s = lsm_backup_list(bdir, bo(), &list, &nl);
        if (lsm_status_code(s) != LSM_CORRUPTION)
            fail_msg("list accepted: %s", bad[i]);
        lsm_status_free(s);
    }
    write_meta(good, n, false);
    ASSERT_OK(lsm_backup_verify(bdir, 1, bo(), tu_fail_report, NULL));
    free(good);
}

/* A closed store at live of 500 keys: what it holds (malloc'd, dump). */
static char *closed_store(void)
{
    lsm_db *db = tu_open_db(live, NULL, 64 << 10);
    put_range(db, 0, 500, 0);
    char *want = tu_dump_db(db);
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
    ASSERT_OK(lsm_backup_store(live, bdir, bo(), &info));
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
    ASSERT_FAILS(lsm_backup_store(live, bdir, bo(), NULL), LSM_BUSY, NULL);
    ASSERT_OK(lsm_close(db));
}

/* The store and the backup directory in envs of their own (RADOS and a
 * local disk: so over RADOS): each part goes through its env only — the store env
 * never writes, the backup env never reads the store, and the other way
 * round for a restore — and a failed read of the store or a failed sync
 * of the restored store fails the backup or restore, leaving nothing
 * listed or in place. */
static void test_backup_two_envs(void **state)
{
    (void)state;
    char *want = closed_store();
    lsm_db *db;
    char local[300], lbdir[320];
    snprintf(local, sizeof local, "/tmp/lsm-test-backup-local-XXXXXX");
    assert_non_null(mkdtemp(local));
    snprintf(lbdir, sizeof lbdir, "%s/backups", local); /* on the local disk */
    const char *bd = tu_on_rados() ? lbdir : bdir;
    fault_env *fs = fault_env_new(tu_env()), *fb = fault_env_new(lsm_env_default());
    lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.env = fault_env_env(fb);
    o.store_env = fault_env_env(fs);
    fault_env_fail(fs, FAULT_WRITE | FAULT_CREATE | FAULT_RENAME | FAULT_SYNC_DIR, NULL, EIO, 0, -1);
    fault_env_fail(fb, FAULT_READ, "/live/", EIO, 0, -1);
    lsm_backup_info info;
    ASSERT_OK(lsm_backup_store(live, bd, &o, &info));
    assert_int_equal(info.id, 1);
    fault_env_clear_failures(fs);
    fault_env_clear_failures(fb);
    fault_env_fail(fs, FAULT_READ, ".ldb", EIO, 0, -1); /* the store's tables */
    ASSERT_FAILS(lsm_backup_store(live, bd, &o, NULL), LSM_IO_ERROR, NULL);
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bd, NULL, &list, &n));
    free(list);
    assert_int_equal(n, 1);

    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored-two", tu_dir);
    fault_env_clear_failures(fs);
    fault_env_fail(fs, FAULT_SYNC, NULL, EIO, 2, -1);
    ASSERT_FAILS(lsm_backup_restore(bd, 1, dest, &o), LSM_IO_ERROR, NULL);
    assert_false(tu_env()->file_exists(tu_env(), dest));
    fault_env_clear_failures(fs);
    fault_env_fail(fs, FAULT_READ, "/backups/", EIO, 0, -1);
    fault_env_fail(fb, FAULT_WRITE | FAULT_CREATE | FAULT_RENAME | FAULT_SYNC_DIR, NULL, EIO, 0, -1);
    ASSERT_OK(lsm_backup_restore(bd, 1, dest, &o));
    fault_env_free(fs);
    fault_env_free(fb);
    db = tu_open_existing(dest, false);
    char *got = tu_dump_db(db);
    assert_string_equal(got, want);
    free(got);
    free(want);
    ASSERT_OK(lsm_close(db));
    assert_int_equal(nftw(local, tu_remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* ------------------------------------------------------------- faults */

enum { SWEEP_KEYS = 300 };

/* The names in bdir/sub (none if it is missing), sorted: *n of them. */
static char **names_in(const char *sub, int *n)
{
    char dir[400], **names = NULL;
    snprintf(dir, sizeof dir, "%s/%s", bdir, sub);
    *n = 0;
    if (tu_env()->file_exists(tu_env(), dir))
        ASSERT_OK(tu_env()->get_children(tu_env(), dir, &names, n));
    if (*n > 1)
        qsort(names, (size_t)*n, sizeof *names, tu_cmp_names);
    return names;
}

/* The distinct shared files (name, size, CRC) the lists in meta/ name. */
static int shared_listed(void)
{
    int nm, n = 0, distinct = 0;
    char **meta = names_in("meta", &nm), *lines[4096];
    for (int i = 0; i < nm; i++) {
        char path[700];
        size_t len;
        snprintf(path, sizeof path, "%s/meta/%s", bdir, meta[i]);
        char *text = tu_read_file(path, &len), *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
            char name[256], size[32], crc[32];
            if (sscanf(l, "file S %255s %31s %31s", name, size, crc) == 3 && n < 4096)
                assert_true(asprintf(&lines[n++], "%s %s %s", name, size, crc) > 0);
        }
        free(text);
    }
    env_free_children(meta, nm);
    qsort(lines, (size_t)n, sizeof *lines, tu_cmp_names);
    for (int i = 0; i < n; i++)
        distinct += i == 0 || strcmp(lines[i], lines[i - 1]) != 0;
    for (int i = 0; i < n; i++)
        free(lines[i]);
    return distinct;
}

/* The shared files listed backups name, and the files in shared/: equal
 * after a purge (nothing a cut-off backup left survives it); private/
 * holds a directory per listed backup. */
static void assert_shared_clean(void)
{
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, bo(), &list, &n));
    free(list);
    int ns, np, nm;
    char **shared = names_in("shared", &ns), **priv = names_in("private", &np),
         **meta = names_in("meta", &nm);
    int listed = shared_listed();
    bool same = np == nm;
    for (int i = 0; same && i < np; i++)
        same = strcmp(priv[i], meta[i]) == 0;
    if (listed != ns || !same)
        fail_msg("after purge: %d shared files listed, %d in shared/; %d in private/, %d in meta/",
                 listed, ns, np, nm);
    env_free_children(shared, ns);
    env_free_children(priv, np);
    env_free_children(meta, nm);
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
    fault_env *fe = fault_env_new(tu_env());
    lsm_db *db = tu_open_db(live, fault_env_env(fe), 64 << 10);
    put_range(db, 0, SWEEP_KEYS, 0);
    ASSERT_OK(lsm_backup(db, bdir, NULL, NULL));
    put_range(db, 0, SWEEP_KEYS / 10, 1);
    ASSERT_OK(lsm_sync(db));
    char *want2 = tu_dump_db(db);
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
    ASSERT_OK(lsm_backup_list(bdir, bo(), &list, &n));
    free(list);
    if (f.cut) /* what the call returned no one saw: the list's rename survived or not */
        listed = n == 2;
    if (n != (listed ? 2u : 1u))
        fail_msg("%s at %s %s: %zu backups listed", fault_kind_name(k), fault_call_name(f.c),
                 f.path, n);
    ASSERT_OK(lsm_backup_verify(bdir, 0, bo(), tu_fail_report, NULL));
    check_restore(1, want1);
    if (listed)
        check_restore(2, want2);
    /* The live store holds what it held (a power cut keeps what was synced). */
    db = tu_open_existing(live, false);
    char *got = tu_dump_db(db);
    assert_string_equal(got, want2);
    free(got);
    tu_verify_clean(db);
    ASSERT_OK(lsm_close(db));
    ASSERT_OK(lsm_backup_purge(bdir, 10, bo(), NULL));
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
    char *want1 = tu_dump_db(db);
    ASSERT_OK(lsm_close(db));
    const enum fault_kind kinds[] = {FAULT_EIO, FAULT_POWER_CUT, FAULT_ENOSPC};
    /* The flush of the checkpoint's cut runs on the background thread. */
    int runs = tu_fault_sweep(kinds, FAULT_KINDS_SWEPT(sizeof kinds / sizeof kinds[0]),
                              FAULT_STRIDE, tu_on_rados() ? 1 : 8, sweep_one, want1);
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
        want[b] = tu_dump_db(db);
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
    fault_env *fe = fault_env_new(tu_env());
    lsm_backup_options o = faulty(fe);
    fault_env_count_start(fe, NULL, NULL);
    fault_env_arm(fe, FAULT_STREAM_MAIN, index, k);
    lsm_status_free(lsm_backup_purge(bdir, 1, &o, NULL));
    bool fired = fault_env_fired(fe, NULL, NULL, 0);
    fault_env_count_stop(fe);
    fault_env_free(fe);
    lsm_backup_info *list;
    size_t n;
    ASSERT_OK(lsm_backup_list(bdir, bo(), &list, &n));
    assert_true(n >= 1 && list[n - 1].id == 3);
    ASSERT_OK(lsm_backup_verify(bdir, 0, bo(), tu_fail_report, NULL));
    for (size_t i = 0; i < n; i++)
        check_restore(list[i].id, want[list[i].id]);
    free(list);
    ASSERT_OK(lsm_backup_purge(bdir, 1, bo(), NULL));
    assert_shared_clean();
    for (int b = 1; b <= 3; b++)
        free(want[b]);
    return fired;
}

/* Fails if tu_dir holds anything but live, backups and hidden leftovers
 * of a restore (.restored.tmp-*), which it removes. */
static void remove_restore_leftovers(void)
{
    char **names;
    int n;
    ASSERT_OK(tu_env()->get_children(tu_env(), tu_dir, &names, &n));
    for (int i = 0; i < n; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", tu_dir, names[i]);
        if (strncmp(names[i], ".restored.tmp-", 14) == 0)
            tu_rmtree(path);
        else if (strcmp(names[i], "live") != 0 && strcmp(names[i], "backups") != 0)
            fail_msg("a restore left %s", path);
    }
    env_free_children(names, n);
}

/* One restore of backup 2 with fault k at call index: dest is complete
 * or absent; nothing but it (and a hidden leftover after a cut) is left. */
static bool restore_one(uint64_t index, enum fault_kind k, const char *want)
{
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored", tu_dir);
    fault_env *fe = fault_env_new(tu_env());
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
    if (tu_env()->file_exists(tu_env(), dest)) {
        lsm_db *db = tu_open_existing(dest, true);
        char *got = tu_dump_db(db);
        assert_string_equal(got, want);
        free(got);
        ASSERT_OK(lsm_close(db));
        tu_rmtree(dest);
    }
    remove_restore_leftovers();
    return fired;
}

static void test_purge_and_restore_fault_sweep(void **state)
{
    (void)state;
    const enum fault_kind kinds[] = {FAULT_EIO, FAULT_POWER_CUT};
    int runs = 0;
    for (size_t k = 0; k < 2; k++)
        for (uint64_t i = 0; purge_one(i, kinds[k]); i += FAULT_STRIDE)
            runs++;
    tu_dir_empty();
    char *want[4];
    three_backups(want);
    const enum fault_kind rkinds[] = {FAULT_EIO, FAULT_POWER_CUT, FAULT_ENOSPC};
    for (size_t k = 0; k < FAULT_KINDS_SWEPT(3); k++)
        for (uint64_t i = 0; restore_one(i, rkinds[k], want[2]); i += FAULT_STRIDE)
            runs++;
    for (int b = 1; b <= 3; b++)
        free(want[b]);
    print_message("%d faulted purges and restores\n", runs);
}

/* Who holds bdir's LOCK elsewhere: a child process, or on RADOS a second
 * client (another host) of this process. */
struct holder {
    pid_t pid;
    int done; /* the child's pipe: a byte lets it go */
    lsm_env *env;
    lsm_filelock *lock;
};

/* The child: takes the lock, says so on ready, holds it until told. */
_Noreturn static void hold_in_child(int ready, int done)
{
    char lock_path[400];
    snprintf(lock_path, sizeof lock_path, "%s/LOCK", bdir);
    lsm_env *env = lsm_env_default();
    lsm_filelock *lock = NULL;
    lsm_status *s = env->lock_file(env, lock_path, &lock);
    char c = s == NULL ? 'y' : 'n';
    if (write(ready, &c, 1) != 1 || read(done, &c, 1) != 1)
        _exit(2);
    _exit(s == NULL ? 0 : 1);
}

static void hold_lock_elsewhere(struct holder *h)
{
    memset(h, 0, sizeof *h);
    if (tu_on_rados()) {
        env_rados_options o;
        env_rados_options_init(&o);
        o.pool = "lsmfs";
        o.ceph_conf = getenv("LSM_CEPH_CONF");
        ASSERT_OK(env_rados_open(&o, &h->env));
        char lock_path[400];
        snprintf(lock_path, sizeof lock_path, "%s/LOCK", bdir);
        ASSERT_OK(h->env->lock_file(h->env, lock_path, &h->lock));
        return;
    }
    int ready[2], done[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(done), 0);
    h->pid = fork();
    assert_true(h->pid >= 0);
    if (h->pid == 0) {
        close(ready[0]);
        close(done[1]);
        hold_in_child(ready[1], done[0]);
    }
    close(ready[1]);
    close(done[0]);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    close(ready[0]);
    h->done = done[1];
}

static void release_elsewhere(struct holder *h)
{
    if (h->env != NULL) {
        ASSERT_OK(h->env->unlock_file(h->env, h->lock));
        env_rados_close(h->env);
        return;
    }
    assert_int_equal(write(h->done, "x", 1), 1);
    int status = 0;
    assert_int_equal(waitpid(h->pid, &status, 0), h->pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(h->done);
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
    struct holder h;
    hold_lock_elsewhere(&h);
    char dest[400];
    snprintf(dest, sizeof dest, "%s/restored", tu_dir);
    ASSERT_FAILS(lsm_backup_verify(bdir, 0, bo(), NULL, NULL), LSM_BUSY, "in use");
    ASSERT_FAILS(lsm_backup_restore(bdir, 1, dest, bo()), LSM_BUSY, "in use");
    assert_false(tu_env()->file_exists(tu_env(), dest));
    lsm_backup_info *list = NULL;
    size_t n = 0;
    ASSERT_OK(lsm_backup_list(bdir, bo(), &list, &n));
    assert_int_equal(n, 1);
    free(list);
    release_elsewhere(&h);
    ASSERT_OK(lsm_backup_verify(bdir, 0, bo(), NULL, NULL));
    ASSERT_OK(lsm_backup_restore(bdir, 1, dest, bo()));
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
