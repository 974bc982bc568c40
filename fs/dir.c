/*
 * dir.c — directory entries as 'D' and 'C' keys.
 */
#include "dir.h"

#include "commit.h"
#include "fuse_api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int dir_check_name(const char *name)
{
    size_t n = strlen(name);
    if (n > SCHEMA_NAME_MAX)
        return ENAMETOOLONG;
    if (n == 0 || strchr(name, '/') != NULL)
        return EINVAL;
    return 0;
}

int dir_lookup(lsmfs *fs, uint64_t parent, const char *name, dirent_val *d)
{
    size_t nlen = strlen(name);
    if (nlen > SCHEMA_NAME_MAX)
        return ENAMETOOLONG;
    schema_key k;
    key_dirent(&k, parent, name, nlen);
    char *v;
    size_t vlen;
    lsm_status *s = fs_get(fs, &k, &v, &vlen);
    if (s != NULL)
        return fs_read_errno(fs, s, "dirent");
    int err = dirent_decode(v, vlen, d) ? 0 : EIO;
    free(v);
    return err;
}

int dir_batch_add(lsm_batch *b, uint64_t parent, const char *name, uint64_t ino, uint8_t type,
                  uint64_t cookie)
{
    size_t nlen = strlen(name);
    schema_key k;
    key_dirent(&k, parent, name, nlen);
    char dv[DIRENT_VAL_LEN];
    dirent_encode(&(dirent_val){.ino = ino, .type = type, .cookie = cookie}, dv);
    if (!lsm_batch_put(b, k.b, k.len, dv, sizeof dv))
        return ENOMEM;
    char cv[COOKIE_VAL_HDR + SCHEMA_NAME_MAX];
    size_t cvlen = cookie_encode(ino, type, name, nlen, cv);
    key_cookie(&k, parent, cookie);
    return lsm_batch_put(b, k.b, k.len, cv, cvlen) ? 0 : ENOMEM;
}

int dir_batch_remove(lsm_batch *b, uint64_t parent, const char *name, uint64_t cookie)
{
    schema_key k;
    key_dirent(&k, parent, name, strlen(name));
    if (!lsm_batch_delete(b, k.b, k.len))
        return ENOMEM;
    key_cookie(&k, parent, cookie);
    return lsm_batch_delete(b, k.b, k.len) ? 0 : ENOMEM;
}

int dir_scan(lsmfs *fs, uint64_t parent, uint64_t from, dir_visit_fn fn, void *ctx)
{
    lsm_iter *it = fs_iter_new(fs, true);
    if (it == NULL)
        return ENOMEM;
    schema_key k;
    key_cookie(&k, parent, from);
    int err = 0;
    for (lsm_iter_seek(it, k.b, k.len); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen, vlen;
        const char *key = lsm_iter_key(it, &klen);
        uint64_t p, cookie, ino;
        if (klen < 9 || key[0] != K_COOKIE || be64_get(key + 1) != parent)
            break;
        const char *v = lsm_iter_value(it, &vlen);
        const char *name;
        size_t nlen;
        uint8_t type;
        if (!key_parse_cookie(key, klen, &p, &cookie) ||
            !cookie_decode(v, vlen, &ino, &type, &name, &nlen) || memchr(name, '/', nlen) != NULL ||
            memchr(name, 0, nlen) != NULL) {
            fuse_log(FUSE_LOG_ERR, "lsmfs: directory %llu: damaged entry\n",
                     (unsigned long long)parent);
            err = EIO;
            break;
        }
        if (fn(ctx, cookie, ino, type, name, nlen) != 0)
            break;
    }
    return fs_iter_end(fs, it, err, "readdir");
}
