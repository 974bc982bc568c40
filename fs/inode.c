/*
 * inode.c — inode records in the store.
 */
#include "inode.h"

#include "storeio.h"
#include "fuse_api.h"
#include "icache.h"
#include "lsm_malloc.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ts ts_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ts_from_timespec(t);
}

int inode_load(lsmfs *fs, uint64_t ino, inode_rec *r, char **pay, size_t *plen)
{
    schema_key k;
    key_inode(&k, ino);
    char *v;
    size_t vlen;
    lsm_status *s = fs_get(fs, &k, &v, &vlen);
    if (s != NULL)
        return fs_read_errno(fs, s, "inode");
    const char *p;
    size_t pl;
    int err = 0;
    if (!inode_decode(v, vlen, r, &p, &pl)) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: inode %llu: damaged record\n", (unsigned long long)ino);
        err = EIO;
    } else if (pay != NULL) {
        *pay = NULL;
        *plen = pl;
        if (pl > 0 && (*pay = lsm_malloc(pl)) == NULL)
            err = ENOMEM;
        else if (pl > 0)
            memcpy(*pay, p, pl);
    }
    free(v);
    return err;
}

/* Adds a put of the record r with `data` (plen bytes) as its payload. */
static int put_record(lsm_batch *b, uint64_t ino, const inode_rec *r, const char *data,
                      size_t plen)
{
    char stackbuf[INODE_HDR_MAX + 512];
    char *v = stackbuf;
    if (INODE_HDR_MAX + plen > sizeof stackbuf) {
        v = lsm_malloc(INODE_HDR_MAX + plen);
        if (v == NULL)
            return ENOMEM;
    }
    size_t hlen = inode_encode_hdr(r, v);
    if (plen > 0)
        memcpy(v + hlen, data, plen);
    schema_key k;
    key_inode(&k, ino);
    bool ok = lsm_batch_put(b, k.b, k.len, v, hlen + plen);
    if (v != stackbuf)
        free(v);
    return ok ? 0 : ENOMEM;
}

int inode_batch_put(lsm_batch *b, uint64_t ino, inode_rec *r, const char *target, size_t tlen)
{
    assert(tlen == 0 || S_ISLNK(r->mode));
    inode_rec_place(r);
    return put_record(b, ino, r, target, tlen);
}

/* Does the stored record r carry a payload (schema.h)? */
static bool record_has_payload(const inode_rec *r)
{
    if (S_ISLNK(r->mode))
        return true;
    return S_ISREG(r->mode) && (r->flags & INODE_F_INLINE) && !inode_bytes_apart(r) &&
           r->size > 0;
}

/* The bytes of ino (record r, bytes apart) from its 'L' key, malloc'd
 * (NULL when empty). Missing while the size is not 0, or longer than the
 * size or the inline limit, is damage: EIO. */
static int inline_load(lsmfs *fs, uint64_t ino, const inode_rec *r, char **p, size_t *plen)
{
    *p = NULL;
    *plen = 0;
    if (!inode_has_inline_key(r))
        return 0;
    schema_key k;
    key_inline(&k, ino);
    lsm_status *s = fs_get(fs, &k, p, plen);
    int err = fs_read_errno(fs, s, "inline data");
    const char *damage = err == ENOENT ? "missing" : NULL;
    if (err == 0 && *plen > inode_inline_max(r, fs->sb.inline_limit))
        damage = "longer than the file";
    if (damage != NULL) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: inode %llu: inline data %s\n", (unsigned long long)ino,
                 damage);
        err = EIO;
    }
    if (err != 0 || *plen == 0) {
        free(*p);
        *p = NULL;
        *plen = 0;
    }
    return err;
}

int inode_payload(lsmfs *fs, inode *n, char **p, size_t *plen)
{
    *p = NULL;
    *plen = n->pay_len;
    if (n->pay_kept) {
        if (n->pay_len > 0 && (*p = lsm_malloc(n->pay_len)) == NULL)
            return ENOMEM;
        if (n->pay_len > 0)
            memcpy(*p, n->pay, n->pay_len);
        return 0;
    }
    if (inode_bytes_apart(&n->rec))
        return inline_load(fs, n->ino, &n->rec, p, plen);
    inode_rec old;
    int err = inode_load(fs, n->ino, &old, p, plen);
    return err == ENOENT ? EIO : err;
}

/* Adds to b what n's 'L' key becomes with its new record r (placed): put
 * (pl's bytes, or the old record's moving apart), deleted, or left. */
