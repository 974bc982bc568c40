/*
 * data.c — inline data, chunks, holes and truncation.
 */
#include "data.h"

#include "storeio.h"
#include "fuse_api.h"
#include "icache.h"
#include "grow.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}
static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static bool is_inline(const inode_rec *r)
{
    return (r->flags & INODE_F_INLINE) != 0;
}

/* Reads chunk idx of ino (NULL/0 for a hole). A stored chunk longer than
 * the chunk size is damage. */
static int chunk_get(lsmfs *fs, uint64_t ino, uint64_t idx, char **v, size_t *vlen)
{
    schema_key k;
    key_chunk(&k, ino, idx);
    lsm_status *s = fs_get(fs, &k, v, vlen);
    if (s != NULL) {
        int err = fs_read_errno(fs, s, "chunk");
        return err == ENOENT ? 0 : err;
    }
    if (*vlen > fs->sb.chunk_size) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: inode %llu chunk %llu: oversized\n", (unsigned long long)ino,
                 (unsigned long long)idx);
        free(*v);
        *v = NULL;
        return EIO;
    }
    return 0;
}

/* Counts d chunks added to (or, negative, deleted from) the record, unless
 * its count is unknown (a record of version 1). */
static void chunks_add(inode_rec *r, int64_t d)
{
    if (r->chunks != INODE_CHUNKS_UNKNOWN)
        r->chunks += (uint64_t)d;
}

static int chunk_put(lsm_batch *b, uint64_t ino, uint64_t idx, const char *v, size_t vlen)
{
    schema_key k;
    key_chunk(&k, ino, idx);
    return lsm_batch_put(b, k.b, k.len, v, vlen) ? 0 : ENOMEM;
}

static int chunk_del(lsm_batch *b, uint64_t ino, uint64_t idx)
{
    schema_key k;
    key_chunk(&k, ino, idx);
    return lsm_batch_delete(b, k.b, k.len) ? 0 : ENOMEM;
}

/* Copies the overlap of stored bytes [base, base+vlen) with the window
 * [off, off+len) into out (which maps the window). */
static void copy_overlap(char *out, uint64_t off, uint64_t len, uint64_t base, const char *v,
                         size_t vlen)
{
    uint64_t lo = max_u64(off, base), hi = min_u64(off + len, base + vlen);
    if (lo < hi)
        memcpy(out + (lo - off), v + (lo - base), hi - lo);
}

/* REQUIRES: n->lock held. */
static int read_inline(lsmfs *fs, inode *n, uint64_t off, uint64_t len, char *out)
{
    if (n->pay_kept) {
        copy_overlap(out, off, len, 0, n->pay, n->pay_len);
        return 0;
    }
    char *p;
    size_t plen;
    int err = inode_payload(fs, n, &p, &plen);
    if (err == 0)
        copy_overlap(out, off, len, 0, p, plen);
    free(p);
    return err;
}

/* Stops a chunk scan early without an error. */
#define SCAN_STOP (-1)

/* Calls fn for each stored chunk of ino with index in [first, last], in
 * order, in one consistent scan, until fn returns non-zero: SCAN_STOP ends
 * the scan with 0, an errno ends it with that errno. `what` names the scan
 * in the log should the store fail. */
static int scan_chunks(lsmfs *fs, uint64_t ino, uint64_t first, uint64_t last, bool fill_cache,
                       const char *what,
                       int (*fn)(void *ctx, uint64_t idx, const char *key, size_t klen,
                                 const char *v, size_t vlen),
                       void *ctx)
{
    lsm_iter *it = fs_iter_new(fs, fill_cache);
    if (it == NULL)
        return ENOMEM;
    schema_key k;
    key_chunk(&k, ino, first);
    int err = 0;
    for (lsm_iter_seek(it, k.b, k.len); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen, vlen;
        const char *key = lsm_iter_key(it, &klen);
        uint64_t kino, idx;
        if (!key_parse_chunk(key, klen, &kino, &idx) || kino != ino || idx > last)
            break;
        const char *v = lsm_iter_value(it, &vlen);
        if ((err = fn(ctx, idx, key, klen, v, vlen)) != 0)
            break;
    }
    return fs_iter_end(fs, it, err == SCAN_STOP ? 0 : err, what);
}

