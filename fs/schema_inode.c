/*
 * schema_inode.c — the inode record's header: written compact (version 3),
 * read in every version (schema.h); where an inline file's bytes are.
 *
 * Version 3, after its version byte:
 *   u8 tflags (T_*)
 *   varint32 mode, uid, gid, flags, nlink
 *   varint64 size, rdev, generation, parent, next_cookie, chunks
 *   ctime: zigzag varint64 seconds, u32 nsec if T_CTIME_NSEC
 *   mtime: nothing if T_MTIME_IS_CTIME, else zigzag varint64 seconds after
 *          ctime's, u32 nsec if T_MTIME_NSEC
 *   atime: nothing if T_ATIME_IS_MTIME, else zigzag varint64 seconds after
 *          mtime's, u32 nsec if T_ATIME_NSEC
 * The payload follows. Every read is bounds-checked: a short or malformed
 * header, an unknown flag or a nanosecond count of a second or more is a
 * damaged record.
 */
#include "schema.h"

#include "coding.h"

#include <assert.h>
#include <string.h>
#include <sys/stat.h>

#define T_CTIME_NSEC 0x01u
#define T_MTIME_IS_CTIME 0x02u
#define T_MTIME_NSEC 0x04u
#define T_ATIME_IS_MTIME 0x08u
#define T_ATIME_NSEC 0x10u
#define T_ALL 0x1fu

#define NSEC_PER_SEC 1000000000u

static bool ts_equal(ts a, ts b)
{
    return a.sec == b.sec && a.nsec == b.nsec;
}

static uint64_t zigzag(uint64_t d)
{
    return (d << 1) ^ (0 - (d >> 63));
}

static uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

/* t as seconds after base's (wrapping) and its nsec if nsec_flag is set in
 * the flags. */
static char *put_time(char *p, ts t, int64_t base, unsigned *tflags, unsigned nsec_flag)
{
    p = encode_varint64(p, zigzag((uint64_t)t.sec - (uint64_t)base));
    if (t.nsec != 0) {
        *tflags |= nsec_flag;
        le32_put(p, t.nsec);
        p += 4;
    }
    return p;
}

static const char *get_time(const char *p, const char *end, int64_t base, bool has_nsec, ts *t)
{
    uint64_t z;
    p = decode_varint64(p, end, &z);
    if (p == NULL)
        return NULL;
    t->sec = (int64_t)((uint64_t)base + unzigzag(z));
    t->nsec = 0;
    if (has_nsec) {
        if (end - p < 4)
            return NULL;
        t->nsec = le32_get(p);
        p += 4;
    }
    return t->nsec < NSEC_PER_SEC ? p : NULL;
}

size_t inode_encode_hdr(const inode_rec *r, char out[INODE_HDR_MAX])
{
    char *p = out;
    *p++ = INODE_REC_VERSION;
    char *tf = p++;
    unsigned tflags = 0;
    p = encode_varint32(p, r->mode);
    p = encode_varint32(p, r->uid);
    p = encode_varint32(p, r->gid);
    p = encode_varint32(p, r->flags);
    p = encode_varint32(p, r->nlink);
    p = encode_varint64(p, r->size);
    p = encode_varint64(p, r->rdev);
    p = encode_varint64(p, r->generation);
    p = encode_varint64(p, r->parent);
    p = encode_varint64(p, r->next_cookie);
    p = encode_varint64(p, r->chunks);
    p = put_time(p, r->ctime, 0, &tflags, T_CTIME_NSEC);
    if (ts_equal(r->mtime, r->ctime))
        tflags |= T_MTIME_IS_CTIME;
    else
        p = put_time(p, r->mtime, r->ctime.sec, &tflags, T_MTIME_NSEC);
    if (ts_equal(r->atime, r->mtime))
        tflags |= T_ATIME_IS_MTIME;
    else
        p = put_time(p, r->atime, r->mtime.sec, &tflags, T_ATIME_NSEC);
    *tf = (char)tflags;
    assert(p - out <= INODE_HDR_MAX);
    return (size_t)(p - out);
}

