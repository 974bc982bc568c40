/*
 * icount.c — the inode count kept across a clean unmount (icount.h).
 */
#include "icount.h"

#include "schema.h"

#include <errno.h>
#include <stdlib.h>

int icount_scan(lsm_db *db, int64_t *count)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.fill_cache = false;
    lsm_iter *it = lsm_iter_new(db, &ro);
    if (it == NULL)
        return ENOMEM;
    char prefix = K_INODE;
    *count = 0;
    for (lsm_iter_seek(it, &prefix, 1); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen;
        const char *key = lsm_iter_key(it, &klen);
        if (klen == 0 || key[0] != K_INODE)
            break;
        (*count)++;
    }
    lsm_status *s = lsm_iter_status(it);
    int err = s ? EIO : 0;
    lsm_status_free(s);
    lsm_iter_free(it);
    return err;
}

int icount_current(lsm_db *db, bool *current, uint64_t *count)
{
    *current = false;
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    schema_key k;
    key_icount(&k);
    char *v = NULL;
    size_t vlen = 0;
    lsm_status *s = lsm_get(db, &ro, k.b, k.len, &v, &vlen);
    int err = s != NULL && lsm_status_code(s) != LSM_NOT_FOUND ? EIO : 0;
    uint64_t seq, last;
    if (s == NULL && icount_decode(v, vlen, count, &seq) &&
        lsm_property_u64(db, "lsm.sequence", &last))
        *current = seq == last;
    lsm_status_free(s);
    free(v);
    return err;
}

int icount_load(lsm_db *db, int64_t *count)
{
    bool current;
    uint64_t n;
    int err = icount_current(db, &current, &n);
    if (err != 0)
        return err;
    if (!current)
        return icount_scan(db, count);
    *count = (int64_t)n;
    return 0;
}

int icount_save(lsm_db *db, int64_t count)
{
    uint64_t last;
    if (count < 1 || !lsm_property_u64(db, "lsm.sequence", &last))
        return EINVAL;
    char v[SCHEMA_ICOUNT_LEN];
    icount_encode((uint64_t)count, last + 1, v); /* this batch's sequence */
    schema_key k;
    key_icount(&k);
    lsm_batch *b = lsm_batch_new();
    if (b == NULL || !lsm_batch_put(b, k.b, k.len, v, sizeof v)) {
        lsm_batch_free(b);
        return ENOMEM;
    }
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_write(db, &wo, b);
    lsm_batch_free(b);
    int err = s == NULL ? 0 : lsm_status_errno(s);
    if (s != NULL && err == 0)
        err = EIO;
    lsm_status_free(s);
    return err;
}
