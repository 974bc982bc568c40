/* table_reader.c — opening, looking up and iterating a table; the format
 * is described in table.h. */
#include "table.h"
#include "lsm_malloc.h"

#include "block.h"
#include "bloom.h"
#include "crc32c.h"
#include "dbformat.h"
#include "keycmp.h"
#include "status.h"

#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <lz4.h>
#include <stdatomic.h>
#include <stdlib.h>

/* A block's contents after checksum and decompression; what the block
 * cache holds. One allocation: header, then the bytes. */
typedef struct table_block {
    block b;       /* parsed view of data (data and index blocks) */
    size_t len;    /* bytes in data */
    size_t charge; /* allocation size, for the cache */
    char data[];
} table_block;

struct sstable {
    lsm_rfile *file;
    uint64_t number;
    uint64_t file_size;
    uint64_t data_end; /* where the data blocks end and metadata begins */
    cache *cache;      /* may be NULL */
    uint64_t cache_id; /* key prefix of this table's blocks in cache */
    table_block *index;
    table_block *filter; /* NULL: no filter */
    /* The last block read from the file was stored raw: read the next one
     * straight into its cache allocation. A hint (relaxed, any thread):
     * either way reads the same bytes. */
    atomic_bool raw_hint;
};

/* A block in use: pinned in the cache (h) or owned (h NULL). */
typedef struct block_ref {
    table_block *tb;
    cache_handle *h;
} block_ref;

/* Internal-key order, made safe for keys of any length: data read from a
 * damaged file may hold keys shorter than the 8-byte trailer. */
static int table_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen < IKEY_TRAILER || blen < IKEY_TRAILER)
        return keycmp_bytes(a, alen, b, blen);
    return keycmp_ikey(a, alen, b, blen);
}

static lsm_status *corruption(const sstable *t, uint64_t offset, const char *what)
{
    return status_new(LSM_CORRUPTION, "table %06" PRIu64 ": %s at offset %" PRIu64, t->number, what,
                      offset);
}

/* ------------------------------------------------------- reading blocks */

/* Decompresses the lz4 block stored in data[0..n) into a new block. */
static lsm_status *decompress(const sstable *t, uint64_t offset, const char *data, size_t n,
                              table_block **out)
{
    uint32_t raw_len;
    const char *p = decode_varint32(data, data + n, &raw_len);
    size_t clen = p ? (size_t)(data + n - p) : 0;
    /* LZ4 cannot expand more than ~255x: a larger claim is damage, and
     * must not become a huge allocation. */
    if (p == NULL || clen > INT_MAX || raw_len > INT_MAX || (uint64_t)raw_len > clen * 256 + 64)
        return corruption(t, offset, "bad compressed block header");
    size_t charge = sizeof(table_block) + raw_len;
    table_block *tb = lsm_malloc(charge);
    if (tb == NULL)
        return status_new(LSM_NO_MEMORY, "table %06" PRIu64 ": out of memory", t->number);
    int got = LZ4_decompress_safe(p, tb->data, (int)clen, (int)raw_len);
    if (got < 0 || (uint32_t)got != raw_len) {
        free(tb);
        return corruption(t, offset, "bad compressed block");
    }
    tb->len = raw_len;
    tb->charge = charge;
    *out = tb;
    return NULL;
}

/* Checks the checksum and type of the stored block data[0..size + trailer). */
static lsm_status *check_block(const sstable *t, uint64_t offset, const char *data, size_t size)
{
    const char *trailer = data + size;
    uint32_t crc = crc32c_extend(crc32c(data, size), trailer, 1);
    if (crc != crc32c_unmask(decode_fixed32(trailer + 1)))
        return corruption(t, offset, "block checksum mismatch");
    if (trailer[0] != TABLE_BLOCK_LZ4 && trailer[0] != TABLE_BLOCK_RAW)
        return corruption(t, offset, "unknown block type");
    return NULL;
}

/* Checks the stored block data[0..size + trailer) read from offset and
 * makes *out of it: decompressed, or raw — then `held` (the buffer data
 * lies in, if the caller gives one) becomes it, else a copy. Takes `held`
 * either way. */
