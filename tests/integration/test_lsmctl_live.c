/*
 * test_lsmctl_live.c — lsmctl on a mounted lsmfs: stats --json,
 * --prometheus and --watch (the daemon's user.lsmfs.metrics).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mount.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char out[1 << 20];

#define lsmctl(...) tm_lsmctl(out, sizeof out, __VA_ARGS__)

static int setup(void **state)
{
    return tm_setup(state, 240, "test_lsmctl_live", NULL);
}

/* The number after "\"name\": " in --json's output; fails if absent. */
static uint64_t json_field(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *p = strstr(out, key);
    if (p == NULL)
        fail_msg("no %s in:\n%s", key, out);
    return strtoull(p + strlen(key), NULL, 10);
}

/* --json: one object, one "name": number per line, counting what was done. */
static void test_stats_json(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(lsmctl("stats %s --json", m->mnt), 0);
    uint64_t mkdirs = json_field("fs_requests_mkdir");
    uint64_t writes = json_field("store_writes");
    TM_OK(mkdir(P("d1"), 0755));
    TM_OK(mkdir(P("d2"), 0755));
    assert_int_equal(lsmctl("stats %s --json", m->mnt), 0);
    assert_int_equal(json_field("fs_requests_mkdir"), mkdirs + 2);
    assert_true(json_field("store_writes") >= writes + 2);
    json_field("store_wal_syncs");
    json_field("store_stall_us");
    json_field("store_tables_level_0");
    assert_int_equal(out[0], '{');
    assert_string_equal(out + strlen(out) - 2, "}\n");
    int lines = 0;
    for (char *l = strchr(out, '\n') + 1; *l != '}'; l = strchr(l, '\n') + 1, lines++) {
        char name[64];
        unsigned long long v;
        if (sscanf(l, " \"%63[a-z0-9_]\": %llu", name, &v) != 2)
            fail_msg("not a \"name\": number line: %.60s", l);
    }
    assert_true(lines > 60);
}

/* --prometheus: a # TYPE line once per family, counters end in _total. */
static void test_stats_prometheus(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("d"), 0755));
    assert_int_equal(lsmctl("stats %s --prometheus", m->mnt), 0);
    assert_non_null(strstr(out, "# TYPE lsmfs_fs_requests_total counter\n"));
    assert_non_null(strstr(out, "lsmfs_fs_requests_total{op=\"mkdir\"} 1\n"));
    assert_non_null(strstr(out, "# TYPE lsmfs_store_tables gauge\n"));
    assert_non_null(strstr(out, "lsmfs_store_tables{level=\"0\"} "));
    assert_non_null(strstr(out, "lsmfs_store_wal_syncs_total "));
    const char *first = strstr(out, "# TYPE lsmfs_store_tables ");
    assert_null(strstr(first + 1, "# TYPE lsmfs_store_tables ")); /* once */
}

/* --watch=SEC --count=N: a header and N lines of rates; refused on a store. */
static void test_stats_watch(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(lsmctl("stats %s --watch=1 --count=2", m->mnt), 0);
    assert_non_null(strstr(out, "req/s"));
    assert_non_null(strstr(out, "wr/sync"));
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    assert_int_equal(lines, 3);
    assert_int_equal(lsmctl("stats %s --watch=0", m->mnt), 2);
    assert_int_equal(lsmctl("stats %s --json --prometheus", m->mnt), 2);
    assert_int_equal(lsmctl("stats %s --watch --count=1", m->root), 1);
    assert_non_null(strstr(out, "not the mount point of a running lsmfs"));
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_stats_json, setup),
        TM_TEST(test_stats_prometheus, setup),
        TM_TEST(test_stats_watch, setup),
    };
    return cmocka_run_group_tests_name("lsmctl_live", tests, NULL, NULL);
}
