/*
 * db_write.c — the write queue and group commit.
 *
 * No writer thread: each caller puts a `struct writer` on its own stack into
 * the queue. The writer at the head is the leader: it merges the batches of
 * the writers queued behind it into one group, appends the group to the WAL
 * as one record, syncs if any member asked for it, inserts the group into the
 * memtable — all with mu released — then hands every member its status and
 * makes the next writer the head.
 *
 * Rules that make this correct and durable:
 *  - A writer that asked for sync never joins a group whose leader did not:
 *    that leader will not sync. (A non-sync writer may ride in a sync group.)
 *  - A group is one WAL record and one range of sequence numbers, published
 *    to readers (last_seq) only after every member is in the memtable, so a
 *    batch is visible all at once or not at all.
 *  - Before a WAL is left behind it is synced if it holds unsynced writes,
 *    and a new WAL's directory entry is synced before it is used, so a sync
 *    covers every write acknowledged before it, whatever log it went to.
 *  - Any WAL write or sync failure is sticky (db->bg_error): the page cache
 *    may have dropped what we wrote, so nothing later can be promised.
 *
 * Gathering: when the leader is going to sync and recent sync groups were
 * larger than the queue now is, it waits (at most group_commit_delay_us) for
 * the usual crowd to arrive, so one fdatasync serves all of them instead of
 * splitting them into a small group and a large one (PostgreSQL's
 * commit_delay idea, self-tuned: one writer alone never waits).
 */
#include "db_impl.h"
#include "status.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GROUP_BYTES (1u << 20)
#define SMALL_BATCH (128u << 10)

static size_t writer_bytes(const struct writer *w)
{
    return w->batch ? w->batch->rep.len - BATCH_HEADER : 0;
}

/* ------------------------------------------------------------- hand-off */

static void futex_wait(_Atomic int *addr, int expected)
{
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic int *addr)
{
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wake-ups a leader owes, issued after it lets go of mu so the woken
 * writers do not find the mutex held for a string of system calls. */
#define WAKE_BATCH 64
struct wakeups {
    _Atomic int *addr[WAKE_BATCH];
    int n;
};

/* Publishes w's new state and wakes it now or (wk != NULL) later. Once the
 * state is stored, w may return and its stack frame vanish: the wake then
 * hits a stale address, which the kernel treats as a futex with no waiter,
 * or wakes a later writer at the same address, which sees WAITING and
 * sleeps again (harmless either way). */
static void writer_wake(struct writer *w, enum writer_state st, struct wakeups *wk)
{
    atomic_store_explicit(&w->state, st, memory_order_release);
    if (wk != NULL && wk->n < WAKE_BATCH)
        wk->addr[wk->n++] = &w->state;
    else
        futex_wake(&w->state);
}

static void wakeups_flush(struct wakeups *wk)
{
    for (int i = 0; i < wk->n; i++)
        futex_wake(wk->addr[i]);
    wk->n = 0;
}

/* Waits, without mu, until w is told to lead or is done. A brief spin
 * first: a non-sync group finishes in microseconds. */
static enum writer_state writer_wait(struct writer *w)
{
    for (int i = 0; i < 64; i++) {
        int st = atomic_load_explicit(&w->state, memory_order_acquire);
        if (st != WRITER_WAITING)
            return (enum writer_state)st;
        __builtin_ia32_pause();
    }
    int st;
    while ((st = atomic_load_explicit(&w->state, memory_order_acquire)) == WRITER_WAITING)
        futex_wait(&w->state, WRITER_WAITING);
    return (enum writer_state)st;
}

/* REQUIRES: mu held. */
static void enqueue(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu));
    w->next = NULL;
    if (db->tail)
        db->tail->next = w;
    else
        db->head = w;
    db->tail = w;
    db->queue_len++;
    if (db->gathering && db->queue_len >= db->expected_group)
        pthread_cond_signal(&db->gather_cv);
}