/* A READ's buffer, written front to back by the chunks in index order, a
 * gap before a chunk or past a short chunk's bytes zeroed as it goes (a
 * hole reads as zeros): the buffer needs no clearing first. */
typedef struct read_window {
    uint64_t off, len, chunk_size;
    uint64_t filled; /* out[0, filled) written */
    char *out;
} read_window;

/* Chunk idx's stored bytes v[0, vlen) into the window, and zeros over the
 * rest of its span and any gap before it. Chunks come in ascending order. */
static void window_put(read_window *w, uint64_t idx, const char *v, size_t vlen)
{
    uint64_t base = idx * w->chunk_size, wend = w->off + w->len;
    uint64_t lo = max_u64(w->off, base), hi = min_u64(wend, base + w->chunk_size);
    if (lo >= hi)
        return;
    assert(lo - w->off >= w->filled);
    memset(w->out + w->filled, 0, lo - w->off - w->filled);
    copy_overlap(w->out, w->off, w->len, base, v, vlen);
    uint64_t data_end = max_u64(lo, min_u64(hi, base + vlen));
    memset(w->out + (data_end - w->off), 0, hi - data_end);
    w->filled = hi - w->off;
}

/* Zeros the window past the last chunk. */
static void window_finish(read_window *w)
{
    memset(w->out + w->filled, 0, w->len - w->filled);
    w->filled = w->len;
}

static int read_one(void *ctx, uint64_t idx, const char *key, size_t klen, const char *v,
                    size_t vlen)
{
    (void)key;
    (void)klen;
    read_window *w = ctx;
    if (vlen > w->chunk_size)
        return EIO;
    window_put(w, idx, v, vlen);
    return 0;
}

/* Reads of up to this many chunks get them one by one: a point read costs
 * less than opening a store iterator. (The inode's lock, held for reading,
 * keeps the file's chunks from changing in between.) */
#define READ_GETS_MAX 4

/* The chunks touching [off, off+len) into out: point reads for a few, else
 * one consistent scan, which leaves the block cache alone (a big file read
 * through would evict what small files and metadata reuse).
 * REQUIRES: n->lock held. */
static int read_chunks(lsmfs *fs, inode *n, uint64_t off, uint64_t len, char *out)
{
    assert(inode_held(n));
    uint64_t cs = fs->sb.chunk_size;
    uint64_t first = off / cs, last = (off + len - 1) / cs;
    read_window w = {.off = off, .len = len, .chunk_size = cs, .out = out};
    int err = 0;
    if (last - first < READ_GETS_MAX) {
        for (uint64_t idx = first; idx <= last && err == 0; idx++) {
            char *v;
            size_t vlen;
            err = chunk_get(fs, n->ino, idx, &v, &vlen);
            if (err == 0)
                err = read_one(&w, idx, NULL, 0, v, vlen);
            free(v);
        }
    } else {
        err = scan_chunks(fs, n->ino, first, last, false, "read", read_one, &w);
    }
    if (err == 0)
        window_finish(&w);
    return err;
}

int data_read(lsmfs *fs, inode *n, uint64_t off, size_t size, char **out, size_t *outlen)
{
    assert(inode_held(n));
    *out = NULL;
    *outlen = 0;
    const inode_rec *r = &n->rec;
    if (off >= r->size || size == 0)
        return 0;
    uint64_t len = min_u64(size, r->size - off);
    char *buf = lsm_malloc(len);
    if (buf == NULL)
        return ENOMEM;
    if (is_inline(r))
        memset(buf, 0, len);
    int err = is_inline(r) ? read_inline(fs, n, off, len, buf) : read_chunks(fs, n, off, len, buf);
    if (err != 0) {
        free(buf);
        return err;
    }
    *out = buf;
    *outlen = len;
    return 0;
}

/* Takes the inline payload the operation builds on: the one an earlier step
 * of it decided (pl->replace; ownership moves to the caller), else the
 * stored one. *p is malloc'd, NULL when *plen is 0. */
