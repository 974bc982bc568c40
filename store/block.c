/* block.c — block builder, parser and iterator; see block.h. */
#include "block.h"
#include "lsm_malloc.h"

#include "status.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ builder */

void block_builder_init(block_builder *b, int restart_interval)
{
    assert(restart_interval >= 1);
    buf_init(&b->data);
    buf_init(&b->restarts);
    buf_init(&b->last_key);
    b->interval = restart_interval;
    block_builder_reset(b);
}

void block_builder_destroy(block_builder *b)
{
    buf_free(&b->data);
    buf_free(&b->restarts);
    buf_free(&b->last_key);
}

void block_builder_reset(block_builder *b)
{
    b->data.len = 0;
    b->restarts.len = 0;
    b->last_key.len = 0;
    b->counter = b->interval; /* the first entry starts a restart point */
    b->entries = 0;
    b->finished = false;
}

/* Length of the common prefix, 8 bytes at a time (little-endian: the first
 * differing byte is the lowest set byte of the xor). */
static size_t common_prefix(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            return i + ((size_t)__builtin_ctzll(x ^ y) >> 3);
    }
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

bool block_builder_add(block_builder *b, const char *key, size_t klen, const char *val, size_t vlen)
{
    assert(!b->finished);
    assert(klen <= UINT32_MAX && vlen <= UINT32_MAX);
    bool restart = b->counter >= b->interval;
    size_t shared = restart ? 0 : common_prefix(b->last_key.data, b->last_key.len, key, klen);
    size_t unshared = klen - shared;

    /* Reserve everything first so that a failure changes nothing. */
    if (!buf_reserve(&b->data, 3 * VARINT32_MAX + unshared + vlen))
        return false;
    if (klen > b->last_key.len && !buf_reserve(&b->last_key, klen - b->last_key.len))
        return false;
    if (restart) {
        assert(b->data.len <= UINT32_MAX);
        if (!buf_put_fixed32(&b->restarts, (uint32_t)b->data.len))
            return false;
        b->counter = 0;
    }

    char *p = b->data.data + b->data.len;
    p = encode_varint32(p, (uint32_t)shared);
    p = encode_varint32(p, (uint32_t)unshared);
    p = encode_varint32(p, (uint32_t)vlen);
    if (unshared) { /* an empty key may come with NULL pointers */
        memcpy(p, key + shared, unshared);
        memcpy(b->last_key.data + shared, key + shared, unshared);
    }
    p += unshared;
    if (vlen)
        memcpy(p, val, vlen);
    b->data.len = (size_t)(p + vlen - b->data.data);

    b->last_key.len = klen;
    b->counter++;
    b->entries++;
    return true;
}

bool block_builder_finish(block_builder *b, const char **data, size_t *n)
{
    if (!b->finished) {
        if (!buf_reserve(&b->data, b->restarts.len + 4))
            return false;
        buf_append(&b->data, b->restarts.data, b->restarts.len);
        buf_put_fixed32(&b->data, (uint32_t)(b->restarts.len / 4));
        b->finished = true;
    }
    *data = b->data.data;
    *n = b->data.len;
    return true;
}

/* ------------------------------------------------------------- parser */

bool block_parse(block *b, const char *data, size_t n)
{
    if (n < 4 || n > UINT32_MAX)
        return false;
    uint32_t num = decode_fixed32(data + n - 4);
    if (num > (n - 4) / 4)
        return false;
    uint32_t restart_offset = (uint32_t)(n - 4 - (size_t)num * 4);
    if (restart_offset == 0 && num != 0)
        return false;
    if (restart_offset > 0) {
        /* Entries exist: restart points must start at 0, rise strictly and
         * stay inside the entries, so the iterator can trust them. */
        const char *r = data + restart_offset;
        if (num == 0 || decode_fixed32(r) != 0)
            return false;
        for (uint32_t i = 1; i < num; i++) {
            uint32_t prev = decode_fixed32(r + 4 * (i - 1)), cur = decode_fixed32(r + 4 * i);
            if (cur <= prev || cur >= restart_offset)
                return false;
        }
    }
    b->data = data;
    b->size = n;
    b->restart_offset = restart_offset;
    b->num_restarts = num;
    return true;
}

/* ----------------------------------------------------------- iterator */

/* Walking backward, every step would rescan from the restart point before
 * the current entry (keys are prefix-compressed: only a forward scan can
 * rebuild them). So the first step back into a restart interval records
 * the interval's entries up to there, keys included, and the following
 * steps back just read that record. Intervals longer than BACK_MAX entries
 * or BACK_KEY_BYTES of keys (other block writers, damaged blocks) are not
 * recorded: they fall back to one rescan per step. */
