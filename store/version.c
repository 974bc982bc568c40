/* version.c — lookups, iterators and overlap queries over a version; see
 * version.h. */
#include "version.h"
#include "lsm_malloc.h"
#include "keycmp.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ get */

struct get_state {
    const char *ukey;
    size_t ulen;
    enum memtable_get_result result;
    char **val;
    size_t *vlen;
    lsm_status *err;
};

/* Called by table_get with the newest entry at or below the seek key. */
static void on_entry(void *ctx, const char *ikey, size_t klen, const char *val, size_t vlen)
{
    struct get_state *g = ctx;
    parsed_ikey pk;
    if (!parse_ikey(ikey, klen, &pk)) {
        g->err = status_new(LSM_CORRUPTION, "malformed internal key in a table");
        return;
    }
    if (keycmp_bytes(pk.user_key, pk.user_len, g->ukey, g->ulen) != 0)
        return;
    if (pk.type == TYPE_DELETION) {
        g->result = MEMTABLE_DELETED;
        return;
    }
    char *copy = lsm_malloc(vlen ? vlen : 1);
    if (copy == NULL) {
        g->result = MEMTABLE_NOMEM;
        return;
    }
    memcpy(copy, val, vlen);
    *g->val = copy;
    *g->vlen = vlen;
    g->result = MEMTABLE_FOUND;
}

static bool user_in_range(const file_meta *f, const char *ukey, size_t ulen)
{
    return keycmp_bytes(ukey, ulen, f->smallest.data, ikey_user_len(f->smallest.len)) >= 0 &&
           keycmp_bytes(ukey, ulen, f->largest.data, ikey_user_len(f->largest.len)) <= 0;
}

static bool search_file(table_cache *tc, const lsm_read_options *ro, const file_meta *f,
                        const char *ikey, size_t n, struct get_state *g)
{
    lsm_status *s = table_cache_get(tc, ro, f->number, f->size, ikey, n, on_entry, g);
    if (s && g->err == NULL)
        g->err = s;
    else
        lsm_status_free(s);
    return g->err != NULL || g->result != MEMTABLE_ABSENT;
}

/* Searches f (of `level`) unless done; the first of two searched is charged. */
static bool search_next(table_cache *tc, const lsm_read_options *ro, file_meta *f, int level,
                        const char *ikey, size_t n, struct get_state *g, seek_charge *charge,
                        file_meta **first, int *first_level)
{
    if (*first == NULL) {
        *first = f;
        *first_level = level;
    } else if (charge->file == NULL) {
        charge->file = *first;
        charge->level = *first_level;
    }
    return search_file(tc, ro, f, ikey, n, g);
}

enum memtable_get_result version_get(version *v, table_cache *tc, const lsm_read_options *ro,
                                     const char *ikey, size_t n, char **val, size_t *vlen,
                                     lsm_status **err, seek_charge *charge)
{
    struct get_state g = {ikey, ikey_user_len(n), MEMTABLE_ABSENT, val, vlen, NULL};
    bool done = false;
    file_meta *first = NULL;
    int first_level = 0;
    charge->file = NULL;
    for (int i = 0; !done && i < v->nfiles[0]; i++) /* newest first */
        if (user_in_range(v->files[0][i], g.ukey, g.ulen))
            done = search_next(tc, ro, v->files[0][i], 0, ikey, n, &g, charge, &first,
                               &first_level);
    for (int l = 1; !done && l < NUM_LEVELS; l++) {
        int i = level_find_file(v->files[l], v->nfiles[l], ikey, n);
        if (i < v->nfiles[l] && user_in_range(v->files[l][i], g.ukey, g.ulen))
            done = search_next(tc, ro, v->files[l][i], l, ikey, n, &g, charge, &first,
                               &first_level);
    }
    *err = g.err;
    return g.err ? MEMTABLE_ABSENT : g.result;
}