static int take_payload(lsmfs *fs, inode *n, payload *pl, char **p, size_t *plen)
{
    *p = NULL;
    *plen = 0;
    if (pl->replace) {
        *p = pl->data;
        *plen = pl->len;
        pl->data = NULL;
        return 0;
    }
    return inode_payload(fs, n, p, plen);
}

/* Would a write of [off, end) to a file of `fsize` bytes overwrite every
 * stored byte of the unit [base, base + span) (a chunk, or the inline
 * payload), so that the unit's old content need not be read? No stored byte
 * lies at or past the file size, so a new file, an append at a unit's
 * start, or a whole rewrite needs no read. */
static bool nothing_to_merge(uint64_t fsize, uint64_t base, uint64_t span, uint64_t off,
                             uint64_t end)
{
    uint64_t stored_end = min_u64(base + span, fsize);
    return stored_end <= base || (off <= base && end >= stored_end);
}

/* take_payload, unless the write [off, end) replaces all of the stored
 * payload: then none is read (an empty one is taken). */
static int payload_for_write(lsmfs *fs, inode *n, const inode_rec *r, payload *pl, uint64_t off,
                             uint64_t end, char **p, size_t *plen)
{
    if (!pl->replace && nothing_to_merge(r->size, 0, UINT64_MAX, off, end)) {
        *p = NULL;
        *plen = 0;
        return 0;
    }
    return take_payload(fs, n, pl, p, plen);
}

/* Writes into an inline payload that stays within the inline limit. */
static int write_inline(lsmfs *fs, inode *n, const inode_rec *r, payload *pl, const char *buf,
                        size_t size, uint64_t off)
{
    char *p;
    size_t plen;
    int err = payload_for_write(fs, n, r, pl, off, off + size, &p, &plen);
    if (err != 0)
        return err;
    size_t newlen = (size_t)max_u64(plen, off + size);
    char *np = lsm_realloc(p, newlen);
    if (np == NULL) {
        free(p);
        return ENOMEM;
    }
    if (off > plen)
        memset(np + plen, 0, off - plen);
    memcpy(np + off, buf, size);
    payload_free(pl);
    *pl = (payload){.replace = true, .data = np, .len = newlen};
    return 0;
}

/* Moves an inline file's payload to chunk 0 (within this batch); returns
 * the payload in *base so that the write [off, end) in the same batch
 * builds on it (none is read when that write replaces all of it). */
static int uninline(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, uint64_t off,
                    uint64_t end, char **base, size_t *blen)
{
    char *p;
    size_t plen;
    int err = payload_for_write(fs, n, r, pl, off, end, &p, &plen);
    if (err != 0)
        return err;
    err = plen > 0 ? chunk_put(b, n->ino, 0, p, plen) : 0;
    if (err != 0) {
        free(p);
        return err;
    }
    payload_free(pl);
    pl->replace = true; /* the record keeps no payload */
    r->flags &= ~INODE_F_INLINE;
    r->chunks = plen > 0; /* an inline file has no chunks: the count starts */
    *base = p;
    *blen = plen;
    return 0;
}

typedef struct chunk_list {
    uint64_t *idx;
    size_t count, cap;
} chunk_list;

static int list_one(void *ctx, uint64_t idx, const char *key, size_t klen, const char *v,
                    size_t vlen)
{
    (void)key;
    (void)klen;
    (void)v;
    (void)vlen;
    chunk_list *l = ctx;
    uint64_t *nv = lsm_grow(l->idx, &l->cap, l->count + 1, sizeof *nv, 16);
    if (nv == NULL)
        return ENOMEM;
    l->idx = nv;
    l->idx[l->count++] = idx;
    return 0;
}

/* The indexes of stored chunks of ino in [first, last], in order. */
static int list_chunks(lsmfs *fs, uint64_t ino, uint64_t first, uint64_t last, uint64_t **out,
                       size_t *count)
{
    chunk_list l = {0};
    int err = scan_chunks(fs, ino, first, last, true, "chunk scan", list_one, &l);
    if (err != 0) {
        free(l.idx);
        l = (chunk_list){0};
    }
    *out = l.idx;
    *count = l.count;
    return err;
}

