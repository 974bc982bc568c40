/*
 * op_xattr.c — setxattr, getxattr, listxattr, removexattr, and the
 * read-only root attributes user.lsmfs.stats (text) and user.lsmfs.metrics
 * ("name value" lines, stable names: stats.h).
 */
#include "acl.h"
#include "caller.h"
#include "storeio.h"
#include "textbuf.h"
#include "icache.h"
#include "inode.h"
#include "ops.h"
#include "xattr.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define STATS_XATTR "user.lsmfs.stats"
#define METRICS_XATTR "user.lsmfs.metrics"

static bool is_stats(fuse_ino_t ino, const char *name)
{
    return ino == SCHEMA_ROOT_INO &&
           (strcmp(name, STATS_XATTR) == 0 || strcmp(name, METRICS_XATTR) == 0);
}

/* The store's and the fs's stats as one text, with the inode cache's size
 * (the budget: ishrink.h), or their metrics; NULL when out of memory. */
static char *stats_value(lsmfs *fs, const char *name)
{
    bool metrics = strcmp(name, METRICS_XATTR) == 0;
    char *store = lsm_property(fs->db, metrics ? "lsm.metrics" : "lsm.stats");
    if (store == NULL) /* both are known: out of memory */
        return NULL;
    char *text = NULL;
    if (metrics) {
        text = stats_metrics(&fs->stats, store);
    } else {
        textbuf head;
        textbuf_init(&head);
        textbuf_printf(&head, "%sfs inodes cached: %zu\n", store, icache_count(fs->icache));
        char *h = textbuf_take(&head);
        text = h != NULL ? stats_text(&fs->stats, h) : NULL;
        free(h);
    }
    free(store);
    return text;
}

/* Replies to a get/list request for `len` bytes of `val`. */
static void reply_sized(fuse_req_t req, const char *val, size_t len, size_t size)
{
    if (size == 0)
        fuse_reply_xattr(req, len);
    else if (len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, val, len);
}

/* An ACL being set by req's caller on the inode of record *r: validates it
 * and, for an access ACL, sets r's mode from it and clears S_ISGID unless
 * the caller is in the file's group or holds CAP_FSETID (the kernel's
 * posix_acl_update_mode, which ext4 applies); *value becomes NULL (remove
 * any stored ACL) when the mode says all it says. 0, EINVAL (malformed) or
 * EACCES (a default ACL on a non-directory, as the kernel's set_posix_acl). */
static int acl_prepare(fuse_req_t req, inode_rec *r, const char *name, const char **value,
                       size_t size)
{
    bool access = acl_is_access(name);
    if ((!access && !acl_is_default(name)) || *value == NULL)
        return 0;
    int err = acl_valid(*value, size);
    if (err != 0)
        return err;
    if (!access)
        return S_ISDIR(r->mode) ? 0 : EACCES;
    bool equiv;
    r->mode = acl_mode(*value, size, r->mode, &equiv);
    if ((r->mode & S_ISGID) && !caller_keeps_sgid(req, r->gid))
        r->mode &= ~(mode_t)S_ISGID;
    if (equiv)
        *value = NULL;
    return 0;
}

/* REQUIRES: n->lock held for writing. value NULL means remove. */
static int change_locked(fuse_req_t req, lsmfs *fs, inode *n, const char *name, const char *value,
                         size_t size, int flags)
{
    assert(inode_wrheld(n));
    if (n->gone)
        return ENOENT;
    inode_rec r = n->rec;
    bool removing = value == NULL;
    int err = acl_prepare(req, &r, name, &value, size);
    if (err == 0)
        err = xattr_exists(fs, n->ino, name);
    if (err != 0 && err != ENODATA)
        return err;
    bool exists = err == 0;
    if (removing && !exists)
        return ENODATA;
    if ((flags & XATTR_CREATE) && exists)
        return EEXIST;
    if ((flags & XATTR_REPLACE) && !exists)
        return ENODATA;
    if (value != NULL && !exists && (err = xattr_room_for(fs, n->ino, name)) != 0)
        return err;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL)
        return ENOMEM;
    r.ctime = ts_now();
    err = 0;
    if (value != NULL) {
        r.flags |= INODE_F_XATTR;
        err = xattr_batch_set(b, n->ino, name, value, size);
    } else if (exists) {
        err = xattr_batch_remove(b, n->ino, name);
    }
    if (err == 0)
        err = op_commit_one(fs, b, n, &r, NULL);
    lsm_batch_free(b);
    return err;
}

