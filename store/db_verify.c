/* db_verify.c — lsm_verify(): read every table block with checksums on. */
#include "db_impl.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>

/* Reads one table front to back; returns its first error. */
static lsm_status *verify_table(lsm_db *db, const file_meta *f)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.verify_checksums = true;
    ro.fill_cache = false;
    iter *it = table_cache_iter(db->tables, &ro, f->number, f->size);
    uint64_t entries = 0;
    const char *prev = NULL;
    size_t prevn = 0;
    buf last;
    buf_init(&last);
    lsm_status *s = NULL;
    for (iter_seek_first(it); iter_valid(it); iter_next(it)) {
        size_t n;
        const char *k = iter_key(it, &n);
        parsed_ikey pk;
        if (!parse_ikey(k, n, &pk) || (prev && ikey_compare(prev, prevn, k, n) >= 0)) {
            s = status_new(LSM_CORRUPTION,
                           "table %06" PRIu64 ": bad or unordered key at entry %" PRIu64, f->number,
                           entries);
            break;
        }
        last.len = 0;
        if (!buf_append(&last, k, n)) {
            s = status_new(LSM_NO_MEMORY, "table %06" PRIu64 ": out of memory", f->number);
            break;
        }
        prev = last.data;
        prevn = last.len;
        entries++;
    }
    if (s == NULL)
        s = iter_status(it);
    iter_free(it);
    buf_free(&last);
    return s;
}

_Static_assert(LSM_LEVELS == NUM_LEVELS, "lsm.h's LSM_LEVELS is the store's NUM_LEVELS");

lsm_status *lsm_verify_level(lsm_db *db, int level, void (*report)(void *ctx, const char *msg),
                             void *ctx, uint64_t *tables, uint64_t *bytes)
{
    uint64_t seq, nt = 0, nb = 0;
    if (level < 0 || level >= NUM_LEVELS)
        return status_new(LSM_INVALID_ARGUMENT, "no level %d", level);
    struct readview *rv = db_ref_view(db, &seq, NULL);
    lsm_status *first = NULL;
    for (int i = 0; i < rv->version->nfiles[level]; i++) {
        const file_meta *f = rv->version->files[level][i];
        lsm_status *s = verify_table(db, f);
        nt++;
        nb += f->size;
        if (s == NULL)
            continue;
        if (lsm_status_code(s) == LSM_NO_MEMORY) { /* no verdict on this table: stop */
            lsm_status_free(first);
            first = s;
            break;
        }
        if (report)
            report(ctx, lsm_status_message(s));
        if (first == NULL)
            first = s;
        else
            lsm_status_free(s);
    }
    db_unref_view(db, rv);
    if (tables != NULL)
        *tables = nt;
    if (bytes != NULL)
        *bytes = nb;
    return first;
}

lsm_status *lsm_verify(lsm_db *db, void (*report)(void *ctx, const char *msg), void *ctx)
{
    lsm_status *first = NULL;
    for (int l = 0; l < NUM_LEVELS; l++) {
        lsm_status *s = lsm_verify_level(db, l, report, ctx, NULL, NULL);
        if (lsm_status_code(s) == LSM_NO_MEMORY) {
            lsm_status_free(first);
            return s;
        }
        if (first == NULL)
            first = s;
        else
            lsm_status_free(s);
    }
    return first;
}