static lsm_status *decode_block(const sstable *t, uint64_t offset, const char *data, size_t size,
                                table_block *held, table_block **out)
{
    const char *trailer = data + size;
    lsm_status *st = check_block(t, offset, data, size);
    if (st == NULL && trailer[0] == TABLE_BLOCK_LZ4)
        st = decompress(t, offset, data, size, out);
    if (st != NULL || trailer[0] == TABLE_BLOCK_LZ4) {
        free(held);
        return st;
    }
    table_block *tb = held;
    if (tb == NULL && (tb = lsm_malloc(sizeof(table_block) + size)) != NULL)
        memcpy(tb->data, data, size);
    if (tb == NULL)
        return status_new(LSM_NO_MEMORY, "table %06" PRIu64 ": out of memory", t->number);
    tb->len = size;
    tb->charge = sizeof(table_block) + size + (held != NULL ? TABLE_TRAILER_SIZE : 0);
    *out = tb;
    return NULL;
}

/* Reads up to n bytes at offset into dst; fewer only at the file's end.
 * point: one block (through the file's mapping if it has one), else a
 * read-ahead (always pread: env.h's mapped reads). */
static lsm_status *read_at(const sstable *t, bool point, uint64_t offset, char *dst, size_t n,
                           size_t *got)
{
    *got = 0;
    lsm_status *st = point ? env_read_point(t->file, offset, dst, n, got)
                           : t->file->ops->pread(t->file, offset, dst, n, got);
    if (st != NULL)
        st = status_wrap(st, "read table %06" PRIu64 " block %" PRIu64, t->number, offset);
    return st;
}

/* A compressed block up to this size (stored bytes + trailer) is read into
 * the stack and decompressed from there into its one allocation: a miss
 * then costs one malloc, not two. Covers the filesystem's 16 KiB blocks
 * (lz4 is kept only when it saves 1/8). */
#define STACK_READ_MAX (32u * 1024)

static void note_block_type(sstable *t, const char *trailer)
{
    atomic_store_explicit(&t->raw_hint, trailer[0] == TABLE_BLOCK_RAW, memory_order_relaxed);
}

/* Reads exactly n stored bytes at offset into dst. */
static lsm_status *read_stored(const sstable *t, uint64_t offset, char *dst, size_t n)
{
    size_t got;
    lsm_status *st = read_at(t, true, offset, dst, n, &got);
    if (st == NULL && got != n)
        st = corruption(t, offset, "truncated block");
    return st;
}

/* read_block for a block of n stored bytes (trailer included) that fits
 * the stack: verified and decoded from there. */
static lsm_status *read_block_stack(sstable *t, uint64_t offset, uint64_t size, size_t n,
                                    table_block **out)
{
    char stored[STACK_READ_MAX];
    lsm_status *st = read_stored(t, offset, stored, n);
    if (st != NULL)
        return st;
    note_block_type(t, stored + size);
    return decode_block(t, offset, stored, (size_t)size, NULL, out);
}

/* Reads the block at [offset, offset + size + trailer), verifies its
 * checksum and decompresses it. REQUIRES: the handle was bounds-checked. */
static lsm_status *read_block(sstable *t, uint64_t offset, uint64_t size, table_block **out)
{
    size_t n = (size_t)size + TABLE_TRAILER_SIZE;
    if (n <= STACK_READ_MAX && !atomic_load_explicit(&t->raw_hint, memory_order_relaxed))
        return read_block_stack(t, offset, size, n, out);
    table_block *tb = lsm_malloc(sizeof(table_block) + n);
    if (tb == NULL)
        return status_new(LSM_NO_MEMORY, "table %06" PRIu64 ": out of memory", t->number);
    lsm_status *st = read_stored(t, offset, tb->data, n);
    if (st != NULL) {
        free(tb);
        return st;
    }
    note_block_type(t, tb->data + size);
    return decode_block(t, offset, tb->data, (size_t)size, tb, out);
}

/* ----------------------------------------------------------- readahead */

/* An iterator reading blocks one after another reads READAHEAD_BYTES of
 * the data region at a time, from the second block on, instead of a
 * system call per block (pread per 4 KiB block made readseq 0.6x
 * LevelDB's mapped reads). */
