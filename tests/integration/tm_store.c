/*
 * tm_store.c — tm_open_store (mount.h): a test's own read-write open of an
 * unmounted store, as the daemon opens it.
 */
#include "mount.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store_open.h"

lsm_db *tm_open_store(const struct tmount *m)
{
    lsm_db *db = NULL;
    schema_super sb;
    char err[1024];
    store_open_req r = {.dir = m->store, .ctx = "test"};
    if (store_open(&r, &db, &sb, err, sizeof err) != 0)
        fail_msg("%s", err);
    return db;
}
