/* coding.c — varints and the growable buffer; see coding.h. */
#include "coding.h"
#include "grow.h"
#include "lsm_malloc.h"

#include <stdint.h>
#include <stdlib.h>

char *encode_varint32(char *p, uint32_t v)
{
    return encode_varint64(p, v);
}

char *encode_varint64(char *p, uint64_t v)
{
    unsigned char *u = (unsigned char *)p;
    while (v >= 0x80) {
        *u++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *u++ = (unsigned char)v;
    return (char *)u;
}

int varint_length(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static const char *decode_varint(const char *p, const char *limit, uint64_t *v, int maxbytes)
{
    uint64_t result = 0;
    for (int i = 0; i < maxbytes && p < limit; i++) {
        uint64_t byte = (unsigned char)*p++;
        result |= (byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *v = result;
            return p;
        }
    }
    return NULL;
}

const char *decode_varint32(const char *p, const char *limit, uint32_t *v)
{
    uint64_t r;
    p = decode_varint(p, limit, &r, VARINT32_MAX);
    if (p == NULL || r > UINT32_MAX)
        return NULL;
    *v = (uint32_t)r;
    return p;
}

const char *decode_varint64(const char *p, const char *limit, uint64_t *v)
{
    return decode_varint(p, limit, v, VARINT64_MAX);
}

const char *decode_length_prefixed(const char *p, const char *limit, const char **data,
                                   uint32_t *len)
{
    p = decode_varint32(p, limit, len);
    if (p == NULL || (size_t)(limit - p) < *len)
        return NULL;
    *data = p;
    return p + *len;
}

void buf_free(buf *b)
{
    free(b->data);
    buf_init(b);
}

bool buf_reserve(buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return true;
    if (extra > SIZE_MAX - b->len)
        return false;
    char *d = lsm_grow(b->data, &b->cap, b->len + extra, 1, 64);
    if (d == NULL)
        return false;
    b->data = d;
    return true;
}

bool buf_append(buf *b, const void *data, size_t n)
{
    if (!buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    return true;
}

bool buf_put_fixed32(buf *b, uint32_t v)
{
    char t[4];
    encode_fixed32(t, v);
    return buf_append(b, t, 4);
}

bool buf_put_fixed64(buf *b, uint64_t v)
{
    char t[8];
    encode_fixed64(t, v);
    return buf_append(b, t, 8);
}

bool buf_put_varint32(buf *b, uint32_t v)
{
    char t[VARINT32_MAX];
    return buf_append(b, t, (size_t)(encode_varint32(t, v) - t));
}

bool buf_put_varint64(buf *b, uint64_t v)
{
    char t[VARINT64_MAX];
    return buf_append(b, t, (size_t)(encode_varint64(t, v) - t));
}

bool buf_put_length_prefixed(buf *b, const void *data, size_t n)
{
    size_t old = b->len;
    if (n > UINT32_MAX || !buf_put_varint32(b, (uint32_t)n))
        return false;
    if (!buf_append(b, data, n)) {
        b->len = old;
        return false;
    }
    return true;
}
