/*
 * dir.c — directory entries as 'D' and 'C' keys.
 */
#include "dir.h"

#include "storeio.h"
#include "fuse_api.h"
#include "inode.h"
#include "lsm_malloc.h"

#include <assert.h>
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
        if (fn(ctx, cookie, ino, type, name, nlen, 0) != 0)
            break;
    }
    return fs_iter_end(fs, it, err, "readdir");
}

int dir_find(lsmfs *fs, inode *dir, const char *name, dirent_val *d)
{
    assert(inode_held(dir));
    if (dir->dc == NULL)
        return dir_lookup(fs, dir->ino, name, d);
    size_t nlen = strlen(name);
    if (nlen > SCHEMA_NAME_MAX)
        return ENAMETOOLONG;
    return dcache_find(dir->dc, name, nlen, &d->ino, &d->type, &d->cookie) ? 0 : ENOENT;
}

/* ------------------------------------------------ listings in memory */

static bool over_budget(lsmfs *fs)
{
    return icache_dcache_bytes(fs->icache) > DIR_CACHE_BUDGET;
}

/* REQUIRES: dir->lock held for writing (or dir unreachable). */
void dir_cache_drop(lsmfs *fs, inode *dir)
{
    if (dir->dc == NULL)
        return;
    icache_dcache_charge(fs->icache, -(int64_t)dcache_bytes(dir->dc));
    dcache_free(dir->dc);
    dir->dc = NULL;
}

/* After a change to dir's listing that found it at `before` bytes: charges
 * the difference, and drops the listing if the change failed (err: it no
 * longer matches the store) or the budget is exceeded. */
static void settle(lsmfs *fs, inode *dir, size_t before, int err)
{
    icache_dcache_charge(fs->icache, (int64_t)dcache_bytes(dir->dc) - (int64_t)before);
    if (err != 0 || over_budget(fs))
        dir_cache_drop(fs, dir);
}

/* The hint an entry gets when the kernel is given its inode: see
 * dir_kernel_holds. */
static uint32_t told_now(lsmfs *fs)
{
    uint32_t epoch = icache_forget_epoch(fs->icache);
    assert(epoch != 0); /* 0 is "not told" */
    return epoch;
}

bool dir_kernel_holds(lsmfs *fs, uint64_t ino, uint32_t hint)
{
    if (hint != 0 && hint == icache_forget_epoch(fs->icache))
        return true;
    return icache_kernel_knows(fs->icache, ino);
}

void dir_cached_add(lsmfs *fs, inode *dir, const char *name, uint64_t ino, uint8_t type,
                    uint64_t cookie)
{
    assert(inode_wrheld(dir));
    if (dir->dc != NULL)
        settle(fs, dir, dcache_bytes(dir->dc),
               dcache_add(dir->dc, name, strlen(name), ino, type, cookie, told_now(fs)));
}

void dir_cached_remove(lsmfs *fs, inode *dir, const char *name)
{
    assert(inode_wrheld(dir));
    if (dir->dc != NULL)
        settle(fs, dir, dcache_bytes(dir->dc), dcache_remove(dir->dc, name, strlen(name)));
}

void dir_cached_retarget(lsmfs *fs, inode *dir, const char *name, uint64_t ino, uint8_t type)
{
    assert(inode_wrheld(dir));
    if (dir->dc != NULL)
        settle(fs, dir, dcache_bytes(dir->dc),
               dcache_retarget(dir->dc, name, strlen(name), ino, type, told_now(fs)));
}

void dir_cache_start(lsmfs *fs, inode *dir)
{
    if (dir->dc != NULL || over_budget(fs) || (dir->dc = dcache_new()) == NULL)
        return;
    icache_dcache_charge(fs->icache, (int64_t)dcache_bytes(dir->dc));
}

static int add_scanned(void *ctx, uint64_t cookie, uint64_t ino, uint8_t type, const char *name,
                       size_t nlen, uint32_t hint)
{
    return dcache_add(ctx, name, nlen, ino, type, cookie, hint); /* 0: not told */
}

/* Makes dir's listing from the store when it has none and may have one.
 * A listing that does not hold exactly the record's entry count (no
 * memory, a damaged entry) is not kept. REQUIRES: dir->lock held for
 * writing. */
static void build(lsmfs *fs, inode *dir)
{
    assert(inode_wrheld(dir));
    if (dir->dc != NULL || dir->gone || !S_ISDIR(dir->rec.mode) ||
        dir->rec.size > DIR_CACHE_MAX_ENTRIES || over_budget(fs))
        return;
    dcache *c = dcache_new();
    if (c == NULL)
        return;
    int err = dir_scan(fs, dir->ino, SCHEMA_FIRST_COOKIE, add_scanned, c);
    if (err != 0 || dcache_count(c) != dir->rec.size) {
        dcache_free(c);
        return;
    }
    dir->dc = c;
    icache_dcache_charge(fs->icache, (int64_t)dcache_bytes(c));
}

/* Entries copied out of a listing for one reply. */
typedef struct copied {
    struct copied_ent {
        uint64_t cookie, ino;
        uint32_t off; /* into names */
        uint32_t hint;
        uint8_t type;
        uint8_t nlen;
    } *e;
    size_t n, max;
    char *names;
    size_t names_len, names_max;
} copied;

static int copy_one(void *ctx, uint64_t cookie, uint64_t ino, uint8_t type, const char *name,
                    size_t nlen, uint32_t hint)
{
    copied *c = ctx;
    if (c->n == c->max || c->names_len + nlen > c->names_max)
        return 1;
    memcpy(c->names + c->names_len, name, nlen);
    c->e[c->n++] = (struct copied_ent){.cookie = cookie,
                                       .ino = ino,
                                       .off = (uint32_t)c->names_len,
                                       .hint = hint,
                                       .type = type,
                                       .nlen = (uint8_t)nlen};
    c->names_len += nlen;
    return 0;
}

/* Copies the entries from `from` on that can fill `room` bytes of reply
 * (each takes 32 bytes at least, and more than its name) out of dir's
 * listing, making it first when it may be. Returns whether dir had one.
 * REQUIRES: dir->lock not held. */
static bool copy_listing(lsmfs *fs, inode *dir, uint64_t from, copied *c)
{
    assert(!inode_held(dir));
    inode_rdlock(dir);
    bool have = dir->dc != NULL;
    if (have)
        dcache_scan(dir->dc, from, copy_one, c);
    inode_unlock(dir);
    if (have)
        return true;
    inode_wrlock(dir);
    build(fs, dir);
    have = dir->dc != NULL;
    if (have)
        dcache_scan(dir->dc, from, copy_one, c);
    inode_unlock(dir);
    return have;
}

int dir_list(lsmfs *fs, inode *dir, uint64_t from, size_t room, dir_visit_fn fn, void *ctx)
{
    assert(inode_pinned(dir) && !inode_held(dir));
    copied c = {.max = room / 32 + 1, .names_max = room};
    c.e = lsm_malloc(c.max * sizeof *c.e);
    c.names = lsm_malloc(room ? room : 1);
    int err = 0;
    if (c.e == NULL || c.names == NULL)
        err = ENOMEM;
    else if (!copy_listing(fs, dir, from, &c))
        err = dir_scan(fs, dir->ino, from, fn, ctx);
    else
        for (size_t i = 0; i < c.n; i++) {
            const struct copied_ent *e = &c.e[i];
            if (fn(ctx, e->cookie, e->ino, e->type, c.names + e->off, e->nlen, e->hint) != 0)
                break;
        }
    free(c.e);
    free(c.names);
    return err;
}
