/*
 * test_thread_names — the daemon's threads carry names (ps -L,
 * /proc/PID/task/TID/comm), so that the CPU of request workers, flushes and
 * compactions can be told apart (tools/bench/mta.sh splits the daemon's CPU
 * by them; issue 30).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "mount.h"

#define TEST_TIMEOUT_S 60

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_thread_names test", NULL);
}

/* Whether a thread of pid is named name. */
static bool has_thread(pid_t pid, const char *name)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[384], comm[32] = "";
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread ended */
        if (fgets(comm, sizeof comm, f) != NULL)
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        found = strcmp(comm, name) == 0;
    }
    closedir(d);
    return found;
}

static void test_threads_are_named(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_touch(P("f")); /* a request served */
    bool ring = tm_stats_counter(m, "fs requests over io_uring") > 0;
    assert_true(has_thread(m->daemon, ring ? "lsmfs-uqueue" : "lsmfs-fuse"));
    assert_true(has_thread(m->daemon, "lsmfs-watch") || ring);
    assert_true(has_thread(m->daemon, "lsm-flush"));
    assert_true(has_thread(m->daemon, "lsm-compact0")); /* a thread per compaction lane */
    assert_true(has_thread(m->daemon, "lsm-compact1"));
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_threads_are_named, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
