/*
 * test_lsmctl.c — bin/lsmctl against real stores: dump, tables, compact,
 * stats, check (sound and damaged), and the refusal of a store in use.
 * Needs LSMFS_BIN (set by `make test`), no mount.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lsm.h"
#include "mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[PATH_MAX];
static char out[1 << 20];

static int setup(void **state)
{
    (void)state;
    return tm_mkdtemp(dir, "ctl");
}

static int teardown(void **state)
{
    (void)state;
    return tm_rmtree(dir);
}

/* `lsmctl ARGS`, output in out; the exit status. */
#define lsmctl(...) tm_lsmctl(out, sizeof out, __VA_ARGS__)

static lsm_db *open_db(void)
{
    lsm_options o;
    lsm_options_init(&o);
    o.create_if_missing = true;
    o.write_buffer_size = 64 << 10;
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, dir, &db);
    if (s)
        fail_msg("open: %s", lsm_status_message(s));
    return db;
}

static void fill(int n)
{
    lsm_db *db = open_db();
    char k[32], v[200];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof(k), "key%06d", i);
        snprintf(v, sizeof(v), "value %d %0150d", i, i);
        assert_null(lsm_put(db, NULL, k, strlen(k), v, strlen(v)));
    }
    assert_null(lsm_put(db, NULL, "bin\x01 =", 6, "x", 1));
    assert_null(lsm_close(db));
}

static void test_dump_and_range(void **state)
{
    (void)state;
    fill(100);
    assert_int_equal(lsmctl("dump %s key000010 key000013", dir), 0);
    assert_non_null(strstr(out, "key000010=value\\x2010\\x20"));
    assert_non_null(strstr(out, "key000012="));
    assert_null(strstr(out, "key000013=")); /* TO is exclusive */
    assert_null(strstr(out, "key000009="));
    assert_int_equal(lsmctl("dump %s 'bin' 'bio'", dir), 0);
    assert_string_equal(out, "bin\\x01\\x20\\x3d=x\n");
}

static void test_tables_compact_stats(void **state)
{
    (void)state;
    fill(5000);
    assert_int_equal(lsmctl("tables %s", dir), 0);
    assert_non_null(strstr(out, ".ldb")); /* close wrote the memtables out */
    assert_int_equal(lsmctl("compact %s", dir), 0);
    assert_non_null(strstr(out, ": compacted in "));
    assert_null(strstr(out, ".ldb")); /* a size line, not the tables */
    assert_int_equal(lsmctl("tables %s", dir), 0);
    assert_null(strstr(out, "level 0")); /* all moved down */
    assert_non_null(strstr(out, ".ldb"));
    assert_int_equal(lsmctl("stats %s", dir), 0);
    assert_non_null(strstr(out, "write path"));
    assert_non_null(strstr(out, "write amplification"));
    assert_int_equal(lsmctl("stats %s --json", dir), 0); /* a store no one has open */
    assert_non_null(strstr(out, "\"store_tables_level_0\": "));
    assert_non_null(strstr(out, "\"store_writes\": "));
    assert_int_equal(lsmctl("check %s", dir), 0);
    assert_non_null(strstr(out, ": ok (0 problems)"));
}

/* Flips one byte in the middle of the largest table: check must name it. */
static void test_check_finds_damage(void **state)
{
    (void)state;
    fill(5000);
    assert_int_equal(lsmctl("compact %s", dir), 0);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    char path[PATH_MAX + 256] = "";
    off_t best = 0;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".ldb") == NULL)
            continue;
        char p[PATH_MAX + 256];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        TM_OK(stat(p, &st));
        if (st.st_size > best) {
            best = st.st_size;
            snprintf(path, sizeof(path), "%s", p);
        }
    }
    closedir(d);
    assert_true(best > 1000);
    int fd = open(path, O_RDWR);
    TM_OK(fd);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, best / 3), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, best / 3), 1);
    close(fd);
    assert_int_equal(lsmctl("check %s", dir), 1);
    assert_non_null(strstr(out, "problem:"));
    assert_non_null(strstr(out, "DAMAGED"));
}

static void test_refuses_store_in_use(void **state)
{
    (void)state;
    fill(10);
    lsm_db *db = open_db();
    assert_int_equal(lsmctl("dump %s", dir), 1);
    assert_non_null(strstr(out, "in use"));
    assert_null(lsm_close(db));
    assert_int_equal(lsmctl("dump %s", "/nonexistent-lsm-dir"), 1);
    assert_string_equal(out, "lsmctl: /nonexistent-lsm-dir: No such file or directory\n");
    /* the path once (before: "lsmctl: DIR: DIR: not an lsmfs store") */
    const char *first = strstr(out, "/nonexistent-lsm-dir");
    assert_non_null(first);
    assert_null(strstr(first + 1, "/nonexistent-lsm-dir"));
    assert_int_equal(lsmctl("frobnicate %s", dir), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dump_and_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tables_compact_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_finds_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_store_in_use, setup, teardown),
    };
    return cmocka_run_group_tests_name("lsmctl", tests, NULL, NULL);
}
