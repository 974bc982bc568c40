/*
 * db_iter.c — lsm_iter: user keys at one sequence number, over the merged
 * stream of internal keys (newest version of each key first).
 *
 * Going forward the internal iterator rests on the entry being returned.
 * Going backward it rests just before every entry of the current user key,
 * whose key and value are copied into saved_key/saved_value — the newest
 * visible version of a key is the last one met when walking backward.
 *
 * Each forward step copies the user key it leaves into saved_key, to skip
 * that key's older versions: the internal iterator's key bytes do not
 * outlive its move. The copy is a few bytes into a buffer that has long
 * been big enough; no call is made for it.
 */
#include "db_impl.h"
#include "lsm_malloc.h"
#include "keycmp.h"
#include "status.h"

#include <stdlib.h>

enum direction { FORWARD, REVERSE };

struct lsm_iter {
    lsm_db *db;
    struct readview *rv; /* pins the memtables and tables being read */
    iter *in;            /* internal keys */
    uint64_t seq;
    enum direction dir;
    bool valid;
    buf saved_key;   /* REVERSE: the current user key; FORWARD: a key to skip */
    buf saved_value; /* REVERSE: the current value */
    buf seek_key;    /* scratch for building internal seek keys */
    const char *key; /* FORWARD and valid: the current user key (in `in`) */
    size_t klen;
    lsm_status *status;
};

lsm_iter *db_iter_new(lsm_db *db, struct readview *rv, iter *internal, uint64_t seq)
{
    lsm_iter *it = lsm_calloc(1, sizeof(*it));
    if (it == NULL) {
        iter_free(internal);
        db_unref_view(db, rv);
        return NULL;
    }
    it->db = db;
    it->rv = rv;
    it->in = internal;
    it->seq = seq;
    return it;
}

void lsm_iter_free(lsm_iter *it)
{
    if (it == NULL)
        return;
    iter_free(it->in);
    db_unref_view(it->db, it->rv);
    buf_free(&it->saved_key);
    buf_free(&it->saved_value);
    buf_free(&it->seek_key);
    lsm_status_free(it->status);
    free(it);
}

static void set_error(lsm_iter *it, lsm_status *s)
{
    if (it->status == NULL)
        it->status = s;
    else
        lsm_status_free(s);
    it->valid = false;
}

/* Parses the internal iterator's current key; false (and an error) if it
 * is malformed. */
static inline bool current(lsm_iter *it, parsed_ikey *pk)
{
    size_t n;
    const char *k = iter_key(it->in, &n);
    if (parse_ikey(k, n, pk))
        return true;
    set_error(it, status_new(LSM_CORRUPTION, "malformed internal key in iterator"));
    return false;
}

/* Copies data into b. */
static inline bool save(buf *b, const char *data, size_t n)
{
    if (n > b->cap || b->data == NULL) {
        b->len = 0;
        return buf_append(b, data, n);
    }
    memcpy(b->data, data, n);
    b->len = n;
    return true;
}

/* Moves forward to the first visible, live entry; with `skipping`, entries
 * for user keys <= saved_key are passed over. */
static void find_next_user_entry(lsm_iter *it, bool skipping)
{
    assert(it->dir == FORWARD);
    for (; iter_valid(it->in); iter_next(it->in)) {
        parsed_ikey pk;
        if (!current(it, &pk))
            return;
        if (pk.seq > it->seq)
            continue;
        if (skipping &&
            keycmp_bytes(pk.user_key, pk.user_len, it->saved_key.data, it->saved_key.len) <= 0)
            continue;
        if (pk.type == TYPE_DELETION) {
            if (!save(&it->saved_key, pk.user_key, pk.user_len))
                return set_error(it, status_new(LSM_NO_MEMORY, "out of memory"));
            skipping = true;
            continue;
        }
        it->key = pk.user_key;
        it->klen = pk.user_len;
        it->valid = true;
        return;
    }
    it->valid = false;
}

/* Moves backward over all entries of the previous user key, saving the
 * newest visible one. */