/* One write into a chunked file. */
typedef struct chunk_write {
    const char *buf;
    uint64_t off, end;
    uint64_t old_size;  /* the file size before the write */
    const char *base0;  /* chunk 0's content when it is not in the store yet */
    size_t base0len;    /* (just un-inlined: have_base0) */
    bool have_base0;
    inode_rec *r;       /* the record whose chunk count the write keeps */
    bool dense;         /* every chunk below old_size is stored */
    /* The chunks stored in the write's span below old_size, listed by one
     * scan (listed), for a write of many chunks into a sparse file. */
    bool listed;
    chunk_list stored;
} chunk_write;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Was chunk idx stored before the write? Known without a read below a
 * dense file's size and at or past its size (no stored byte lies there);
 * else one point read, for writes into sparse files only. */
static int chunk_was_stored(lsmfs *fs, uint64_t ino, uint64_t idx, const chunk_write *w,
                            bool *stored)
{
    uint64_t cs = fs->sb.chunk_size;
    *stored = true;
    if (w->r->chunks == INODE_CHUNKS_UNKNOWN)
        return 0;
    if (idx == 0 && w->have_base0) {
        *stored = w->base0len > 0; /* un-inlined into chunk 0 */
        return 0;
    }
    *stored = idx * cs < w->old_size;
    if (!*stored || w->dense)
        return 0;
    if (w->listed) {
        *stored = w->stored.count > 0 &&
                  bsearch(&idx, w->stored.idx, w->stored.count, sizeof idx, cmp_u64) != NULL;
        return 0;
    }
    char *v;
    size_t vlen;
    int err = chunk_get(fs, ino, idx, &v, &vlen);
    *stored = err == 0 && v != NULL;
    free(v);
    return err;
}

/* The content of chunk idx the write merges with: base0, nothing when the
 * write covers every stored byte of the chunk, else the stored chunk (then
 * *read says whether it was stored). */
static int chunk_old(lsmfs *fs, uint64_t ino, uint64_t idx, const chunk_write *w, char **v,
                     size_t *vlen, bool *read)
{
    uint64_t cs = fs->sb.chunk_size;
    *v = NULL;
    *vlen = 0;
    *read = false;
    if (idx == 0 && w->have_base0) {
        if (w->base0len > 0 && (*v = lsm_malloc(w->base0len)) == NULL)
            return ENOMEM;
        if (w->base0len > 0)
            memcpy(*v, w->base0, w->base0len);
        *vlen = w->base0len;
        return 0;
    }
    if (nothing_to_merge(w->old_size, idx * cs, cs, w->off, w->end))
        return 0;
    *read = true;
    return chunk_get(fs, ino, idx, v, vlen);
}

/* Writes the part of the write falling in chunk idx. */
static int write_chunk(lsmfs *fs, lsm_batch *b, uint64_t ino, uint64_t idx, const chunk_write *w)
{
    uint64_t cs = fs->sb.chunk_size, cstart = idx * cs;
    uint64_t lo = max_u64(w->off, cstart) - cstart, hi = min_u64(w->end, cstart + cs) - cstart;
    const char *src = w->buf + (cstart + lo - w->off);
    bool stored;
    if (lo == 0 && hi == cs) {
        int err = chunk_was_stored(fs, ino, idx, w, &stored);
        if (err == 0)
            err = chunk_put(b, ino, idx, src, cs);
        if (err == 0 && !stored)
            chunks_add(w->r, 1);
        return err;
    }
    char *v;
    size_t vlen;
    bool read;
    int err = chunk_old(fs, ino, idx, w, &v, &vlen, &read);
    if (err == 0 && !read)
        err = chunk_was_stored(fs, ino, idx, w, &stored);
    else
        stored = v != NULL;
    if (err != 0) {
        free(v);
        return err;
    }
    if (!stored)
        chunks_add(w->r, 1);
    size_t newlen = (size_t)max_u64(vlen, hi);
    char *nv = lsm_realloc(v, newlen);
    if (nv == NULL) {
        free(v);
        return ENOMEM;
    }
    if (lo > vlen)
        memset(nv + vlen, 0, lo - vlen);
    memcpy(nv + lo, src, hi - lo);
    err = chunk_put(b, ino, idx, nv, newlen);
    free(nv);
    return err;
}

