/* batch.c — WriteBatch encoding, parsing and memtable insertion; see
 * batch.h for the format. */
#include "batch.h"
#include "bufpool.h"
#include "lsm_malloc.h"

#include "status.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>

/* Longest key a record may carry: its internal key must fit a varint32. */
#define BATCH_MAX_KEY (UINT32_MAX - IKEY_TRAILER)

bool batch_init(lsm_batch *b)
{
    buf_init(&b->rep);
    if (!buf_reserve(&b->rep, BATCH_HEADER))
        return false;
    memset(b->rep.data, 0, BATCH_HEADER);
    b->rep.len = BATCH_HEADER;
    return true;
}

void batch_destroy(lsm_batch *b)
{
    bufpool_release(&b->rep);
}

uint64_t batch_sequence(const lsm_batch *b)
{
    return decode_fixed64(b->rep.data);
}

void batch_set_sequence(lsm_batch *b, uint64_t seq)
{
    encode_fixed64(b->rep.data, seq);
}

void batch_set_count(lsm_batch *b, uint32_t n)
{
    encode_fixed32(b->rep.data + 8, n);
}

lsm_batch *lsm_batch_new(void)
{
    lsm_batch *b = lsm_malloc(sizeof(*b));
    if (b != NULL && !batch_init(b)) {
        free(b);
        b = NULL;
    }
    return b;
}

void lsm_batch_free(lsm_batch *b)
{
    if (b == NULL)
        return;
    batch_destroy(b);
    free(b);
}

/* Keeps the buffer: a cleared batch is usually refilled. */
void lsm_batch_clear(lsm_batch *b)
{
    memset(b->rep.data, 0, BATCH_HEADER);
    b->rep.len = BATCH_HEADER;
}

bool lsm_batch_reserve(lsm_batch *b, size_t bytes)
{
    return bufpool_reserve(&b->rep, bytes);
}

uint32_t lsm_batch_count(const lsm_batch *b)
{
    return decode_fixed32(b->rep.data + 8);
}

size_t lsm_batch_size(const lsm_batch *b)
{
    return b->rep.len;
}

/* Appends one record; reserves first so a failure leaves b unchanged. Also
 * fails for a key or value too long for the format, or a full count. */
static bool add_record(lsm_batch *b, enum value_type t, const void *key, size_t klen,
                       const void *val, size_t vlen)
{
    uint32_t count = lsm_batch_count(b);
    if (count == UINT32_MAX || klen > BATCH_MAX_KEY || vlen > UINT32_MAX)
        return false;
    size_t need = 1 + (size_t)varint_length(klen) + klen;
    if (t == TYPE_VALUE)
        need += (size_t)varint_length(vlen) + vlen;
    if (!buf_reserve(&b->rep, need))
        return false;
    char *p = b->rep.data + b->rep.len;
    *p++ = (char)t;
    p = encode_varint32(p, (uint32_t)klen);
    if (klen)
        memcpy(p, key, klen);
    p += klen;
    if (t == TYPE_VALUE) {
        p = encode_varint32(p, (uint32_t)vlen);
        if (vlen)
            memcpy(p, val, vlen);
        p += vlen;
    }
    b->rep.len = (size_t)(p - b->rep.data);
    batch_set_count(b, count + 1);
    return true;
}

bool lsm_batch_put(lsm_batch *b, const void *key, size_t klen, const void *val, size_t vlen)
{
    return add_record(b, TYPE_VALUE, key, klen, val, vlen);
}

bool lsm_batch_delete(lsm_batch *b, const void *key, size_t klen)
{
    return add_record(b, TYPE_DELETION, key, klen, NULL, 0);
}

/* dst == src is allowed: after the reserve both name the same new buffer
 * and the copy's source and destination do not overlap. */
bool lsm_batch_append(lsm_batch *dst, const lsm_batch *src)
{
    uint32_t dc = lsm_batch_count(dst), sc = lsm_batch_count(src);
    if (sc > UINT32_MAX - dc)
        return false;
    size_t n = src->rep.len - BATCH_HEADER;
    if (!buf_reserve(&dst->rep, n))
        return false;
    memcpy(dst->rep.data + dst->rep.len, src->rep.data + BATCH_HEADER, n);
    dst->rep.len += n;
    batch_set_count(dst, dc + sc);
    return true;
}

lsm_status *batch_set_contents(lsm_batch *b, const char *data, size_t n)
{
    if (n < BATCH_HEADER)
        return status_new(LSM_CORRUPTION, "batch too small (%zu bytes)", n);
    if (n > b->rep.len && !buf_reserve(&b->rep, n - b->rep.len))
        return status_new(LSM_NO_MEMORY, "out of memory (batch of %zu bytes)", n);
    memmove(b->rep.data, data, n);
    b->rep.len = n;
    return NULL;
}

/* ------------------------------------------------------------- parsing */

typedef struct record {
    enum value_type type;
    const char *key, *val;
    uint32_t klen, vlen;
} record;

/* Parses the record at *p (before limit) and advances *p past it; false if
 * it is malformed. Every length is checked against limit. */
