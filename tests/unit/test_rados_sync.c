/* test_rados_sync.c — a sync by path (env.h's sync_file) on RADOS covers
 * what an open writable file of the same object has sent (run by
 * tests/ceph/run.sh). The store relies on it: db_cut_broken_wal cuts the
 * open WAL back and syncs it by path before it answers the groups that
 * waited for a sync. An OSD slow to acknowledge is played by the env's
 * seam (env_rados_set_crash_hook's "answered" point): the test holds an
 * append's answer there as long as it wants. */
#include "testutil.h"

#include "rados_util.h"

#include <rados/librados.h>

#include <pthread.h>
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

static lsm_env *env;
static rados_t admin; /* a client of its own: the cluster's settings, probes */

#define MAX_OBJECT (1u << 20) /* the OSD's object size limit while a test lowers it */

/* The held answers: while hold is set, every "answered" point waits. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static bool hold;       /* GUARDED_BY(hold_mu) */
static int held;        /* GUARDED_BY(hold_mu): answers waiting now */
static int let_through; /* GUARDED_BY(hold_mu): answers to pass while hold */
static atomic_int sends; /* the env's "send" points: appends sent */

static bool slow_osd(void *arg, const char *point, const char *oid)
{
    (void)arg;
    (void)oid;
    if (strcmp(point, "send") == 0)
        atomic_fetch_add(&sends, 1);
    if (strcmp(point, "answered") != 0)
        return false;
    pthread_mutex_lock(&hold_mu);
    held++;
    pthread_cond_broadcast(&hold_cv);
    while (hold && let_through == 0)
        pthread_cond_wait(&hold_cv, &hold_mu);
    if (hold)
        let_through--;
    held--;
    pthread_mutex_unlock(&hold_mu);
    return false;
}

/* While answers are held, lets the next n go. */
static void let_answers_through(int n)
{
    pthread_mutex_lock(&hold_mu);
    let_through += n;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
}

static void set_hold(bool on)
{
    pthread_mutex_lock(&hold_mu);
    hold = on;
    let_through = 0;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
}

/* Waits (up to 30 s) until an answer is held. */
static void wait_held(void)
{
    pthread_mutex_lock(&hold_mu);
    for (int i = 0; i < 300 && held == 0; i++) {
        pthread_mutex_unlock(&hold_mu);
        usleep(100 * 1000);
        pthread_mutex_lock(&hold_mu);
    }
    int n = held;
    pthread_mutex_unlock(&hold_mu);
    if (n == 0)
        fail_msg("no append was answered in 30 s");
}

/* Lowers the OSD's object size limit to MAX_OBJECT (on) or restores it,
 * and waits (up to 30 s) until a write just past MAX_OBJECT fails (on) or
 * lands. */
static int limit_objects(bool on)
{
    char cmd[200];
    if (on)
        snprintf(cmd, sizeof cmd,
                 "{\"prefix\": \"config set\", \"who\": \"osd\", \"name\": "
                 "\"osd_max_object_size\", \"value\": \"%u\"}",
                 MAX_OBJECT);
    else
        snprintf(cmd, sizeof cmd,
                 "{\"prefix\": \"config rm\", \"who\": \"osd\", \"name\": "
                 "\"osd_max_object_size\"}");
    if (tr_mon_command(admin, cmd) < 0)
        return -1;
    rados_ioctx_t io;
    if (rados_ioctx_create(admin, TR_POOL, &io) < 0)
        return -1;
    char probe[64];
    snprintf(probe, sizeof probe, "lsmfs-test-probe-%d", (int)getpid());
    int r = -1;
    for (int i = 0; i < 300; i++) {
        r = rados_write(io, probe, "x", 1, MAX_OBJECT);
        if ((r == -EFBIG) == on)
            break;
        usleep(100 * 1000);
    }
    rados_remove(io, probe);
    rados_ioctx_destroy(io);
    return (r == -EFBIG) == on ? 0 : -1;
}

static int setup(void **state)
{
    (void)state;
    if (tr_admin_connect(&admin) < 0)
        return -1;
    env = tr_env(0, false);
    env_rados_set_crash_hook(env, slow_osd, NULL);
    return 0;
}

/* Always lets held answers go, also after a failed test. */
static int teardown(void **state)
{
    (void)state;
    set_hold(false);
    env_rados_close(env);
    int r = limit_objects(false);
    rados_shutdown(admin);
    return r;
}

struct by_path {
    const char *path;
    bool truncate; /* truncate_file to 3 bytes, else sync_file */
    lsm_status *s;
    atomic_bool returned;
};

static void *call_by_path(void *arg)
{
    struct by_path *b = arg;
    b->s = b->truncate ? env->truncate_file(env, b->path, 3) : env->sync_file(env, b->path);
    atomic_store(&b->returned, true);
    return NULL;
}

/* dir gets a file 000007.log open for writing (into *f, its path into
 * path) holding 6 acknowledged bytes. */