/* Waits for followers to gather behind the leader `w` (see the file comment).
 * REQUIRES: mu held; w is the head. */
static void gather(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu) && db->head == w);
    uint32_t delay = db->opt.group_commit_delay_us;
    if (!w->sync || delay == 0 || db->queue_len >= db->expected_group)
        return;
    uint64_t t0 = db->env->now_micros(db->env);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += (long)delay * 1000;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    db->gathering = true;
    while (db->queue_len < db->expected_group &&
           cond_timedwait(&db->gather_cv, &db->mu, &deadline) != ETIMEDOUT) {
    }
    db->gathering = false;
    db->stats.gather_wait_us += db->env->now_micros(db->env) - t0;
}

/* After a sync group of n writers: expect as many next time, forgetting
 * slowly (one per group) so a crowd that thinned is not waited for long. */
static void learn_group_size(lsm_db *db, int n)
{
    if (n >= db->expected_group)
        db->expected_group = n;
    else if (db->expected_group > 1)
        db->expected_group--;
}

/* Picks the writers that join the leader's group: returns the last one, and
 * whether the group must be synced. REQUIRES: mu held; leader at the head. */
static struct writer *pick_group(lsm_db *db, bool *need_sync, int *count)
{
    assert(mutex_held(&db->mu));
    struct writer *first = db->head, *last = first;
    size_t size = writer_bytes(first);
    size_t max = MAX_GROUP_BYTES;
    if (size <= SMALL_BATCH)
        max = size + SMALL_BATCH;
    *need_sync = first->sync;
    *count = 1;
    for (struct writer *w = first->next; w != NULL; w = w->next) {
        if (w->sync && !first->sync)
            break; /* this leader will not sync: w must lead its own group */
        if (w->solo)
            break;
        if (size + writer_bytes(w) > max)
            break;
        size += writer_bytes(w);
        last = w;
        (*count)++;
    }
    return last;
}

/* Builds the group's WAL record: the leader's own batch when it is alone,
 * else the scratch batch with every member's records appended. Sequence
 * numbers start at seq. [leader] */
static lsm_status *build_group(lsm_db *db, struct writer *first, struct writer *last, uint64_t seq,
                               lsm_batch **out)
{
    lsm_batch *only = NULL;
    int with_data = 0;
    for (struct writer *w = first;; w = w->next) {
        if (w->batch) {
            only = w->batch;
            with_data++;
        }
        if (w == last)
            break;
    }
    if (with_data <= 1) {
        *out = only; /* NULL: a group of barriers writes nothing */
    } else {
        lsm_batch_clear(&db->group);
        for (struct writer *w = first;; w = w->next) {
            if (w->batch && !lsm_batch_append(&db->group, w->batch))
                return status_new(LSM_IO_ERROR, "out of memory merging a write group");
            if (w == last)
                break;
        }
        *out = &db->group;
    }
    if (*out)
        batch_set_sequence(*out, seq);
    return NULL;
}

/* Appends the group to the WAL, syncs it if asked, inserts it into mem.
 * Runs with mu released. [leader] */
static lsm_status *commit_group(lsm_db *db, lsm_batch *group, bool need_sync, wal_writer *wal,
                                memtable *mem, uint64_t *bytes, bool *synced)
{
    lsm_status *s = NULL;
    *bytes = 0;
    *synced = false;
    if (group) {
        size_t n;
        const char *data = batch_contents(group, &n);
        s = wal_add_record(wal, data, n);
        if (s == NULL)
            s = wal_flush(wal);
        *bytes = n;
    }
    if (s == NULL && need_sync && db->wal_synced < wal_offset(wal)) {
        s = wal_sync(wal);
        if (s == NULL) {
            db->wal_synced = wal_offset(wal);
            *synced = true;
        }
    }
    if (s != NULL)
        return status_wrap(s, "write-ahead log %06llu", (unsigned long long)db->wal_number);
    if (group)
        s = batch_insert_into(group, mem);
    return s;
}

