/*
 * alloc.c — inode numbers from synchronously reserved ranges.
 */
#include "alloc.h"

#include "storeio.h"

#include "schema.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

int alloc_highest_inode(lsm_db *db, uint64_t *ino)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    lsm_iter *it = lsm_iter_new(db, &ro);
    if (it == NULL)
        return ENOMEM;
    char after[1] = {(char)(K_INODE + 1)};
    *ino = 0;
    /* The last 'I' key is the one just before the first key past the kind. */
    fs_iter_seek_before(it, after, 1);
    if (lsm_iter_valid(it)) {
        size_t klen;
        const char *k = lsm_iter_key(it, &klen);
        uint64_t v;
        if (key_parse_ino(k, klen, K_INODE, &v))
            *ino = v;
    }
    lsm_status *s = lsm_iter_status(it);
    int err = lsm_status_errno(s); /* EIO, or ENOMEM out of memory */
    lsm_status_free(s);
    lsm_iter_free(it);
    return err;
}

int alloc_init(ino_alloc *a, lsm_db *db, char *err, size_t errlen)
{
    a->db = db;
    mutex_init(&a->mu);
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    schema_key k;
    key_alloc(&k);
    char *v = NULL;
    size_t vlen = 0;
    lsm_status *s = lsm_get(db, &ro, k.b, k.len, &v, &vlen);
    uint64_t next = SCHEMA_FIRST_INO;
    int e = 0;
    if (s == NULL && !alloc_decode(v, vlen, &next)) {
        snprintf(err, errlen,
                 "damaged inode allocator record: %zu bytes, expected %d holding a number >= %llu",
                 vlen, SCHEMA_ALLOC_LEN, (unsigned long long)SCHEMA_FIRST_INO);
        e = EIO;
    } else if (s != NULL && lsm_status_code(s) != LSM_NOT_FOUND) {
        snprintf(err, errlen, "reading the inode allocator record: %s", lsm_status_message(s));
        e = EIO;
    }
    lsm_status_free(s);
    free(v);
    if (e != 0)
        return e;
    uint64_t high;
    e = alloc_highest_inode(db, &high);
    if (e != 0) {
        snprintf(err, errlen, "finding the highest inode: %s", strerror(e));
        return e;
    }
    if (high >= next) /* only a damaged store gets here; never reuse anyway */
        next = high + 1;
    a->next = next;
    a->limit = next; /* nothing reserved by this mount yet */
    return 0;
}

void alloc_destroy(ino_alloc *a)
{
    mutex_destroy(&a->mu);
}

/* REQUIRES: a->mu held. */
static int reserve(ino_alloc *a)
{
    assert(mutex_held(&a->mu));
    uint64_t limit = a->next + ALLOC_RANGE;
    char v[SCHEMA_ALLOC_LEN];
    alloc_encode(limit, v);
    schema_key k;
    key_alloc(&k);
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_put(a->db, &wo, k.b, k.len, v, sizeof v);
    if (s != NULL) {
        int err = lsm_status_errno(s);
        lsm_status_free(s);
        return err ? err : EIO;
    }
    a->limit = limit;
    return 0;
}

int alloc_ino(ino_alloc *a, uint64_t *ino)
{
    mutex_lock(&a->mu);
    int err = 0;
    if (a->next >= a->limit)
        err = reserve(a);
    if (err == 0)
        *ino = a->next++;
    mutex_unlock(&a->mu);
    return err;
}