#define READAHEAD_BYTES (256u * 1024)

typedef struct readahead {
    char *buf;     /* READAHEAD_BYTES, allocated at first use; NULL: none */
    uint64_t off;  /* file offset of buf[0] */
    size_t len;    /* bytes of buf read */
    uint64_t next; /* where the block after the last one read starts */
} readahead;

static void readahead_free(readahead *ra)
{
    free(ra->buf);
    ra->buf = NULL;
}

/* Where in ra's buffer the n bytes at offset are, filling it first when
 * the read continues the last one; NULL: read the block alone. An error
 * is the buffer's read's. */
static lsm_status *readahead_find(const sstable *t, readahead *ra, uint64_t offset, size_t n,
                                  const char **at)
{
    *at = NULL;
    bool sequential = offset == ra->next;
    ra->next = offset + n;
    if (ra->buf != NULL && offset >= ra->off && offset - ra->off <= ra->len &&
        ra->len - (offset - ra->off) >= n) {
        *at = ra->buf + (offset - ra->off);
        return NULL;
    }
    if (!sequential || n > READAHEAD_BYTES)
        return NULL;
    if (ra->buf == NULL && (ra->buf = lsm_malloc(READAHEAD_BYTES)) == NULL)
        return NULL;                      /* no memory: block by block */
    uint64_t span = t->data_end - offset; /* the handle lies below data_end */
    ra->off = offset;
    ra->len = 0;
    lsm_status *st = read_at(t, false, offset, ra->buf,
                             span < READAHEAD_BYTES ? (size_t)span : READAHEAD_BYTES, &ra->len);
    if (st == NULL && ra->len >= n)
        *at = ra->buf;
    return st; /* short: the block alone reports it */
}

/* A raw block checked where it lies in ra's buffer, not copied: *out is a
 * header only, its bytes at data, good until ra's buffer is next filled. */
static lsm_status *view_block(const sstable *t, uint64_t offset, const char *data, size_t size,
                              table_block **out)
{
    lsm_status *st = check_block(t, offset, data, size);
    if (st != NULL)
        return st;
    if ((*out = lsm_malloc(sizeof(table_block))) == NULL)
        return status_new(LSM_NO_MEMORY, "table %06" PRIu64 ": out of memory", t->number);
    (*out)->len = size;
    (*out)->charge = sizeof(table_block);
    return NULL;
}

/* read_block through ra (NULL: none); *bytes is where the block's bytes
 * are: its own data, or (view: the caller drops the block before ra reads
 * again, and does not cache it) a raw block's place in ra's buffer. */
static lsm_status *read_block_ra(sstable *t, readahead *ra, uint64_t offset, uint64_t size,
                                 bool view, table_block **out, const char **bytes)
{
    const char *at = NULL;
    if (ra != NULL) {
        lsm_status *st = readahead_find(t, ra, offset, (size_t)size + TABLE_TRAILER_SIZE, &at);
        if (st != NULL)
            return st;
    }
    lsm_status *st;
    if (at != NULL && view && at[size] == TABLE_BLOCK_RAW) {
        *bytes = at;
        return view_block(t, offset, at, (size_t)size, out);
    }
    st = at == NULL ? read_block(t, offset, size, out)
                    : decode_block(t, offset, at, (size_t)size, NULL, out);
    if (st == NULL)
        *bytes = (*out)->data;
    return st;
}

/* read_block(_ra) + parse as a key/value block. */
static lsm_status *read_kv_block(sstable *t, readahead *ra, uint64_t offset, uint64_t size,
                                 bool view, table_block **out)
{
    const char *bytes = NULL;
    lsm_status *st = read_block_ra(t, ra, offset, size, view, out, &bytes);
    if (st == NULL && !block_parse(&(*out)->b, bytes, (*out)->len)) {
        free(*out);
        *out = NULL;
        st = corruption(t, offset, "malformed block");
    }
    return st;
}

static void delete_cached_block(const char *key, size_t klen, void *value)
{
    (void)key;
    (void)klen;
    free(value);
}

/* The data block at offset, from the cache or the file (through ra, NULL:
 * none). */
