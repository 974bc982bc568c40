/* compaction.c — picking compactions and the rules used while running one;
 * see compaction.h. */
#include "compaction.h"
#include "lsm_malloc.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

uint64_t max_grandparent_overlap(uint64_t target)
{
    return 10 * target;
}

static uint64_t total_size(file_meta *const *files, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += files[i]->size;
    return sum;
}

/* The smallest and largest internal keys over files. */
static void key_range(file_meta *const *files, int n, const buf **smallest, const buf **largest)
{
    *smallest = &files[0]->smallest;
    *largest = &files[0]->largest;
    for (int i = 1; i < n; i++) {
        const buf *s = &files[i]->smallest, *l = &files[i]->largest;
        if (ikey_compare(s->data, s->len, (*smallest)->data, (*smallest)->len) < 0)
            *smallest = s;
        if (ikey_compare(l->data, l->len, (*largest)->data, (*largest)->len) > 0)
            *largest = l;
    }
}

static compaction *compaction_new(version_set *vs, int level, uint64_t target)
{
    compaction *c = lsm_calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->level = level;
    c->max_output_file_size = target;
    c->input_version = vs->current;
    version_ref(c->input_version);
    version_edit_init(&c->edit);
    return c;
}

void compaction_free(compaction *c)
{
    if (c == NULL)
        return;
    if (c->input_version)
        version_unref(c->input_version);
    free(c->inputs[0]);
    free(c->inputs[1]);
    free(c->grandparents);
    version_edit_destroy(&c->edit);
    free(c);
}

/* Given inputs[0], fills inputs[1] and grandparents, and moves the level's
 * compact pointer past the inputs. false if out of memory. */
static bool setup_other_inputs(version_set *vs, compaction *c)
{
    const version *v = c->input_version;
    const buf *lo, *hi;
    key_range(c->inputs[0], c->ninputs[0], &lo, &hi);
    if (!version_overlapping(v, c->level + 1, lo->data, ikey_user_len(lo->len), hi->data,
                             ikey_user_len(hi->len), &c->inputs[1], &c->ninputs[1]))
        return false;
    const buf *all_lo = lo, *all_hi = hi;
    if (c->ninputs[1]) {
        const buf *lo1, *hi1;
        key_range(c->inputs[1], c->ninputs[1], &lo1, &hi1);
        if (ikey_compare(lo1->data, lo1->len, all_lo->data, all_lo->len) < 0)
            all_lo = lo1;
        if (ikey_compare(hi1->data, hi1->len, all_hi->data, all_hi->len) > 0)
            all_hi = hi1;
    }
    if (c->level + 2 < NUM_LEVELS &&
        !version_overlapping(v, c->level + 2, all_lo->data, ikey_user_len(all_lo->len),
                             all_hi->data, ikey_user_len(all_hi->len), &c->grandparents,
                             &c->ngrandparents))
        return false;
    /* Rotate: the next compaction of this level starts after these keys. */
    buf *cp = &vs->compact_pointer[c->level];
    cp->len = 0;
    return buf_append(cp, hi->data, hi->len) &&
           version_edit_set_compact_pointer(&c->edit, c->level, hi->data, hi->len);
}

/* The first file of `level` after its compact pointer (wrapping around). */
static file_meta *next_file_after_pointer(version_set *vs, int level)
{
    const version *v = vs->current;
    const buf *cp = &vs->compact_pointer[level];
    for (int i = 0; i < v->nfiles[level]; i++) {
        file_meta *f = v->files[level][i];
        if (cp->len == 0 || ikey_compare(f->largest.data, f->largest.len, cp->data, cp->len) > 0)
            return f;
    }
    return v->files[level][0];
}

int compaction_lane(int level)
{
    return level == 0 ? 0 : 1;
}

unsigned compaction_levels(int level)
{
    assert(level >= 0 && level + 1 < NUM_LEVELS);
    return 3u << level;
}

