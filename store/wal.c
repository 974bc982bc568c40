/*
 * wal.c — writing and reading the write-ahead log; the format is in wal.h.
 *
 * The reader's job beyond parsing is to tell two kinds of damage apart:
 *  - a torn tail: the last writes before a crash, never synced, reached the
 *    disk only in part. It is at the very end of the newest log and losing it
 *    loses nothing that was acknowledged as durable, so it is dropped quietly
 *    (and reported in the stats);
 *  - corruption in the middle: bad bytes with good records after them. Data
 *    that was written (and maybe synced) is gone, which paranoid mode reports.
 * The reader cannot know which one a bad fragment is when it meets it, so it
 * keeps the damage pending until either a good whole record turns up (middle)
 * or the file ends (tail).
 */
#include "wal.h"
#include "lsm_malloc.h"

#include "coding.h"
#include "crc32c.h"
#include "status.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define WAL_MAX_TYPE WAL_LAST
/* A fragment up to this size goes out with its header in one append (one
 * system call on a log written with pwrite, the mail spool's case); a
 * larger one is not worth the copy. */
#define WAL_JOIN_MAX 8192

/* ------------------------------------------------------------- writer */

struct wal_writer {
    lsm_wfile *f;
    uint64_t offset;  /* bytes of log written (appended) so far */
    size_t block_off; /* offset inside the current block */
    /* After a failed append the file holds an unknown part of a record;
     * anything written behind it would be unreadable, so later records fail. */
    bool broken;
    uint32_t type_crc[WAL_MAX_TYPE + 1]; /* crc32c of each type byte alone */
    char joined[WAL_HEADER_SIZE + WAL_JOIN_MAX]; /* header + small payload */
};

wal_writer *wal_writer_new(lsm_wfile *f, uint64_t offset)
{
    wal_writer *w = lsm_malloc(sizeof(*w));
    if (w == NULL) {
        lsm_status_free(f->ops->close(f));
        return NULL;
    }
    w->f = f;
    w->offset = offset;
    w->block_off = (size_t)(offset % WAL_BLOCK_SIZE);
    w->broken = false;
    for (int t = 0; t <= WAL_MAX_TYPE; t++) {
        char c = (char)t;
        w->type_crc[t] = crc32c(&c, 1);
    }
    return w;
}

static lsm_status *emit_fragment(wal_writer *w, int type, const char *p, size_t n)
{
    assert(n <= 0xffff && w->block_off + WAL_HEADER_SIZE + n <= WAL_BLOCK_SIZE);
    char h[WAL_HEADER_SIZE];
    uint32_t crc = crc32c_extend(w->type_crc[type], p, n);
    encode_fixed32(h, crc32c_mask(crc));
    h[4] = (char)(n & 0xff);
    h[5] = (char)(n >> 8);
    h[6] = (char)type;
    lsm_status *s;
    if (n <= WAL_JOIN_MAX) {
        memcpy(w->joined, h, WAL_HEADER_SIZE);
        if (n > 0)
            memcpy(w->joined + WAL_HEADER_SIZE, p, n);
        s = w->f->ops->append(w->f, w->joined, WAL_HEADER_SIZE + n);
    } else {
        s = w->f->ops->append(w->f, h, WAL_HEADER_SIZE);
        if (s == NULL)
            s = w->f->ops->append(w->f, p, n);
    }
    if (s != NULL) {
        w->broken = true;
        return s;
    }
    w->block_off += WAL_HEADER_SIZE + n;
    w->offset += WAL_HEADER_SIZE + n;
    return NULL;
}

/* Zero-fills a block tail too short for a header and moves to the next. */
static lsm_status *finish_block(wal_writer *w)
{
    static const char zeros[WAL_HEADER_SIZE];
    size_t left = WAL_BLOCK_SIZE - w->block_off;
    assert(left < WAL_HEADER_SIZE);
    if (left > 0) {
        lsm_status *s = w->f->ops->append(w->f, zeros, left);
        if (s != NULL) {
            w->broken = true;
            return s;
        }
    }
    w->offset += left;
    w->block_off = 0;
    return NULL;
}

