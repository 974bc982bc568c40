/*
 * coding.h — fixed-width little-endian and varint encodings (the on-disk
 * integer formats of the WAL, batches, tables and MANIFEST), and a growable
 * byte buffer.
 *
 * Decoders never read past `limit` and return NULL on malformed input, so
 * they are safe on data read from disk.
 */
#ifndef LSM_CODING_H
#define LSM_CODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void encode_fixed32(char *p, uint32_t v)
{
    memcpy(p, &v, 4); /* x86-64 and the formats are little-endian */
}
static inline void encode_fixed64(char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static inline uint32_t decode_fixed32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t decode_fixed64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#define VARINT32_MAX 5
#define VARINT64_MAX 10

/* Write a varint at p; return the byte after it. */
char *encode_varint32(char *p, uint32_t v);
char *encode_varint64(char *p, uint64_t v);
int varint_length(uint64_t v);
/* Parse a varint from [p, limit); NULL if truncated or overlong. */
const char *decode_varint32(const char *p, const char *limit, uint32_t *v);
const char *decode_varint64(const char *p, const char *limit, uint64_t *v);
/* A varint32 length followed by that many bytes; NULL if it does not fit. */
const char *decode_length_prefixed(const char *p, const char *limit, const char **data,
                                   uint32_t *len);

/* A growable byte string. All appenders return false (and leave the buffer
 * as it was) when memory runs out. */
typedef struct buf {
    char *data;
    size_t len;
    size_t cap;
} buf;

static inline void buf_init(buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
}
void buf_free(buf *b);
bool buf_reserve(buf *b, size_t extra); /* room for `extra` more bytes */
bool buf_append(buf *b, const void *data, size_t n);
bool buf_put_fixed32(buf *b, uint32_t v);
bool buf_put_fixed64(buf *b, uint64_t v);
bool buf_put_varint32(buf *b, uint32_t v);
bool buf_put_varint64(buf *b, uint64_t v);
bool buf_put_length_prefixed(buf *b, const void *data, size_t n);

/* Bytewise comparison of two strings (memcmp, then shorter first). */
static inline int bytes_compare(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, n) : 0;
    if (r == 0)
        r = (alen > blen) - (alen < blen);
    return r;
}

#endif