static void find_prev_user_entry(lsm_iter *it)
{
    assert(it->dir == REVERSE);
    enum value_type type = TYPE_DELETION;
    for (; iter_valid(it->in); iter_prev(it->in)) {
        parsed_ikey pk;
        if (!current(it, &pk))
            return;
        if (pk.seq > it->seq)
            continue;
        if (type != TYPE_DELETION &&
            keycmp_bytes(pk.user_key, pk.user_len, it->saved_key.data, it->saved_key.len) < 0)
            break; /* reached the key before the one we have saved */
        type = pk.type;
        if (type == TYPE_DELETION) {
            it->saved_key.len = 0;
            it->saved_value.len = 0;
            continue;
        }
        size_t vn;
        const char *v = iter_value(it->in, &vn);
        if (!save(&it->saved_key, pk.user_key, pk.user_len) || !save(&it->saved_value, v, vn))
            return set_error(it, status_new(LSM_NO_MEMORY, "out of memory"));
    }
    if (type == TYPE_DELETION) {
        it->valid = false;
        it->saved_key.len = 0;
        it->saved_value.len = 0;
        it->dir = FORWARD;
    } else {
        it->valid = true;
    }
}

bool lsm_iter_valid(const lsm_iter *it)
{
    return it->valid;
}

void lsm_iter_seek_first(lsm_iter *it)
{
    it->dir = FORWARD;
    it->saved_value.len = 0;
    iter_seek_first(it->in);
    find_next_user_entry(it, false);
}

void lsm_iter_seek_last(lsm_iter *it)
{
    it->dir = REVERSE;
    it->saved_value.len = 0;
    iter_seek_last(it->in);
    find_prev_user_entry(it);
}

void lsm_iter_seek(lsm_iter *it, const void *key, size_t klen)
{
    it->dir = FORWARD;
    it->saved_value.len = 0;
    it->seek_key.len = 0;
    if (!buf_put_ikey(&it->seek_key, key, klen, it->seq, TYPE_SEEK))
        return set_error(it, status_new(LSM_NO_MEMORY, "out of memory"));
    iter_seek(it->in, it->seek_key.data, it->seek_key.len);
    find_next_user_entry(it, false);
}

void lsm_iter_next(lsm_iter *it)
{
    assert(it->valid);
    if (it->dir == REVERSE) {
        /* The internal iterator is just before the entries of saved_key. */
        it->dir = FORWARD;
        if (iter_valid(it->in))
            iter_next(it->in);
        else
            iter_seek_first(it->in);
    } else {
        if (!save(&it->saved_key, it->key, it->klen))
            return set_error(it, status_new(LSM_NO_MEMORY, "out of memory"));
        iter_next(it->in);
    }
    find_next_user_entry(it, true);
}

void lsm_iter_prev(lsm_iter *it)
{
    assert(it->valid);
    if (it->dir == FORWARD) {
        /* Step back past every entry of the current user key. */
        if (!save(&it->saved_key, it->key, it->klen))
            return set_error(it, status_new(LSM_NO_MEMORY, "out of memory"));
        size_t n;
        const char *k;
        for (;;) {
            iter_prev(it->in);
            if (!iter_valid(it->in)) {
                it->valid = false;
                it->saved_key.len = 0;
                it->saved_value.len = 0;
                return;
            }
            k = iter_key(it->in, &n);
            if (keycmp_bytes(k, ikey_user_len(n), it->saved_key.data, it->saved_key.len) < 0)
                break;
        }
        it->dir = REVERSE;
    }
    find_prev_user_entry(it);
}

const char *lsm_iter_key(const lsm_iter *it, size_t *klen)
{
    assert(it->valid);
    if (it->dir == REVERSE) {
        *klen = it->saved_key.len;
        return it->saved_key.data;
    }
    *klen = it->klen;
    return it->key;
}

const char *lsm_iter_value(const lsm_iter *it, size_t *vlen)
{
    assert(it->valid);
    if (it->dir == REVERSE) {
        *vlen = it->saved_value.len;
        return it->saved_value.data;
    }
    return iter_value(it->in, vlen);
}

lsm_status *lsm_iter_status(const lsm_iter *it)
{
    if (it->status)
        return status_copy(it->status);
    return iter_status(it->in);
}