static lsm_status *get_block(sstable *t, readahead *ra, uint64_t offset, uint64_t size,
                             bool fill_cache, block_ref *ref)
{
    char key[16];
    ref->h = NULL;
    if (t->cache != NULL) {
        encode_fixed64(key, t->cache_id);
        encode_fixed64(key + 8, offset);
        ref->h = cache_lookup(t->cache, key, sizeof(key));
        if (ref->h != NULL) {
            ref->tb = cache_value(ref->h);
            return NULL;
        }
    }
    lsm_status *st = read_kv_block(t, ra, offset, size, !fill_cache, &ref->tb);
    if (st != NULL)
        return st;
    if (t->cache != NULL && fill_cache)
        ref->h = cache_insert(t->cache, key, sizeof(key), ref->tb, ref->tb->charge,
                              delete_cached_block); /* NULL (no memory): stays owned */
    return NULL;
}

static void release_block(sstable *t, block_ref *ref)
{
    if (ref->h != NULL)
        cache_release(t->cache, ref->h);
    else
        free(ref->tb);
    ref->tb = NULL;
    ref->h = NULL;
}

/* Decodes an index value into a data block handle that lies inside the
 * data region. */
static bool decode_handle(const sstable *t, const char *v, size_t n, uint64_t *offset,
                          uint64_t *size)
{
    const char *limit = v + n;
    v = decode_varint64(v, limit, offset);
    if (v == NULL || decode_varint64(v, limit, size) == NULL)
        return false;
    return *size <= t->data_end && t->data_end - *size >= TABLE_TRAILER_SIZE &&
           *offset <= t->data_end - *size - TABLE_TRAILER_SIZE;
}

/* ---------------------------------------------------------------- open */

static bool handle_fits(uint64_t offset, uint64_t size, uint64_t limit)
{
    return size <= limit && limit - size >= TABLE_TRAILER_SIZE &&
           offset <= limit - size - TABLE_TRAILER_SIZE;
}

static lsm_status *read_footer(sstable *t, uint64_t *foff, uint64_t *fsize, uint64_t *ioff,
                               uint64_t *isize)
{
    if (t->file_size < TABLE_FOOTER_SIZE)
        return corruption(t, 0, "file too short to be a table");
    uint64_t at = t->file_size - TABLE_FOOTER_SIZE;
    char f[TABLE_FOOTER_SIZE];
    size_t got = 0;
    lsm_status *st = env_read_point(t->file, at, f, sizeof(f), &got);
    if (st != NULL)
        return status_wrap(st, "read table %06" PRIu64 " footer", t->number);
    if (got != sizeof(f))
        return corruption(t, at, "truncated footer");
    if (decode_fixed64(f + 40) != TABLE_MAGIC)
        return corruption(t, at, "bad magic number (not a table, or truncated)");
    if (crc32c_unmask(decode_fixed32(f + 36)) != crc32c(f, 36))
        return corruption(t, at, "footer checksum mismatch");
    if (decode_fixed32(f + 32) != TABLE_FORMAT_VERSION)
        return status_new(LSM_NOT_SUPPORTED, "table %06" PRIu64 ": format version %u unknown",
                          t->number, decode_fixed32(f + 32));
    *foff = decode_fixed64(f);
    *fsize = decode_fixed64(f + 8);
    *ioff = decode_fixed64(f + 16);
    *isize = decode_fixed64(f + 24);
    if (!handle_fits(*ioff, *isize, at) || (*fsize != 0 && !handle_fits(*foff, *fsize, at)))
        return corruption(t, at, "footer points outside the file");
    return NULL;
}

lsm_status *table_open(lsm_rfile *file, uint64_t file_size, uint64_t number, cache *block_cache,
                       sstable **out)
{
    *out = NULL;
    sstable *t = lsm_calloc(1, sizeof(*t));
    if (t == NULL) {
        file->ops->close(file);
        return status_new(LSM_NO_MEMORY, "table %06" PRIu64 ": out of memory", number);
    }
    t->file = file;
    t->number = number;
    t->file_size = file_size;
    t->cache = block_cache;
    atomic_init(&t->raw_hint, false);
    uint64_t foff = 0, fsize = 0, ioff = 0, isize = 0;
    lsm_status *st = read_footer(t, &foff, &fsize, &ioff, &isize);
    if (st == NULL)
        st = read_kv_block(t, NULL, ioff, isize, false, &t->index);
    if (st == NULL && fsize != 0)
        st = read_block(t, foff, fsize, &t->filter);
    if (st != NULL) {
        table_free(t);
        return st;
    }
    t->data_end = fsize != 0 && foff < ioff ? foff : ioff;
    if (block_cache != NULL)
        t->cache_id = cache_new_id(block_cache);
    *out = t;
    return NULL;
}

