/*
 * schema.c — key and value encodings of the lsmfs on-disk format.
 */
#include "schema.h"

#include <assert.h>
#include <string.h>

/* ------------------------------------------------------------------ kinds */

const schema_kind_info schema_kinds[] = {
    {K_ALLOC, "allocator"},    {K_COOKIE, "readdir index"}, {K_DIRENT, "directory entries"},
    {K_CHUNK, "file data"},    {K_INODE, "inodes"},         {K_INLINE, "inline file data"},
    {K_ICOUNT, "inode count"}, {K_ORPHAN, "orphan marks"},  {K_SUPER, "superblock"},
    {K_XATTR, "xattrs"},
};
const size_t schema_nkinds = sizeof schema_kinds / sizeof schema_kinds[0];

bool schema_kind_known(char kind)
{
    for (size_t i = 0; i < schema_nkinds; i++)
        if (schema_kinds[i].kind == kind)
            return true;
    return false;
}

/* ------------------------------------------------------------------ keys */

static void key_ino(schema_key *k, char kind, uint64_t ino)
{
    k->b[0] = kind;
    be64_put(k->b + 1, ino);
    k->len = 9;
}

void key_super(schema_key *k)
{
    k->b[0] = K_SUPER;
    k->len = 1;
}

void key_alloc(schema_key *k)
{
    k->b[0] = K_ALLOC;
    k->len = 1;
}

void key_icount(schema_key *k)
{
    k->b[0] = K_ICOUNT;
    k->len = 1;
}

void key_inode(schema_key *k, uint64_t ino)
{
    key_ino(k, K_INODE, ino);
}

void key_orphan(schema_key *k, uint64_t ino)
{
    key_ino(k, K_ORPHAN, ino);
}

void key_inline(schema_key *k, uint64_t ino)
{
    key_ino(k, K_INLINE, ino);
}

void key_dirent(schema_key *k, uint64_t parent, const char *name, size_t nlen)
{
    assert(nlen <= SCHEMA_NAME_MAX);
    key_ino(k, K_DIRENT, parent);
    memcpy(k->b + 9, name, nlen);
    k->len = 9 + nlen;
}

void key_cookie(schema_key *k, uint64_t parent, uint64_t cookie)
{
    key_ino(k, K_COOKIE, parent);
    be64_put(k->b + 9, cookie);
    k->len = 17;
}

void key_chunk(schema_key *k, uint64_t ino, uint64_t index)
{
    key_ino(k, K_CHUNK, ino);
    be64_put(k->b + 9, index);
    k->len = 17;
}

void key_xattr(schema_key *k, uint64_t ino, const char *name, size_t nlen)
{
    assert(nlen <= SCHEMA_XATTR_NAME_MAX);
    key_ino(k, K_XATTR, ino);
    memcpy(k->b + 9, name, nlen);
    k->len = 9 + nlen;
}

void key_range(schema_key *start, schema_key *end, char kind, uint64_t ino)
{
    key_ino(start, kind, ino);
    if (ino == UINT64_MAX) { /* no next inode: the range ends with the kind */
        end->b[0] = (char)(kind + 1);
        end->len = 1;
    } else {
        key_ino(end, kind, ino + 1);
    }
}

bool key_parse_ino(const char *k, size_t klen, char kind, uint64_t *ino)
{
    if (klen != 9 || k[0] != kind)
        return false;
    *ino = be64_get(k + 1);
    return true;
}

bool key_parse_dirent(const char *k, size_t klen, uint64_t *parent, const char **name, size_t *nlen)
{
    if (klen < 10 || klen > 9 + SCHEMA_NAME_MAX || k[0] != K_DIRENT)
        return false;
    *parent = be64_get(k + 1);
    *name = k + 9;
    *nlen = klen - 9;
    return true;
}

bool key_parse_cookie(const char *k, size_t klen, uint64_t *parent, uint64_t *cookie)
{
    if (klen != 17 || k[0] != K_COOKIE)
        return false;
    *parent = be64_get(k + 1);
    *cookie = be64_get(k + 9);
    return true;
}

bool key_parse_chunk(const char *k, size_t klen, uint64_t *ino, uint64_t *index)
{
    if (klen != 17 || k[0] != K_CHUNK)
        return false;
    *ino = be64_get(k + 1);
    *index = be64_get(k + 9);
    return true;
}

bool key_parse_xattr(const char *k, size_t klen, uint64_t *ino, const char **name, size_t *nlen)
{
    if (klen < 10 || klen > 9 + SCHEMA_XATTR_NAME_MAX || k[0] != K_XATTR)
        return false;
    *ino = be64_get(k + 1);
    *name = k + 9;
    *nlen = klen - 9;
    return true;
}

/* ------------------------------------------------------------ superblock */

