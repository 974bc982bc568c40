/* test_rados_mount.c — lsmfs mounted on RADOS (run by tests/ceph/run.sh,
 * which starts the cluster and sets CEPH_CONF): maildir delivery, kill -9
 * and takeover by a second client, split brain, a snapshot mounted
 * read-only while the writer goes on, lsmctl info, backup to a local
 * directory and restore to either, and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mount.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WRITERS 8
#define MAX_MSGS 4000
/* The kill -9 test's lease: a probe mount right after the kill must meet
 * it live, and a ThreadSanitizer-built daemon takes several seconds to get
 * to its lock (both the probe and the unmount of the killed mount). */
#ifdef __SANITIZE_THREAD__
#define LEASE_MS 20000
#else
#define LEASE_MS 3000
#endif

/* rados:lsmfs/t-NAME-PID-NANOS: a store no other test or run uses. */
static void store_name(char *out, size_t cap, const char *name)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "rados:lsmfs/t-%s-%d-%ld%09ld", name, (int)getpid(), (long)ts.tv_sec,
             ts.tv_nsec);
}

static size_t msg_size(int w, int j)
{
    return 1500 + (size_t)((w * 7919 + j * 104729) % 6000);
}

static uint64_t msg_seed(int w, int j)
{
    return (uint64_t)w * 1000003u + (uint64_t)j;
}

struct writer {
    struct tmount *m;
    int id;
    _Atomic int acked;  /* messages whose delivery returned: durable */
    _Atomic bool stop;
    _Atomic int first_error; /* errno of the first failed step */
    _Atomic int failed_fsyncs;
};

/* One maildir delivery: tmp/ file written and fsynced, renamed into new/,
 * new/ fsynced. 0 or the errno of the step that failed. */
static int deliver(struct tmount *m, int w, int j, bool *fsync_failed)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", tm_path(m, "Maildir/tmp/%d.%d", w, j));
    snprintf(dst, sizeof dst, "%s", tm_path(m, "Maildir/new/%d.%d", w, j));
    size_t n = msg_size(w, j);
    char *buf = malloc(n);
    if (buf == NULL)
        return ENOMEM;
    tm_fill(buf, n, msg_seed(w, j), 0);
    int e = 0;
    int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0)
        e = errno;
    if (e == 0 && tm_pwrite_all(fd, buf, n, 0) != 0)
        e = errno ? errno : EIO;
    if (e == 0 && fsync(fd) != 0) {
        e = errno;
        *fsync_failed = true;
    }
    if (fd >= 0)
        close(fd);
    if (e == 0 && rename(tmp, dst) != 0)
        e = errno;
    int dfd = e == 0 ? open(tm_path(m, "Maildir/new"), O_RDONLY | O_DIRECTORY) : -1;
    if (e == 0 && dfd < 0)
        e = errno;
    if (e == 0 && fsync(dfd) != 0) {
        e = errno;
        *fsync_failed = true;
    }
    if (dfd >= 0)
        close(dfd);
    free(buf);
    return e;
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    for (int j = 0; j < MAX_MSGS && !atomic_load(&w->stop); j++) {
        bool fsync_failed = false;
        int e = deliver(w->m, w->id, j, &fsync_failed);
        if (fsync_failed)
            atomic_fetch_add(&w->failed_fsyncs, 1);
        if (e != 0) {
            int zero = 0;
            atomic_compare_exchange_strong(&w->first_error, &zero, e);
            break;
        }
        atomic_store(&w->acked, j + 1);
    }
    return NULL;
}

static void make_maildir(struct tmount *m)
{
    TM_OK(mkdir(tm_path(m, "Maildir"), 0700));
    TM_OK(mkdir(tm_path(m, "Maildir/tmp"), 0700));
    TM_OK(mkdir(tm_path(m, "Maildir/new"), 0700));
    int fd = open(tm_path(m, "Maildir"), O_RDONLY | O_DIRECTORY);
    TM_OK(fd);
    TM_OK(fsync(fd));
    close(fd);
}

