/* test_db_group_sync.c — how the writer queue builds groups
 * (store/db_write.c pick_group): a sync writer never joins a group whose
 * leader did not ask for a sync, so its write is synced before it returns
 * whoever leads the queue when it arrives. */
#include "fixture.h"

#include "fault_env.h"

#include <stdatomic.h>

#define WBS (64 * 1024)

struct putter {
    lsm_db *db;
    const char *key;
    bool sync;
    _Atomic bool done;
};

static void *put_main(void *p)
{
    struct putter *a = p;
    lsm_write_options wo = {.sync = a->sync};
    lsm_status *s = lsm_put(a->db, &wo, a->key, strlen(a->key), "1", 1);
    if (s) {
        fprintf(stderr, "put %s: %s\n", a->key, lsm_status_message(s));
        abort();
    }
    atomic_store(&a->done, true);
    return NULL;
}

static void put(lsm_db *db, const char *k, const char *v, size_t vn)
{
    lsm_write_options wo = {.sync = false};
    ASSERT_OK(lsm_put(db, &wo, k, strlen(k), v, vn));
}

/* Starts a thread that puts a->key and returns once that writer is in the
 * queue: db_write counts the write and enqueues it under one hold of mu, so
 * lsm.writes reaching `writes` says so. */
static void start_put(struct putter *a, pthread_t *t, uint64_t writes)
{
    atomic_init(&a->done, false);
    assert_int_equal(pthread_create(t, NULL, put_main, a), 0);
    for (int i = 0; tu_prop(a->db, "lsm.writes") < writes; i++) {
        assert_true(i < 10000);
        usleep(1000);
    }
}

/* Makes the next write wait for memtable room at the head of the queue:
 * the immutable memtable's flush is held in its directory sync, the active
 * one is full, and two memtables are all the memory allowed. */
static void block_the_queue(fault_env *fe, lsm_db *db)
{
    fault_env_count_start(fe, NULL, NULL); /* holding needs the count */
    fault_env_hold_dir_syncs(fe, true);
    char k[32], v[200];
    memset(v, 'v', sizeof v);
    for (int i = 0; tu_prop(db, "lsm.immutable-memtables") == 0; i++) {
        assert_true(i < 10000);
        snprintf(k, sizeof k, "k%06d", i);
        put(db, k, v, sizeof v);
    }
    for (int i = 0; fault_env_held(fe) == 0; i++) { /* the flush is stuck */
        assert_true(i < 10000);
        usleep(1000);
    }
    size_t big_n = WBS + 1024;
    char *big = malloc(big_n);
    assert_non_null(big);
    memset(big, 'b', big_n);
    put(db, "big", big, big_n); /* room was checked before: it fills mem */
    free(big);
}

/* A non-sync writer leads (it waits for room at the head of the queue), a
 * sync writer queues behind it; when room comes, the sync write must still
 * be synced before it returns: it survives a power cut taken right after. */
static void test_sync_writer_behind_non_sync_leader(void **state)
{
    (void)state;
    fault_env *fe = fault_env_new(tu_env()); /* POSIX, or RADOS under tests/ceph/run.sh */
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), WBS);
    o.max_memtable_bytes = 2 * WBS;
    lsm_db *db = tu_open_with(&o);

    block_the_queue(fe, db);
    uint64_t writes = tu_prop(db, "lsm.writes");
    struct putter lead = {.db = db, .key = "lead", .sync = false};
    struct putter follow = {.db = db, .key = "follow", .sync = true};
    pthread_t tl, tf;
    start_put(&lead, &tl, writes + 1);   /* at the head, waiting for room */
    start_put(&follow, &tf, writes + 2); /* queued behind it */
    usleep(20000);
    assert_false(atomic_load(&lead.done));
    assert_false(atomic_load(&follow.done));
    uint64_t syncs = tu_prop(db, "lsm.wal-syncs");

    fault_env_hold_dir_syncs(fe, false); /* the flush ends: room */
    pthread_join(tf, NULL);
    pthread_join(tl, NULL);
    assert_true(tu_prop(db, "lsm.wal-syncs") > syncs);
    fault_env_count_stop(fe);
    assert_null(fault_env_power_cut(fe));
    lsm_status_free(lsm_close(db)); /* the cut made its files dead */

    db = tu_open(fault_env_env(fe), WBS);
    tu_assert_value(db, "follow", "1");
    ASSERT_OK(lsm_close(db));
    fault_env_free(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_sync_writer_behind_non_sync_leader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