void super_encode(const schema_super *s, char out[SCHEMA_SUPER_LEN])
{
    char *p = out;
    memcpy(p, SCHEMA_MAGIC, SCHEMA_MAGIC_LEN);
    p += SCHEMA_MAGIC_LEN;
    le32_put(p, s->version);
    le32_put(p + 4, s->chunk_size);
    le32_put(p + 8, s->inline_limit);
    le64_put(p + 12, (uint64_t)s->ctime_sec);
    le32_put(p + 20, s->ctime_nsec);
    le32_put(p + 24, s->reserve_pct);
    le32_put(p + 28, s->resuid);
    le32_put(p + 32, s->resgid);
}

enum super_check super_decode(const char *v, size_t len, schema_super *s)
{
    if (len < SCHEMA_MAGIC_LEN + 4 || memcmp(v, SCHEMA_MAGIC, SCHEMA_MAGIC_LEN) != 0)
        return SUPER_NOT_LSMFS;
    const char *p = v + SCHEMA_MAGIC_LEN;
    s->version = le32_get(p);
    if (s->version > SCHEMA_VERSION)
        return SUPER_NEWER;
    if (s->version == 0 || len < SCHEMA_SUPER_V1_LEN)
        return SUPER_BAD;
    s->chunk_size = le32_get(p + 4);
    s->inline_limit = le32_get(p + 8);
    s->ctime_sec = (int64_t)le64_get(p + 12);
    s->ctime_nsec = le32_get(p + 20);
    bool reserve = len >= SCHEMA_SUPER_LEN;
    s->reserve_pct = reserve ? le32_get(p + 24) : 0;
    s->resuid = reserve ? le32_get(p + 28) : 0;
    s->resgid = reserve ? le32_get(p + 32) : 0;
    const char *why;
    if (!super_params_valid(s->chunk_size, s->inline_limit, &why) ||
        s->reserve_pct > SCHEMA_MAX_RESERVE_PCT)
        return SUPER_BAD;
    return SUPER_OK;
}

bool super_params_valid(uint32_t chunk_size, uint32_t inline_limit, const char **errmsg)
{
    if (chunk_size < SCHEMA_MIN_CHUNK || chunk_size > SCHEMA_MAX_CHUNK ||
        (chunk_size & (chunk_size - 1)) != 0) {
        *errmsg = "chunk size must be a power of two from 4 KiB to 1 MiB";
        return false;
    }
    /* An inline file converts to chunks by moving its data to chunk 0. */
    if (inline_limit > chunk_size) {
        *errmsg = "inline limit must not exceed the chunk size";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ allocator */

void alloc_encode(uint64_t next, char out[SCHEMA_ALLOC_LEN])
{
    le64_put(out, next);
}

bool alloc_decode(const char *v, size_t len, uint64_t *next)
{
    if (len != SCHEMA_ALLOC_LEN)
        return false;
    *next = le64_get(v);
    return *next >= SCHEMA_FIRST_INO;
}

void icount_encode(uint64_t count, uint64_t seq, char out[SCHEMA_ICOUNT_LEN])
{
    le64_put(out, count);
    le64_put(out + 8, seq);
}

bool icount_decode(const char *v, size_t len, uint64_t *count, uint64_t *seq)
{
    if (len != SCHEMA_ICOUNT_LEN)
        return false;
    *count = le64_get(v);
    *seq = le64_get(v + 8);
    return *count >= 1; /* the root at least */
}

/* --------------------------------------------------------------- dirent */

void dirent_encode(const dirent_val *d, char out[DIRENT_VAL_LEN])
{
    le64_put(out, d->ino);
    out[8] = (char)d->type;
    le64_put(out + 9, d->cookie);
}

bool dirent_decode(const char *v, size_t len, dirent_val *d)
{
    if (len != DIRENT_VAL_LEN)
        return false;
    d->ino = le64_get(v);
    d->type = (uint8_t)v[8];
    d->cookie = le64_get(v + 9);
    return d->ino != 0 && d->type <= 017;
}

size_t cookie_encode(uint64_t ino, uint8_t type, const char *name, size_t nlen, char *out)
{
    le64_put(out, ino);
    out[8] = (char)type;
    memcpy(out + COOKIE_VAL_HDR, name, nlen);
    return COOKIE_VAL_HDR + nlen;
}

bool cookie_decode(const char *v, size_t len, uint64_t *ino, uint8_t *type, const char **name,
                   size_t *nlen)
{
    if (len <= COOKIE_VAL_HDR || len > COOKIE_VAL_HDR + SCHEMA_NAME_MAX)
        return false;
    *ino = le64_get(v);
    *type = (uint8_t)v[8];
    *name = v + COOKIE_VAL_HDR;
    *nlen = len - COOKIE_VAL_HDR;
    return *ino != 0 && *type <= 017;
}

uint32_t schema_table_partition(const void *key, size_t n)
{
    char kind = n > 0 ? *(const char *)key : 0;
    return kind == K_CHUNK ? 1 : kind == K_INLINE ? 2 : 0;
}

uint64_t schema_table_segment(const void *key, size_t n)
{
    const char *k = key;
    return n >= 9 && k[0] == K_CHUNK ? be64_get(k + 1) : 0;
}