void table_free(sstable *t)
{
    if (t == NULL)
        return;
    t->file->ops->close(t->file);
    free(t->index);
    free(t->filter);
    free(t);
}

size_t table_memory_usage(const sstable *t)
{
    return sizeof(*t) + (t->index ? t->index->charge : 0) + (t->filter ? t->filter->charge : 0);
}

/* ----------------------------------------------------------------- get */

static bool want_fill(const lsm_read_options *ro)
{
    return ro == NULL || ro->fill_cache;
}

/* One table_get in progress. */
typedef struct lookup {
    sstable *t;
    bool fill_cache;
    const char *ikey;
    size_t n;
    table_get_fn fn;
    void *ctx;
    block_iter index; /* over t's index block */
    block_iter data;  /* over the data block being searched */
    bool done;        /* the answer is known: found, or certainly absent */
} lookup;

/* Searches the data block the index iterator is on. */
static lsm_status *search_block(lookup *lk)
{
    sstable *t = lk->t;
    uint64_t offset, size;
    if (!decode_handle(t, lk->index.val, lk->index.val_len, &offset, &size))
        return corruption(t, t->data_end, "bad block handle in index");
    block_ref ref;
    lsm_status *st = get_block(t, NULL, offset, size, lk->fill_cache, &ref);
    if (st != NULL)
        return st;
    block_iter *d = &lk->data;
    block_iter_set_block(d, &ref.tb->b);
    block_iter_seek(d, lk->ikey, lk->n);
    if (block_iter_valid(d)) {
        lk->done = true;
        if (d->key_len < IKEY_TRAILER)
            st = corruption(t, offset, "short key in block");
        else if (keycmp_bytes(d->key, d->key_len - IKEY_TRAILER, lk->ikey, lk->n - IKEY_TRAILER) ==
                 0)
            lk->fn(lk->ctx, d->key, d->key_len, d->val, d->val_len);
    } else if (block_iter_error(d) != NULL) {
        st = status_wrap(status_copy(block_iter_error(d)), "table %06" PRIu64 " block %" PRIu64,
                         t->number, offset);
    }
    block_iter_set_block(d, NULL); /* before the block may go */
    release_block(t, &ref);
    return st;
}

lsm_status *table_get(sstable *t, const lsm_read_options *ro, const char *ikey, size_t n,
                      table_get_fn fn, void *ctx)
{
    assert(n >= IKEY_TRAILER);
    if (t->filter != NULL &&
        !bloom_may_match(t->filter->data, t->filter->len, ikey, n - IKEY_TRAILER))
        return NULL;
    lookup lk = {.t = t, .fill_cache = want_fill(ro), .ikey = ikey, .n = n, .fn = fn, .ctx = ctx};
    block_iter_init(&lk.index, table_cmp);
    block_iter_init(&lk.data, table_cmp);
    block_iter_set_block(&lk.index, &t->index->b);
    block_iter_seek(&lk.index, ikey, n);
    lsm_status *st = NULL;
    /* The first block normally answers; the loop only matters when the key
     * sorts after a block's last entry but before its separator. */
    while (st == NULL && !lk.done && block_iter_valid(&lk.index)) {
        st = search_block(&lk);
        if (st == NULL && !lk.done)
            block_iter_next(&lk.index);
    }
    if (st == NULL && block_iter_error(&lk.index) != NULL)
        st = status_wrap(status_copy(block_iter_error(&lk.index)), "table %06" PRIu64 " index",
                         t->number);
    block_iter_destroy(&lk.index);
    block_iter_destroy(&lk.data);
    return st;
}

