/*
 * xattr.c — extended attributes in the store.
 */
#include "xattr.h"

#include "grow.h"
#include "acl.h"
#include "storeio.h"
#include "schema.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/limits.h>
#include <sys/stat.h>

static bool has_prefix(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

bool xattr_supported(const char *name)
{
    return has_prefix(name, "user.") || has_prefix(name, "trusted.") ||
           has_prefix(name, "security.") || acl_is_access(name) || acl_is_default(name);
}

bool xattr_stored_name_kept(const char *name, size_t nlen)
{
    char buf[SCHEMA_XATTR_NAME_MAX + 1];
    if (nlen == 0 || nlen > SCHEMA_XATTR_NAME_MAX || memchr(name, 0, nlen) != NULL)
        return false;
    memcpy(buf, name, nlen);
    buf[nlen] = '\0';
    return xattr_supported(buf);
}

int xattr_check(const char *name, size_t size)
{
    size_t n = strlen(name);
    if (n == 0 || n > SCHEMA_XATTR_NAME_MAX)
        return ERANGE;
    if (!xattr_supported(name))
        return EOPNOTSUPP;
    if (size > SCHEMA_XATTR_VALUE_MAX)
        return E2BIG;
    return 0;
}

int xattr_get(lsmfs *fs, uint64_t ino, const char *name, char **val, size_t *len)
{
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen > SCHEMA_XATTR_NAME_MAX)
        return ENODATA;
    schema_key k;
    key_xattr(&k, ino, name, nlen);
    lsm_status *s = fs_get(fs, &k, val, len);
    if (s == NULL)
        return 0;
    int err = fs_read_errno(fs, s, "xattr");
    return err == ENOENT ? ENODATA : err;
}

int xattr_exists(lsmfs *fs, uint64_t ino, const char *name)
{
    char *v;
    size_t len;
    int err = xattr_get(fs, ino, name, &v, &len);
    free(v);
    return err;
}

int xattr_batch_set(lsm_batch *b, uint64_t ino, const char *name, const char *val, size_t len)
{
    schema_key k;
    key_xattr(&k, ino, name, strlen(name));
    return lsm_batch_put(b, k.b, k.len, val, len) ? 0 : ENOMEM;
}

int xattr_batch_remove(lsm_batch *b, uint64_t ino, const char *name)
{
    schema_key k;
    key_xattr(&k, ino, name, strlen(name));
    return lsm_batch_delete(b, k.b, k.len) ? 0 : ENOMEM;
}

/* Calls fn for each xattr key of ino; stops early when fn returns non-zero
 * (that value is returned). */
static int scan(lsmfs *fs, uint64_t ino,
                int (*fn)(void *, const char *, size_t, const char *, size_t), void *ctx)
{
    lsm_iter *it = fs_iter_new(fs, true);
    if (it == NULL)
        return ENOMEM;
    schema_key start, end;
    key_range(&start, &end, K_XATTR, ino);
    int err = 0;
    for (lsm_iter_seek(it, start.b, start.len); lsm_iter_valid(it) && err == 0; lsm_iter_next(it)) {
        size_t klen;
        const char *key = lsm_iter_key(it, &klen);
        uint64_t kino;
        const char *name;
        size_t nlen;
        if (klen < 9 || key[0] != K_XATTR || be64_get(key + 1) != ino)
            break;
        if (!key_parse_xattr(key, klen, &kino, &name, &nlen) || memchr(name, 0, nlen)) {
            err = EIO;
            break;
        }
        err = fn(ctx, key, klen, name, nlen);
    }
    return fs_iter_end(fs, it, err, "xattr scan");
}

static int remove_one(void *ctx, const char *key, size_t klen, const char *name, size_t nlen)
{
    (void)name;
    (void)nlen;
    return lsm_batch_delete(ctx, key, klen) ? 0 : ENOMEM;
}

int xattr_batch_remove_all(lsmfs *fs, lsm_batch *b, uint64_t ino)
{
    return scan(fs, ino, remove_one, b);
}

struct list_ctx {
    char *buf;
    size_t len, cap;
};

static int list_one(void *ctx, const char *key, size_t klen, const char *name, size_t nlen)
{
    (void)key;
    (void)klen;
    struct list_ctx *l = ctx;
    if (!xattr_stored_name_kept(name, nlen))
        return 0; /* stored by an earlier version; fsck deletes it */
    char *nb = lsm_grow(l->buf, &l->cap, l->len + nlen + 1, 1, 256);
    if (nb == NULL)
        return ENOMEM;
    l->buf = nb;
    memcpy(l->buf + l->len, name, nlen);
    l->buf[l->len + nlen] = '\0';
    l->len += nlen + 1;
    return 0;
}

int xattr_list(lsmfs *fs, uint64_t ino, char **out, size_t *len)
{
    struct list_ctx l = {0};
    int err = scan(fs, ino, list_one, &l);
    if (err != 0) {
        free(l.buf);
        return err;
    }
    *out = l.buf;
    *len = l.len;
    return 0;
}

int xattr_acl_chmod(lsmfs *fs, lsm_batch *b, uint64_t ino, const inode_rec *r)
{
    if (!(r->flags & INODE_F_XATTR))
        return 0;
    char *acl;
    size_t len;
    int err = xattr_get(fs, ino, ACL_NAME_ACCESS, &acl, &len);
    if (err == ENODATA)
        return 0;
    if (err == 0 && acl_valid(acl, len) != 0)
        err = EIO; /* only valid ACLs are ever stored */
    if (err == 0) {
        acl_chmod(acl, len, r->mode);
        err = xattr_batch_set(b, ino, ACL_NAME_ACCESS, acl, len);
    }
    free(acl);
    return err;
}

/* The directory's default ACL: 0 (*acl malloc'd), ENODATA or an errno. */
static int default_acl(lsmfs *fs, uint64_t dir, const inode_rec *d, char **acl, size_t *len)
{
    if (!S_ISDIR(d->mode) || !(d->flags & INODE_F_XATTR))
        return ENODATA;
    int err = xattr_get(fs, dir, ACL_NAME_DEFAULT, acl, len);
    if (err == 0 && acl_valid(*acl, *len) != 0)
        err = EIO;
    if (err != 0) {
        free(*acl);
        *acl = NULL;
    }
    return err;
}

int xattr_inherit(lsmfs *fs, lsm_batch *b, uint64_t dir, const inode_rec *d, uint64_t ino,
                  inode_rec *r, mode_t umask)
{
    if (S_ISLNK(r->mode))
        return 0;
    char *acl = NULL;
    size_t len = 0;
    int err = default_acl(fs, dir, d, &acl, &len);
    if (err == ENODATA) {
        r->mode &= ~(umask & 0777);
        return 0;
    }
    if (err == 0 && S_ISDIR(r->mode)) {
        err = xattr_batch_set(b, ino, ACL_NAME_DEFAULT, acl, len);
        r->flags |= INODE_F_XATTR;
    }
    mode_t mode = r->mode;
    if (err == 0 && acl_inherit(acl, len, &mode)) {
        err = xattr_batch_set(b, ino, ACL_NAME_ACCESS, acl, len);
        r->flags |= INODE_F_XATTR;
    }
    r->mode = mode;
    free(acl);
    return err;
}

int xattr_room_for(lsmfs *fs, uint64_t ino, const char *name)
{
    char *list = NULL;
    size_t len = 0;
    int err = xattr_list(fs, ino, &list, &len);
    free(list);
    if (err == 0 && len + strlen(name) + 1 > XATTR_LIST_MAX)
        err = ENOSPC;
    return err;
}
