/*
 * db_defer.c — deferred logging (lsm_write_options.defer_log).
 *
 * A large batch written without sync need not cost its bytes twice (WAL,
 * then table). With defer_log, the leader puts only a WAL_DEFERRED marker
 * in the log, inserts the batch into the memtable and keeps the batch here,
 * its bytes taken from the writer's lsm_batch by the memtable rather than
 * copied, the memtable's entries pointing at its big values (memtable.h's
 * memtable_keep: a big write's bytes are copied twice less). The bytes
 * live as long as the memtable; a deferred batch holds a reference to it,
 * so they outlive both the batch's entry here and every reader. It is then
 * either
 *  - dropped when its memtable is written to a table (the common case for a
 *    large file written in one go: its bytes reach the disk once), or
 *  - logged late, whole, by the next leader of a logged batch, before that
 *    leader's own record, or by a sync (db_defer_log.c), at the head of the
 *    queue.
 * So the log never holds a record that follows a deferred batch which is
 * in neither the log nor a table, and recovery (replay_filter, db_recover.c) keeps
 * a prefix of the writes: at a marker whose batch does not follow, it stops
 * applying records. A sync never claims a deferred batch durable before it
 * is logged (db_sync_ceiling).
 */
#include "db_impl.h"
#include "lsm_malloc.h"

#include "status.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct deferred *deferred_new(uint64_t mem)
{
    struct deferred *d = lsm_malloc(sizeof(*d));
    if (d == NULL)
        return NULL;
    *d = (struct deferred){.mem = mem};
    buf_init(&d->spare);
    if (!buf_reserve(&d->spare, BATCH_HEADER)) { /* what the batch gets back */
        free(d);
        return NULL;
    }
    return d;
}

lsm_status *deferred_take(struct deferred *d, lsm_batch *b, memtable *mem)
{
    assert(d->owner == NULL);
    size_t len;
    const char *data = batch_contents(b, &len);
    lsm_status *s = batch_give(b, mem, &d->spare);
    if (s != NULL)
        return s;
    memtable_ref(mem); /* the bytes live as long as mem (memtable.h) */
    d->owner = mem;
    d->data = data;
    d->len = len;
    return NULL;
}

void deferred_marker(const struct deferred *d, char out[WAL_MARKER_LEN])
{
    wal_marker_encode(out, WAL_DEFERRED, decode_fixed64(d->data), decode_fixed32(d->data + 8));
}

lsm_status *deferred_insert(struct deferred *d, lsm_batch *b)
{
    lsm_status *s = batch_insert_kept(d->data, d->len, d->owner);
    if (s != NULL)
        batch_take_back(b, d->owner, &d->spare, d->data, d->len, true);
    return s;
}

void deferred_give_back(struct deferred *d, lsm_batch *b)
{
    batch_take_back(b, d->owner, &d->spare, d->data, d->len, false);
    memtable_unref(d->owner);
    d->owner = NULL;
    d->data = NULL;
    d->len = 0;
}

void deferred_free(struct deferred *d)
{
    if (d == NULL)
        return;
    memtable_unref(d->owner);
    buf_free(&d->spare);
    free(d);
}

/* The first sequence of a deferred batch, from its header. */
static uint64_t first_seq(const struct deferred *d)
{
    return decode_fixed64(d->data);
}

void db_keep_deferred(lsm_db *db, struct deferred *d)
{
    assert(mutex_held(&db->mu) && d->next == NULL && d->owner != NULL);
    assert(db->deferred_tail == NULL || first_seq(db->deferred_tail) < first_seq(d));
    if (db->deferred_head == NULL) /* the flush thread times them */
        pthread_cond_broadcast(&db->work_cv);
    d->at_us = db->env->now_micros(db->env);
    db->stats.deferred++;
    db->stats.deferred_bytes += d->len;
    if (db->deferred_tail)
        db->deferred_tail->next = d;
    else
        db->deferred_head = d;
    db->deferred_tail = d;
}