lsm_status *db_new_wal(lsm_db *db, uint64_t number, wal_writer **out)
{
    char name[4096];
    snprintf(name, sizeof(name), "%s/%06llu.log", db->dir, (unsigned long long)number);
    lsm_wfile *f;
    lsm_status *s = db->env->new_wfile(db->env, name, &f);
    if (s)
        return s;
    /* Reserve log space ahead of the writes, 1 MiB at a time: syncs of
     * appends into reserved space need no inode update, and a live log
     * holds at most 1 MiB it does not use. ENOSPC here is no error: the
     * log then simply grows as it is written. */
    lsm_status *pre = f->ops->preallocate(f, 1u << 20);
    lsm_status_free(pre);
    *out = wal_writer_new(f, 0);
    if (*out == NULL)
        return status_new(LSM_IO_ERROR, "out of memory");
    s = db->env->sync_dir(db->env, db->dir);
    if (s) {
        lsm_status_free(wal_writer_close(*out));
        lsm_status_free(db->env->remove_file(db->env, name));
        *out = NULL;
    }
    return s;
}

/* Switches to a new memtable and a new WAL; the old memtable becomes
 * immutable. REQUIRES: mu held; caller is the leader (mu is released while
 * the old log is synced and the new one created). */
static lsm_status *switch_memtable(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t number = vset_new_file_number(&db->vs);
    wal_writer *old = db->wal;
    memtable *fresh = memtable_new();
    if (fresh == NULL)
        return status_new(LSM_IO_ERROR, "out of memory switching memtables");
    mutex_unlock(&db->mu);
    lsm_status *sync_err = NULL;
    if (db->wal_synced < wal_offset(old))
        sync_err = wal_sync(old);
    wal_writer *neu = NULL;
    lsm_status *s = sync_err ? status_copy(sync_err) : db_new_wal(db, number, &neu);
    mutex_lock(&db->mu);
    if (sync_err) /* the old log's writes may be lost: sticky */
        db_set_bg_error(db, status_wrap(sync_err, "syncing the write-ahead log"));
    if (s) {
        /* A failed create is not sticky: the old log is intact and the next
         * write tries again. */
        memtable_unref(fresh);
        return s;
    }
    if (!db_push_imm(db, fresh, number)) {
        /* Keep writing the old log; the empty new one is swept later. */
        lsm_status_free(wal_writer_close(neu));
        memtable_unref(fresh);
        return status_new(LSM_IO_ERROR, "out of memory switching memtables");
    }
    lsm_status_free(wal_writer_close(old));
    db->durable_seq = db->last_seq; /* the old log was synced just now */
    db->wal = neu;
    db->wal_number = number;
    db->wal_synced = 0;
    db->stats.rotations++;
    db_install_view(db);
    return NULL;
}

/* Writers are paced by a rate rather than by delays per write: each group's
 * bytes are charged at the rate to a clock (pace_next_us), and the leader
 * sleeps while that clock runs ahead of real time. A window of writes then
 * takes max(its own time, its bytes / rate): a steady rate gives steady
 * windows, whatever the writer's own speed does. The clock may lag real time
 * by at most PACE_BURST_US: slow writes earn no credit beyond that. Charges
 * are settled against real time once per PACE_SETTLE_US of them, not at
 * every write (reading the time per write cost the writer 6% of its CPU). */
#define PACE_BURST_US 20000.0
#define PACE_SETTLE_US 1000.0
/* The rate the backstops scale down when the pacer sets none. */
#define BACKSTOP_RATE 64e6

/* Bytes per second writers may go: the rate compaction sustains (pacing.h),
 * scaled down further — linearly to a trickle at the stop point — while
 * level 0 holds L0_SLOWDOWN files or more or memtables fill past 3/4 of
 * max_memtable_bytes. Those two are backstops: with the pacer's rate right
 * they are not reached. 0: unpaced. REQUIRES: mu held. */
