/*
 * super.c — opening and closing a filesystem: store, superblock, allocator,
 * inode cache, orphan reclaimer.
 */
#include "super.h"

#include "icache.h"
#include "orphan.h"
#include "schema.h"
#include "store_open.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int super_read(lsm_db *db, const char *dir, schema_super *sb, char *err, size_t errlen)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    schema_key k;
    key_super(&k);
    char *v = NULL;
    size_t vlen = 0;
    lsm_status *s = lsm_get(db, &ro, k.b, k.len, &v, &vlen);
    if (s != NULL) {
        int notfound = lsm_status_code(s) == LSM_NOT_FOUND;
        if (notfound)
            snprintf(err, errlen, "%s: not an lsmfs filesystem (store has no superblock)", dir);
        else
            snprintf(err, errlen, "%s: reading the superblock: %s", dir, lsm_status_message(s));
        lsm_status_free(s);
        return notfound ? EINVAL : EIO;
    }
    enum super_check c = super_decode(v, vlen, sb);
    free(v);
    switch (c) {
    case SUPER_OK:
        return 0;
    case SUPER_NOT_LSMFS:
        snprintf(err, errlen, "%s: not an lsmfs filesystem (bad superblock magic)", dir);
        return EINVAL;
    case SUPER_NEWER:
        snprintf(err, errlen,
                 "%s: lsmfs format version %u is newer than this lsmfs supports (%u): upgrade "
                 "lsmfs",
                 dir, sb->version, SCHEMA_VERSION);
        return EPROTONOSUPPORT;
    case SUPER_BAD:
        break;
    }
    snprintf(err, errlen, "%s: damaged superblock", dir);
    return EIO;
}

bool super_batch_upgrade(lsm_batch *b, schema_super *sb)
{
    if (sb->version >= SCHEMA_VERSION)
        return true;
    schema_super up = *sb;
    up.version = SCHEMA_VERSION;
    char v[SCHEMA_SUPER_LEN];
    super_encode(&up, v);
    schema_key k;
    key_super(&k);
    if (!lsm_batch_put(b, k.b, k.len, v, sizeof v))
        return false;
    *sb = up;
    return true;
}

/* A read-write mount marks the store current before it writes anything
 * (super_batch_upgrade). Synced. */
static int super_upgrade(lsm_db *db, schema_super *sb, char *err, size_t errlen)
{
    if (sb->version >= SCHEMA_VERSION)
        return 0;
    schema_super up = *sb;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL || !super_batch_upgrade(b, &up)) {
        lsm_batch_free(b);
        snprintf(err, errlen, "writing the superblock of format %u: out of memory", SCHEMA_VERSION);
        return ENOMEM;
    }
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_write(db, &wo, b);
    lsm_batch_free(b);
    if (s != NULL) {
        snprintf(err, errlen, "writing the superblock of format %u: %s", SCHEMA_VERSION,
                 lsm_status_message(s));
        int e = lsm_status_errno(s);
        lsm_status_free(s);
        return e != 0 ? e : EIO;
    }
    *sb = up;
    return 0;
}

/* Counts inode records (statfs reports it as files in use). */
static int count_inodes(lsm_db *db, int64_t *count)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.fill_cache = false;
    lsm_iter *it = lsm_iter_new(db, &ro);
    if (it == NULL)
        return ENOMEM;
    char prefix = K_INODE;
    *count = 0;
    for (lsm_iter_seek(it, &prefix, 1); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen;
        const char *key = lsm_iter_key(it, &klen);
        if (klen == 0 || key[0] != K_INODE)
            break;
        (*count)++;
    }
    lsm_status *s = lsm_iter_status(it);
    int err = s ? EIO : 0;
    lsm_status_free(s);
    lsm_iter_free(it);
    return err;
}

static void fail_close(lsmfs *fs)
{
    reclaimer_stop(fs->reclaim);
    icache_free(fs->icache);
    if (fs->alloc.db != NULL)
        alloc_destroy(&fs->alloc);
    lsm_status_free(lsm_close(fs->db));
    free(fs->dir);
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

int lsmfs_open(const lsmfs_config *cfg, lsmfs **out, char *err, size_t errlen)
{
    lsmfs *fs = calloc(1, sizeof *fs);
    if (fs == NULL) {
        snprintf(err, errlen, "out of memory");
        return ENOMEM;
    }
    fs->cfg = *cfg;
    fs->dir = realpath(cfg->store_dir, NULL);
    if (fs->dir == NULL) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", cfg->store_dir, strerror(e));
        free(fs);
        return e;
    }
    fs->cfg.store_dir = fs->dir;
    store_open_req req = {.dir = fs->dir,
                          .flags = cfg->read_only ? STORE_OPEN_RO | STORE_OPEN_SALVAGE
                                                  : STORE_OPEN_RW,
                          .ctx = "lsmfs"};
    int e = store_open(&req, &fs->db, &fs->sb, err, errlen);
    if (e == 0 && !cfg->read_only) /* read-only reads version-1 records as they are */
        e = super_upgrade(fs->db, &fs->sb, err, errlen);
    if (e == 0)
        init_durability(fs);
    if (e == 0)
        e = alloc_init(&fs->alloc, fs->db, err, errlen);
    int64_t n = 0;
    if (e == 0 && (e = count_inodes(fs->db, &n)) != 0)
        snprintf(err, errlen, "%s: cannot scan inodes", fs->dir);
    atomic_store(&fs->inodes, n);
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
    lsm_status *s = lsm_close(fs->db);
    int e = s ? EIO : 0;
    lsm_status_free(s);
    free(fs->dir);
    free(fs);
    return e;
}
