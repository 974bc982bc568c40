/*
 * db_error.c — why a change to the store is refused: a read-only handle, or
 * the sticky background error (db_impl.h, bg_error).
 */
#include "db_impl.h"
#include "status.h"

lsm_status *db_refuse_read_only(const lsm_db *db)
{
    if (!db->opt.read_only)
        return NULL;
    return status_new(LSM_READ_ONLY, "%s: the store is open read-only", db->dir);
}

void db_set_bg_error(lsm_db *db, lsm_status *s)
{
    assert(mutex_held(&db->mu));
    status_keep_first(&db->bg_error, s);
}