/* Whether `lane` may compact `level` now (busy: the levels taken). */
static bool lane_may(const version *v, int lane, unsigned busy, int level)
{
    return level >= 0 && level + 1 < NUM_LEVELS && compaction_lane(level) == lane &&
           (busy & compaction_levels(level)) == 0 && v->nfiles[level] > 0;
}

/* Whether a level of another lane that needs compaction more than `level`
 * shares a level with it and could start now: it goes first, as with one
 * thread (the lanes race for mu). */
static bool yields(const version *v, int lane, unsigned busy, int level)
{
    for (int m = 0; m < NUM_LEVELS - 1; m++)
        if (compaction_lane(m) != lane && v->level_score[m] > v->level_score[level] &&
            (compaction_levels(m) & compaction_levels(level)) != 0 &&
            lane_may(v, compaction_lane(m), busy, m))
            return true;
    return false;
}

int compaction_choose(const version *v, int lane, unsigned busy, enum compaction_why *why)
{
    int best = -1;
    for (int l = 0; l < NUM_LEVELS - 1; l++)
        if (v->level_score[l] >= 1 && lane_may(v, lane, busy, l) && !yields(v, lane, busy, l) &&
            (best < 0 || v->level_score[l] > v->level_score[best]))
            best = l;
    *why = best >= 0 ? PICK_SIZE : PICK_NONE;
    if (best >= 0 || v->compaction_score >= 1) /* size first */
        return best;
    file_meta *seek = atomic_load(&((version *)v)->seek_file);
    if (seek != NULL && lane_may(v, lane, busy, v->seek_level)) {
        *why = PICK_SEEKS;
        return v->seek_level;
    }
    if (v->deletion_file != NULL && lane_may(v, lane, busy, v->deletion_level)) {
        *why = PICK_DELETIONS;
        return v->deletion_level;
    }
    return -1;
}

compaction *compaction_pick(version_set *vs, uint64_t target_file_size, int level,
                            enum compaction_why why)
{
    assert(mutex_held(vs->mu) && level >= 0 && why != PICK_NONE);
    const version *v = vs->current;
    bool by_size = why == PICK_SIZE, by_seeks = why == PICK_SEEKS;
    compaction *c = compaction_new(vs, level, target_file_size);
    if (c == NULL)
        return NULL;
    c->for_deletions = !by_size && !by_seeks;
    /* Level 0 is compacted where it is deepest (the files there and all
     * that overlap them); other levels round-robin by the pointer. */
    file_meta *first = by_seeks                      ? v->seek_file
                       : !by_size                    ? v->deletion_file
                       : level == 0 && v->l0_deepest ? v->l0_deepest
                                                     : next_file_after_pointer(vs, level);
    bool ok = true;
    if (level == 0) {
        /* Level-0 files overlap: take every file overlapping the first. */
        free(c->inputs[0]);
        ok = version_overlapping(v, 0, first->smallest.data, ikey_user_len(first->smallest.len),
                                 first->largest.data, ikey_user_len(first->largest.len),
                                 &c->inputs[0], &c->ninputs[0]);
    } else if ((c->inputs[0] = lsm_malloc(sizeof(file_meta *))) != NULL) {
        c->inputs[0][0] = first;
        c->ninputs[0] = 1;
    } else {
        ok = false;
    }
    if (!ok || !setup_other_inputs(vs, c)) {
        compaction_free(c);
        return NULL;
    }
    return c;
}

compaction *compaction_pick_range(version_set *vs, int level, const char *begin, size_t blen,
                                  const char *end, size_t elen, uint64_t target_file_size)
{
    assert(mutex_held(vs->mu));
    compaction *c = compaction_new(vs, level, target_file_size);
    if (c == NULL)
        return NULL;
    if (!version_overlapping(vs->current, level, begin, blen, end, elen, &c->inputs[0],
                             &c->ninputs[0]) ||
        c->ninputs[0] == 0) {
        compaction_free(c);
        return NULL;
    }
    /* Keep one manual step bounded: about 25 target files of input from a
     * sorted level (level 0 files overlap, so all of them go together). */
    if (level > 0) {
        uint64_t sum = 0;
        for (int i = 0; i < c->ninputs[0]; i++) {
            sum += c->inputs[0][i]->size;
            if (sum >= 25 * target_file_size) {
                c->ninputs[0] = i + 1;
                break;
            }
        }
    }
    if (!setup_other_inputs(vs, c)) {
        compaction_free(c);
        return NULL;
    }
    return c;
}

