/*
 * fixture.h — the unit tests' shared fixture: a fresh temporary directory
 * per test (tu_dir), the store opened in it, and the test macro that sets
 * them up and tears them down.
 *
 *     static void test_x(void **state) { lsm_db *db = tu_open(NULL, 0); ... }
 *     const struct CMUnitTest tests[] = {TU_TEST(test_x), ...};
 */
#ifndef LSMFS_FIXTURE_H
#define LSMFS_FIXTURE_H

#include "testutil.h"

/* The running test's directory, /tmp/lsm-test-<program>-XXXXXX (on RADOS
 * one in the pool, see tu_mkdtemp): made by tu_setup, removed with all
 * below it by tu_teardown. */
extern char tu_dir[96];

int tu_setup(void **state);
int tu_teardown(void **state);

/* A cmocka test run in its own tu_dir. */
#define TU_TEST(fn) cmocka_unit_test_setup_teardown(fn, tu_setup, tu_teardown)

/* Empties tu_dir: removes it with all below it and makes it again. */
void tu_dir_empty(void);
/* "<tu_dir>/<name>" into out, or the test fails. */
void tu_path(char *out, size_t cap, const char *name);
/* Opens (creating) the store in tu_dir as tu_open_db does. */
lsm_db *tu_open(lsm_env *env, size_t wbs);
/* Opens the store in tu_dir with o, or the test fails. */
lsm_db *tu_open_with(const lsm_options *o);
/* How many table files (.ldb) are in tu_dir (a local directory). */
int tu_tables_on_disk(void);

#endif