#define BACK_MAX 64
#define BACK_KEY_BYTES (16u << 10)

struct block_back {
    int n;                     /* entries recorded; 0: none */
    int pos;                   /* the entry the iterator is on, if it came from the record */
    uint32_t restart_index;    /* the interval recorded */
    uint32_t off[BACK_MAX];    /* entry offsets, ascending, contiguous */
    uint32_t key_at[BACK_MAX]; /* where each key starts in keys */
    uint32_t key_len[BACK_MAX];
    uint32_t val_at[BACK_MAX]; /* value offsets in the block */
    uint32_t val_len[BACK_MAX];
    uint32_t end; /* offset of the entry after the last one */
    char *keys;   /* the keys, one after another */
    size_t used, cap;
};

static inline uint32_t restart_point(const block_iter *it, uint32_t i)
{
    return decode_fixed32(it->restarts + 4 * (size_t)i);
}

static void set_invalid(block_iter *it)
{
    it->cur = it->next = it->restart_offset;
    it->key_len = 0;
    it->val_len = 0;
}

static void fail(block_iter *it, int code, const char *what, uint32_t off)
{
    if (it->status == NULL)
        it->status = status_new(code, "block: %s at offset %u", what, off);
    set_invalid(it);
}

/* Decodes an entry's three lengths at p; returns where its key bytes start,
 * or NULL if the entry does not fit before limit. */
static inline const char *decode_entry(const char *p, const char *limit, uint32_t *shared,
                                       uint32_t *unshared, uint32_t *vlen)
{
    if (limit - p < 3)
        return NULL;
    uint32_t a = (unsigned char)p[0], b = (unsigned char)p[1], c = (unsigned char)p[2];
    if ((a | b | c) < 128) {
        p += 3; /* the common case: three one-byte varints */
    } else if ((p = decode_varint32(p, limit, &a)) == NULL ||
               (p = decode_varint32(p, limit, &b)) == NULL ||
               (p = decode_varint32(p, limit, &c)) == NULL) {
        return NULL;
    }
    if ((uint64_t)(limit - p) < (uint64_t)b + c)
        return NULL;
    *shared = a;
    *unshared = b;
    *vlen = c;
    return p;
}

/* memcpy for the few bytes a key delta usually is, without a call. The
 * ranges never overlap. */
static inline void copy_bytes(char *dst, const char *src, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t x, y;
        memcpy(&x, src, 8);
        memcpy(&y, src + n - 8, 8);
        memcpy(dst, &x, 8);
        memcpy(dst + n - 8, &y, 8);
    } else if (n < 8) {
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i];
    } else {
        memcpy(dst, src, n);
    }
}

/* Rebuilds the key as the current key's first `shared` bytes + delta. */
static bool build_key(block_iter *it, uint32_t shared, const char *delta, uint32_t unshared,
                      uint32_t off)
{
    size_t need = (size_t)shared + unshared;
    if (need > it->kcap) {
        size_t cap = need > 2 * it->kcap ? need : 2 * it->kcap;
        char *nb = lsm_malloc(cap);
        if (nb == NULL) {
            fail(it, LSM_NO_MEMORY, "out of memory for a key", off);
            return false;
        }
        memcpy(nb, it->key, shared);
        if (it->kbuf != it->kspace)
            free(it->kbuf);
        it->kbuf = nb;
        it->kcap = cap;
    } else if (it->key != it->kbuf) {
        copy_bytes(it->kbuf, it->key, shared);
    }
    copy_bytes(it->kbuf + shared, delta, unshared);
    it->key = it->kbuf;
    return true;
}

/* Makes restart_index the last restart point at or before off (which lies
 * past the current interval's start). */
static void enter_interval(block_iter *it, uint32_t off)
{
    uint32_t i = it->restart_index;
    while (i + 1 < it->num_restarts && restart_point(it, i + 1) <= off)
        i++;
    it->restart_index = i;
    it->restart_start = restart_point(it, i);
    it->restart_end = i + 1 < it->num_restarts ? restart_point(it, i + 1) : it->restart_offset;
}

/* Moves to the entry at it->next. false at the end or on corruption. */
static inline bool parse_next(block_iter *it)
{
    uint32_t off = it->next;
    if (off >= it->restart_offset) {
        set_invalid(it);
        return false;
    }
    uint32_t shared, unshared, vlen;
    const char *p =
        decode_entry(it->data + off, it->data + it->restart_offset, &shared, &unshared, &vlen);
    if (p == NULL || shared > it->key_len) {
        fail(it, LSM_CORRUPTION, "bad entry", off);
        return false;
    }
    if (off >= it->restart_end)
        enter_interval(it, off);
    if (shared == 0) {
        it->key = p; /* no copy: the key is whole in the block */
    } else if (off == it->restart_start) {
        fail(it, LSM_CORRUPTION, "restart entry shares a prefix", off);
        return false;
    } else if (!build_key(it, shared, p, unshared, off)) {
        return false;
    }
    it->key_len = (size_t)shared + unshared;
    it->val = p + unshared;
    it->val_len = vlen;
    it->cur = off;
    it->next = (uint32_t)(it->val + vlen - it->data);
    return true;
}