static void change(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                   int flags)
{
    lsmfs *fs = op_fs(req);
    int err = is_stats(ino, name) ? EPERM : xattr_check(name, size);
    if (err == 0 && (flags & ~(XATTR_CREATE | XATTR_REPLACE)))
        err = EINVAL;
    if (err == 0 && value != NULL)
        err = reserve_admit(&fs->reserve, req, strlen(name) + size);
    inode *n = NULL;
    if (err == 0)
        err = icache_get(fs, ino, &n);
    if (err == 0) {
        inode_wrlock(n);
        err = change_locked(req, fs, n, name, value, size, flags);
        inode_unlock(n);
        icache_put(fs->icache, n);
    }
    if (err == 0)
        err = fs_durable(fs);
    fuse_reply_err(req, err);
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags)
{
    stats_inc(&op_fs(req)->stats.ops[OP_SETXATTR]);
    change(req, ino, name, value != NULL ? value : "", size, flags);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    stats_inc(&op_fs(req)->stats.ops[OP_REMOVEXATTR]);
    change(req, ino, name, NULL, 0, 0);
}

/* Whether ino may have extended attributes: INODE_F_XATTR is set by the
 * first setxattr and never cleared, so without it there are none, and the
 * store need not be asked. The kernel asks for security.capability before
 * every write; this answers it from the inode cache. Returns 0 or an errno
 * (ENODATA: certainly none). */
static int may_have_xattrs(lsmfs *fs, fuse_ino_t ino)
{
    inode *n;
    int err = icache_get(fs, ino, &n);
    if (err != 0)
        return err;
    inode_rec r;
    op_read_rec(n, &r);
    icache_put(fs->icache, n);
    return (r.flags & INODE_F_XATTR) ? 0 : ENODATA;
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_GETXATTR]);
    char *val = NULL;
    size_t len = 0;
    int err = 0;
    if (is_stats(ino, name)) {
        val = stats_value(fs, name);
        len = val != NULL ? strlen(val) : 0;
        err = val != NULL ? 0 : ENOMEM;
    } else if (!xattr_supported(name)) {
        err = EOPNOTSUPP;
    } else if ((err = may_have_xattrs(fs, ino)) == 0) {
        err = xattr_get(fs, ino, name, &val, &len);
    }
    if (err != 0)
        fuse_reply_err(req, err);
    else
        reply_sized(req, val, len, size);
    free(val);
}

/* Drops the trusted.* names from the NUL-separated list (len bytes) unless
 * the caller holds CAP_SYS_ADMIN, as ext4 lists them (the kernel already
 * refuses their values to others). Asks for the capability only when there
 * is such a name. */
static void hide_trusted(fuse_req_t req, char *list, size_t *len)
{
    static const char prefix[] = "trusted.";
    int capable = -1; /* not asked yet */
    size_t out = 0;
    for (size_t at = 0; at < *len;) {
        size_t n = strnlen(list + at, *len - at) + 1;
        bool hide = strncmp(list + at, prefix, sizeof prefix - 1) == 0 &&
                    !(capable < 0 ? (capable = caller_capable(req, CAP_SYS_ADMIN)) : capable);
        if (!hide)
            memmove(list + out, list + at, n);
        out += hide ? 0 : n;
        at += n;
    }
    *len = out;
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_LISTXATTR]);
    char *list = NULL;
    size_t len = 0;
    int err = may_have_xattrs(fs, ino);
    if (err == ENODATA)
        err = 0; /* an empty list */
    else if (err == 0 && (err = xattr_list(fs, ino, &list, &len)) == 0)
        hide_trusted(req, list, &len);
    if (err != 0)
        fuse_reply_err(req, err);
    else
        reply_sized(req, list, len, size);
    free(list);
}
