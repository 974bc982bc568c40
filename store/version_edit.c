/* version_edit.c — encoding and decoding MANIFEST records; see version_edit.h. */
#include "version_edit.h"
#include "lsm_malloc.h"
#include "filename.h"
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum tag {
    TAG_FORMAT = 1,
    TAG_LOG_NUMBER = 2,
    TAG_NEXT_FILE = 3,
    TAG_LAST_SEQ = 4,
    TAG_COMPACT_POINTER = 5,
    TAG_DELETED_FILE = 6,
    TAG_NEW_FILE = 7,
    TAG_FILE_COUNTS = 8, /* number, keys, deletions of a file added earlier in the edit */
    TAG_LAST_KNOWN = TAG_FILE_COUNTS,
};

file_meta *file_meta_new(uint64_t number, uint64_t size, const char *smallest, size_t slen,
                         const char *largest, size_t llen)
{
    file_meta *f = lsm_calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->number = number;
    f->size = size;
    atomic_init(&f->allowed_seeks, file_allowed_seeks(size));
    if (!buf_append(&f->smallest, smallest, slen) || !buf_append(&f->largest, largest, llen)) {
        file_meta_unref(f);
        return NULL;
    }
    return f;
}

int file_allowed_seeks(uint64_t size)
{
    uint64_t n = size / 16384;
    return n < 100 ? 100 : n > INT32_MAX ? INT32_MAX : (int)n;
}

void file_meta_unref(file_meta *f)
{
    if (f == NULL || --f->refs > 0)
        return;
    buf_free(&f->smallest);
    buf_free(&f->largest);
    free(f);
}

void version_edit_init(version_edit *e)
{
    memset(e, 0, sizeof(*e));
}

void version_edit_destroy(version_edit *e)
{
    for (int i = 0; i < e->nadded; i++)
        file_meta_unref(e->added[i].f);
    free(e->added);
    free(e->deleted);
    for (int l = 0; l < NUM_LEVELS; l++)
        buf_free(&e->compact_pointer[l]);
    version_edit_init(e);
}

void version_edit_set_log_number(version_edit *e, uint64_t n)
{
    e->has_log_number = true;
    e->log_number = n;
}

void version_edit_set_next_file(version_edit *e, uint64_t n)
{
    e->has_next_file = true;
    e->next_file = n;
}

void version_edit_set_last_seq(version_edit *e, uint64_t s)
{
    e->has_last_seq = true;
    e->last_seq = s;
}

void version_edit_set_format(version_edit *e)
{
    e->has_format = true;
    snprintf(e->format, sizeof(e->format), "%s", STORE_FORMAT);
}