static void set_interval(block_iter *it, uint32_t index)
{
    it->restart_index = index;
    it->restart_start = restart_point(it, index);
    it->restart_end =
        index + 1 < it->num_restarts ? restart_point(it, index + 1) : it->restart_offset;
}

static void seek_to_restart(block_iter *it, uint32_t index)
{
    it->key_len = 0;
    set_interval(it, index);
    it->next = it->restart_start;
}

static bool unusable(block_iter *it)
{
    if (it->status != NULL || it->num_restarts == 0) {
        set_invalid(it);
        return true;
    }
    return false;
}

void block_iter_seek_first(block_iter *it)
{
    if (unusable(it))
        return;
    seek_to_restart(it, 0);
    parse_next(it);
}

void block_iter_seek_last(block_iter *it)
{
    if (unusable(it))
        return;
    seek_to_restart(it, it->num_restarts - 1);
    if (!parse_next(it))
        return;
    while (it->next < it->restart_offset && parse_next(it)) {
    }
}

void block_iter_next(block_iter *it)
{
    assert(block_iter_valid(it));
    parse_next(it);
}

/* Adds the current entry to the record; false (record dropped) if it is
 * full or memory runs out. */
static bool back_record(block_iter *it)
{
    struct block_back *bk = it->back;
    if (bk->n == BACK_MAX || it->key_len > BACK_KEY_BYTES - bk->used)
        goto drop;
    if (it->key_len > bk->cap - bk->used) {
        size_t cap = 2 * (bk->used + it->key_len);
        char *k = lsm_realloc(bk->keys, cap);
        if (k == NULL)
            goto drop;
        bk->keys = k;
        bk->cap = cap;
    }
    int i = bk->n++;
    bk->off[i] = it->cur;
    bk->key_at[i] = (uint32_t)bk->used;
    bk->key_len[i] = (uint32_t)it->key_len;
    bk->val_at[i] = (uint32_t)(it->val - it->data);
    bk->val_len[i] = it->val_len;
    bk->end = it->next;
    if (it->key_len)
        memcpy(bk->keys + bk->used, it->key, it->key_len);
    bk->used += it->key_len;
    return true;
drop:
    bk->n = 0;
    return false;
}

/* Positions the iterator on recorded entry i. */
static void back_load(block_iter *it, int i)
{
    struct block_back *bk = it->back;
    bk->pos = i;
    it->cur = bk->off[i];
    it->next = i + 1 < bk->n ? bk->off[i + 1] : bk->end;
    it->key = bk->keys + bk->key_at[i];
    it->key_len = bk->key_len[i];
    it->val = it->data + bk->val_at[i];
    it->val_len = bk->val_len[i];
    if (it->restart_index != bk->restart_index)
        set_interval(it, bk->restart_index);
}

/* The recorded entry just before the current one, or -1. */
static int back_find_prev(const block_iter *it)
{
    const struct block_back *bk = it->back;
    if (bk == NULL || bk->n == 0)
        return -1;
    int i = bk->pos;
    if (i < bk->n && bk->off[i] == it->cur)
        return i - 1;
    if (bk->end == it->cur) /* just past the record: where it was made */
        return bk->n - 1;
    for (i = 1; i < bk->n; i++) /* moved forward within the record */
        if (bk->off[i] == it->cur)
            return i - 1;
    return -1;
}

void block_iter_prev(block_iter *it)
{
    assert(block_iter_valid(it));
    int i = back_find_prev(it);
    if (i >= 0) {
        back_load(it, i);
        return;
    }
    uint32_t original = it->cur;
    uint32_t index = it->restart_index;
    while (restart_point(it, index) >= original) {
        if (index == 0) {
            set_invalid(it); /* it was the first entry */
            return;
        }
        index--;
    }
    if (it->back == NULL)
        it->back = lsm_calloc(1, sizeof(*it->back)); /* NULL: rescan every time */
    bool record = it->back != NULL;
    if (record) {
        it->back->n = 0;
        it->back->used = 0;
        it->back->restart_index = index;
    }
    seek_to_restart(it, index);
    /* Offsets rise strictly, so this ends even in a corrupt block. */
    do {
        if (!parse_next(it)) {
            if (record)
                it->back->n = 0;
            return;
        }
        if (record)
            record = back_record(it);
    } while (it->next < original);
    if (record)
        it->back->pos = it->back->n - 1;
}

