/*
 * fsinfo.c — the superblock and the inodes counted by type (fsinfo.h).
 */
#include "fsinfo.h"
#include "snapshot.h"
#include "store_files.h"
#include "super.h"

#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Counts one inode record's value into out; false if it does not decode. */
static bool count_inode(const char *v, size_t vlen, struct lsmfs_info *out)
{
    inode_rec r;
    const char *payload;
    size_t plen;
    if (!inode_decode(v, vlen, &r, &payload, &plen))
        return false;
    if (S_ISREG(r.mode)) {
        out->files++;
        out->file_bytes += r.size;
    } else if (S_ISDIR(r.mode)) {
        out->dirs++;
    } else if (S_ISLNK(r.mode)) {
        out->symlinks++;
    } else {
        out->others++;
    }
    return true;
}

/* Scans the records of kind k (K_INODE or K_ORPHAN) with it. */
static int scan_kind(lsm_iter *it, char k, struct lsmfs_info *out, uint64_t *bad)
{
    for (lsm_iter_seek(it, &k, 1); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen, vlen;
        const char *key = lsm_iter_key(it, &klen);
        if (klen == 0 || key[0] != k)
            break;
        if (k == K_ORPHAN) {
            out->orphans++;
            continue;
        }
        const char *v = lsm_iter_value(it, &vlen); /* sets vlen: before the call */
        if (!count_inode(v, vlen, out))
            (*bad)++;
    }
    lsm_status *s = lsm_iter_status(it);
    int err = lsm_status_errno(s); /* EIO, or ENOMEM: the next may work */
    lsm_status_free(s);
    return err;
}

int fs_info_scan(lsm_db *db, const char *dir, struct lsmfs_info *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    schema_super sb;
    int e = super_read(db, dir, &sb, err, errlen);
    if (e != 0)
        return e;
    out->format = sb.version;
    out->chunk_size = sb.chunk_size;
    out->inline_limit = sb.inline_limit;
    out->reserve_pct = sb.reserve_pct;
    out->resuid = sb.resuid;
    out->resgid = sb.resgid;
    out->created = sb.ctime_sec;
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.fill_cache = false;
    ro.snapshot = lsm_snapshot_new(db);
    lsm_iter *it = ro.snapshot != NULL ? lsm_iter_new(db, &ro) : NULL;
    uint64_t bad = 0;
    e = it == NULL ? ENOMEM : scan_kind(it, K_INODE, out, &bad);
    if (e == 0)
        e = scan_kind(it, K_ORPHAN, out, &bad);
    lsm_iter_free(it);
    if (ro.snapshot != NULL)
        lsm_snapshot_release(db, ro.snapshot);
    if (e != 0)
        snprintf(err, errlen, "%s: reading the inodes: %s", dir, strerror(e));
    else if (bad != 0)
        snprintf(err, errlen, "%s: %llu inode records do not decode (run fsck.lsmfs)", dir,
                 (unsigned long long)bad);
    return e != 0 ? e : bad != 0 ? EIO : 0;
}

/* Snapshot names in snapdir (hidden ones are half-built or half-deleted). */
static lsm_status *count_snapshots(lsm_env *env, const char *snapdir, uint64_t *out)
{
    *out = 0;
    if (!env->file_exists(env, snapdir))
        return NULL;
    char **names;
    int n;
    lsm_status *s = env->get_children(env, snapdir, &names, &n);
    for (int i = 0; s == NULL && i < n; i++)
        *out += names[i][0] != '.';
    if (s == NULL)
        env_free_children(names, n);
    return s;
}

int fs_info_files(lsm_env *env, const char *path, const char *dir, struct lsmfs_info *out,
                  char *err, size_t errlen)
{
    store_files f;
    char snapdir[4096 + sizeof LSMFS_SNAPSHOT_DIR + 1];
    snprintf(snapdir, sizeof snapdir, "%s/" LSMFS_SNAPSHOT_DIR, path);
    lsm_status *s = store_files_measure(env, path, &f);
    if (s == NULL)
        s = count_snapshots(env, snapdir, &out->snapshots);
    if (s != NULL) {
        int e = lsm_status_errno(s); /* never 0 for a status */
        snprintf(err, errlen, "%s: listing its files: %s", dir, lsm_status_message(s));
        lsm_status_free(s);
        return e;
    }
    out->table_bytes = f.tables;
    out->log_bytes = f.logs;
    out->reserve_bytes = f.reserve;
    out->other_bytes = f.other;
    return 0;
}