static bool parse_record(const char **p, const char *limit, record *r)
{
    const char *q = *p;
    if (q >= limit)
        return false;
    unsigned tag = (unsigned char)*q++;
    if (tag != TYPE_VALUE && tag != TYPE_DELETION)
        return false;
    r->type = (enum value_type)tag;
    q = decode_length_prefixed(q, limit, &r->key, &r->klen);
    if (q == NULL || r->klen > BATCH_MAX_KEY)
        return false;
    r->val = NULL;
    r->vlen = 0;
    if (tag == TYPE_VALUE && (q = decode_length_prefixed(q, limit, &r->val, &r->vlen)) == NULL)
        return false;
    *p = q;
    return true;
}

/* Checks every record and the count without acting on any, so callers can
 * apply a batch all or nothing. */
static lsm_status *batch_validate(const lsm_batch *b)
{
    if (b->rep.len < BATCH_HEADER)
        return status_new(LSM_CORRUPTION, "batch too small (%zu bytes)", b->rep.len);
    const char *p = b->rep.data + BATCH_HEADER, *limit = b->rep.data + b->rep.len;
    uint32_t found = 0;
    record r;
    while (p < limit) {
        if (!parse_record(&p, limit, &r))
            return status_new(LSM_CORRUPTION, "malformed batch record at offset %zu",
                              (size_t)(p - b->rep.data));
        found++;
    }
    if (found != lsm_batch_count(b))
        return status_new(LSM_CORRUPTION, "batch count %u but %u records", lsm_batch_count(b),
                          found);
    return NULL;
}

/* Validates the whole batch first: a malformed one makes no calls. */
lsm_status *lsm_batch_iterate(const lsm_batch *b, const lsm_batch_handler *h)
{
    lsm_status *s = batch_validate(b);
    if (s != NULL)
        return s;
    const char *p = b->rep.data + BATCH_HEADER, *limit = b->rep.data + b->rep.len;
    record r;
    while (p < limit && parse_record(&p, limit, &r)) {
        if (r.type == TYPE_VALUE)
            h->put(h->ctx, r.key, r.klen, r.val, r.vlen);
        else
            h->del(h->ctx, r.key, r.klen);
    }
    return NULL;
}

/* Inserts the records of a validated batch's bytes into m, sequences from
 * the header's. Out of arena memory part-way leaves a prefix inserted. */
static lsm_status *insert_records(const char *data, size_t len, memtable *m)
{
    uint64_t seq = decode_fixed64(data);
    uint32_t count = decode_fixed32(data + 8);
    if (count > 0 && (seq > MAX_SEQUENCE || count - 1 > MAX_SEQUENCE - seq))
        return status_new(LSM_CORRUPTION, "batch sequence %" PRIu64 " + %u records overflows", seq,
                          count);
    const char *p = data + BATCH_HEADER, *limit = data + len;
    record r;
    while (p < limit && parse_record(&p, limit, &r)) {
        if (!memtable_add(m, seq, r.type, r.key, r.klen, r.val, r.vlen))
            return status_new(LSM_NO_MEMORY, "out of memory inserting sequence %" PRIu64, seq);
        seq++;
    }
    return NULL;
}

lsm_status *batch_insert_into(const lsm_batch *b, memtable *m)
{
    lsm_status *s = batch_validate(b);
    return s != NULL ? s : insert_records(b->rep.data, b->rep.len, m);
}

lsm_status *batch_give(lsm_batch *b, memtable *m, buf *spare)
{
    assert(spare->cap >= BATCH_HEADER);
    lsm_status *s = batch_validate(b);
    if (s != NULL)
        return s;
    if (!memtable_keep(m, &b->rep))
        return status_new(LSM_NO_MEMORY, "out of memory deferring a write");
    b->rep = *spare;
    buf_init(spare);
    lsm_batch_clear(b);
    return NULL;
}

void batch_take_back(lsm_batch *b, memtable *m, buf *spare, const char *data, size_t len,
                     bool inserted)
{
    if (!inserted) {
        *spare = b->rep;
        memtable_unkeep(m, &b->rep);
        return;
    }
    b->rep.len = 0;
    if (!buf_append(&b->rep, data, len))
        lsm_batch_clear(b);
}

lsm_status *batch_insert_kept(const char *data, size_t len, memtable *m)
{
    return insert_records(data, len, m);
}

/* Tag bytes: no record type (TYPE_DELETION, TYPE_VALUE) is either. */
#define TAG_DEFERRED 0xD5
#define TAG_EPOCH 0xE9

void wal_marker_encode(char out[WAL_MARKER_LEN], enum wal_record_kind kind, uint64_t seq,
                       uint32_t count)
{
    assert(kind == WAL_DEFERRED || (kind == WAL_EPOCH && seq == 0 && count == 0));
    encode_fixed64(out, seq);
    encode_fixed32(out + 8, count);
    out[BATCH_HEADER] = (char)(kind == WAL_DEFERRED ? TAG_DEFERRED : TAG_EPOCH);
}

enum wal_record_kind wal_record_kind_of(const char *rec, size_t n, uint64_t *seq, uint32_t *count)
{
    if (n != WAL_MARKER_LEN)
        return WAL_BATCH;
    unsigned char tag = (unsigned char)rec[BATCH_HEADER];
    if (tag != TAG_DEFERRED && tag != TAG_EPOCH)
        return WAL_BATCH; /* not a marker: refused as a batch when parsed */
    *seq = decode_fixed64(rec);
    *count = decode_fixed32(rec + 8);
    return tag == TAG_DEFERRED ? WAL_DEFERRED : WAL_EPOCH;
}
