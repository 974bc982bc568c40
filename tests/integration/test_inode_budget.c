/*
 * test_inode_budget.c — the inode budget (-o max_inodes, fs/ishrink.h):
 * past it the daemon asks the kernel to drop entries, so the inode cache
 * stays near the budget however many files the kernel has seen; what it
 * dropped is looked up again, unchanged.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 300
#define BUDGET 200
#define DIRS 4
#define FILES_PER_DIR 500

static int setup_budget(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_inode_budget test", "max_inodes=200");
}

static uint64_t cached(const struct tmount *m)
{
    return tm_stats_counter(m, "fs inodes cached");
}

/* Waits up to 10 s for the cache to hold at most `most` inodes; returns
 * what it holds then. */
static uint64_t settle(const struct tmount *m, uint64_t most)
{
    uint64_t n = cached(m);
    for (int i = 0; i < 200 && n > most; i++) {
        tm_sleep_ms(50);
        n = cached(m);
    }
    return n;
}

static void make_tree(struct tmount *m)
{
    for (int d = 0; d < DIRS; d++) {
        TM_OK(mkdir(tm_path(m, "d%d", d), 0755));
        for (int f = 0; f < FILES_PER_DIR; f++) {
            char body[32];
            int len = snprintf(body, sizeof body, "file %d/%d", d, f);
            TM_OK(tm_write_file(tm_path(m, "d%d/f%d", d, f), body, (size_t)len, 0644));
        }
    }
}

/* Stats and reads every file: each has its own contents. */
static void check_tree(struct tmount *m)
{
    for (int d = 0; d < DIRS; d++)
        for (int f = 0; f < FILES_PER_DIR; f++) {
            char want[32], got[32];
            int len = snprintf(want, sizeof want, "file %d/%d", d, f);
            struct stat st;
            TM_OK(stat(tm_path(m, "d%d/f%d", d, f), &st));
            assert_int_equal(st.st_size, len);
            assert_int_equal(tm_read_file(tm_path(m, "d%d/f%d", d, f), got, sizeof got), len);
            assert_memory_equal(got, want, (size_t)len);
        }
}

/* 2,000 files created, then all stat'ed and read: the cache comes back to
 * the budget each time, and every file reads right after its entry was
 * dropped. (Before the budget: one cached inode per file the kernel held.) */
static void test_cache_stays_within_budget(void **state)
{
    struct tmount *m = *state;
    make_tree(m);
    uint64_t after_create = settle(m, BUDGET);
    if (after_create > BUDGET)
        fail_msg("%llu inodes cached after creating %d files (budget %d)",
                 (unsigned long long)after_create, DIRS * FILES_PER_DIR, BUDGET);
    check_tree(m);
    uint64_t after_read = settle(m, BUDGET);
    if (after_read > BUDGET)
        fail_msg("%llu inodes cached after reading %d files (budget %d)",
                 (unsigned long long)after_read, DIRS * FILES_PER_DIR, BUDGET);
    tm_remount_checked(m);
    check_tree(m);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_cache_stays_within_budget, setup_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
