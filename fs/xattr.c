/*
 * xattr.c — extended attributes in the store.
 */
#include "xattr.h"

#include "commit.h"
#include "schema.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int xattr_check(const char *name, size_t size)
{
    size_t n = strlen(name);
    if (n == 0 || n > SCHEMA_XATTR_NAME_MAX)
        return ERANGE;
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
    if (l->len + nlen + 1 > l->cap) {
        size_t cap = (l->cap ? l->cap * 2 : 256) + nlen + 1;
        char *nb = realloc(l->buf, cap);
        if (nb == NULL)
            return ENOMEM;
        l->buf = nb;
        l->cap = cap;
    }
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
