/* fixture.c — the unit tests' temporary directory and store; see fixture.h. */
#include "fixture.h"

#include <dirent.h>

char tu_dir[96];

/* The program's name without its "test_" (a name for its directories). */
static const char *program_name(void)
{
    const char *n = program_invocation_short_name;
    return strncmp(n, "test_", 5) == 0 ? n + 5 : n;
}

int tu_setup(void **state)
{
    (void)state;
    tu_mkdtemp(tu_dir, sizeof tu_dir, program_name());
    return 0;
}

int tu_teardown(void **state)
{
    (void)state;
    tu_rmtree(tu_dir);
    return 0;
}

void tu_dir_empty(void)
{
    tu_rmtree(tu_dir);
    ASSERT_OK(tu_env()->create_dir(tu_env(), tu_dir));
}

void tu_path(char *out, size_t cap, const char *name)
{
    if (snprintf(out, cap, "%s/%s", tu_dir, name) >= (int)cap)
        fail_msg("path too long: %s/%s", tu_dir, name);
}

lsm_db *tu_open(lsm_env *env, size_t wbs)
{
    return tu_open_db(tu_dir, env, wbs);
}

lsm_db *tu_open_with(const lsm_options *o)
{
    lsm_db *db = NULL;
    ASSERT_OK(lsm_open(o, tu_dir, &db));
    return db;
}

int tu_tables_on_disk(void)
{
    DIR *d = opendir(tu_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".ldb") != NULL;
    closedir(d);
    return n;
}