static int batch_bytes(lsmfs *fs, lsm_batch *b, inode *n, const inode_rec *r, const payload *pl)
{
    schema_key k;
    key_inline(&k, n->ino);
    bool had = inode_has_inline_key(&n->rec), has = inode_has_inline_key(r);
    if (!has)
        return had && !lsm_batch_delete(b, k.b, k.len) ? ENOMEM : 0;
    if (pl != NULL && pl->replace)
        return lsm_batch_put(b, k.b, k.len, pl->len > 0 ? pl->data : "", pl->len) ? 0 : ENOMEM;
    if (had)
        return 0;
    /* Its first key: the bytes an older record held, else none (a file
     * grown from empty without a write). */
    char *data = NULL;
    size_t len = 0;
    int err = record_has_payload(&n->rec) ? inode_payload(fs, n, &data, &len) : 0;
    if (err == 0 && !lsm_batch_put(b, k.b, k.len, len > 0 ? data : "", len))
        err = ENOMEM;
    free(data);
    return err;
}

int inode_batch_finish(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, const payload *pl)
{
    assert(inode_wrheld(n));
    inode_rec_place(r);
    if (!S_ISLNK(r->mode)) {
        int err = S_ISREG(r->mode) ? batch_bytes(fs, b, n, r, pl) : 0;
        return err != 0 ? err : put_record(b, n->ino, r, NULL, 0);
    }
    char *target; /* a symlink's stays in its record */
    size_t tlen;
    int err = inode_payload(fs, n, &target, &tlen);
    if (err == 0)
        err = put_record(b, n->ino, r, target, tlen);
    free(target);
    return err;
}

int inode_batch_update(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r)
{
    return inode_batch_finish(fs, b, n, r, NULL);
}

void inode_init(inode_rec *r, uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev,
                const inode_rec *parent)
{
    memset(r, 0, sizeof *r);
    if (parent != NULL && (parent->mode & S_ISGID)) {
        gid = parent->gid;
        if (S_ISDIR(mode))
            mode |= S_ISGID;
    }
    r->mode = mode;
    r->uid = uid;
    r->gid = gid;
    r->rdev = rdev;
    r->nlink = S_ISDIR(mode) ? 2 : 1;
    r->generation = 1;
    r->atime = r->mtime = r->ctime = ts_now();
    if (S_ISDIR(mode))
        r->next_cookie = SCHEMA_FIRST_COOKIE;
}

void inode_to_stat(uint64_t ino, const inode_rec *r, uint32_t chunk_size, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = r->mode;
    st->st_nlink = r->nlink;
    st->st_uid = r->uid;
    st->st_gid = r->gid;
    st->st_rdev = r->rdev;
    st->st_blksize = chunk_size;
    if (S_ISDIR(r->mode)) {
        /* Directories report a size that grows with their entry count, as
         * ext4's do, but in bytes of a nominal 32-byte entry. */
        st->st_size = (off_t)(4096 + r->size * 32);
        st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
    } else {
        st->st_size = (off_t)r->size;
        /* What is stored, in 512-byte units: whole chunks (holes cost
         * nothing); an inline payload or a symlink target (at most the
         * size, and the inline limit is at most a chunk); a record older
         * than the chunk count says what a dense file would. */
        uint64_t b = (r->size + 511) / 512;
        if (r->flags & INODE_F_INLINE)
            b = (r->size < chunk_size ? r->size + 511 : chunk_size) / 512;
        else if (S_ISREG(r->mode) && r->chunks != INODE_CHUNKS_UNKNOWN)
            b = r->chunks * (chunk_size / 512);
        st->st_blocks = (blkcnt_t)b;
    }
    st->st_atim.tv_sec = r->atime.sec;
    st->st_atim.tv_nsec = r->atime.nsec;
    st->st_mtim.tv_sec = r->mtime.sec;
    st->st_mtim.tv_nsec = r->mtime.nsec;
    st->st_ctim.tv_sec = r->ctime.sec;
    st->st_ctim.tv_nsec = r->ctime.nsec;
}

/* v's distinct inodes, ascending by number, into s; returns how many. */
static int distinct_sorted(inode *const *v, int n, inode **s)
{
    assert(n <= INODE_LOCKS_MAX);
    int k = 0;
    for (int i = 0; i < n && i < INODE_LOCKS_MAX; i++) {
        if (v[i] == NULL)
            continue;
        int j = k;
        while (j > 0 && s[j - 1]->ino > v[i]->ino)
            j--;
        if (j > 0 && s[j - 1] == v[i])
            continue;
        memmove(&s[j + 1], &s[j], (size_t)(k - j) * sizeof s[0]);
        s[j] = v[i];
        k++;
    }
    return k;
}

void inode_wrlock_all(inode *const *v, int n)
{
    inode *s[INODE_LOCKS_MAX];
    int k = distinct_sorted(v, n, s);
    for (int i = 0; i < k; i++)
        inode_wrlock(s[i]);
}

void inode_unlock_all(inode *const *v, int n)
{
    inode *s[INODE_LOCKS_MAX];
    int k = distinct_sorted(v, n, s);
    for (int i = k - 1; i >= 0; i--)
        inode_unlock(s[i]);
}
