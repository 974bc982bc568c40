/* table_builder.c — writing a table; the format is described in table.h. */
#include "table.h"
#include "lsm_malloc.h"

#include "block.h"
#include "bloom.h"
#include "crc32c.h"
#include "dbformat.h"
#include "status.h"

#include <assert.h>
#include <lz4.h>
#include <stdlib.h>

struct table_builder {
    table_options opt;
    lsm_wfile *file;
    uint64_t offset; /* bytes appended to file */
    block_builder data;
    block_builder index;
    bloom_builder filter;
    bool use_filter;
    buf last_key;   /* the last key added */
    buf smallest;   /* the first key added */
    buf scratch;    /* separators */
    buf compressed; /* lz4 output */
    /* lz4's state, made at the first block tried (lsm_malloc) and reset
     * cheaply for each: a one-shot LZ4_compress_default clears all 16 KiB
     * of it per block. Each block is a chain of its own (independent). */
    LZ4_stream_t *lz4;
    /* The block just written awaits its index entry: its separator depends
     * on the first key of the next block. */
    bool pending_index;
    uint64_t pending_offset, pending_size;
    uint64_t entries;
    uint64_t keys;      /* distinct user keys */
    uint64_t deletions; /* user keys whose newest entry is a deletion */
    /* Data blocks in a row that lz4 could not shrink by 1/8, blocks since
     * the last one tried, and every how many blocks one is tried (see
     * want_compress). */
    unsigned incompressible, untried, probe_every;
    lsm_status *status; /* first error; sticky */
    bool finished;
};

/* lz4 on incompressible data: see want_compress. */
#define COMPRESS_GIVE_UP 8
#define COMPRESS_PROBE_FIRST 16
#define COMPRESS_PROBE_MAX 256

table_builder *table_builder_new(const table_options *o, lsm_wfile *file)
{
    table_builder *b = lsm_calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->opt = *o;
    if (b->opt.block_size == 0)
        b->opt.block_size = 1;
    b->file = file;
    b->probe_every = COMPRESS_PROBE_FIRST;
    block_builder_init(&b->data, BLOCK_RESTART_INTERVAL);
    block_builder_init(&b->index, 1); /* every entry a restart: pure binary search */
    b->use_filter = o->bloom_bits_per_key > 0;
    bloom_builder_init(&b->filter, b->use_filter ? o->bloom_bits_per_key : 1);
    buf_init(&b->last_key);
    buf_init(&b->smallest);
    buf_init(&b->scratch);
    buf_init(&b->compressed);
    return b;
}

void table_builder_free(table_builder *b)
{
    if (b == NULL)
        return;
    block_builder_destroy(&b->data);
    block_builder_destroy(&b->index);
    bloom_builder_destroy(&b->filter);
    buf_free(&b->last_key);
    buf_free(&b->smallest);
    buf_free(&b->scratch);
    buf_free(&b->compressed);
    free(b->lz4);
    lsm_status_free(b->status);
    free(b);
}

/* Records the first error and returns a copy for the caller. */
static lsm_status *fail(table_builder *b, lsm_status *st)
{
    if (b->status == NULL)
        b->status = st;
    else
        lsm_status_free(st);
    return status_copy(b->status);
}

static lsm_status *fail_oom(table_builder *b)
{
    return fail(b, status_new(LSM_NO_MEMORY, "table builder: out of memory"));
}

/* Compresses raw into b->compressed if that saves at least 1/8. */
static bool try_compress(table_builder *b, const char *raw, size_t n)
{
    if (n < 64 || n > LZ4_MAX_INPUT_SIZE)
        return false;
    int bound = LZ4_compressBound((int)n);
    b->compressed.len = 0;
    if (!buf_reserve(&b->compressed, VARINT32_MAX + (size_t)bound))
        return false; /* out of memory: store it raw */
    if (b->lz4 == NULL) {
        void *mem = lsm_malloc(sizeof(LZ4_stream_t));
        if (mem == NULL)
            return false; /* out of memory: store it raw */
        if ((b->lz4 = LZ4_initStream(mem, sizeof(LZ4_stream_t))) == NULL) {
            free(mem);
            return false;
        }
    }
    char *start = b->compressed.data;
    char *p = encode_varint32(start, (uint32_t)n);
    LZ4_resetStream_fast(b->lz4); /* no history: the block depends on no other */
    int c = LZ4_compress_fast_continue(b->lz4, raw, p, (int)n, bound, 1);
    if (c <= 0)
        return false;
    size_t total = (size_t)(p - start) + (size_t)c;
    if (total > n - n / 8)
        return false;
    b->compressed.len = total;
    return true;
}