/* A write of more than READ_GETS_MAX whole chunks below the size of a
 * sparse file lists the stored ones with one scan rather than a point read
 * each (a preallocated file written in 1 MiB blocks: 256 reads a write). */
static int list_stored(lsmfs *fs, uint64_t ino, chunk_write *w)
{
    uint64_t cs = fs->sb.chunk_size;
    uint64_t first = w->off / cs, last = (min_u64(w->end, w->old_size) - 1) / cs;
    if (w->dense || w->have_base0 || w->r->chunks == INODE_CHUNKS_UNKNOWN ||
        w->off >= w->old_size || last - first < READ_GETS_MAX)
        return 0;
    int err = w->r->chunks == 0 ? 0 : list_chunks(fs, ino, first, last, &w->stored.idx,
                                                  &w->stored.count);
    w->listed = err == 0;
    return err;
}

/* A chunk's record in a batch: its value plus at most this much (type,
 * key, two varints). */
#define CHUNK_RECORD_EXTRA 32

/* Room in b for chunks first..last at once: a big write's batch is then
 * allocated once instead of doubled (and copied) as it fills. Returns 0 or
 * ENOMEM. */
static int reserve_chunks(lsm_batch *b, uint64_t first, uint64_t last, uint64_t cs)
{
    uint64_t n = last - first + 1;
    if (n > SIZE_MAX / (cs + CHUNK_RECORD_EXTRA))
        return ENOMEM;
    return lsm_batch_reserve(b, (size_t)(n * (cs + CHUNK_RECORD_EXTRA))) ? 0 : ENOMEM;
}

uint64_t data_max_size(const lsmfs *fs)
{
    return fs->cfg.writeback ? DATA_MAX_SIZE_KERNEL : DATA_MAX_SIZE;
}

int data_write(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, const char *buf,
               size_t size, uint64_t off)
{
    assert(inode_wrheld(n));
    if (size == 0)
        return 0;
    const uint64_t max = data_max_size(fs);
    if (off >= max || size > max - off)
        return EFBIG;
    uint64_t end = off + size;
    if (is_inline(r) && end <= fs->sb.inline_limit) {
        int err = write_inline(fs, n, r, pl, buf, size, off);
        if (err == 0)
            r->size = max_u64(r->size, end);
        return err;
    }
    chunk_write w = {.buf = buf, .off = off, .end = end, .old_size = r->size, .r = r};
    char *base0 = NULL;
    if (is_inline(r)) {
        int err = uninline(fs, b, n, r, pl, off, end, &base0, &w.base0len);
        if (err != 0)
            return err;
        w.base0 = base0;
        w.have_base0 = true;
    }
    uint64_t cs = fs->sb.chunk_size;
    w.dense = !w.have_base0 && r->chunks >= (w.old_size + cs - 1) / cs;
    int err = reserve_chunks(b, off / cs, (end - 1) / cs, cs);
    if (err == 0)
        err = list_stored(fs, n->ino, &w);
    for (uint64_t idx = off / cs; idx <= (end - 1) / cs && err == 0; idx++)
        err = write_chunk(fs, b, n->ino, idx, &w);
    free(w.stored.idx);
    free(base0);
    if (err == 0)
        r->size = max_u64(r->size, end);
    return err;
}

typedef struct chunk_deletes {
    lsm_batch *b;
    uint64_t n, max;
    uint64_t next; /* the first index not deleted */
    bool more;
} chunk_deletes;

static int delete_one(void *ctx, uint64_t idx, const char *key, size_t klen, const char *v,
                      size_t vlen)
{
    (void)v;
    (void)vlen;
    chunk_deletes *d = ctx;
    if (d->n == d->max) {
        d->more = true;
        d->next = idx;
        return SCAN_STOP;
    }
    if (!lsm_batch_delete(d->b, key, klen))
        return ENOMEM;
    d->n++;
    d->next = idx + 1;
    return 0;
}

