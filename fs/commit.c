/*
 * commit.c — batches into the store, and store errors into errnos.
 */
#include "commit.h"

#include "fuse_api.h"

#include <errno.h>

static int write_errno(lsmfs *fs, lsm_status *s, const char *what)
{
    int err = lsm_status_errno(s);
    if (err == 0)
        err = EIO;
    if (!atomic_exchange(&fs->write_error, true))
        fuse_log(FUSE_LOG_ERR, "lsmfs: store %s failed: %s; later writes will fail\n", what,
                 lsm_status_message(s));
    lsm_status_free(s);
    return err;
}

int fs_commit(lsmfs *fs, lsm_batch *b)
{
    lsm_write_options wo = {.sync = false};
    stats_inc(&fs->stats.store_writes);
    lsm_status *s = lsm_write(fs->db, &wo, b);
    return s ? write_errno(fs, s, "write") : 0;
}

int fs_sync(lsmfs *fs)
{
    stats_inc(&fs->stats.store_syncs);
    lsm_status *s = lsm_sync(fs->db);
    return s ? write_errno(fs, s, "sync") : 0;
}

int fs_durable(lsmfs *fs)
{
    return fs->cfg.sync_all ? fs_sync(fs) : 0;
}

int fs_read_errno(lsmfs *fs, lsm_status *s, const char *what)
{
    (void)fs;
    if (s == NULL)
        return 0;
    int code = lsm_status_code(s);
    int err = ENOENT;
    if (code != LSM_NOT_FOUND) {
        err = EIO;
        fuse_log(FUSE_LOG_ERR, "lsmfs: store read (%s) failed: %s\n", what,
                 lsm_status_message(s));
    }
    lsm_status_free(s);
    return err;
}
