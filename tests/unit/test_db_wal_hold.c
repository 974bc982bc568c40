/* test_db_wal_hold.c — the WAL held for a coming sync (db_sync.c's
 * db_hold_wal): once syncs are slow (a RADOS round trip; here the fault
 * env's delay), the store tells the WAL's file to keep flushed bytes for the
 * next sync, and ends the hold once no sync follows, so a write without sync
 * is never kept back for long. Also over RADOS (Makefile's RADOS_ALSO),
 * where a held write's bytes really stay in the process until the hold
 * ends. */
#include "fixture.h"

#include "fault_env.h"
#include "filename.h"

#include <stdlib.h>
#include <unistd.h>

static void put(lsm_db *db, int i, bool sync)
{
    char k[32];
    snprintf(k, sizeof k, "k%06d", i);
    lsm_write_options wo = {.sync = sync};
    ASSERT_OK(lsm_put(db, &wo, k, strlen(k), k, strlen(k)));
}

/* Waits (at most ms milliseconds) until the last hold given to the WAL is
 * `want`. */
static bool hold_becomes_within(fault_env *fe, int want, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (fault_env_last_hold(fe, NULL) == want)
            return true;
        usleep(1000);
    }
    return false;
}

/* The same, within 3 s. */
static bool hold_becomes(fault_env *fe, int want)
{
    return hold_becomes_within(fe, want, 3000);
}

/* Slow syncs hold the WAL (before: never); once no sync follows, the flush
 * thread ends the hold within about two syncs' time (without: it stayed on,
 * and a write without sync waited for a sync that might never come). */
static void test_slow_syncs_hold_until_no_sync_follows(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env()); /* POSIX, or RADOS under tests/ceph/run.sh */
    fault_env_set_sync_delay_us(fe, 3000);
    lsm_db *db = tu_open(fault_env_env(fe), 0);
    for (int i = 0; i < 20; i++)
        put(db, i, true);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-overlap-max"), 1);
    uint64_t holds = 0;
    fault_env_last_hold(fe, &holds);
    assert_true(holds >= 1);
    assert_true(hold_becomes(fe, 0));
    put(db, 100, false); /* no sync near: goes out at once */
    assert_int_equal(fault_env_last_hold(fe, NULL), 0);
    uint64_t before = holds;
    put(db, 101, true); /* a sync again: held while it waits and a while after */
    fault_env_last_hold(fe, &holds);
    assert_true(holds > before);
    assert_true(hold_becomes(fe, 0));
    assert_null(lsm_close(db));
    db = tu_open(fault_env_env(fe), 0);
    char k[32];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "k%06d", i);
        tu_assert_value(db, k, k);
    }
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

/* The path of the newest log in tu_dir into path. */
static void newest_log(lsm_env *env, char *path, size_t cap)
{
    char **names;
    int n;
    ASSERT_OK(env->get_children(env, tu_dir, &names, &n));
    uint64_t newest = 0, number;
    enum file_type type;
    for (int i = 0; i < n; i++)
        if (parse_file_name(names[i], &number, &type) && type == FILE_LOG && number > newest)
            newest = number;
    env_free_children(names, n);
    assert_true(newest > 0);
    char *log = log_file_name(tu_dir, newest);
    assert_non_null(log);
    snprintf(path, cap, "%s", log);
    free(log);
}

/* Whether the first 64 KiB of the log at path (through env: on RADOS, what
 * was sent) hold the bytes of key. */
static bool log_holds(lsm_env *env, const char *path, const char *key)
{
    lsm_sfile *f;
    ASSERT_OK(env->new_sfile(env, path, &f));
    static char head[64 * 1024];
    size_t got = 0;
    ASSERT_OK(f->ops->read(f, head, sizeof head, &got));
    f->ops->close(f);
    return memmem(head, got, key, strlen(key)) != NULL;
}

/* Waits (at most ms milliseconds) until the newest log holds key. */
static bool log_holds_within(lsm_env *env, const char *key, int ms)
{
    char path[256];
    newest_log(env, path, sizeof path);
    for (int i = 0; i < ms; i++) {
        if (log_holds(env, path, key))
            return true;
        usleep(1000);
    }
    return false;
}

/* A write without sync made while the flush thread is busy (its flush
 * held in the directory sync before the MANIFEST names the table) is not
 * kept back past the hold's bound (HOLD_MAX_US, 50 ms; 250 ms here for a
 * loaded machine): without the rule (db_hold_watch) nobody ended the hold
 * until the flush was done, seconds on RADOS. */
static void test_busy_flush_thread_does_not_keep_a_hold(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env()); /* POSIX, or RADOS under tests/ceph/run.sh */
    fault_env_set_sync_delay_us(fe, 3000);
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), 64 * 1024);
    lsm_db *db = tu_open_with(&o);
    fault_env_count_start(fe, NULL, NULL); /* holding needs the count */
    fault_env_hold_dir_syncs(fe, true);
    char v[200];
    memset(v, 'v', sizeof v);
    lsm_write_options plain = {.sync = false};
    for (int i = 0; tu_prop(db, "lsm.immutable-memtables") == 0; i++) {
        assert_true(i < 10000);
        char k[32];
        snprintf(k, sizeof k, "f%06d", i);
        ASSERT_OK(lsm_put(db, &plain, k, strlen(k), v, sizeof v));
    }
    for (int i = 0; fault_env_held(fe) == 0; i++) { /* the flush is stuck */
        assert_true(i < 10000);
        usleep(1000);
    }
    uint64_t holds = 0;
    fault_env_last_hold(fe, &holds);
    uint64_t before = holds;
    for (int i = 0; i < 20; i++)
        put(db, i, true);
    assert_int_equal(tu_prop(db, "lsm.wal-syncs-overlap-max"), 1);
    fault_env_last_hold(fe, &holds);
    assert_true(holds > before); /* syncs still hold while they come */
    put(db, 100, false);
    assert_true(hold_becomes_within(fe, 0, 250));
    assert_true(log_holds_within(tu_env(), "k000100", 250)); /* RADOS: it was sent */
    assert_int_equal(fault_env_held(fe), 1); /* and the flush is still stuck */
    fault_env_hold_dir_syncs(fe, false);
    fault_env_count_stop(fe);
    assert_null(lsm_close(db));
    db = tu_open(fault_env_env(fe), 0);
    tu_assert_value(db, "k000100", "k000100");
    assert_null(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_slow_syncs_hold_until_no_sync_follows),
        TU_TEST(test_busy_flush_thread_does_not_keep_a_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