int level_find_file(file_meta *const *files, int n, const char *ikey, size_t klen)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const buf *lg = &files[mid]->largest;
        if (keycmp_ikey(lg->data, lg->len, ikey, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ------------------------------------------------------------ level iter */

typedef struct level_iter {
    iter base;
    table_cache *tc;
    lsm_read_options ro;
    file_meta *const *files;
    int n;
    int index;   /* file the table iterator is over; n when none */
    iter *table; /* NULL when index == n */
    lsm_status *status;
} level_iter;

static void set_file(level_iter *li, int index)
{
    if (li->table && index == li->index)
        return;
    if (li->table) {
        lsm_status *s = iter_status(li->table);
        if (s && li->status == NULL)
            li->status = s;
        else
            lsm_status_free(s);
        iter_free(li->table);
    }
    li->table = NULL;
    li->index = index;
    if (index >= 0 && index < li->n)
        li->table =
            table_cache_iter(li->tc, &li->ro, li->files[index]->number, li->files[index]->size);
}

static bool li_valid(const iter *it)
{
    const level_iter *li = (const level_iter *)it;
    return li->table && iter_valid(li->table);
}

/* Moves to later files while the current one is exhausted. */
static void skip_forward(level_iter *li)
{
    while (li->table && !iter_valid(li->table)) {
        if (li->index + 1 >= li->n) {
            set_file(li, li->n);
            return;
        }
        set_file(li, li->index + 1);
        iter_seek_first(li->table);
    }
}

static void skip_backward(level_iter *li)
{
    while (li->table && !iter_valid(li->table)) {
        if (li->index == 0) {
            set_file(li, li->n);
            return;
        }
        set_file(li, li->index - 1);
        iter_seek_last(li->table);
    }
}

static void li_seek_first(iter *it)
{
    level_iter *li = (level_iter *)it;
    set_file(li, 0);
    if (li->table)
        iter_seek_first(li->table);
    skip_forward(li);
}

static void li_seek_last(iter *it)
{
    level_iter *li = (level_iter *)it;
    set_file(li, li->n - 1);
    if (li->table)
        iter_seek_last(li->table);
    skip_backward(li);
}

static void li_seek(iter *it, const char *key, size_t n)
{
    level_iter *li = (level_iter *)it;
    set_file(li, level_find_file(li->files, li->n, key, n));
    if (li->table)
        iter_seek(li->table, key, n);
    skip_forward(li);
}

static void li_next(iter *it)
{
    level_iter *li = (level_iter *)it;
    iter_next(li->table);
    skip_forward(li);
}

static void li_prev(iter *it)
{
    level_iter *li = (level_iter *)it;
    iter_prev(li->table);
    skip_backward(li);
}

static const char *li_key(const iter *it, size_t *n)
{
    return iter_key(((const level_iter *)it)->table, n);
}

static const char *li_value(const iter *it, size_t *n)
{
    return iter_value(((const level_iter *)it)->table, n);
}

static lsm_status *li_status(const iter *it)
{
    const level_iter *li = (const level_iter *)it;
    if (li->status)
        return status_copy(li->status);
    return li->table ? iter_status(li->table) : NULL;
}

static void li_free(iter *it)
{
    level_iter *li = (level_iter *)it;
    iter_free(li->table);
    lsm_status_free(li->status);
    free(li);
}

static const struct iter_ops level_iter_ops = {
    li_valid, li_seek_first, li_seek_last, li_seek,   li_next,
    li_prev,  li_key,        li_value,     li_status, li_free,
};

iter *level_iter_new(table_cache *tc, const lsm_read_options *ro, file_meta *const *files, int n)
{
    level_iter *li = lsm_calloc(1, sizeof(*li));
    if (li == NULL)
        return NULL;
    li->base.ops = &level_iter_ops;
    li->tc = tc;
    if (ro)
        li->ro = *ro;
    else
        lsm_read_options_init(&li->ro);
    li->files = files;
    li->n = n;
    li->index = n;
    return &li->base;
}

static bool push_iter(iter ***its, int *n, int *cap, iter *it)
{
    if (it == NULL)
        return false;
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 8;
        iter **p = lsm_realloc(*its, (size_t)ncap * sizeof(*p));
        if (p == NULL) {
            iter_free(it);
            return false;
        }
        *its = p;
        *cap = ncap;
    }
    (*its)[(*n)++] = it;
    return true;
}

bool version_add_iters(version *v, table_cache *tc, const lsm_read_options *ro, iter ***its, int *n,
                       int *cap)
{
    for (int i = 0; i < v->nfiles[0]; i++)
        if (!push_iter(its, n, cap,
                       table_cache_iter(tc, ro, v->files[0][i]->number, v->files[0][i]->size)))
            return false;
    for (int l = 1; l < NUM_LEVELS; l++)
        if (v->nfiles[l] &&
            !push_iter(its, n, cap, level_iter_new(tc, ro, v->files[l], v->nfiles[l])))
            return false;
    return true;
}

/* -------------------------------------------------------------- overlaps */

static bool before_file(const file_meta *f, const char *end, size_t elen)
{
    return end && bytes_compare(end, elen, f->smallest.data, ikey_user_len(f->smallest.len)) < 0;
}

static bool after_file(const file_meta *f, const char *begin, size_t blen)
{
    return begin && bytes_compare(begin, blen, f->largest.data, ikey_user_len(f->largest.len)) > 0;
}

bool version_overlaps_level(const version *v, int level, const char *begin, size_t blen,
                            const char *end, size_t elen)
{
    for (int i = 0; i < v->nfiles[level]; i++) {
        const file_meta *f = v->files[level][i];
        if (!before_file(f, end, elen) && !after_file(f, begin, blen))
            return true;
    }
    return false;
}

bool version_overlapping(const version *v, int level, const char *begin, size_t blen,
                         const char *end, size_t elen, file_meta ***out, int *n)
{
    *n = 0;
    *out = lsm_malloc((size_t)(v->nfiles[level] + 1) * sizeof(**out));
    if (*out == NULL)
        return false;
    buf lo, hi; /* the range, widened for level 0 */
    buf_init(&lo);
    buf_init(&hi);
    bool has_lo = begin != NULL, has_hi = end != NULL, ok = true;
    if (has_lo)
        ok = ok && buf_append(&lo, begin, blen);
    if (has_hi)
        ok = ok && buf_append(&hi, end, elen);
    for (int i = 0; ok && i < v->nfiles[level]; i++) {
        file_meta *f = v->files[level][i];
        if (before_file(f, has_hi ? hi.data : NULL, hi.len) ||
            after_file(f, has_lo ? lo.data : NULL, lo.len))
            continue;
        (*out)[(*n)++] = f;
        if (level != 0)
            continue;
        /* A level-0 file reaching outside the range widens it: restart. */
        const char *fs = f->smallest.data, *fl = f->largest.data;
        size_t fsn = ikey_user_len(f->smallest.len), fln = ikey_user_len(f->largest.len);
        bool widen_lo = has_lo && bytes_compare(fs, fsn, lo.data, lo.len) < 0;
        bool widen_hi = has_hi && bytes_compare(fl, fln, hi.data, hi.len) > 0;
        if (widen_lo || widen_hi) {
            if (widen_lo) {
                lo.len = 0;
                ok = buf_append(&lo, fs, fsn);
            }
            if (widen_hi) {
                hi.len = 0;
                ok = ok && buf_append(&hi, fl, fln);
            }
            *n = 0;
            i = -1;
        }
    }
    buf_free(&lo);
    buf_free(&hi);
    if (!ok) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return ok;
}

/* ----------------------------------------------------------------- scores */

int version_level_for_flush(const version *v, const char *smallest, size_t slen,
                            const char *largest, size_t llen, uint64_t max_grandparent_bytes)
{
    int level = 0;
    if (version_overlaps_level(v, 0, smallest, slen, largest, llen))
        return 0;
    while (level < MAX_FLUSH_LEVEL) {
        if (version_overlaps_level(v, level + 1, smallest, slen, largest, llen))
            break;
        if (level + 2 < NUM_LEVELS) {
            file_meta **gp = NULL;
            int n = 0;
            if (!version_overlapping(v, level + 2, smallest, slen, largest, llen, &gp, &n))
                break; /* out of memory: level 0 is always right */
            uint64_t bytes = 0;
            for (int i = 0; i < n; i++)
                bytes += gp[i]->size;
            free(gp);
            if (bytes > max_grandparent_bytes)
                break;
        }
        level++;
    }
    return level;
}

uint64_t version_max_bytes_for_level(uint64_t level1_bytes, int level)
{
    /* level1_bytes at level 1, ten times more per level below (LevelDB's shape). */
    uint64_t bytes = level1_bytes;
    for (int l = 1; l < level; l++)
        bytes *= 10;
    return bytes;
}

uint64_t version_compaction_debt(const version *v)
{
    uint64_t moving = 0, owed = 0; /* bytes leaving the level above; in all */
    for (int l = 0; l < NUM_LEVELS - 1; l++) {
        uint64_t held = version_level_bytes(v, l) + moving;
        uint64_t target = l == 0 ? 0 : version_max_bytes_for_level(v->level1_bytes, l);
        moving = held > target ? held - target : 0;
        owed += moving;
    }
    return owed;
}

static int user_cmp(const buf *a, const buf *b)
{
    return bytes_compare(a->data, ikey_user_len(a->len), b->data, ikey_user_len(b->len));
}

uint64_t version_level_bytes(const version *v, int level)
{
    uint64_t sum = 0;
    for (int i = 0; i < v->nfiles[level]; i++)
        sum += v->files[level][i]->size;
    return sum;
}

/* Sets l0_load and l0_deepest. The most intervals covering one point are
 * found at some interval's start: n^2 over a level of a few dozen files. */
static void compute_l0_load(version *v, uint64_t unit_bytes)
{
    int depth = 0;
    v->l0_deepest = NULL;
    for (int i = 0; i < v->nfiles[0]; i++) {
        const buf *at = &v->files[0][i]->smallest;
        int n = 0;
        for (int j = 0; j < v->nfiles[0]; j++) {
            const file_meta *g = v->files[0][j];
            n += user_cmp(&g->smallest, at) <= 0 && user_cmp(at, &g->largest) <= 0;
        }
        if (n > depth) {
            depth = n;
            v->l0_deepest = v->files[0][i];
        }
    }
    uint64_t units = (version_level_bytes(v, 0) + unit_bytes - 1) / unit_bytes;
    v->l0_load = (uint64_t)depth > units ? depth : (int)units;
}

bool file_meta_tombstone_heavy(const file_meta *f)
{
    return f->deletions > 0 && f->deletions * 2 >= f->keys;
}

/* The share of f's keys that are deleted. */
static double deletion_share(const file_meta *f)
{
    return f->keys ? (double)f->deletions / (double)f->keys : 0;
}

static void pick_deletion_file(version *v)
{
    v->deletion_file = NULL;
    v->deletion_level = -1;
    if (v->compaction_score >= 1)
        return; /* size first: that compaction moves the tombstones down too */
    for (int l = 0; l < NUM_LEVELS - 1; l++) {
        for (int i = 0; i < v->nfiles[l]; i++) {
            file_meta *f = v->files[l][i];
            if (file_meta_tombstone_heavy(f) &&
                (v->deletion_file == NULL || deletion_share(f) > deletion_share(v->deletion_file))) {
                v->deletion_file = f;
                v->deletion_level = l;
            }
        }
    }
}

void version_compute_score(version *v, int l0_trigger, uint64_t l0_unit_bytes,
                           uint64_t level1_bytes)
{
    assert(l0_unit_bytes > 0 && level1_bytes > 0);
    v->level1_bytes = level1_bytes;
    compute_l0_load(v, l0_unit_bytes);
    int best_level = -1;
    double best = -1;
    v->level_score[NUM_LEVELS - 1] = 0;
    for (int l = 0; l < NUM_LEVELS - 1; l++) {
        double score =
            (l == 0) ? (double)v->l0_load / l0_trigger
                     : (double)version_level_bytes(v, l) /
                           (double)version_max_bytes_for_level(level1_bytes, l);
        v->level_score[l] = score;
        if (score > best) {
            best = score;
            best_level = l;
        }
    }
    v->compaction_level = best_level;
    v->compaction_score = best;
    pick_deletion_file(v);
}

bool version_needs_compaction(const version *v)
{
    return v->compaction_score >= 1 || v->seek_file != NULL || v->deletion_file != NULL;
}