static void start_writers(struct writer *w, pthread_t *t, struct tmount *m, int n)
{
    for (int i = 0; i < n; i++) {
        w[i] = (struct writer){.m = m, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
    }
}

static void join_writers(struct writer *w, pthread_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        atomic_store(&w[i].stop, true);
        pthread_join(t[i], NULL);
    }
}

/* Every message writer w acknowledged is in new/ whole on m. */
static void check_acked(struct tmount *m, const struct writer *w, int n)
{
    char *buf = malloc(16384), *want = malloc(16384);
    assert_non_null(buf);
    assert_non_null(want);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < atomic_load(&w[i].acked); j++) {
            size_t len = msg_size(i, j);
            ssize_t got = tm_read_file(tm_path(m, "Maildir/new/%d.%d", i, j), buf, 16384);
            if (got != (ssize_t)len)
                fail_msg("message %d.%d: read %zd of %zu bytes", i, j, got, len);
            tm_fill(want, len, msg_seed(i, j), 0);
            if (memcmp(buf, want, len) != 0)
                fail_msg("message %d.%d: content differs", i, j);
        }
    free(buf);
    free(want);
}

/* Unmounts b cleanly, checks its store with fsck -n, frees b and a. */
static void unmount_fsck_free(struct tmount *b, struct tmount *a)
{
    assert_int_equal(tm_unmount(b), 0);
    assert_int_equal(tm_fsck(b), 0);
    tm_free(b);
    tm_free(a);
}

/* Mounts store for a second client, retrying while the old lease is live;
 * the seconds it took go to *secs. */
static struct tmount *mount_when_free(const char *store, const char *opts, double *secs)
{
    double t0 = tm_now();
    for (;;) {
        struct tmount *b = tm_new_at(opts, store, false);
        if (b != NULL) {
            *secs = tm_now() - t0;
            return b;
        }
        if (tm_now() - t0 > 3.0 * LEASE_MS / 1000 + 20)
            fail_msg("%s: no second mount within the lease", store);
        tm_sleep_ms(500);
    }
}

/* A second host's mount of store while the lease lives: refused with one
 * line that names the holder (not just any failure: a daemon that crashed
 * or reported a sanitizer error would fail too). */
static void refused_naming_holder(const char *store, const char *opts)
{
    char dir[] = "/tmp/lsmfs-probe-XXXXXX", out[4096], unused[256];
    assert_non_null(mkdtemp(dir));
    int rc = tm_sh(out, sizeof out, "timeout 60 %s -o %s %s %s 2>&1", tm_bin("lsmfs"), opts, store,
                   dir);
    if (rc == 0) /* mounted: undo it before failing */
        (void)tm_sh(unused, sizeof unused, "fusermount3 -u %s 2>&1", dir);
    rmdir(dir);
    const char *nl = strchr(out, '\n');
    if (rc == 0 || strstr(out, "the store is in use: its lease is held by client.") == NULL ||
        nl == NULL || nl[1] != '\0')
        fail_msg("a second mount while the lease lives: exit %d, said: %s", rc, out);
}

/* 8 writers deliver with fsync + dir fsync; the daemon is killed (-9)
 * mid-delivery; a second daemon (another client) is refused while the
 * lease lives, then takes over: every acknowledged message is there and
 * intact, and fsck is clean. */
static void test_maildir_kill_takeover(void **state)
{
    (void)state;
    char store[256], opts[128];
    store_name(store, sizeof store, "maildir");
    snprintf(opts, sizeof opts, "lease_ms=%d", LEASE_MS);
    struct tmount *a = tm_new_at(opts, store, true);
    assert_non_null(a);
    make_maildir(a);
    struct writer w[WRITERS];
    pthread_t t[WRITERS];
    start_writers(w, t, a, WRITERS);
    tm_sleep_ms(3000);
    int acked_before = 0;
    for (int i = 0; i < WRITERS; i++)
        acked_before += atomic_load(&w[i].acked);
    assert_true(acked_before > WRITERS); /* delivery went on */
    double killed = tm_now();
    assert_int_equal(tm_kill(a), 0);
    join_writers(w, t, WRITERS);
    assert_int_equal(tm_crash(a) == 0 || !tm_is_mounted(a->mnt), 1);

    /* Another host: refused at once (the lease is live), then in. */
    snprintf(opts, sizeof opts, "lease_ms=%d,ceph_id=lsmfs2", LEASE_MS);
    refused_naming_holder(store, opts);
    double secs;
    struct tmount *b = mount_when_free(store, opts, &secs);
    printf("takeover: second mount %.2f s after kill -9 (lease %d ms), %d messages acked\n",
           tm_now() - killed, LEASE_MS, acked_before);
    check_acked(b, w, WRITERS);
    unmount_fsck_free(b, a);
}