lsm_status *wal_add_record(wal_writer *w, const void *data, size_t n)
{
    if (w->broken)
        return status_new(LSM_IO_ERROR, "wal: an earlier append to this log failed");
    const char *p = data;
    bool first = true;
    do {
        if (WAL_BLOCK_SIZE - w->block_off < WAL_HEADER_SIZE) {
            lsm_status *s = finish_block(w);
            if (s != NULL)
                return s;
        }
        size_t room = WAL_BLOCK_SIZE - w->block_off - WAL_HEADER_SIZE;
        size_t frag = n < room ? n : room;
        bool last = frag == n;
        int type = first ? (last ? WAL_FULL : WAL_FIRST) : (last ? WAL_LAST : WAL_MIDDLE);
        lsm_status *s = emit_fragment(w, type, p, frag);
        if (s != NULL)
            return s;
        p += frag;
        n -= frag;
        first = false;
    } while (n > 0);
    return NULL;
}

lsm_status *wal_flush(wal_writer *w)
{
    return w->f->ops->flush(w->f);
}

lsm_status *wal_sync(wal_writer *w)
{
    return w->f->ops->sync(w->f);
}

void wal_hold_for_sync(wal_writer *w, bool on)
{
    if (w->f->ops->hold_for_sync != NULL)
        w->f->ops->hold_for_sync(w->f, on);
}

uint64_t wal_offset(const wal_writer *w)
{
    return w->offset;
}

lsm_status *wal_writer_close(wal_writer *w)
{
    if (w == NULL)
        return NULL;
    lsm_status *s = w->f->ops->close(w->f);
    free(w);
    return s;
}

/* ------------------------------------------------------------- reader */

/* Damage met but not yet classified as tail or middle. */
struct pending {
    uint64_t bad_bytes;  /* bytes of bad or incomplete records */
    uint64_t zero_bytes; /* zero-filled space (padding is harmless at the end) */
    uint64_t offset;     /* file offset of the earliest damaged byte */
    const char *why;     /* what the earliest damage was */
    bool zeros_first;    /* the damage began with a zero hole (see drop_block_rest) */
};

struct wal_reader {
    lsm_sfile *f;
    char *name;
    bool paranoid;
    bool hole_ends_log;   /* see wal_reader_end_at_hole */
    char *block;          /* the current block, WAL_BLOCK_SIZE bytes */
    size_t block_len;     /* valid bytes in block */
    size_t pos;           /* parse position in block */
    uint64_t block_start; /* file offset of block[0] */
    bool last_block;      /* block is the file's last (read came up short) */
    bool at_eof;          /* end reported; later calls report it again */
    lsm_status *failed;   /* a read error or (paranoid) corruption; sticky */
    /* A record being reassembled from FIRST/MIDDLE fragments. */
    buf rec;
    bool in_record;
    uint64_t rec_start; /* file offset of its FIRST fragment */
    uint64_t rec_bytes; /* physical bytes (headers + payload) read for it */
    struct pending pend;
    wal_reader_stats st;
};

wal_reader *wal_reader_new(lsm_sfile *f, const char *name, bool paranoid)
{
    wal_reader *r = lsm_calloc(1, sizeof(*r));
    char *nm = lsm_strdup(name != NULL ? name : "(log)");
    char *blk = lsm_malloc(WAL_BLOCK_SIZE);
    if (r == NULL || nm == NULL || blk == NULL) {
        free(r);
        free(nm);
        free(blk);
        f->ops->close(f);
        return NULL;
    }
    r->f = f;
    r->name = nm;
    r->paranoid = paranoid;
    r->block = blk;
    buf_init(&r->rec);
    return r;
}

void wal_reader_free(wal_reader *r)
{
    if (r == NULL)
        return;
    r->f->ops->close(r->f);
    lsm_status_free(r->failed);
    buf_free(&r->rec);
    free(r->block);
    free(r->name);
    free(r);
}