uint64_t table_approximate_offset(sstable *t, const char *ikey, size_t n)
{
    block_iter idx;
    block_iter_init(&idx, table_cmp);
    block_iter_set_block(&idx, &t->index->b);
    block_iter_seek(&idx, ikey, n);
    uint64_t offset = t->data_end, size;
    if (!block_iter_valid(&idx) || !decode_handle(t, idx.val, idx.val_len, &offset, &size))
        offset = t->data_end;
    block_iter_destroy(&idx);
    return offset;
}

/* ------------------------------------------------------------ iterator */

/* Two levels: `index` walks the index block; `data` walks the data block
 * its current entry names. Both block iterators live inside this struct
 * and are re-pointed, not reallocated, as the iterator crosses blocks. */
typedef struct table_iter {
    iter base;
    sstable *t;
    bool fill_cache;
    block_iter index;
    block_iter data;
    block_ref cur; /* the block data walks; cur.tb NULL: none */
    readahead ra;
    uint64_t cur_offset; /* its offset */
    lsm_status *status;  /* first error; the iterator then stays invalid */
    void (*cleanup)(void *arg);
    void *cleanup_arg;
} table_iter;

static void drop_block(table_iter *ti)
{
    block_iter_set_block(&ti->data, NULL);
    if (ti->cur.tb != NULL)
        release_block(ti->t, &ti->cur);
}

static void set_error(table_iter *ti, lsm_status *st)
{
    if (ti->status == NULL)
        ti->status = st;
    else
        lsm_status_free(st);
    drop_block(ti);
    block_iter_set_block(&ti->index, NULL);
}

static bool on_entry(const table_iter *ti)
{
    return ti->cur.tb != NULL && block_iter_valid(&ti->data);
}

/* Points `data` at the block of the index entry (none if the index is
 * exhausted). */
static void load_block(table_iter *ti)
{
    sstable *t = ti->t;
    if (!block_iter_valid(&ti->index)) {
        if (block_iter_error(&ti->index) != NULL)
            set_error(ti, status_wrap(status_copy(block_iter_error(&ti->index)),
                                      "table %06" PRIu64 " index", t->number));
        drop_block(ti);
        return;
    }
    uint64_t offset, size;
    if (!decode_handle(t, ti->index.val, ti->index.val_len, &offset, &size)) {
        set_error(ti, corruption(t, t->data_end, "bad block handle in index"));
        return;
    }
    if (ti->cur.tb != NULL && ti->cur_offset == offset)
        return;
    drop_block(ti);
    lsm_status *st = get_block(t, &ti->ra, offset, size, ti->fill_cache, &ti->cur);
    if (st != NULL) {
        set_error(ti, st);
        return;
    }
    ti->cur_offset = offset;
    block_iter_set_block(&ti->data, &ti->cur.tb->b);
}

/* After a move: turn a data block error into the iterator's, and refuse
 * keys too short to be internal keys (the merge above compares them). */
static bool check_data(table_iter *ti)
{
    if (ti->cur.tb == NULL)
        return false;
    if (block_iter_error(&ti->data) != NULL) {
        set_error(ti,
                  status_wrap(status_copy(block_iter_error(&ti->data)),
                              "table %06" PRIu64 " block %" PRIu64, ti->t->number, ti->cur_offset));
        return false;
    }
    if (block_iter_valid(&ti->data) && ti->data.key_len < IKEY_TRAILER) {
        set_error(ti, corruption(ti->t, ti->cur_offset, "short key in block"));
        return false;
    }
    return true;
}

static void skip_forward(table_iter *ti)
{
    while (ti->status == NULL && !on_entry(ti)) {
        if (ti->cur.tb != NULL && !check_data(ti))
            return;
        if (!block_iter_valid(&ti->index)) {
            load_block(ti); /* reports an index error, drops the block */
            return;
        }
        block_iter_next(&ti->index);
        load_block(ti);
        if (ti->cur.tb != NULL)
            block_iter_seek_first(&ti->data);
    }
    if (ti->status == NULL)
        check_data(ti);
}