/* Split brain: A is stopped (SIGSTOP) with deliveries in flight; B takes
 * over (-o takeover) and delivers; A is continued: every fsync A's callers
 * then make fails with EIO, and the store holds A's acknowledged prefix and
 * B's messages, none of what A tried after the takeover. */
static void test_split_brain(void **state)
{
    (void)state;
    char store[256], opts[128];
    store_name(store, sizeof store, "split");
    /* A lease long enough that A itself still trusts it when continued: the
     * OSDs (fence, blocklist) must refuse A's writes, not A's own clock. */
    snprintf(opts, sizeof opts, "lease_ms=%d", 60000);
    struct tmount *a = tm_new_at(opts, store, true);
    assert_non_null(a);
    make_maildir(a);
    struct writer w[2];
    pthread_t t[2];
    start_writers(w, t, a, 2);
    tm_sleep_ms(1500);
    assert_int_equal(kill(a->daemon, SIGSTOP), 0);
    tm_sleep_ms(300); /* the writers are now stuck in requests to A */
    int acked_at_stop[2] = {atomic_load(&w[0].acked), atomic_load(&w[1].acked)};

    snprintf(opts, sizeof opts, "lease_ms=%d,ceph_id=lsmfs2,takeover", LEASE_MS);
    struct tmount *b = tm_new_at(opts, store, false);
    assert_non_null(b);
    /* B delivers as writer 7 (names A never uses). */
    bool ff = false;
    for (int j = 0; j < 20; j++)
        assert_int_equal(deliver(b, 7, j, &ff), 0);

    assert_int_equal(kill(a->daemon, SIGCONT), 0);
    /* A's writers go on until a step fails: it must, and with EIO. */
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        int e = atomic_load(&w[i].first_error);
        if (e != EIO)
            fail_msg("A's writer %d: first error %s, want EIO", i, tm_errname(e));
        /* At most the delivery in flight at the stop completed after it. */
        assert_true(atomic_load(&w[i].acked) <= acked_at_stop[i] + 1);
    }
    /* Every later attempt by A's callers is refused too. */
    ff = false;
    assert_int_not_equal(deliver(a, 5, 0, &ff), 0);

    /* B has A's acknowledged prefix and its own 20, nothing of A's after. */
    check_acked(b, w, 2);
    char *buf = malloc(16384);
    for (int i = 0; i < 2; i++) {
        int after = atomic_load(&w[i].acked) + 1;
        ssize_t got = tm_read_file(tm_path(b, "Maildir/new/%d.%d", i, after), buf, 16384);
        assert_true(got < 0);
    }
    free(buf);
    assert_int_equal(access(tm_path(b, "Maildir/new/5.0"), F_OK), -1);
    struct writer ball[8] = {{0}}; /* B's 20, as writer 7 */
    atomic_store(&ball[7].acked, 20);
    check_acked(b, ball, 8);

    tm_crash(a); /* A's store cannot close cleanly: it was fenced */
    unmount_fsck_free(b, a);
}

/* A snapshot of the store on RADOS, mounted read-only by a second daemon
 * (another client) while the writer delivers. */