const wal_reader_stats *wal_reader_stats_get(const wal_reader *r)
{
    return &r->st;
}

static bool pend_empty(const struct pending *p)
{
    return p->bad_bytes == 0 && p->zero_bytes == 0;
}

static void pend_add(struct pending *p, uint64_t off, uint64_t bytes, bool zeros, const char *why)
{
    if (bytes == 0)
        return;
    if (pend_empty(p) || off < p->offset) {
        p->offset = off;
        p->why = why;
    }
    if (zeros)
        p->zero_bytes += bytes;
    else
        p->bad_bytes += bytes;
}

/* Abandons a record being reassembled: its fragments are damage too. */
static void drop_partial(wal_reader *r, const char *why)
{
    if (!r->in_record)
        return;
    pend_add(&r->pend, r->rec_start, r->rec_bytes, false, why);
    r->in_record = false;
    r->rec.len = 0;
}

static bool all_zero(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* Marks the rest of the current block as damage and skips it. Damage that
 * starts with zeros (a record it cuts short is part of it) is a hole. */
static void drop_block_rest(wal_reader *r, bool zeros, const char *why)
{
    bool first = pend_empty(&r->pend);
    drop_partial(r, "record cut short by damage");
    pend_add(&r->pend, r->block_start + r->pos, r->block_len - r->pos, zeros, why);
    if (first && zeros)
        r->pend.zeros_first = true;
    r->pos = r->block_len;
}

/* Whether the fragment at [p, p+n) of the current block runs into a page
 * of zeros (4 KiB, file-aligned, whole or up to the block's end): a page
 * never written back. A bit flip makes no such page. Blocks start at
 * multiples of 32 KiB, so block offsets align as file offsets do. */
static bool runs_into_zero_page(const wal_reader *r, size_t p, size_t n)
{
    const size_t page = 4096;
    for (size_t at = p / page * page + page; at < p + n; at += page) {
        size_t end = at + page < r->block_len ? at + page : r->block_len;
        if (all_zero(r->block + at, end - at))
            return true;
    }
    return false;
}

/* Makes the next block current. *eof when there is none. */
static lsm_status *next_block(wal_reader *r, bool *eof)
{
    *eof = false;
    if (r->last_block) {
        *eof = true;
        return NULL;
    }
    r->block_start += r->block_len;
    r->block_len = 0;
    r->pos = 0;
    size_t got = 0;
    lsm_status *s = r->f->ops->read(r->f, r->block, WAL_BLOCK_SIZE, &got);
    if (s != NULL)
        return status_wrap(s, "log %s", r->name);
    r->block_len = got;
    if (got < WAL_BLOCK_SIZE)
        r->last_block = true;
    *eof = got == 0;
    return NULL;
}


/* Whether the block bytes at h (left of them) start a fragment whose length
 * fits and whose checksum matches. */
static bool fragment_ok(const char *h, size_t left)
{
    if (left < WAL_HEADER_SIZE)
        return false;
    size_t len = (unsigned char)h[4] | (size_t)(unsigned char)h[5] << 8;
    if (WAL_HEADER_SIZE + len > left)
        return false;
    uint32_t want = crc32c_unmask(decode_fixed32(h));
    return want == crc32c_extend(crc32c(h + 6, 1), h + WAL_HEADER_SIZE, len);
}

/* The first offset >= p of the current block where a good fragment starts
 * (a match by chance is a 1 in 2^32 event); past the block's room for a
 * header if none does. */
static size_t next_good_fragment(const wal_reader *r, size_t p)
{
    while (p + WAL_HEADER_SIZE <= r->block_len) {
        unsigned char type = (unsigned char)r->block[p + 6];
        if (type >= WAL_FULL && type <= WAL_LAST && fragment_ok(r->block + p, r->block_len - p))
            break;
        p++;
    }
    return p;
}

/* A bad fragment at r->pos: its length cannot be trusted, so the next good
 * fragment is looked for at every later byte of the block. The bytes
 * skipped are damage; good records found after them make it damage in the
 * middle, not a torn tail — the records after a flipped bit in the log's
 * last block are not lost quietly. */
static void resync(wal_reader *r, const char *why)
{
    size_t p = next_good_fragment(r, r->pos + 1);
    if (p + WAL_HEADER_SIZE > r->block_len) {
        drop_block_rest(r, false, why);
        return;
    }
    drop_partial(r, "record cut short by damage");
    pend_add(&r->pend, r->block_start + r->pos, p - r->pos, false, why);
    r->pos = p;
}

/* Zeros at r->pos: a page never written back. What follows them in the
 * block up to the next good fragment is pending zeros (the hole); a good
 * fragment after it, here or in a later block, ends the log at the hole
 * (settle_hole) — also in the log's last block, where dropping the block's
 * rest would read records after the hole as a torn tail. */
static void skip_zero_hole(wal_reader *r)
{
    size_t p = next_good_fragment(r, r->pos + 1);
    if (p + WAL_HEADER_SIZE > r->block_len) {
        drop_block_rest(r, true, "zero-filled hole");
        return;
    }
    bool first = pend_empty(&r->pend);
    drop_partial(r, "record cut short by damage");
    pend_add(&r->pend, r->block_start + r->pos, p - r->pos, true, "zero-filled hole");
    if (first)
        r->pend.zeros_first = true;
    r->pos = p;
}

/* One fragment with a good checksum. */
struct fragment {
    int type;
    const char *data;
    size_t len;
    uint64_t offset; /* of its header */
};

/* Finds the next well-formed fragment, recording anything bad on the way as
 * pending damage. *eof at the end of the file. */
static lsm_status *next_fragment(wal_reader *r, struct fragment *fr, bool *eof)
{
    for (;;) {
        size_t left = r->block_len - r->pos;
        if (left < WAL_HEADER_SIZE) {
            /* A full block's tail is the writer's zero padding. In the last
             * block it is a header cut short (or zeros, if the file was
             * extended without being written). */
            if (r->last_block && left > 0)
                drop_block_rest(r, all_zero(r->block + r->pos, left), "truncated header");
            lsm_status *s = next_block(r, eof);
            if (s != NULL || *eof)
                return s;
            continue;
        }
        const char *h = r->block + r->pos;
        if (all_zero(h, WAL_HEADER_SIZE)) {
            skip_zero_hole(r);
            continue;
        }
        size_t len = (unsigned char)h[4] | (size_t)(unsigned char)h[5] << 8;
        int type = (unsigned char)h[6];
        if (WAL_HEADER_SIZE + len > left) {
            resync(r, r->last_block ? "fragment runs past the end of the file"
                                    : "fragment runs past the end of its block");
            continue;
        }
        if (!fragment_ok(h, left)) {
            bool hole = runs_into_zero_page(r, r->pos, WAL_HEADER_SIZE + len);
            if (hole)
                skip_zero_hole(r);
            else
                resync(r, "checksum mismatch");
            continue;
        }
        fr->type = type;
        fr->data = h + WAL_HEADER_SIZE;
        fr->len = len;
        fr->offset = r->block_start + r->pos;
        r->pos += WAL_HEADER_SIZE + len;
        return NULL;
    }
}

void wal_reader_end_at_hole(wal_reader *r)
{
    r->hole_ends_log = true;
}

/* A whole record was found after a zero hole: the log ends at the hole. */
static bool settle_hole(wal_reader *r)
{
    struct pending *p = &r->pend;
    if (!r->hole_ends_log || pend_empty(p) || !p->zeros_first)
        return false;
    drop_partial(r, "record without its last fragment");
    r->st.hole = true;
    r->st.hole_offset = p->offset;
    if (r->pend.bad_bytes > 0) {
        r->st.torn_tail = true;
        r->st.torn_tail_bytes += r->pend.bad_bytes;
    }
    memset(p, 0, sizeof(*p));
    return true;
}

/* A whole record was found: any pending damage lay in the middle. */
static lsm_status *settle_middle(wal_reader *r)
{
    struct pending *p = &r->pend;
    if (pend_empty(p))
        return NULL;
    uint64_t bytes = p->bad_bytes + p->zero_bytes;
    if (r->st.corruptions == 0) {
        r->st.damage_offset = p->offset;
        r->st.damage_why = p->why;
    }
    if (r->paranoid)
        return status_new(LSM_CORRUPTION, "log %s: corruption at byte %llu (%s; %llu bytes)",
                          r->name, (unsigned long long)p->offset, p->why,
                          (unsigned long long)bytes);
    r->st.dropped_bytes += bytes;
    r->st.corruptions++;
    memset(p, 0, sizeof(*p));
    return NULL;
}

/* The file ended: whatever is pending was the torn tail. */
static void settle_tail(wal_reader *r)
{
    drop_partial(r, "record without its last fragment");
    if (r->pend.bad_bytes > 0) {
        if (!r->st.torn_tail) {
            r->st.torn_tail_offset = r->pend.offset;
            r->st.torn_tail_why = r->pend.why;
        }
        r->st.torn_tail = true;
        r->st.torn_tail_bytes += r->pend.bad_bytes;
    }
    memset(&r->pend, 0, sizeof(r->pend));
}

/* Feeds one fragment to the reassembly. Returns true, with *rec and *n set, when
 * it completes a record. */
static bool assemble(wal_reader *r, const struct fragment *fr, const char **rec, size_t *n,
                     lsm_status **err)
{
    uint64_t phys = WAL_HEADER_SIZE + fr->len;
    *err = NULL;
    switch (fr->type) {
    case WAL_FULL:
        drop_partial(r, "record without its last fragment");
        *rec = fr->data;
        *n = fr->len;
        return true;
    case WAL_FIRST:
        drop_partial(r, "record without its last fragment");
        r->in_record = true;
        r->rec_start = fr->offset;
        r->rec_bytes = 0;
        r->rec.len = 0;
        /* fall through */
    case WAL_MIDDLE:
    case WAL_LAST:
        if (!r->in_record) {
            pend_add(&r->pend, fr->offset, phys, false, "fragment without its first");
            return false;
        }
        if (!buf_append(&r->rec, fr->data, fr->len)) {
            *err = status_new(LSM_NO_MEMORY, "log %s: out of memory for a record", r->name);
            return false;
        }
        r->rec_bytes += phys;
        if (fr->type != WAL_LAST)
            return false;
        r->in_record = false;
        *rec = r->rec.data != NULL ? r->rec.data : "";
        *n = r->rec.len;
        return true;
    default:
        drop_partial(r, "record cut short by damage");
        pend_add(&r->pend, fr->offset, phys, false, "unknown fragment type");
        return false;
    }
}

lsm_status *wal_read_record(wal_reader *r, const char **rec, size_t *n, bool *eof)
{
    *rec = NULL;
    *n = 0;
    *eof = false;
    if (r->failed != NULL)
        return status_copy(r->failed);
    if (r->at_eof) {
        *eof = true;
        return NULL;
    }
    for (;;) {
        struct fragment fr = {0, NULL, 0, 0};
        bool end = false;
        lsm_status *s = next_fragment(r, &fr, &end);
        if (s == NULL && end) {
            settle_tail(r);
            r->at_eof = *eof = true;
            return NULL;
        }
        if (s == NULL && assemble(r, &fr, rec, n, &s)) {
            if (settle_hole(r)) {
                *rec = NULL;
                *n = 0;
                r->at_eof = *eof = true;
                return NULL;
            }
            s = settle_middle(r);
            if (s == NULL) {
                r->st.records++;
                return NULL;
            }
        }
        if (s != NULL) {
            *rec = NULL;
            *n = 0;
            r->failed = status_copy(s);
            return s;
        }
    }
}