static double paced_rate(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    int l0 = db->vs.current->nfiles[0];
    double mem_fill = (double)db_memtable_bytes(db) / (double)db->opt.max_memtable_bytes;
    double f = 0; /* 0: no slowdown, 1: stopped */
    if (l0 >= L0_SLOWDOWN)
        f = (double)(l0 - L0_SLOWDOWN + 1) / (double)(L0_STOP - L0_SLOWDOWN + 1);
    if (mem_fill > 0.75 && (mem_fill - 0.75) * 4 > f)
        f = (mem_fill - 0.75) * 4;
    double rate = db->pacer.rate;
    if (f > 0) {
        if (f >= 1)
            f = 0.99;
        rate = (rate > 0 ? rate : BACKSTOP_RATE) * (1 - f);
    }
    return rate;
}

void db_account_write(lsm_db *db, uint64_t bytes)
{
    double rate = paced_rate(db);
    if (rate <= 0) {
        db->pace_next_us = 0;
        return;
    }
    if (db->pace_next_us == 0) /* a paced stretch begins now */
        db->pace_next_us = db->pace_settled_us = (double)db->env->now_micros(db->env);
    db->pace_next_us += (double)bytes * 1e6 / rate;
}

/* Settles the pacing clock against real time once enough was charged to it:
 * returns how long to sleep (0: none). REQUIRES: mu held. */
static uint64_t pace_delay(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    if (db->pace_next_us == 0 || db->pace_next_us < db->pace_settled_us + PACE_SETTLE_US)
        return 0;
    double now = (double)db->env->now_micros(db->env);
    if (db->pace_next_us < now - PACE_BURST_US)
        db->pace_next_us = now - PACE_BURST_US;
    db->pace_settled_us = db->pace_next_us;
    return db->pace_next_us > now + PACE_SETTLE_US ? (uint64_t)(db->pace_next_us - now) : 0;
}

/* Waits for background work to make room. REQUIRES: mu held. */
static void wait_for_room(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t t0 = db->env->now_micros(db->env);
    db->stats.stops++;
    pthread_cond_broadcast(&db->work_cv);
    cond_wait(&db->room_cv, &db->mu);
    db->stats.stop_us += db->env->now_micros(db->env) - t0;
}

lsm_status *db_make_room_for_write(lsm_db *db, bool force)
{
    assert(mutex_held(&db->mu));
    for (;;) {
        if (db->bg_error)
            return status_copy(db->bg_error);
        uint64_t us = pace_delay(db);
        if (us > 0) {
            /* Sleep until the pacing clock, with mu released (others keep
             * queueing behind us and join the next group). */
            mutex_unlock(&db->mu);
            db->env->sleep_micros(db->env, us);
            mutex_lock(&db->mu);
            db->stats.slowdown_us += us;
            continue;
        }
        bool full = memtable_memory_usage(db->mem) >= db->opt.write_buffer_size;
        if (!force && !full)
            return NULL;
        if (force && memtable_entries(db->mem) == 0)
            return NULL;
        bool no_memory =
            db_memtable_bytes(db) + db->opt.write_buffer_size > db->opt.max_memtable_bytes &&
            db->nimm > 0;
        if (no_memory || db->vs.current->nfiles[0] >= L0_STOP) {
            /* Room comes from flushes and compactions; while the disk is
             * too full for them, say so rather than wait forever. */
            if (db->nospace)
                return status_copy(db->nospace);
            wait_for_room(db);
            continue;
        }
        lsm_status *s = switch_memtable(db);
        if (s == NULL)
            pthread_cond_broadcast(&db->work_cv); /* wake the flush thread */
        return s;
    }
}

/* Pops the group [head, last], handing each follower its status; wakes the
 * next head. REQUIRES: mu held. */