struct deferred *db_take_deferred(lsm_db *db)
{
    assert(mutex_held(&db->mu) && db->deferred_floor == 0);
    struct deferred *list = db->deferred_head;
    if (list != NULL)
        db->deferred_floor = first_seq(list);
    db->deferred_head = db->deferred_tail = NULL;
    return list;
}

lsm_status *deferred_log_late(wal_writer *wal, const struct deferred *list, uint64_t *bytes)
{
    *bytes = 0;
    for (const struct deferred *d = list; d != NULL; d = d->next) {
        lsm_status *s = wal_add_record(wal, d->data, d->len);
        if (s != NULL)
            return s;
        *bytes += d->len;
    }
    return NULL;
}

static void free_list(struct deferred *d)
{
    while (d != NULL) {
        struct deferred *next = d->next;
        deferred_free(d);
        d = next;
    }
}

/* Whether memtable `mem` was written to a table: ids grow with each
 * memtable and the flush takes the oldest first (db_push_imm, flush_one).
 * REQUIRES: mu held. */
static bool mem_flushed(lsm_db *db, uint64_t mem)
{
    assert(mutex_held(&db->mu));
    uint64_t oldest = db->nimm > 0 ? db->imm_id[0] : db->mem_id;
    return mem < oldest;
}

/* Puts the list back in front, to be logged again, but for the batches
 * whose memtable was flushed while the list was out: that flush could not
 * drop them (db_drop_deferred), and nothing else would (a freeing write
 * waited for them for good in db_write.c's flush_deferred_first). REQUIRES:
 * mu held. */
static void restore(lsm_db *db, struct deferred *list)
{
    assert(mutex_held(&db->mu));
    struct deferred *keep = NULL, *last = NULL;
    while (list != NULL) {
        struct deferred *d = list;
        list = d->next;
        d->next = NULL;
        if (mem_flushed(db, d->mem))
            deferred_free(d);
        else if (last == NULL)
            keep = last = d;
        else
            last = last->next = d;
    }
    if (keep == NULL)
        return;
    last->next = db->deferred_head;
    if (db->deferred_head == NULL)
        db->deferred_tail = last;
    db->deferred_head = keep;
}

void db_end_late_log(lsm_db *db, struct deferred *list, const lsm_status *s, uint64_t bytes)
{
    assert(mutex_held(&db->mu));
    db->deferred_floor = 0;
    if (list == NULL)
        return;
    if (lsm_status_code(s) == LSM_NO_SPACE) {
        restore(db, list);
        return;
    }
    db->stats.late_logged_bytes += bytes;
    db->stats.wal_bytes += bytes;
    free_list(list);
}

void db_drop_deferred(lsm_db *db, uint64_t mem)
{
    assert(mutex_held(&db->mu));
    struct deferred **pp = &db->deferred_head, *prev = NULL;
    while (*pp != NULL) {
        struct deferred *d = *pp;
        if (d->mem != mem) {
            prev = d;
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        deferred_free(d);
    }
    db->deferred_tail = prev;
}

void db_free_deferred(lsm_db *db)
{
    free_list(db->deferred_head);
    db->deferred_head = db->deferred_tail = NULL;
}

/* The first sequence of a deferred batch not yet in the log (being logged
 * late, or waiting), or 0 if none. REQUIRES: mu held. */
static uint64_t first_unlogged(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->deferred_floor != 0)
        return db->deferred_floor;
    return db->deferred_head != NULL ? first_seq(db->deferred_head) : 0;
}

uint64_t db_sync_ceiling(lsm_db *db)
{
    uint64_t first = first_unlogged(db);
    return first != 0 && first - 1 < db->last_seq ? first - 1 : db->last_seq;
}

bool db_deferred_upto(lsm_db *db, uint64_t seq)
{
    uint64_t first = first_unlogged(db);
    return first != 0 && first <= seq;
}

uint64_t db_deferred_bytes_upto(lsm_db *db, uint64_t seq)
{
    assert(mutex_held(&db->mu));
    uint64_t bytes = 0;
    for (const struct deferred *d = db->deferred_head; d != NULL && first_seq(d) <= seq;
         d = d->next)
        bytes += d->len;
    return bytes;
}