int data_delete_chunks(lsmfs *fs, lsm_batch *b, uint64_t ino, uint64_t first, uint64_t max,
                       bool *more, uint64_t *deleted, uint64_t *next)
{
    chunk_deletes d = {.b = b, .max = max, .next = first};
    int err = scan_chunks(fs, ino, first, UINT64_MAX, false, "chunk scan", delete_one, &d);
    *more = d.more;
    *deleted = d.n;
    if (next != NULL)
        *next = d.next;
    return err;
}

/* The index of the last stored chunk of ino with index >= first, if any
 * (*found). */
static int last_chunk(lsmfs *fs, uint64_t ino, uint64_t first, bool *found, uint64_t *idx)
{
    *found = false;
    lsm_iter *it = fs_iter_new(fs, false);
    if (it == NULL)
        return ENOMEM;
    schema_key start, end;
    key_range(&start, &end, K_CHUNK, ino);
    fs_iter_seek_before(it, end.b, end.len);
    if (lsm_iter_valid(it)) {
        size_t klen;
        const char *key = lsm_iter_key(it, &klen);
        uint64_t kino;
        *found = key_parse_chunk(key, klen, &kino, idx) && kino == ino && *idx >= first;
    }
    return fs_iter_end(fs, it, 0, "chunk scan");
}

/* Deletes the chunks of n from index `first` on, but the last
 * DATA_DELETE_BATCH indexes' worth, in batches of its own from the end
 * (see data_truncate); r's chunk count follows. REQUIRES: n->lock held for
 * writing, n chunked. */
static int truncate_in_batches(lsmfs *fs, inode *n, inode_rec *r, uint64_t first)
{
    assert(inode_wrheld(n));
    uint64_t cs = fs->sb.chunk_size, last;
    bool found;
    int err = last_chunk(fs, n->ino, first, &found, &last);
    lsm_batch *b = NULL;
    while (err == 0 && found && last - first >= DATA_DELETE_BATCH) {
        uint64_t lo = last + 1 - DATA_DELETE_BATCH;
        if (b == NULL && (b = lsm_batch_new()) == NULL)
            return ENOMEM;
        lsm_batch_clear(b);
        chunk_deletes d = {.b = b, .max = UINT64_MAX};
        err = scan_chunks(fs, n->ino, lo, last, false, "chunk scan", delete_one, &d);
        inode_rec cut = n->rec;
        cut.size = lo * cs;
        chunks_add(&cut, -(int64_t)d.n);
        if (err == 0)
            err = inode_batch_update(fs, b, n, &cut);
        if (err == 0)
            err = fs_commit(fs, b, &n, 1);
        if (err == 0) {
            n->rec = cut;
            r->chunks = cut.chunks;
            err = last_chunk(fs, n->ino, first, &found, &last);
        }
    }
    lsm_batch_free(b);
    return err;
}

static int truncate_inline(lsmfs *fs, inode *n, inode_rec *r, payload *pl, uint64_t newsize)
{
    if (newsize < r->size) {
        char *p;
        size_t plen;
        int err = take_payload(fs, n, pl, &p, &plen);
        if (err != 0)
            return err;
        if (plen > newsize)
            plen = (size_t)newsize;
        if (plen == 0) {
            free(p);
            p = NULL;
        }
        payload_free(pl);
        *pl = (payload){.replace = true, .data = p, .len = plen};
    }
    r->size = newsize;
    return 0;
}

/* Trims the chunk that now holds the end of the file. */
static int trim_boundary(lsmfs *fs, lsm_batch *b, uint64_t ino, uint64_t newsize)
{
    uint64_t cs = fs->sb.chunk_size;
    uint64_t idx = newsize / cs, keep = newsize % cs;
    if (keep == 0)
        return 0;
    char *v;
    size_t vlen;
    int err = chunk_get(fs, ino, idx, &v, &vlen);
    if (err == 0 && vlen > keep)
        err = chunk_put(b, ino, idx, v, keep);
    free(v);
    return err;
}

