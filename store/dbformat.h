/*
 * dbformat.h — internal keys: what the memtable, tables and iterators sort.
 *
 * An internal key is the user key followed by 8 bytes (fixed64 little-endian)
 * holding (sequence << 8) | type. Internal keys sort by user key ascending,
 * then by sequence descending (newest first), then type descending — so a
 * seek to (key, snapshot_seq, TYPE_SEEK) lands on the newest entry for `key`
 * visible at the snapshot.
 */
#ifndef LSM_DBFORMAT_H
#define LSM_DBFORMAT_H

#include "coding.h"

#include <assert.h>

enum value_type {
    TYPE_DELETION = 0,
    TYPE_VALUE = 1,
};
#define TYPE_SEEK TYPE_VALUE /* the highest type: sorts first among equal seqs */

#define MAX_SEQUENCE ((UINT64_C(1) << 56) - 1)
#define IKEY_TRAILER 8

static inline uint64_t pack_seq_type(uint64_t seq, enum value_type t)
{
    assert(seq <= MAX_SEQUENCE);
    return (seq << 8) | (uint64_t)t;
}

typedef struct parsed_ikey {
    const char *user_key;
    size_t user_len;
    uint64_t seq;
    enum value_type type;
} parsed_ikey;

/* false if the key is too short or its type unknown (corrupt data). */
static inline bool parse_ikey(const char *ik, size_t n, parsed_ikey *out)
{
    if (n < IKEY_TRAILER)
        return false;
    uint64_t tag = decode_fixed64(ik + n - IKEY_TRAILER);
    unsigned t = (unsigned)(tag & 0xff);
    if (t > TYPE_VALUE)
        return false;
    out->user_key = ik;
    out->user_len = n - IKEY_TRAILER;
    out->seq = tag >> 8;
    out->type = (enum value_type)t;
    return true;
}

static inline size_t ikey_user_len(size_t n)
{
    assert(n >= IKEY_TRAILER);
    return n - IKEY_TRAILER;
}

static inline uint64_t ikey_tag(const char *ik, size_t n)
{
    assert(n >= IKEY_TRAILER);
    return decode_fixed64(ik + n - IKEY_TRAILER);
}

/* Builds user_key + trailer into b (appending). */
static inline bool buf_put_ikey(buf *b, const void *ukey, size_t ulen, uint64_t seq,
                                enum value_type t)
{
    return buf_append(b, ukey, ulen) && buf_put_fixed64(b, pack_seq_type(seq, t));
}

static inline int ikey_compare(const char *a, size_t alen, const char *b, size_t blen)
{
    int r = bytes_compare(a, alen - IKEY_TRAILER, b, blen - IKEY_TRAILER);
    if (r != 0)
        return r;
    uint64_t ta = ikey_tag(a, alen), tb = ikey_tag(b, blen);
    return (ta > tb) ? -1 : (ta < tb);
}

#endif
