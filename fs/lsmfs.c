/*
 * lsmfs.c — opening and closing a filesystem: store, superblock, allocator,
 * inode cache, orphan reclaimer (lsmfs.h).
 */
#include "lsmfs.h"

#include "env.h"
#include "fuse_api.h"
#include "icache.h"
#include "icount.h"
#include "orphan.h"
#include "snapshot.h"
#include "store_open.h"
#include "store_uri.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The saved count, or a background count when it is stale. */
static int inode_count_init(lsmfs *fs, char *err, size_t errlen)
{
    bool current;
    uint64_t saved;
    int e = icount_current(fs->db, &current, &saved);
    if (e == 0 && current) {
        atomic_store(&fs->inodes, (int64_t)saved);
        atomic_store(&fs->inodes_known, true);
        return 0;
    }
    if (e == 0)
        e = icount_start(fs->db, &fs->inodes, &fs->inodes_known, &fs->icount);
    if (e != 0)
        snprintf(err, errlen, "%s: cannot count inodes: %s", fs->dir, strerror(e));
    return e;
}

uint64_t lsmfs_inodes_bound(lsmfs *fs)
{
    if (atomic_load(&fs->inodes_known)) {
        int64_t n = atomic_load(&fs->inodes);
        return n > 0 ? (uint64_t)n : 0;
    }
    mutex_lock(&fs->alloc.mu);
    uint64_t next = fs->alloc.next;
    mutex_unlock(&fs->alloc.mu);
    return next;
}

static void fail_close(lsmfs *fs)
{
    reclaimer_stop(fs->reclaim);
    icount_stop(fs->icount);
    icache_free(fs->icache);
    if (fs->alloc.db != NULL)
        alloc_destroy(&fs->alloc);
    lsm_status_free(lsm_close(fs->db));
    store_usage_destroy(&fs->usage);
    free(fs->dir);
    free(fs->path);
    free(fs);
}

/* Everything in the store when it opens counts as committed; the store
 * knows whether it is durable (lsm_sync_upto asks it). */
static void init_durability(lsmfs *fs)
{
    uint64_t seq = 0;
    if (!lsm_property_u64(fs->db, "lsm.sequence", &seq))
        seq = 0;
    atomic_store(&fs->committed_seq, seq);
    atomic_store(&fs->durable_seq, 0);
}

/* The root reserve: the superblock's, or the mount's options. */
static void init_reserve(lsmfs *fs)
{
    const lsmfs_config *c = &fs->cfg;
    uint32_t pct = c->reserve_pct >= 0 ? (uint32_t)c->reserve_pct : fs->sb.reserve_pct;
    uid_t uid = c->resuid >= 0 ? (uid_t)c->resuid : fs->sb.resuid;
    gid_t gid = c->resgid >= 0 ? (gid_t)c->resgid : fs->sb.resgid;
    reserve_init(&fs->reserve, fs->db, fs->env, fs->path, pct, uid, gid);
}

/* The store's path with every link resolved (a RADOS one as it is), in
 * lsm_malloc'd memory; NULL with errno set when it cannot be. */
static char *store_dir_of(const char *dir)
{
    char real[PATH_MAX];
    if (!store_uri_is_rados(dir) && realpath(dir, real) == NULL)
        return NULL;
    char *copy = lsm_strdup(store_uri_is_rados(dir) ? dir : real);
    if (copy == NULL)
        errno = ENOMEM;
    return copy;
}

int lsmfs_open(const lsmfs_config *cfg, lsmfs **out, char *err, size_t errlen)
{
    lsmfs *fs = lsm_calloc(1, sizeof *fs);
    if (fs == NULL) {
        snprintf(err, errlen, "out of memory");
        return ENOMEM;
    }
    fs->cfg = *cfg;
    store_usage_init(&fs->usage);
    fs->dir = store_dir_of(cfg->store_dir);
    if (fs->dir == NULL) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", cfg->store_dir, strerror(e));
        store_usage_destroy(&fs->usage);
        free(fs);
        return e;
    }
    fs->cfg.store_dir = fs->dir;
    store_open_req req = {.dir = fs->dir,
                          .flags = cfg->read_only ? STORE_OPEN_RO | STORE_OPEN_SALVAGE
                                                  : STORE_OPEN_RW,
                          .ctx = "lsmfs"};
    int e = store_open(&req, &fs->db, &fs->sb, err, errlen);
    if (e == 0) { /* the same (process-wide) env the store was opened with */
        lsm_status *s = store_uri_resolve(fs->dir, &fs->env, &fs->path);
        e = s ? EIO : 0;
        lsm_status_free(s);
    }
    if (e == 0) /* before this mount writes anything (icount.h) */
        e = inode_count_init(fs, err, errlen);
    if (e == 0 && !cfg->read_only) /* read-only reads version-1 records as they are */
        e = super_upgrade(fs->db, &fs->sb, err, errlen);
    if (e == 0)
        init_durability(fs);
    if (e == 0 && !cfg->read_only)
        snapshot_sweep_leftovers(fs);
    if (e == 0)
        init_reserve(fs);
    if (e == 0)
        e = alloc_init(&fs->alloc, fs->db, err, errlen);
    if (e == 0 && (fs->icache = icache_new()) == NULL)
        e = ENOMEM;
    /* Read-only: orphans stay for the next read-write mount to reclaim. */
    if (e == 0 && !cfg->read_only && (e = reclaimer_start(fs, &fs->reclaim)) != 0)
        snprintf(err, errlen, "cannot start the orphan reclaimer: %s", strerror(e));
    if (e != 0) {
        fail_close(fs);
        return e;
    }
    *out = fs;
    return 0;
}

int lsmfs_close(lsmfs *fs)
{
    reclaimer_stop(fs->reclaim);
    icache_free(fs->icache);
    alloc_destroy(&fs->alloc);
    icount_stop(fs->icount);
    /* Nothing writes any more. A count that cannot be saved costs the next
     * mount a scan, nothing else. */
    if (!fs->cfg.read_only && atomic_load(&fs->inodes_known))
        (void)icount_save(fs->db, atomic_load(&fs->inodes));
    lsm_status *s = lsm_close(fs->db);
    int e = s ? EIO : 0;
    if (lsm_status_code(s) == LSM_NO_SPACE) { /* nothing at risk (lsm_close) */
        fuse_log(FUSE_LOG_WARNING, "lsmfs: the disk is full: the last table was not written; every "
                        "acknowledged change is safe in the log and replayed at the next "
                        "mount (%s)\n", lsm_status_message(s));
        e = 0;
    }
    lsm_status_free(s);
    store_usage_destroy(&fs->usage);
    free(fs->dir);
    free(fs->path);
    free(fs);
    return e;
}