/* Grows an array of `size`-byte elements to hold one more; false if OOM. */
static bool grow(void **arr, int n, int *cap, size_t size)
{
    if (n < *cap)
        return true;
    int ncap = *cap ? *cap * 2 : 8;
    void *p = lsm_realloc(*arr, (size_t)ncap * size);
    if (p == NULL)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

bool version_edit_add_file(version_edit *e, int level, file_meta *f)
{
    assert(level >= 0 && level < NUM_LEVELS);
    if (!grow((void **)&e->added, e->nadded, &e->cap_added, sizeof(new_file)))
        return false;
    f->refs++;
    e->added[e->nadded++] = (new_file){level, f};
    return true;
}

bool version_edit_delete_file(version_edit *e, int level, uint64_t number)
{
    assert(level >= 0 && level < NUM_LEVELS);
    if (!grow((void **)&e->deleted, e->ndeleted, &e->cap_deleted, sizeof(deleted_file)))
        return false;
    e->deleted[e->ndeleted++] = (deleted_file){level, number};
    return true;
}

bool version_edit_set_compact_pointer(version_edit *e, int level, const char *ikey, size_t n)
{
    buf *b = &e->compact_pointer[level];
    b->len = 0;
    if (!buf_append(b, ikey, n))
        return false;
    e->has_compact_pointer[level] = true;
    return true;
}

bool version_edit_encode(const version_edit *e, buf *out)
{
    bool ok = true;
    if (e->has_format)
        ok = ok && buf_put_varint32(out, TAG_FORMAT) &&
             buf_put_length_prefixed(out, e->format, strlen(e->format));
    if (e->has_log_number)
        ok = ok && buf_put_varint32(out, TAG_LOG_NUMBER) && buf_put_varint64(out, e->log_number);
    if (e->has_next_file)
        ok = ok && buf_put_varint32(out, TAG_NEXT_FILE) && buf_put_varint64(out, e->next_file);
    if (e->has_last_seq)
        ok = ok && buf_put_varint32(out, TAG_LAST_SEQ) && buf_put_varint64(out, e->last_seq);
    for (int l = 0; l < NUM_LEVELS; l++)
        if (e->has_compact_pointer[l])
            ok =
                ok && buf_put_varint32(out, TAG_COMPACT_POINTER) &&
                buf_put_varint32(out, (uint32_t)l) &&
                buf_put_length_prefixed(out, e->compact_pointer[l].data, e->compact_pointer[l].len);
    for (int i = 0; i < e->ndeleted; i++)
        ok = ok && buf_put_varint32(out, TAG_DELETED_FILE) &&
             buf_put_varint32(out, (uint32_t)e->deleted[i].level) &&
             buf_put_varint64(out, e->deleted[i].number);
    for (int i = 0; i < e->nadded; i++) {
        const file_meta *f = e->added[i].f;
        ok = ok && buf_put_varint32(out, TAG_NEW_FILE) &&
             buf_put_varint32(out, (uint32_t)e->added[i].level) &&
             buf_put_varint64(out, f->number) && buf_put_varint64(out, f->size) &&
             buf_put_length_prefixed(out, f->smallest.data, f->smallest.len) &&
             buf_put_length_prefixed(out, f->largest.data, f->largest.len);
        if (f->keys)
            ok = ok && buf_put_varint32(out, TAG_FILE_COUNTS) &&
                 buf_put_varint64(out, f->number) && buf_put_varint64(out, f->keys) &&
                 buf_put_varint64(out, f->deletions);
    }
    return ok;
}

static const char *get_level(const char *p, const char *limit, int *level)
{
    uint32_t l;
    p = decode_varint32(p, limit, &l);
    if (p == NULL || l >= NUM_LEVELS)
        return NULL;
    *level = (int)l;
    return p;
}

/* A file number (or the next one): NULL unless below MAX_FILE_NUMBER. */
static const char *decode_file_number(const char *p, const char *limit, uint64_t *number)
{
    p = decode_varint64(p, limit, number);
    return p && *number < MAX_FILE_NUMBER ? p : NULL;
}

static const char *decode_new_file(version_edit *e, const char *p, const char *limit, bool *oom)
{
    int level;
    uint64_t number, size;
    const char *s, *lg;
    uint32_t slen, llen;
    if ((p = get_level(p, limit, &level)) == NULL ||
        (p = decode_file_number(p, limit, &number)) == NULL ||
        (p = decode_varint64(p, limit, &size)) == NULL ||
        (p = decode_length_prefixed(p, limit, &s, &slen)) == NULL ||
        (p = decode_length_prefixed(p, limit, &lg, &llen)) == NULL || slen < IKEY_TRAILER ||
        llen < IKEY_TRAILER)
        return NULL;
    file_meta *f = file_meta_new(number, size, s, slen, lg, llen);
    if (f == NULL || !version_edit_add_file(e, level, f)) {
        file_meta_unref(f);
        *oom = true;
        return NULL;
    }
    return p;
}

/* The counts of a file this edit added before them; NULL if malformed (no
 * such file, more deletions than keys). */
static const char *decode_file_counts(version_edit *e, const char *p, const char *limit)
{
    uint64_t number, keys, deletions;
    if ((p = decode_varint64(p, limit, &number)) == NULL ||
        (p = decode_varint64(p, limit, &keys)) == NULL ||
        (p = decode_varint64(p, limit, &deletions)) == NULL || deletions > keys)
        return NULL;
    for (int i = e->nadded - 1; i >= 0; i--) {
        file_meta *f = e->added[i].f;
        if (f->number == number) {
            f->keys = keys;
            f->deletions = deletions;
            return p;
        }
    }
    return NULL;
}

/* Decodes one tagged field; NULL on malformed input (or OOM, flagged). */
static const char *decode_field(version_edit *e, uint32_t tag, const char *p, const char *limit,
                                bool *oom)
{
    const char *s;
    uint32_t n;
    int level;
    uint64_t num;
    switch (tag) {
    case TAG_FORMAT:
        if ((p = decode_length_prefixed(p, limit, &s, &n)) == NULL || n >= sizeof(e->format))
            return NULL;
        memcpy(e->format, s, n);
        e->format[n] = '\0';
        e->has_format = true;
        return p;
    case TAG_LOG_NUMBER:
        e->has_log_number = true;
        return decode_file_number(p, limit, &e->log_number);
    case TAG_NEXT_FILE:
        e->has_next_file = true;
        return decode_file_number(p, limit, &e->next_file);
    case TAG_LAST_SEQ:
        e->has_last_seq = true;
        return decode_varint64(p, limit, &e->last_seq);
    case TAG_COMPACT_POINTER:
        if ((p = get_level(p, limit, &level)) == NULL ||
            (p = decode_length_prefixed(p, limit, &s, &n)) == NULL)
            return NULL;
        if (!version_edit_set_compact_pointer(e, level, s, n))
            *oom = true;
        return *oom ? NULL : p;
    case TAG_DELETED_FILE:
        if ((p = get_level(p, limit, &level)) == NULL ||
            (p = decode_file_number(p, limit, &num)) == NULL)
            return NULL;
        if (!version_edit_delete_file(e, level, num))
            *oom = true;
        return *oom ? NULL : p;
    case TAG_NEW_FILE:
        return decode_new_file(e, p, limit, oom);
    case TAG_FILE_COUNTS:
        return decode_file_counts(e, p, limit);
    default:
        return NULL;
    }
}

lsm_status *version_edit_decode(version_edit *e, const char *data, size_t n)
{
    version_edit_init(e);
    const char *p = data, *limit = data + n;
    while (p < limit) {
        uint32_t tag;
        bool oom = false;
        const char *field = decode_varint32(p, limit, &tag);
        const char *next = field ? decode_field(e, tag, field, limit, &oom) : NULL;
        if (next == NULL) {
            version_edit_destroy(e);
            /* Records are checksummed: a whole record with a field this
             * version does not know was written by a newer one. */
            if (field && tag > TAG_LAST_KNOWN)
                return status_new(LSM_NOT_SUPPORTED,
                                  "written by a newer lsmfs (MANIFEST field %u is unknown to "
                                  "this version): upgrade lsmfs to open it",
                                  tag);
            if (oom)
                return status_new(LSM_NO_MEMORY, "out of memory decoding a version edit");
            return status_new(LSM_CORRUPTION, "bad version edit at byte %zu (tag %u)",
                              (size_t)(p - data), field ? tag : 0);
        }
        p = next;
    }
    return NULL;
}
