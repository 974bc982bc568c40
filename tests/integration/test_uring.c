/*
 * test_uring — the choice of transport (-o uring=auto|on|off, fs/transport/uring.h)
 * and the ring under a crash.
 *
 * What the kernel offers decides what is checked, and each test says which
 * case it checked: with the fuse module's enable_uring at Y, auto and on
 * serve over io_uring (the stats count requests over it); at N (the
 * default), auto falls back to /dev/fuse with a log line naming the module
 * parameter, and on refuses to mount, naming it too. off never uses the
 * ring. The crash test kills the daemon while fsyncing writers have
 * requests in flight (over the ring when the kernel offers it) and checks
 * every acknowledged delivery after the remount; a SIGTERM in the same
 * state must end the daemon cleanly (exit 0, clean store).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 120
#define PARAM "/sys/module/fuse/parameters/enable_uring"

/* Whether the kernel offers FUSE over io_uring (as lsmfs judges it). */
static bool kernel_offers(void)
{
    char c = 0, d = '0';
    FILE *f = fopen(PARAM, "r");
    if (f != NULL) {
        c = (char)fgetc(f);
        fclose(f);
    }
    f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
    if (f != NULL) {
        d = (char)fgetc(f);
        fclose(f);
    }
    return c == 'Y' && d == '0';
}

static void say_case(const char *test, bool offers)
{
    printf("[uring] %s: the kernel %s FUSE over io_uring (%s): checked the %s case\n", test,
           offers ? "offers" : "does not offer", PARAM, offers ? "io_uring" : "fallback");
}

static int setup_auto(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_uring test (uring=auto)", "uring=auto");
}

static int setup_off(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_uring test (uring=off)", "uring=off");
}