static void open_log(char *dir, size_t dcap, char *path, size_t pcap, lsm_wfile **f)
{
    tr_name(dir, dcap, "syncpath");
    ASSERT_OK(env->create_dir(env, dir));
    snprintf(path, pcap, "%s/000007.log", dir);
    ASSERT_OK(env->new_wfile(env, path, f));
    ASSERT_OK((*f)->ops->append(*f, "acked ", 6));
    ASSERT_OK((*f)->ops->sync(*f));
}

static void close_and_remove(lsm_wfile *f, const char *dir, const char *path)
{
    lsm_status_free(f->ops->close(f));
    ASSERT_OK(env->remove_file(env, path));
    ASSERT_OK(env->remove_dir(env, dir));
}

/* The open file has sent an append whose answer is held: the call by path
 * does not return before the answer (before: at once); its size after. */
static void by_path_waits(bool truncate, uint64_t want_size)
{
    char dir[128], path[256];
    lsm_wfile *f;
    open_log(dir, sizeof dir, path, sizeof path, &f);
    set_hold(true);
    ASSERT_OK(f->ops->append(f, "in flight", 9));
    ASSERT_OK(f->ops->flush(f)); /* sent: what a call by path must cover */
    wait_held();
    struct by_path b = {.path = path, .truncate = truncate};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_by_path, &b), 0);
    usleep(1000 * 1000);
    bool early = atomic_load(&b.returned);
    set_hold(false);
    pthread_join(t, NULL);
    if (early)
        fail_msg("%s by path returned while a sent append was unanswered",
                 truncate ? "truncate" : "sync");
    ASSERT_OK(b.s);
    uint64_t size = 0;
    ASSERT_OK(env->file_size(env, path, &size));
    assert_int_equal(size, want_size);
    close_and_remove(f, dir, path);
}

/* A sync by path makes durable what an open file sent (db_cut_broken_wal
 * syncs the open WAL by path). */
static void test_sync_by_path_waits_for_open_files_sends(void **state)
{
    (void)state;
    by_path_waits(false, 15);
}

/* A truncate by path lands after the open file's sends (a send the full
 * pool refused is sent again from its answer: it must not land past the
 * cut). */
static void test_truncate_by_path_waits_for_open_files_sends(void **state)
{
    (void)state;
    by_path_waits(true, 3);
}

/* A send of the open file failed (the OSD refuses an object past its size
 * limit): the sync by path fails with it, naming the file (before: it
 * succeeded, the bytes missing). */
static void test_sync_by_path_reports_a_failed_send(void **state)
{
    (void)state;
    char dir[128], path[256];
    lsm_wfile *f;
    open_log(dir, sizeof dir, path, sizeof path, &f);
    assert_int_equal(limit_objects(true), 0);
    size_t n = MAX_OBJECT;
    char *big = calloc(1, n);
    assert_non_null(big);
    ASSERT_OK(f->ops->append(f, big, n)); /* its last send ends past the limit */
    free(big);
    ASSERT_OK(f->ops->flush(f));
    lsm_status *s = env->sync_file(env, path);
    if (s == NULL)
        fail_msg("sync by path succeeded although a send of the open file failed");
    assert_int_equal(lsm_status_code(s), LSM_IO_ERROR);
    assert_non_null(strstr(lsm_status_message(s), path));
    lsm_status_free(s);
    s = f->ops->sync(f); /* the file's own sync says the same */
    assert_non_null(s);
    lsm_status_free(s);
    assert_int_equal(limit_objects(false), 0);
    close_and_remove(f, dir, path);
}

/* A truncate by path cuts what the open file has not sent yet too: the
 * torn record db_cut_broken_wal cuts from a log (a record the full pool
 * refused part of, its first fragments still buffered) does not come back
 * when the log is closed (before: the file ended 5 bytes past the cut). */
static void test_truncate_by_path_cuts_unsent_bytes(void **state)
{
    (void)state;
    char dir[128], path[256];
    lsm_wfile *f;
    open_log(dir, sizeof dir, path, sizeof path, &f); /* 6 bytes, acknowledged */
    ASSERT_OK(f->ops->append(f, "torn!", 5)); /* buffered, not sent */
    ASSERT_OK(env->truncate_file(env, path, 6));
    ASSERT_OK(f->ops->close(f));
    uint64_t size = 0;
    ASSERT_OK(env->file_size(env, path, &size));
    assert_int_equal(size, 6);
    ASSERT_OK(env->remove_file(env, path));
    ASSERT_OK(env->remove_dir(env, dir));
}

/* The size of the object at path once it is want, or after 30 s. */
static uint64_t size_within_30s(const char *path, uint64_t want)
{
    uint64_t size = 0;
    for (int i = 0; i < 300; i++) {
        ASSERT_OK(env->file_size(env, path, &size));
        if (size == want)
            break;
        usleep(100 * 1000);
    }
    return size;
}

/* Flushes while a send is in flight go out together, as one send once it
 * is answered, with no further call (before: a send each, 21 sends: the OSD
 * applies one object's writes in turn, so a burst of small appends queued
 * there behind each other). */