int data_truncate(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, uint64_t newsize)
{
    assert(inode_wrheld(n));
    if (newsize > data_max_size(fs))
        return EFBIG;
    if (is_inline(r))
        return truncate_inline(fs, n, r, pl, newsize);
    if (newsize < r->size) {
        uint64_t cs = fs->sb.chunk_size;
        bool more;
        uint64_t deleted, first = (newsize + cs - 1) / cs;
        int err = truncate_in_batches(fs, n, r, first);
        if (err == 0)
            err = data_delete_chunks(fs, b, n->ino, first, UINT64_MAX, &more, &deleted, NULL);
        if (err == 0)
            err = trim_boundary(fs, b, n->ino, newsize);
        if (err != 0)
            return err;
        chunks_add(r, -(int64_t)deleted);
        if (newsize == 0)
            r->chunks = 0; /* known from here on, for a record of version 1 too */
        if (newsize == 0 && fs->sb.inline_limit > 0) {
            r->flags |= INODE_F_INLINE; /* an emptied file starts over inline */
            payload_free(pl);
            pl->replace = true;
        }
    }
    r->size = newsize;
    return 0;
}

static int zero_inline(lsmfs *fs, inode *n, payload *pl, uint64_t off, uint64_t end)
{
    char *p;
    size_t plen;
    int err = take_payload(fs, n, pl, &p, &plen);
    if (err != 0)
        return err;
    if (off < plen)
        memset(p + off, 0, (size_t)(min_u64(end, plen) - off));
    payload_free(pl);
    *pl = (payload){.replace = true, .data = p, .len = plen};
    return 0;
}

/* Zeroes part of one stored chunk, or deletes it when wholly covered. */
static int zero_chunk(lsmfs *fs, lsm_batch *b, inode_rec *r, uint64_t ino, uint64_t idx,
                      uint64_t off, uint64_t end)
{
    uint64_t cs = fs->sb.chunk_size, cstart = idx * cs;
    uint64_t lo = max_u64(off, cstart) - cstart, hi = min_u64(end, cstart + cs) - cstart;
    char *v;
    size_t vlen;
    int err = chunk_get(fs, ino, idx, &v, &vlen);
    if (err != 0 || v == NULL)
        return err;
    if (lo == 0 && hi >= vlen) {
        err = chunk_del(b, ino, idx);
        if (err == 0)
            chunks_add(r, -1);
    } else if (lo < vlen) {
        memset(v + lo, 0, (size_t)(min_u64(hi, vlen) - lo));
        err = chunk_put(b, ino, idx, v, vlen);
    }
    free(v);
    return err;
}

int data_zero(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, uint64_t off,
              uint64_t len)
{
    assert(inode_wrheld(n));
    uint64_t end = len > r->size - min_u64(off, r->size) ? r->size : off + len;
    if (off >= end)
        return 0;
    if (is_inline(r))
        return zero_inline(fs, n, pl, off, end);
    uint64_t cs = fs->sb.chunk_size, *idx;
    size_t count;
    int err = list_chunks(fs, n->ino, off / cs, (end - 1) / cs, &idx, &count);
    for (size_t i = 0; i < count && err == 0; i++)
        err = zero_chunk(fs, b, r, n->ino, idx[i], off, end);
    free(idx);
    return err;
}

int data_seek(lsmfs *fs, inode *n, uint64_t off, int whence, uint64_t *result)
{
    assert(inode_held(n));
    const inode_rec *r = &n->rec;
    if (off >= r->size)
        return ENXIO;
    if (is_inline(r)) {
        *result = whence == SEEK_DATA ? off : r->size;
        return 0;
    }
    uint64_t cs = fs->sb.chunk_size, *idx;
    size_t count;
    uint64_t first = off / cs;
    int err = list_chunks(fs, n->ino, first, (r->size - 1) / cs, &idx, &count);
    if (err != 0)
        return err;
    if (whence == SEEK_DATA) {
        if (count == 0)
            err = ENXIO;
        else
            *result = max_u64(off, idx[0] * cs);
    } else {
        uint64_t expect = first;
        for (size_t i = 0; i < count && idx[i] == expect; i++)
            expect++;
        *result = min_u64(max_u64(off, expect * cs), r->size);
    }
    free(idx);
    return err;
}