/* Whether to try lz4 on the next data block. Data that does not compress
 * (compressed files, media, random bytes) is tried only every probe_every
 * blocks once COMPRESS_GIVE_UP blocks in a row failed: every
 * COMPRESS_PROBE_FIRST blocks, twice as far apart after each failed probe,
 * up to COMPRESS_PROBE_MAX (docs/decisions.md, "lz4 sampling"). The probes
 * find where the data becomes compressible again. */
static bool want_compress(table_builder *b)
{
    if (!b->opt.compression)
        return false;
    if (b->incompressible < COMPRESS_GIVE_UP)
        return true;
    if (++b->untried < b->probe_every)
        return false;
    b->untried = 0;
    return true;
}

/* After a block was tried: packed says whether lz4 shrank it. */
static void compress_tried(table_builder *b, bool packed)
{
    if (packed) {
        b->incompressible = 0;
        b->probe_every = COMPRESS_PROBE_FIRST;
        return;
    }
    if (++b->incompressible > COMPRESS_GIVE_UP && b->probe_every < COMPRESS_PROBE_MAX)
        b->probe_every *= 2; /* a probe failed */
}

/* Appends a block and its trailer; *offset and *size form its handle.
 * *packed (if not NULL) says whether it went out compressed. */
static lsm_status *write_block(table_builder *b, const char *raw, size_t n, bool compress,
                               uint64_t *offset, uint64_t *size, bool *packed)
{
    const char *out = raw;
    size_t outn = n;
    char trailer[TABLE_TRAILER_SIZE];
    trailer[0] = TABLE_BLOCK_RAW;
    if (packed != NULL)
        *packed = false;
    if (compress && try_compress(b, raw, n)) {
        if (packed != NULL)
            *packed = true;
        out = b->compressed.data;
        outn = b->compressed.len;
        trailer[0] = TABLE_BLOCK_LZ4;
    }
    uint32_t crc = crc32c_extend(crc32c(out, outn), trailer, 1);
    encode_fixed32(trailer + 1, crc32c_mask(crc));
    lsm_status *st = b->file->ops->append(b->file, out, outn);
    if (st == NULL)
        st = b->file->ops->append(b->file, trailer, sizeof(trailer));
    if (st != NULL)
        return fail(b, st);
    *offset = b->offset;
    *size = outn;
    b->offset += outn + TABLE_TRAILER_SIZE;
    return NULL;
}

static lsm_status *flush_data_block(table_builder *b)
{
    if (block_builder_empty(&b->data))
        return NULL;
    assert(!b->pending_index);
    const char *raw;
    size_t n;
    if (!block_builder_finish(&b->data, &raw, &n))
        return fail_oom(b);
    bool tried = want_compress(b), packed;
    lsm_status *st = write_block(b, raw, n, tried, &b->pending_offset, &b->pending_size, &packed);
    if (st != NULL)
        return st;
    if (tried)
        compress_tried(b, packed);
    block_builder_reset(&b->data);
    b->pending_index = true;
    return NULL;
}

/* A short internal key s with last <= s < next (next NULL: any s >= last),
 * built in b->scratch. Shorter index keys mean smaller, faster indexes. */
static void make_separator(table_builder *b, const char *next, size_t nlen)
{
    const char *last = b->last_key.data;
    size_t ulen = b->last_key.len - IKEY_TRAILER;
    size_t i = 0;
    if (next != NULL) {
        size_t nulen = nlen - IKEY_TRAILER, min = ulen < nulen ? ulen : nulen;
        while (i < min && last[i] == next[i])
            i++;
        if (i < min) {
            unsigned char d = (unsigned char)last[i];
            if (d == 0xff || d + 1 >= (unsigned char)next[i])
                i = ulen; /* cannot shorten */
        }
    } else {
        while (i < ulen && (unsigned char)last[i] == 0xff)
            i++;
    }
    b->scratch.len = 0;
    if (i + 1 < ulen) {
        /* last[0..i] with byte i incremented: > last's user key, and (for
         * next) < next's. The largest tag makes it the first internal key
         * of that user key. */
        buf_append(&b->scratch, last, i + 1);
        b->scratch.data[i]++;
        buf_put_fixed64(&b->scratch, pack_seq_type(MAX_SEQUENCE, TYPE_SEEK));
    } else {
        buf_append(&b->scratch, last, b->last_key.len);
    }
}