static void test_flushes_behind_a_send_go_as_one(void **state)
{
    (void)state;
    char dir[128], path[256];
    lsm_wfile *f;
    open_log(dir, sizeof dir, path, sizeof path, &f); /* 6 bytes */
    set_hold(true);
    atomic_store(&sends, 0);
    ASSERT_OK(f->ops->append(f, "first", 5));
    ASSERT_OK(f->ops->flush(f));
    wait_held();
    for (int i = 0; i < 20; i++) { /* fewer than WFILE_MAX_INFLIGHT */
        ASSERT_OK(f->ops->append(f, "0123456789", 10));
        ASSERT_OK(f->ops->flush(f));
    }
    int before_answer = atomic_load(&sends);
    set_hold(false);
    assert_int_equal(size_within_30s(path, 6 + 5 + 200), 6 + 5 + 200); /* no sync, no flush */
    if (before_answer != 1 || atomic_load(&sends) != 2)
        fail_msg("21 flushes, the first answered late, made %d sends (%d before its answer), "
                 "want 2 (1)",
                 atomic_load(&sends), before_answer);
    close_and_remove(f, dir, path);
}

/* A sync by path covers bytes the open file flushed but held behind a send
 * in flight: it sends them and waits for their answer (without: it returned
 * once the earlier send was answered, the held bytes unanswered). */
static void test_sync_by_path_covers_held_flushes(void **state)
{
    (void)state;
    char dir[128], path[256];
    lsm_wfile *f;
    open_log(dir, sizeof dir, path, sizeof path, &f); /* 6 bytes */
    set_hold(true);
    ASSERT_OK(f->ops->append(f, "in flight", 9));
    ASSERT_OK(f->ops->flush(f)); /* sent, its answer held */
    wait_held();
    ASSERT_OK(f->ops->append(f, "held", 4));
    ASSERT_OK(f->ops->flush(f)); /* held behind it */
    struct by_path b = {.path = path};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_by_path, &b), 0);
    usleep(500 * 1000);
    let_answers_through(1); /* the first send's answer only */
    usleep(1000 * 1000);
    bool early = atomic_load(&b.returned);
    set_hold(false);
    pthread_join(t, NULL);
    if (early)
        fail_msg("sync by path returned while a flushed append was unanswered");
    ASSERT_OK(b.s);
    uint64_t size = 0;
    ASSERT_OK(env->file_size(env, path, &size));
    assert_int_equal(size, 6 + 9 + 4);
    close_and_remove(f, dir, path);
}

/* While held for a sync (hold_for_sync), flushes send nothing; the sync
 * sends them all as one (before: the first flush went alone and the sync
 * sent the rest behind it, two round trips); a sync by path covers what was
 * kept back; and ending the hold sends what it kept at once. */
static void test_held_flushes_go_with_the_sync(void **state)
{
    (void)state;
    char dir[128], path[256];
    lsm_wfile *f;
    open_log(dir, sizeof dir, path, sizeof path, &f); /* 6 bytes */
    assert_non_null(f->ops->hold_for_sync);
    f->ops->hold_for_sync(f, true);
    atomic_store(&sends, 0);
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(f->ops->append(f, "0123456789", 10));
        ASSERT_OK(f->ops->flush(f));
    }
    assert_int_equal(atomic_load(&sends), 0);
    ASSERT_OK(f->ops->sync(f));
    assert_int_equal(atomic_load(&sends), 1);
    uint64_t size = 0;
    ASSERT_OK(env->file_size(env, path, &size));
    assert_int_equal(size, 6 + 50);

    ASSERT_OK(f->ops->append(f, "by path", 7));
    ASSERT_OK(f->ops->flush(f)); /* kept back */
    assert_int_equal(atomic_load(&sends), 1);
    ASSERT_OK(env->sync_file(env, path));
    ASSERT_OK(env->file_size(env, path, &size));
    assert_int_equal(size, 6 + 50 + 7);

    ASSERT_OK(f->ops->append(f, "kept", 4));
    ASSERT_OK(f->ops->flush(f));
    int before_end = atomic_load(&sends);
    f->ops->hold_for_sync(f, false); /* sends what it kept, no sync asked */
    assert_int_equal(size_within_30s(path, 6 + 50 + 7 + 4), 6 + 50 + 7 + 4);
    assert_int_equal(before_end, 2);
    close_and_remove(f, dir, path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_by_path_waits_for_open_files_sends),
        cmocka_unit_test(test_truncate_by_path_waits_for_open_files_sends),
        cmocka_unit_test(test_sync_by_path_reports_a_failed_send),
        cmocka_unit_test(test_truncate_by_path_cuts_unsent_bytes),
        cmocka_unit_test(test_flushes_behind_a_send_go_as_one),
        cmocka_unit_test(test_sync_by_path_covers_held_flushes),
        cmocka_unit_test(test_held_flushes_go_with_the_sync),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