/* The compact header at v[0..len); returns its length, 0 if damaged. */
static size_t decode_compact(const char *v, size_t len, inode_rec *r)
{
    const char *end = v + len, *p = v + 2;
    if (len < 2)
        return 0;
    unsigned tflags = (unsigned char)v[1];
    if ((tflags & ~T_ALL) != 0 || ((tflags & T_MTIME_IS_CTIME) && (tflags & T_MTIME_NSEC)) ||
        ((tflags & T_ATIME_IS_MTIME) && (tflags & T_ATIME_NSEC)))
        return 0;
    uint32_t *u32s[] = {&r->mode, &r->uid, &r->gid, &r->flags, &r->nlink};
    for (size_t i = 0; p != NULL && i < sizeof u32s / sizeof *u32s; i++)
        p = decode_varint32(p, end, u32s[i]);
    uint64_t *u64s[] = {&r->size,   &r->rdev,        &r->generation,
                        &r->parent, &r->next_cookie, &r->chunks};
    for (size_t i = 0; p != NULL && i < sizeof u64s / sizeof *u64s; i++)
        p = decode_varint64(p, end, u64s[i]);
    if (p != NULL)
        p = get_time(p, end, 0, tflags & T_CTIME_NSEC, &r->ctime);
    if (p != NULL && (tflags & T_MTIME_IS_CTIME))
        r->mtime = r->ctime;
    else if (p != NULL)
        p = get_time(p, end, r->ctime.sec, tflags & T_MTIME_NSEC, &r->mtime);
    if (p != NULL && (tflags & T_ATIME_IS_MTIME))
        r->atime = r->mtime;
    else if (p != NULL)
        p = get_time(p, end, r->mtime.sec, tflags & T_ATIME_NSEC, &r->atime);
    return p != NULL ? (size_t)(p - v) : 0;
}

static const char *get_fixed_ts(const char *p, ts *t)
{
    t->sec = (int64_t)le64_get(p);
    t->nsec = le32_get(p + 8);
    return p + 12;
}

/* A header of version 1 or 2 at v[0..len); returns its length, 0 if
 * damaged. */
static size_t decode_fixed(const char *v, size_t len, inode_rec *r)
{
    size_t hdr = v[0] == 1 ? INODE_HDR_V1_LEN : INODE_HDR_V2_LEN;
    if (len < hdr)
        return 0;
    const char *p = v + 1;
    r->mode = le32_get(p);
    r->uid = le32_get(p + 4);
    r->gid = le32_get(p + 8);
    r->flags = le32_get(p + 12);
    r->nlink = le32_get(p + 16);
    p += 20;
    r->size = le64_get(p);
    r->rdev = le64_get(p + 8);
    r->generation = le64_get(p + 16);
    p += 24;
    p = get_fixed_ts(p, &r->atime);
    p = get_fixed_ts(p, &r->mtime);
    p = get_fixed_ts(p, &r->ctime);
    r->parent = le64_get(p);
    r->next_cookie = le64_get(p + 8);
    r->chunks = hdr == INODE_HDR_V2_LEN ? le64_get(p + 16) : INODE_CHUNKS_UNKNOWN;
    if (r->atime.nsec >= NSEC_PER_SEC || r->mtime.nsec >= NSEC_PER_SEC ||
        r->ctime.nsec >= NSEC_PER_SEC)
        return 0;
    return hdr;
}

bool inode_decode(const char *v, size_t len, inode_rec *r, const char **payload, size_t *plen)
{
    if (len == 0)
        return false;
    size_t hdr = 0;
    if (v[0] == 1 || v[0] == 2)
        hdr = decode_fixed(v, len, r);
    else if (v[0] == INODE_REC_VERSION)
        hdr = decode_compact(v, len, r);
    if (hdr == 0)
        return false;
    *payload = v + hdr;
    *plen = len - hdr;
    return true;
}

bool inode_bytes_apart(const inode_rec *r)
{
    return S_ISREG(r->mode) && (r->flags & INODE_F_INLINE) && (r->flags & INODE_F_APART);
}

size_t inode_inline_max(const inode_rec *r, uint32_t inline_limit)
{
    return (size_t)(r->size < inline_limit ? r->size : inline_limit);
}

bool inode_has_inline_key(const inode_rec *r)
{
    return inode_bytes_apart(r) && r->size > 0;
}

void inode_rec_place(inode_rec *r)
{
    if (S_ISREG(r->mode) && (r->flags & INODE_F_INLINE))
        r->flags |= INODE_F_APART;
    else
        r->flags &= ~INODE_F_APART;
}