static void test_snapshot_mounted_while_writing(void **state)
{
    (void)state;
    char store[256], snap[300], out[4096];
    store_name(store, sizeof store, "snap");
    struct tmount *a = tm_new_at("lease_ms=3000", store, true);
    assert_non_null(a);
    make_maildir(a);
    bool ff = false;
    for (int j = 0; j < 10; j++)
        assert_int_equal(deliver(a, 0, j, &ff), 0);
    int rc = tm_lsmctl(out, sizeof out, "snapshot %s one", a->mnt);
    if (rc != 0)
        fail_msg("lsmctl snapshot: %s", out);
    /* Listed through the daemon's env, with its bytes (the store has no
     * local directory to read). */
    unsigned long long bytes = 0;
    const char *line;
    if (tm_lsmctl(out, sizeof out, "snapshot %s --list", a->mnt) != 0 ||
        (line = strstr(out, "\none ")) == NULL ||
        sscanf(line + 5, " - %llu", &bytes) != 1 || bytes == 0)
        fail_msg("lsmctl snapshot --list of a store on RADOS: %s", out);
    struct writer w[1];
    pthread_t t[1];
    start_writers(w, t, a, 1); /* writer 0 again: overwrites nothing (new names) */
    snprintf(snap, sizeof snap, "%s/snapshots/one", store);
    struct tmount *r = tm_new_at("ro,ceph_id=lsmfs2", snap, false);
    assert_non_null(r);
    struct writer first = {.id = 0, .acked = 10};
    check_acked(r, &first, 1);
    assert_int_equal(access(tm_path(r, "Maildir/new/0.10"), F_OK), -1); /* after the cut */
    join_writers(w, t, 1);
    assert_true(atomic_load(&w[0].acked) > 0);
    assert_int_equal(tm_unmount(r), 0);
    assert_int_equal(tm_unmount(a), 0);
    tm_free(r);
    tm_free(a);
}

/* lsmctl info's "Bytes on disk" and "Snapshots" of what (a mount or a
 * store): fails unless the logs hold bytes, some other file (MANIFEST,
 * CURRENT) does, and one snapshot is counted. */
static void check_info(const char *what)
{
    char out[8192];
    if (tm_lsmctl(out, sizeof out, "info %s", what) != 0)
        fail_msg("lsmctl info %s: %s", what, out);
    unsigned long long total, tables, logs, reserve, other, snaps;
    const char *b = strstr(out, "Bytes on disk:"), *n = strstr(out, "Snapshots:");
    if (b == NULL || n == NULL ||
        sscanf(b, "Bytes on disk: %llu (tables %llu, logs %llu, reserve %llu, other %llu)",
               &total, &tables, &logs, &reserve, &other) != 5 ||
        sscanf(n, "Snapshots: %llu", &snaps) != 1)
        fail_msg("lsmctl info %s: no bytes on disk or snapshots:\n%s", what, out);
    if (logs + tables == 0 || other == 0 || snaps != 1)
        fail_msg("lsmctl info %s counted nothing of the store on RADOS:\n%s", what, out);
}

/* lsmctl info of a store on RADOS, mounted (asked of the daemon) and not
 * (the store opened by lsmctl): the store's files and snapshots are
 * counted through its env (before: an opendir of a local path that does
 * not exist counted 0 bytes and 0 snapshots). */
static void test_info(void **state)
{
    (void)state;
    char store[256], out[4096];
    store_name(store, sizeof store, "info");
    struct tmount *a = tm_new_at(NULL, store, true);
    assert_non_null(a);
    make_maildir(a);
    bool ff = false;
    for (int j = 0; j < 10; j++)
        assert_int_equal(deliver(a, 0, j, &ff), 0);
    if (tm_lsmctl(out, sizeof out, "snapshot %s one", a->mnt) != 0)
        fail_msg("lsmctl snapshot: %s", out);
    check_info(a->mnt);
    assert_int_equal(tm_unmount(a), 0);
    check_info(store);
    tm_free(a);
}

/* diff -r of two mounted trees: 0 when they are the same. */
static int diff_trees(const struct tmount *a, const struct tmount *b)
{
    char *argv[] = {"/usr/bin/diff", "-r", (char *)a->mnt, (char *)b->mnt, NULL};
    return tm_run(argv, NULL, 60);
}

/* A store on RADOS backed up to a local directory (lsmctl backup
 * rados:POOL/NAME DIR), restored to another store on RADOS: it holds what
 * was delivered; then backed up from its mount (lsmctl backup MNT DIR),
 * restored to a local directory: the mounted trees are the same (diff -r);
 * fsck is clean. Bad input: a backup directory on RADOS, a restore onto a store
 * that exists: one line each. */