static void skip_backward(table_iter *ti)
{
    while (ti->status == NULL && !on_entry(ti)) {
        if (ti->cur.tb != NULL && !check_data(ti))
            return;
        if (!block_iter_valid(&ti->index)) {
            load_block(ti);
            return;
        }
        block_iter_prev(&ti->index);
        load_block(ti);
        if (ti->cur.tb != NULL)
            block_iter_seek_last(&ti->data);
    }
    if (ti->status == NULL)
        check_data(ti);
}

static bool ti_valid(const iter *i)
{
    const table_iter *ti = (const table_iter *)i;
    return ti->status == NULL && on_entry(ti);
}

static void ti_seek(iter *i, const char *key, size_t n)
{
    table_iter *ti = (table_iter *)i;
    if (ti->status != NULL)
        return;
    block_iter_seek(&ti->index, key, n);
    load_block(ti);
    if (ti->cur.tb != NULL)
        block_iter_seek(&ti->data, key, n);
    skip_forward(ti);
}

static void ti_seek_first(iter *i)
{
    table_iter *ti = (table_iter *)i;
    if (ti->status != NULL)
        return;
    block_iter_seek_first(&ti->index);
    load_block(ti);
    if (ti->cur.tb != NULL)
        block_iter_seek_first(&ti->data);
    skip_forward(ti);
}

static void ti_seek_last(iter *i)
{
    table_iter *ti = (table_iter *)i;
    if (ti->status != NULL)
        return;
    block_iter_seek_last(&ti->index);
    load_block(ti);
    if (ti->cur.tb != NULL)
        block_iter_seek_last(&ti->data);
    skip_backward(ti);
}

/* A move that stays inside the current block on a well-formed key needs
 * none of skip_forward's checks: the block iterator is valid only when it
 * met no error. */
static inline bool still_in_block(const table_iter *ti)
{
    return block_iter_valid(&ti->data) && ti->data.key_len >= IKEY_TRAILER;
}

static void ti_next(iter *i)
{
    table_iter *ti = (table_iter *)i;
    assert(ti_valid(i));
    block_iter_next(&ti->data);
    if (!still_in_block(ti))
        skip_forward(ti);
}

static void ti_prev(iter *i)
{
    table_iter *ti = (table_iter *)i;
    assert(ti_valid(i));
    block_iter_prev(&ti->data);
    if (!still_in_block(ti))
        skip_backward(ti);
}

static const char *ti_key(const iter *i, size_t *n)
{
    const table_iter *ti = (const table_iter *)i;
    assert(ti_valid(i));
    *n = ti->data.key_len;
    return ti->data.key;
}

static const char *ti_value(const iter *i, size_t *n)
{
    const table_iter *ti = (const table_iter *)i;
    assert(ti_valid(i));
    *n = ti->data.val_len;
    return ti->data.val;
}

static lsm_status *ti_status(const iter *i)
{
    return status_copy(((const table_iter *)i)->status);
}

static void ti_free(iter *i)
{
    table_iter *ti = (table_iter *)i;
    drop_block(ti);
    readahead_free(&ti->ra);
    block_iter_destroy(&ti->data);
    block_iter_destroy(&ti->index);
    lsm_status_free(ti->status);
    if (ti->cleanup != NULL)
        ti->cleanup(ti->cleanup_arg);
    free(ti);
}

static const struct iter_ops table_iter_ops = {
    ti_valid, ti_seek_first, ti_seek_last, ti_seek,   ti_next,
    ti_prev,  ti_key,        ti_value,     ti_status, ti_free,
};

iter *table_iter_new(sstable *t, const lsm_read_options *ro, void (*cleanup)(void *arg), void *arg)
{
    table_iter *ti = lsm_malloc(sizeof(*ti));
    if (ti == NULL)
        return NULL;
    ti->base.ops = &table_iter_ops;
    ti->t = t;
    ti->fill_cache = want_fill(ro);
    block_iter_init(&ti->index, table_cmp);
    block_iter_init(&ti->data, table_cmp);
    block_iter_set_block(&ti->index, &t->index->b);
    ti->cur.tb = NULL;
    ti->cur.h = NULL;
    ti->cur_offset = 0;
    ti->ra = (readahead){.buf = NULL, .next = UINT64_MAX};
    ti->status = NULL;
    ti->cleanup = cleanup;
    ti->cleanup_arg = arg;
    return &ti->base;
}