static void finish_group(lsm_db *db, struct writer *leader, struct writer *last, lsm_status *s,
                         struct wakeups *wk)
{
    assert(mutex_held(&db->mu));
    for (;;) {
        struct writer *w = db->head;
        db->head = w->next;
        db->queue_len--;
        if (w != leader) {
            w->seq = db->last_seq;
            w->status = status_copy(s);
            writer_wake(w, WRITER_DONE, wk); /* w may be gone after this */
        }
        if (w == last)
            break;
    }
    if (db->head == NULL)
        db->tail = NULL;
    else
        writer_wake(db->head, WRITER_LEADER, wk);
}

void db_queue_pop_head(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu) && db->head == w);
    finish_group(db, w, w, NULL, NULL);
}

bool db_queue_wait(lsm_db *db, struct writer *w)
{
    assert(mutex_held(&db->mu));
    atomic_init(&w->state, WRITER_WAITING);
    enqueue(db, w);
    if (db->head == w)
        return true;
    mutex_unlock(&db->mu);
    uint64_t t0 = db->env->now_micros(db->env); /* only writers that queue pay for it */
    enum writer_state st = writer_wait(w);
    atomic_fetch_add_explicit(&db->stats.queue_wait_us, db->env->now_micros(db->env) - t0,
                              memory_order_relaxed);
    if (st == WRITER_DONE)
        return false;
    mutex_lock(&db->mu);
    assert(db->head == w);
    return true;
}

static void count_group(lsm_db *db, int count, uint64_t bytes, bool synced)
{
    struct db_stats *st = &db->stats;
    int followers = count - 1;
    st->followers[followers < FOLLOWER_BUCKETS - 1 ? followers : FOLLOWER_BUCKETS - 1]++;
    if (bytes) {
        st->groups++;
        st->wal_bytes += bytes;
        st->user_bytes += bytes - BATCH_HEADER;
    }
    if (synced)
        st->syncs++;
}

/* Leads one group; the wake-ups it owes go to wk. REQUIRES: mu held; w is
 * the head. */
static lsm_status *lead(lsm_db *db, struct writer *w, struct wakeups *wk)
{
    lsm_status *s = db_make_room_for_write(db, false);
    struct writer *last = w;
    int count = 1;
    uint64_t bytes = 0;
    bool need_sync = false, synced = false;
    if (s == NULL) {
        gather(db, w);
        last = pick_group(db, &need_sync, &count);
        uint64_t seq = db->last_seq + 1;
        lsm_batch *group = NULL;
        s = build_group(db, w, last, seq, &group);
        wal_writer *wal = db->wal;
        memtable *mem = db->mem;
        mutex_unlock(&db->mu);
        if (s == NULL)
            s = commit_group(db, group, need_sync, wal, mem, &bytes, &synced);
        mutex_lock(&db->mu);
        if (s == NULL && group) {
            db->last_seq = seq + lsm_batch_count(group) - 1;
            db_account_write(db, bytes);
        }
        if (s == NULL && need_sync) /* the WAL is sequential: all before is durable */
            db->durable_seq = db->last_seq;
        else if (s != NULL)
            db_set_bg_error(db, status_copy(s));
        count_group(db, count, bytes, synced);
        if (need_sync)
            learn_group_size(db, count);
    }
    finish_group(db, w, last, s, wk);
    return s;
}

lsm_status *db_write(lsm_db *db, lsm_batch *batch, bool sync, uint64_t *seqp)
{
    struct writer w = {.batch = batch, .sync = sync};
    if (batch && lsm_batch_count(batch) == 0)
        w.batch = NULL;
    mutex_lock(&db->mu);
    db->stats.writes++;
    if (w.batch == NULL)
        db->stats.barriers++;
    if (!db_queue_wait(db, &w)) { /* a leader wrote it for us */
        if (seqp)
            *seqp = w.seq;
        return w.status;
    }
    struct wakeups wk = {.n = 0};
    lsm_status *s = lead(db, &w, &wk);
    if (seqp)
        *seqp = db->last_seq;
    mutex_unlock(&db->mu);
    wakeups_flush(&wk);
    return s;
}