/* Whether a level below the output level holds keys in the inputs' range. */
static bool overlaps_below_output(const compaction *c)
{
    const buf *lo, *hi;
    key_range(c->inputs[0], c->ninputs[0], &lo, &hi);
    for (int l = c->level + 2; l < NUM_LEVELS; l++)
        if (version_overlaps_level(c->input_version, l, lo->data, ikey_user_len(lo->len),
                                   hi->data, ikey_user_len(hi->len)))
            return true;
    return false;
}

bool compaction_is_trivial_move(const compaction *c)
{
    return c->ninputs[0] == 1 && c->ninputs[1] == 0 &&
           total_size(c->grandparents, c->ngrandparents) <=
               max_grandparent_overlap(c->max_output_file_size) &&
           (!c->for_deletions || overlaps_below_output(c));
}

bool compaction_add_input_deletions(compaction *c)
{
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < c->ninputs[w]; i++)
            if (!version_edit_delete_file(&c->edit, c->level + w, c->inputs[w][i]->number))
                return false;
    return true;
}

bool compaction_is_base_level_for_key(compaction *c, const char *ukey, size_t ulen)
{
    const version *v = c->input_version;
    for (int l = c->level + 2; l < NUM_LEVELS; l++) {
        for (; c->level_ptrs[l] < v->nfiles[l]; c->level_ptrs[l]++) {
            const file_meta *f = v->files[l][c->level_ptrs[l]];
            if (bytes_compare(ukey, ulen, f->largest.data, ikey_user_len(f->largest.len)) <= 0) {
                if (bytes_compare(ukey, ulen, f->smallest.data, ikey_user_len(f->smallest.len)) >=
                    0)
                    return false; /* the key may live in this file */
                break;
            }
        }
    }
    return true;
}

bool compaction_should_stop_before(compaction *c, const char *ikey, size_t n)
{
    while (c->grand_index < c->ngrandparents) {
        const file_meta *g = c->grandparents[c->grand_index];
        if (ikey_compare(ikey, n, g->largest.data, g->largest.len) <= 0)
            break;
        if (c->seen_key)
            c->overlapped_bytes += g->size;
        c->grand_index++;
    }
    c->seen_key = true;
    if (c->overlapped_bytes > max_grandparent_overlap(c->max_output_file_size)) {
        c->overlapped_bytes = 0;
        return true;
    }
    return false;
}

iter *compaction_input_iter(compaction *c, table_cache *tc)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.fill_cache = false; /* a compaction reads each block once */
    ro.verify_checksums = true;
    int cap = (c->level == 0 ? c->ninputs[0] : 1) + 1;
    iter **its = lsm_malloc((size_t)cap * sizeof(*its));
    if (its == NULL)
        return NULL;
    int n = 0;
    bool ok = true;
    if (c->level == 0) {
        for (int i = 0; i < c->ninputs[0]; i++)
            ok = ok && (its[n++] = table_cache_iter(tc, &ro, c->inputs[0][i]->number,
                                                    c->inputs[0][i]->size)) != NULL;
    } else {
        ok = (its[n++] = level_iter_new(tc, &ro, c->inputs[0], c->ninputs[0])) != NULL;
    }
    if (ok && c->ninputs[1])
        ok = (its[n++] = level_iter_new(tc, &ro, c->inputs[1], c->ninputs[1])) != NULL;
    iter *merged = ok ? iter_new_merging(its, n, ikey_compare) : NULL;
    if (merged == NULL)
        for (int i = 0; i < n; i++)
            iter_free(its[i]);
    free(its);
    return merged;
}

uint64_t compaction_input_bytes(const compaction *c)
{
    return total_size(c->inputs[0], c->ninputs[0]) + total_size(c->inputs[1], c->ninputs[1]);
}