static void test_backup_restore(void **state)
{
    (void)state;
    char store[256], store2[256], tmp[PATH_MAX], bdir[PATH_MAX + 16], local[PATH_MAX + 16];
    char out[4096];
    store_name(store, sizeof store, "bak");
    store_name(store2, sizeof store2, "bak2");
    struct tmount *a = tm_new_at(NULL, store, true);
    assert_non_null(a);
    make_maildir(a);
    bool ff = false;
    for (int j = 0; j < 20; j++)
        assert_int_equal(deliver(a, 0, j, &ff), 0);
    assert_int_equal(tm_unmount(a), 0);
    assert_int_equal(tm_mkdtemp(tmp, "bak"), 0);
    snprintf(bdir, sizeof bdir, "%s/backups", tmp);
    snprintf(local, sizeof local, "%s/restored", tmp);
    if (tm_lsmctl(out, sizeof out, "backup %s %s", store, bdir) != 0)
        fail_msg("lsmctl backup: %s", out);
    if (tm_lsmctl(out, sizeof out, "backup restore %s 1 %s", bdir, local) != 0)
        fail_msg("lsmctl backup restore (local): %s", out);
    if (tm_lsmctl(out, sizeof out, "backup restore %s 1 %s", bdir, store2) != 0)
        fail_msg("lsmctl backup restore (RADOS): %s", out);

    assert_int_not_equal(tm_lsmctl(out, sizeof out, "backup %s rados:lsmfs/b", store), 0);
    assert_non_null(strstr(out, "must be a local directory"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
    assert_int_not_equal(tm_lsmctl(out, sizeof out, "backup restore %s 1 %s", bdir, store2), 0);
    assert_non_null(strstr(out, "it exists"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));

    assert_int_equal(tm_mount(a), 0);
    for (int j = 20; j < 30; j++) /* the mount's backup (2) holds these too */
        assert_int_equal(deliver(a, 0, j, &ff), 0);
    if (tm_lsmctl(out, sizeof out, "backup %s %s", a->mnt, bdir) != 0)
        fail_msg("lsmctl backup of the mount: %s", out);
    snprintf(local, sizeof local, "%s/restored2", tmp);
    if (tm_lsmctl(out, sizeof out, "backup restore %s 2 %s", bdir, local) != 0)
        fail_msg("lsmctl backup restore 2: %s", out);
    struct tmount *l = tm_new_at(NULL, local, false), *r = tm_new_at(NULL, store2, false);
    assert_non_null(l);
    assert_non_null(r);
    struct writer w = {.id = 0, .acked = 20};
    check_acked(r, &w, 1);
    assert_int_equal(access(tm_path(r, "Maildir/new/0.20"), F_OK), -1); /* backup 1 */
    assert_int_equal(diff_trees(a, l), 0);
    assert_int_equal(tm_unmount(l), 0);
    assert_int_equal(tm_fsck(l), 0);
    assert_int_equal(tm_unmount(r), 0);
    assert_int_equal(tm_fsck(r), 0);
    assert_int_equal(tm_unmount(a), 0);
    tm_free(l);
    tm_free(r);
    tm_free(a);
    assert_int_equal(tm_rmtree(tmp), 0);
}

static int acked_total(struct writer *w, int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += atomic_load(&w[i].acked);
    return sum;
}

/* Runs tests/ceph/cluster.sh CMD on the test cluster: its exit status. */
static int cluster(const char *cmd)
{
    const char *sh = getenv("LSM_CEPH_CLUSTER_SH"), *dir = getenv("LSM_CEPH_CLUSTER_DIR");
    if (sh == NULL || dir == NULL)
        fail_msg("LSM_CEPH_CLUSTER_SH/DIR not set: run through tests/ceph/run.sh");
    char *argv[] = {(char *)sh, (char *)cmd, (char *)dir, NULL};
    return tm_run(argv, NULL, 60);
}

/* The OSD is killed (-9) and restarted during 8-writer delivery: the
 * writers wait and go on (the lease, 30 s, outlasts the restart), nothing
 * acknowledged is lost, fsck is clean. */
static void test_osd_restart(void **state)
{
    (void)state;
    char store[256];
    store_name(store, sizeof store, "osd");
    struct tmount *a = tm_new_at("lease_ms=30000", store, true);
    assert_non_null(a);
    make_maildir(a);
    struct writer w[WRITERS];
    pthread_t t[WRITERS];
    start_writers(w, t, a, WRITERS);
    tm_sleep_ms(1500);
    assert_int_equal(cluster("kill-osd"), 0);
    int at_kill = acked_total(w, WRITERS);
    tm_sleep_ms(1000);
    assert_true(acked_total(w, WRITERS) <= at_kill + WRITERS); /* they wait */
    double t0 = tm_now();
    assert_int_equal(cluster("start-osd"), 0);
    while (acked_total(w, WRITERS) < at_kill + 4 * WRITERS) {
        if (tm_now() - t0 > 60)
            fail_msg("no delivery within 60 s of the OSD's restart");
        tm_sleep_ms(100);
    }
    printf("osd restart: deliveries went on %.1f s after the restart\n", tm_now() - t0);
    join_writers(w, t, WRITERS);
    for (int i = 0; i < WRITERS; i++)
        if (atomic_load(&w[i].first_error) != 0)
            fail_msg("writer %d: %s", i, tm_errname(atomic_load(&w[i].first_error)));
    check_acked(a, w, WRITERS);
    assert_int_equal(tm_unmount(a), 0);
    assert_int_equal(tm_fsck(a), 0);
    tm_free(a);
}

/* Runs prog args..., expecting failure: its one-line message into out. */
static int run_fails(char *out, size_t cap, const char *cmd)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* Bad input: no such pool, a wrong client key, a cluster that does not
 * answer: one clear line each, nothing made. */
static void test_bad_input(void **state)
{
    (void)state;
    char cmd[PATH_MAX * 2], out[4096], conf[PATH_MAX];
    snprintf(cmd, sizeof cmd, "%s rados:nosuchpool/x 2>&1", tm_bin("mkfs.lsmfs"));
    assert_int_not_equal(run_fails(out, sizeof out, cmd), 0);
    assert_non_null(strstr(out, "pool nosuchpool: no such pool"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */

    snprintf(cmd, sizeof cmd, "%s -o ceph_id=nobody rados:lsmfs/x 2>&1", tm_bin("mkfs.lsmfs"));
    assert_int_not_equal(run_fails(out, sizeof out, cmd), 0);
    assert_non_null(strstr(out, "cannot connect as client.nobody"));

    /* A conf whose monitor is not there: refused within the timeout. */
    snprintf(conf, sizeof conf, "/tmp/lsmfs-test-%d-down.conf", (int)getpid());
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "[global]\nmon_host = v2:127.0.0.1:9\nkeyring = %s\n",
            getenv("CEPH_CONF") ? getenv("CEPH_CONF") : "/dev/null");
    fclose(f);
    char store[256];
    store_name(store, sizeof store, "down");
    double t0 = tm_now();
    snprintf(cmd, sizeof cmd, "%s -o ceph_conf=%s %s 2>&1", tm_bin("mkfs.lsmfs"), conf, store);
    assert_int_not_equal(run_fails(out, sizeof out, cmd), 0);
    assert_non_null(strstr(out, "cannot connect"));
    assert_true(tm_now() - t0 < 30);
    unlink(conf);
    /* Nothing was made under that name. */
    snprintf(cmd, sizeof cmd, "%s -n %s 2>&1", tm_bin("fsck.lsmfs"), store);
    assert_int_not_equal(run_fails(out, sizeof out, cmd), 0);
    assert_non_null(strstr(out, "no store found"));
}

int main(void)
{
    tm_init();
    if (getenv("CEPH_CONF") == NULL) {
        fprintf(stderr, "CEPH_CONF is not set: run RADOS tests through tests/ceph/run.sh\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_maildir_kill_takeover),
        cmocka_unit_test(test_split_brain),
        cmocka_unit_test(test_snapshot_mounted_while_writing),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_backup_restore),
        cmocka_unit_test(test_osd_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