/* The whole daemon log of m (static storage). */
static const char *daemon_log(const struct tmount *m)
{
    static char buf[65536];
    FILE *f = fopen(m->log, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Some requests: a file made, written, read, listed, removed. */
static void some_requests(struct tmount *m)
{
    char buf[100];
    tm_make_file(P("f"), 5000, 7);
    tm_check_file(P("f"), 5000, 7);
    struct stat st;
    TM_OK(stat(P("f"), &st));
    TM_OK(tm_read_file(P("f"), buf, sizeof buf));
    TM_OK(unlink(P("f")));
}

/* auto: the ring if the kernel offers it, else /dev/fuse, said in the log
 * and in the stats. */
static void test_auto_follows_the_kernel(void **state)
{
    struct tmount *m = *state;
    bool offers = kernel_offers();
    say_case("auto", offers);
    some_requests(m);
    uint64_t ring = tm_stats_counter(m, "fs requests over io_uring");
    const char *log = daemon_log(m);
    if (offers) {
        if (ring < 5)
            fail_msg("uring=auto with the ring offered: only %llu requests over io_uring",
                     (unsigned long long)ring);
        assert_non_null(strstr(log, "serving requests over io_uring"));
    } else {
        assert_int_equal(ring, 0);
        assert_non_null(strstr(log, "does not offer FUSE over io_uring"));
        assert_non_null(strstr(log, PARAM));
    }
}

/* off: never the ring, whatever the kernel offers. */
static void test_off_stays_on_dev_fuse(void **state)
{
    struct tmount *m = *state;
    say_case("off", kernel_offers());
    some_requests(m);
    assert_int_equal(tm_stats_counter(m, "fs requests over io_uring"), 0);
    assert_null(strstr(daemon_log(m), "io_uring"));
}

/* on: mounts and serves over the ring when the kernel offers it; refuses to
 * mount otherwise, with a message naming the module parameter. */
static void test_on_needs_the_kernel(void **state)
{
    struct tmount *m = *state; /* mounted with uring=off */
    bool offers = kernel_offers();
    say_case("on", offers);
    assert_int_equal(tm_unmount(m), 0);
    snprintf(m->opts, sizeof m->opts, "uring=on");
    if (offers) {
        assert_int_equal(tm_mount(m), 0);
        some_requests(m);
        if (tm_stats_counter(m, "fs requests over io_uring") < 5)
            fail_msg("uring=on: requests did not go over io_uring");
        return;
    }
    char *argv[] = {(char *)tm_bin("lsmfs"), m->store, m->mnt, "-f", "-o", m->opts, NULL};
    int rc = tm_run(argv, m->log, 30);
    if (tm_is_mounted(m->mnt))
        fail_msg("uring=on mounted although the kernel does not offer the ring");
    assert_int_equal(rc, 1);
    const char *log = daemon_log(m);
    const char *msg = strstr(log, "-o uring=on");
    if (msg == NULL || strstr(msg, PARAM) == NULL)
        fail_msg("uring=on refused without naming %s; log:\n%s", PARAM, log);
    snprintf(m->opts, sizeof m->opts, "uring=off");
    assert_int_equal(tm_mount(m), 0); /* for the teardown */
}

#define WRITERS 4
#define MAX_FILES 100000

struct writer {
    struct tmount *m;
    int id;
    _Atomic int acked; /* files 0..acked-1 were fsynced (file and directory) */
};

/* Delivers files w<id>-<n> (write, fsync, fsync of the directory) until
 * the daemon dies under it. */
static void *deliver(void *arg)
{
    struct writer *w = arg;
    struct tmount *m = w->m;
    char buf[6000];
    for (int n = 0; n < MAX_FILES; n++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s", tm_path(m, "d/w%d-%d", w->id, n));
        size_t size = 1000 + (size_t)(n % 5) * 1000;
        tm_fill(buf, size, (uint64_t)w->id * 1000003 + (uint64_t)n, 0);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0)
            return NULL;
        bool ok = tm_pwrite_all(fd, buf, size, 0) == 0 && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        if (!ok || tm_sync_path(tm_path(m, "d"), true) != 0)
            return NULL;
        atomic_store(&w->acked, n + 1);
    }
    return NULL;
}

/* kill -9 while fsyncing writers have requests in flight; after the
 * remount every acknowledged delivery is there, whole. */
static void test_kill_with_requests_in_flight(void **state)
{
    struct tmount *m = *state;
    say_case("kill -9 in flight", kernel_offers());
    TM_OK(mkdir(P("d"), 0755));
    tm_fsync_path(P("d"), true);
    struct writer ws[WRITERS];
    pthread_t ts[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        ws[i] = (struct writer){.m = m, .id = i};
        assert_int_equal(pthread_create(&ts[i], NULL, deliver, &ws[i]), 0);
    }
    tm_sleep_ms(700);
    assert_int_equal(tm_kill(m), 0);
    int acked[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(ts[i], NULL);
        acked[i] = atomic_load(&ws[i].acked);
        if (acked[i] == 0)
            fail_msg("writer %d delivered nothing before the kill", i);
    }
    tm_crash_checked(m, "kill -9 with deliveries in flight");
    for (int i = 0; i < WRITERS; i++)
        for (int n = 0; n < acked[i]; n++) {
            size_t size = 1000 + (size_t)(n % 5) * 1000;
            tm_check_file(P("d/w%d-%d", i, n), size, (uint64_t)i * 1000003 + (uint64_t)n);
        }
    printf("[uring] %d+%d+%d+%d acknowledged deliveries intact after kill -9\n", acked[0],
           acked[1], acked[2], acked[3]);
}

/* SIGTERM while fsyncing writers have requests in flight: the daemon
 * finishes what it holds, stops its queues before the unmount, exits 0;
 * the store is clean and every acknowledged delivery is there. */
static void test_sigterm_with_requests_in_flight(void **state)
{
    struct tmount *m = *state;
    say_case("SIGTERM in flight", kernel_offers());
    TM_OK(mkdir(P("d"), 0755));
    tm_fsync_path(P("d"), true);
    struct writer ws[WRITERS];
    pthread_t ts[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        ws[i] = (struct writer){.m = m, .id = i};
        assert_int_equal(pthread_create(&ts[i], NULL, deliver, &ws[i]), 0);
    }
    tm_sleep_ms(500);
    assert_int_equal(tm_stop(m, SIGTERM), 0);
    int acked[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(ts[i], NULL);
        acked[i] = atomic_load(&ws[i].acked);
    }
    assert_int_equal(tm_fsck(m), 0);
    assert_int_equal(tm_mount(m), 0);
    for (int i = 0; i < WRITERS; i++)
        for (int n = 0; n < acked[i]; n++)
            tm_check_file(P("d/w%d-%d", i, n), 1000 + (size_t)(n % 5) * 1000,
                          (uint64_t)i * 1000003 + (uint64_t)n);
    printf("[uring] %d+%d+%d+%d acknowledged deliveries intact after SIGTERM\n", acked[0],
           acked[1], acked[2], acked[3]);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_auto_follows_the_kernel, setup_auto),
        TM_TEST(test_off_stays_on_dev_fuse, setup_off),
        TM_TEST(test_on_needs_the_kernel, setup_off),
        TM_TEST(test_kill_with_requests_in_flight, setup_auto),
        TM_TEST(test_sigterm_with_requests_in_flight, setup_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