void block_iter_seek(block_iter *it, const char *target, size_t n)
{
    if (unusable(it))
        return;
    /* The last restart point whose key is < target; scan on from there. */
    const char *limit = it->data + it->restart_offset;
    uint32_t left = 0, right = it->num_restarts - 1;
    while (left < right) {
        uint32_t mid = left + (right - left + 1) / 2;
        uint32_t off = restart_point(it, mid), shared, unshared, vlen;
        const char *k = decode_entry(it->data + off, limit, &shared, &unshared, &vlen);
        if (k == NULL || shared != 0) {
            fail(it, LSM_CORRUPTION, "bad restart entry", off);
            return;
        }
        if (it->cmp(k, unshared, target, n) < 0)
            left = mid;
        else
            right = mid - 1;
    }
    seek_to_restart(it, left);
    while (parse_next(it)) {
        if (it->cmp(it->key, it->key_len, target, n) >= 0)
            return;
    }
}

/* ------------------------------------------------- the iter interface */

static bool op_valid(const iter *i)
{
    return block_iter_valid((const block_iter *)i);
}
static void op_seek_first(iter *i)
{
    block_iter_seek_first((block_iter *)i);
}
static void op_seek_last(iter *i)
{
    block_iter_seek_last((block_iter *)i);
}
static void op_seek(iter *i, const char *k, size_t n)
{
    block_iter_seek((block_iter *)i, k, n);
}
static void op_next(iter *i)
{
    block_iter_next((block_iter *)i);
}
static void op_prev(iter *i)
{
    block_iter_prev((block_iter *)i);
}
static const char *op_key(const iter *i, size_t *n)
{
    const block_iter *it = (const block_iter *)i;
    assert(block_iter_valid(it));
    *n = it->key_len;
    return it->key;
}
static const char *op_value(const iter *i, size_t *n)
{
    const block_iter *it = (const block_iter *)i;
    assert(block_iter_valid(it));
    *n = it->val_len;
    return it->val;
}
static lsm_status *op_status(const iter *i)
{
    return status_copy(((const block_iter *)i)->status);
}
static void op_free_embedded(iter *i)
{
    block_iter_destroy((block_iter *)i);
}
static void op_free_heap(iter *i)
{
    block_iter_destroy((block_iter *)i);
    free(i);
}

static const struct iter_ops embedded_ops = {
    op_valid, op_seek_first, op_seek_last, op_seek,   op_next,
    op_prev,  op_key,        op_value,     op_status, op_free_embedded,
};
static const struct iter_ops heap_ops = {
    op_valid, op_seek_first, op_seek_last, op_seek,   op_next,
    op_prev,  op_key,        op_value,     op_status, op_free_heap,
};

void block_iter_init(block_iter *it, iter_cmp_fn cmp)
{
    memset(it, 0, offsetof(block_iter, kspace));
    it->base.ops = &embedded_ops;
    it->cmp = cmp;
    it->kbuf = it->kspace;
    it->kcap = sizeof(it->kspace);
    it->key = it->kbuf;
}

void block_iter_set_block(block_iter *it, const block *b)
{
    lsm_status_free(it->status);
    it->status = NULL;
    if (b == NULL) {
        it->data = it->restarts = NULL;
        it->restart_offset = it->num_restarts = 0;
    } else {
        it->data = b->data;
        it->restart_offset = b->restart_offset;
        it->num_restarts = b->num_restarts;
        it->restarts = b->data + b->restart_offset;
    }
    it->restart_index = 0;
    it->restart_start = 0;
    it->restart_end = it->num_restarts > 1 ? restart_point(it, 1) : it->restart_offset;
    if (it->back != NULL)
        it->back->n = 0; /* recorded from the old block */
    set_invalid(it);
}

void block_iter_destroy(block_iter *it)
{
    if (it->kbuf != it->kspace)
        free(it->kbuf);
    it->kbuf = it->kspace;
    it->kcap = sizeof(it->kspace);
    lsm_status_free(it->status);
    it->status = NULL;
    if (it->back != NULL)
        free(it->back->keys);
    free(it->back);
    it->back = NULL;
}

iter *block_iter_new(const block *b, iter_cmp_fn cmp)
{
    block_iter *it = lsm_malloc(sizeof(*it));
    if (it == NULL)
        return NULL;
    block_iter_init(it, cmp);
    it->base.ops = &heap_ops;
    block_iter_set_block(it, b);
    return &it->base;
}