static lsm_status *add_index_entry(table_builder *b, const char *next, size_t nlen)
{
    if (!buf_reserve(&b->scratch, b->last_key.len))
        return fail_oom(b);
    make_separator(b, next, nlen); /* cannot fail: fits what was reserved */
    char handle[2 * VARINT64_MAX];
    char *p = encode_varint64(handle, b->pending_offset);
    p = encode_varint64(p, b->pending_size);
    if (!block_builder_add(&b->index, b->scratch.data, b->scratch.len, handle,
                           (size_t)(p - handle)))
        return fail_oom(b);
    b->pending_index = false;
    return NULL;
}

lsm_status *table_builder_add(table_builder *b, const char *ikey, size_t klen, const char *val,
                              size_t vlen)
{
    assert(!b->finished);
    assert(klen >= IKEY_TRAILER);
    if (b->status != NULL)
        return status_copy(b->status);
    assert(b->entries == 0 || ikey_compare(ikey, klen, b->last_key.data, b->last_key.len) > 0);
    bool new_key = b->entries == 0 || bytes_compare(ikey, klen - IKEY_TRAILER, b->last_key.data,
                                                    b->last_key.len - IKEY_TRAILER) != 0;
    lsm_status *st;
    if (b->pending_index && (st = add_index_entry(b, ikey, klen)) != NULL)
        return st;
    if (b->use_filter && !bloom_builder_add(&b->filter, ikey, klen - IKEY_TRAILER))
        return fail_oom(b);
    if (b->entries == 0 && !buf_append(&b->smallest, ikey, klen))
        return fail_oom(b);
    b->last_key.len = 0;
    if (!buf_append(&b->last_key, ikey, klen) ||
        !block_builder_add(&b->data, ikey, klen, val, vlen))
        return fail_oom(b);
    b->entries++;
    if (new_key) { /* a key's entries come newest first */
        b->keys++;
        b->deletions += (ikey_tag(ikey, klen) & 0xff) == TYPE_DELETION;
    }
    if (block_builder_size(&b->data) >= b->opt.block_size)
        return flush_data_block(b);
    return NULL;
}

static void encode_footer(char *f, uint64_t foff, uint64_t fsize, uint64_t ioff, uint64_t isize)
{
    encode_fixed64(f, foff);
    encode_fixed64(f + 8, fsize);
    encode_fixed64(f + 16, ioff);
    encode_fixed64(f + 24, isize);
    encode_fixed32(f + 32, TABLE_FORMAT_VERSION);
    encode_fixed32(f + 36, crc32c_mask(crc32c(f, 36)));
    encode_fixed64(f + 40, TABLE_MAGIC);
}

static lsm_status *write_filter(table_builder *b, uint64_t *offset, uint64_t *size)
{
    *offset = *size = 0;
    if (!b->use_filter)
        return NULL;
    buf f;
    buf_init(&f);
    if (!bloom_builder_finish(&b->filter, &f))
        return fail_oom(b);
    lsm_status *st = write_block(b, f.data, f.len, false, offset, size, NULL);
    buf_free(&f);
    return st;
}

lsm_status *table_builder_finish(table_builder *b)
{
    assert(!b->finished);
    if (b->status != NULL)
        return status_copy(b->status);
    uint64_t foff = 0, fsize = 0, ioff = 0, isize = 0;
    lsm_status *st = flush_data_block(b);
    if (st == NULL)
        st = write_filter(b, &foff, &fsize);
    if (st == NULL && b->pending_index)
        st = add_index_entry(b, NULL, 0);
    if (st != NULL)
        return st;
    const char *raw;
    size_t n;
    if (!block_builder_finish(&b->index, &raw, &n))
        return fail_oom(b);
    if ((st = write_block(b, raw, n, b->opt.compression, &ioff, &isize, NULL)) != NULL)
        return st;
    char footer[TABLE_FOOTER_SIZE];
    encode_footer(footer, foff, fsize, ioff, isize);
    if ((st = b->file->ops->append(b->file, footer, sizeof(footer))) != NULL)
        return fail(b, st);
    b->offset += sizeof(footer);
    b->finished = true;
    return NULL;
}

uint64_t table_builder_entries(const table_builder *b)
{
    return b->entries;
}

uint64_t table_builder_keys(const table_builder *b)
{
    return b->keys;
}

uint64_t table_builder_deletions(const table_builder *b)
{
    return b->deletions;
}

uint64_t table_builder_file_size(const table_builder *b)
{
    return b->offset;
}

const char *table_builder_smallest(const table_builder *b, size_t *n)
{
    assert(b->entries > 0);
    *n = b->smallest.len;
    return b->smallest.data;
}

const char *table_builder_largest(const table_builder *b, size_t *n)
{
    assert(b->entries > 0);
    *n = b->last_key.len;
    return b->last_key.data;
}
