/*
 * db_sync.c — the sync stage of the write path: groups that asked for sync
 * wait here, after db_write.c's queue put them in the WAL and the memtable,
 * until a WAL sync covers them.
 *
 * A group's life here (the state of its leader's writer, enum writer_state):
 *   - db_wait_durable puts it in the sync list (WAITING), unless it is
 *     durable already or the store has a sticky error;
 *   - if a sync may start (may_start_sync) it runs one itself (run_sync);
 *     else it sleeps until either a sync that covered it finishes it
 *     (DONE, with that sync's verdict) or db_hand_off_sync tells it to run
 *     the next sync (SYNCER; db->syncer names it until it starts);
 *   - whoever finishes a sync finishes every group it covered and hands the
 *     next sync to the first group no running sync covers.
 * A sync: syncs_running counts it from before it gathers, a slot of
 * sync_running_upto holds what it covers (db_sync_ceiling at its start)
 * while it runs; memtable switches (db_rotate.c) set wal_switching, wait
 * for syncs_running to reach 0, and then finish or hand on the waiters.
 *
 * Invariants (REQUIRES mu; sync_state_ok checks them, asserted before and
 * after every WAL sync):
 *   S1. 0 <= syncs_running <= SYNC_MAX, and at most that many slots are
 *       taken (a sync still gathering has none yet). Only while
 *       syncs_running < sync_max may another start (sync_max may drop below
 *       the syncs already running: they finish).
 *   S2. durable_seq <= last_seq, and no deferred batch with a sequence
 *       <= durable_seq is outside the log (a sync never claims one).
 *   S3. Each running sync covers at most last_seq and no deferred batch
 *       outside the log.
 *   S4. wal_synced <= wal_written: only appended bytes are synced.
 *   S5. The sync list is empty exactly when sync_head, sync_tail and
 *       sync_waiters all say so.
 *   S6. A sync starts (syncs_running counts it) only when no memtable
 *       switch is leaving the WAL (asserted on entry to run_sync); a switch
 *       that begins later waits for it, so every sync uses the log that was
 *       current when it started.
 *   S7. No sync starts on a log an append found the disk full in
 *       (wal_broken) until db_rotate.c's db_cut_broken_wal has cut it back to
 *       its last whole group (wal_cut); nothing is appended to it after.
 *
 * Gathering: when a sync is about to start and recent syncs covered more
 * writers than now wait, the syncer waits (at most group_commit_delay_us) for
 * the usual crowd to append, so one fdatasync serves all of them instead of
 * splitting them into a small sync and a large one (PostgreSQL's
 * commit_delay idea, self-tuned: one writer alone never waits).
 *
 * Slow syncs (a RADOS round trip, SYNC_MAX_SLOW): one sync runs at a time,
 * so writers that arrive while it runs wait for it and then for the next;
 * left alone they settle into two crowds taking turns, each paying two
 * syncs per fsync. Three rules make them one crowd that pays one: the crowd
 * a sync learns counts the writers that arrived while it ran; the gather
 * waits up to half a sync for the writers a sync released to come back;
 * and the WAL's flushes keep their bytes for the coming sync (db_hold_wal)
 * instead of sending them alone ahead of it.
 */
#include "db_impl.h"
#include "status.h"

#include <errno.h>
#include <time.h>

/* Whether S1-S5 of the file comment hold. REQUIRES: mu held. */
static bool sync_state_ok(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    int taken = 0;
    for (int i = 0; i < SYNC_MAX; i++) {
        uint64_t upto = db->sync_running_upto[i];
        if (upto == 0)
            continue;
        taken++;
        if (upto > db->last_seq || db_deferred_upto(db, upto))
            return false; /* S3 */
    }
    bool s1 = db->syncs_running >= 0 && db->syncs_running <= SYNC_MAX &&
              taken <= db->syncs_running;
    bool s2 = db->durable_seq <= db->last_seq && !db_deferred_upto(db, db->durable_seq);
    bool s4 = db->wal_synced <= db->wal_written;
    bool empty = db->sync_head == NULL;
    bool s5 = (db->sync_tail == NULL) == empty && (db->sync_waiters == 0) == empty;
    return s1 && s2 && s4 && s5;
}

/* Writers a gather counts: `at_head` (a sync leader gathering its group)
 * counts those queued too, a syncer only those already in the sync list.
 * REQUIRES: mu held. */
static int gathered(lsm_db *db, bool at_head)
{
    return db->sync_waiters + (at_head ? db->queue_len : 0);
}

/* Wakes gatherers once the crowd they wait for is there. REQUIRES: mu held. */
void db_gather_signal(lsm_db *db)
{
    if (db->gatherers > 0 && gathered(db, true) >= db->expected_group)
        pthread_cond_broadcast(&db->gather_cv);
}

/* Whether syncs are slow enough to run one at a time (learn_sync_time).
 * REQUIRES: mu held. */
static bool syncs_slow(const lsm_db *db)
{
    return db->sync_max == SYNC_MAX_SLOW;
}

/* The longest a slow sync's gather waits: a writer a sync released comes
 * back within milliseconds or not soon. */
#define SLOW_GATHER_MAX_US 10000

/* The longest a gather waits: group_commit_delay_us, or half a sync (at
 * most SLOW_GATHER_MAX_US) once syncs are slow (see the file comment).
 * REQUIRES: mu held. */
static uint64_t gather_delay_us(const lsm_db *db)
{
    uint64_t delay = db->opt.group_commit_delay_us;
    uint64_t slow = db->sync_us_avg / 2 < SLOW_GATHER_MAX_US ? db->sync_us_avg / 2
                                                             : SLOW_GATHER_MAX_US;
    return syncs_slow(db) && slow > delay ? slow : delay;
}

/* Waits (at most gather_delay_us) for the usual crowd of sync writers
 * to arrive (see the file comment). REQUIRES: mu held. */
void db_gather(lsm_db *db, bool at_head)
{
    assert(mutex_held(&db->mu));
    uint64_t delay = gather_delay_us(db);
    if (delay == 0 || gathered(db, at_head) >= db->expected_group)
        return;
    uint64_t t0 = db->env->now_micros(db->env);
    struct timespec deadline = monotonic_deadline(delay);
    db->gatherers++;
    while (gathered(db, at_head) < db->expected_group &&
           cond_timedwait(&db->gather_cv, &db->mu, &deadline) != ETIMEDOUT) {
    }
    db->gatherers--;
    db->stats.gather_wait_us += db->env->now_micros(db->env) - t0;
}

/* After a sync that covered `covered` writers while `arrived` more came to
 * wait: expect as many next time (with slow syncs, the arrivals too: see the
 * file comment), forgetting slowly (one per sync) so a crowd that thinned is
 * not waited for long. REQUIRES: mu held. */
static void learn_group_size(lsm_db *db, int covered, int arrived)
{
    int n = covered + (syncs_slow(db) ? arrived : 0);
    if (n >= db->expected_group)
        db->expected_group = n;
    else if (db->expected_group > 1)
        db->expected_group--;
}

/* After a WAL sync that took us: sets how many syncs may overlap from the
 * average sync time (db_impl.h, SYNC_MAX_SLOW): two for a fast local
 * disk; one once syncs are slow (a RADOS round trip), so the writers that
 * arrive meanwhile wait and share the next sync instead of splitting into
 * two. Half the threshold to come back, so it does not flap. REQUIRES: mu
 * held. */
static void learn_sync_time(lsm_db *db, uint64_t us)
{
    assert(mutex_held(&db->mu));
    db->sync_us_avg = db->sync_us_avg == 0 ? us : (7 * db->sync_us_avg + us) / 8;
    if (db->sync_us_avg >= SYNC_SLOW_US)
        db->sync_max = SYNC_MAX_SLOW;
    else if (db->sync_us_avg < SYNC_SLOW_US / 2)
        db->sync_max = SYNC_MAX;
}

/* The sync stage. A group waiting for durability is its leader's writer in
 * the sync list; the other members sleep on, still linked from it. Whoever
 * runs a sync finishes, after it, every group it covered (waking each member
 * on its futex: none of them needs mu to return), and hands the next sync
 * to the first group no running sync covers.
 *
 * Syncs overlap, up to sync_max (learn_sync_time): a group published after the running sync
 * started (so not covered by it) starts its own at once instead of waiting
 * a whole sync for its turn. The disk serves overlapping fdatasyncs of one
 * file well (docs/decisions.md, "overlapping WAL syncs"), and each
 * still covers everything appended before it started, so durable_seq only
 * ever moves up to what a finished sync covered (a later-started sync that
 * finishes first covers the earlier one's groups too). The env gives each
 * overlapping sync its own file description, so a lost page is reported to
 * every sync that needed it (see env.h). */

/* Whether a sync still running will decide about a group waiting for
 * `target`. REQUIRES: mu held. */
static bool running_sync_covers(const lsm_db *db, uint64_t target)
{
    for (int i = 0; i < SYNC_MAX; i++)
        if (db->sync_running_upto[i] >= target)
            return true;
    return false;
}

/* Whether a sync that is running or about to start covers `target`: one
 * gathering or told to start reads last_seq after the group was published.
 * REQUIRES: mu held. */
static bool sync_coming(const lsm_db *db, uint64_t target)
{
    return db->sync_gathering || db->syncer != NULL || running_sync_covers(db, target);
}

/* REQUIRES: mu held. */
static bool may_start_sync(const lsm_db *db, uint64_t target)
{
    return !db->wal_switching && (!db->wal_broken || db->wal_cut) && db->syncs_running < db->sync_max && !sync_coming(db, target);
}

/* Finishes the waiting groups whose target is durable, or, if s != NULL,
 * with that error every group no running sync still covers (one that does
 * gets that sync's verdict: its own description of the file reports any
 * page it needed that was lost). REQUIRES: mu held. */
void db_finish_synced(lsm_db *db, lsm_status *s, struct writer *self, struct wakeups *wk)
{
    assert(mutex_held(&db->mu));
    struct writer **pp = &db->sync_head, *prev = NULL;
    while (*pp != NULL) {
        struct writer *g = *pp;
        bool wait_on = s == NULL ? g->target > db->durable_seq
                                 : running_sync_covers(db, g->target);
        if (wait_on) {
            prev = g;
            pp = &g->sync_next;
            continue;
        }
        *pp = g->sync_next;
        db->sync_waiters -= g->count;
        if (g == db->syncer) /* told to sync, but covered before it could */
            db->syncer = NULL;
        db_finish_group(g, g->last, s, g->target, wk);
        g->seq = g->target;
        g->status = status_copy(s);
        if (g != self) /* a group running its own sync sees DONE after it */
            db_writer_wake(g, WRITER_DONE, wk); /* g may be gone after this */
        else
            atomic_store_explicit(&g->state, WRITER_DONE, memory_order_relaxed);
    }
    db->sync_tail = prev;
}

/* Bounds on how long after a sync the WAL stays held for the next one
 * (db_hold_wal): two syncs' time, within these. */
#define HOLD_MIN_US 2000
#define HOLD_MAX_US 50000

uint64_t db_hold_wal(lsm_db *db)
{
    assert(mutex_held(&db->mu));
    uint64_t span = 2 * db->sync_us_avg, left = 0;
    span = span < HOLD_MIN_US ? HOLD_MIN_US : span > HOLD_MAX_US ? HOLD_MAX_US : span;
    bool want = false;
    if (syncs_slow(db) && db->wal != NULL && db->bg_error == NULL) {
        if (db->sync_head != NULL || db->syncs_running > 0) {
            want = true;
            left = span; /* a sync is coming: look again after it */
        } else if (db->hold_watched) { /* its idle look ends it at the deadline */
            uint64_t now = db->env->now_micros(db->env), until = db->sync_end_us + span;
            want = now < until;
            left = want ? until - now : 0;
        }
    }
    if (want != db->wal_held) {
        db->wal_held = want;
        if (db->wal != NULL) /* a closed log sent what it held */
            wal_hold_for_sync(db->wal, want);
        if (want) /* the flush thread ends the hold (db_idle_look) */
            pthread_cond_broadcast(&db->work_cv);
    }
    return left;
}

void db_hold_watch(lsm_db *db, bool watched)
{
    assert(mutex_held(&db->mu));
    db->hold_watched = watched;
    (void)db_hold_wal(db);
}

/* Tells the first group that no running sync covers to run the next one,
 * if one may start. REQUIRES: mu held. */
void db_hand_off_sync(lsm_db *db, struct wakeups *wk)
{
    assert(mutex_held(&db->mu));
    for (struct writer *g = db->sync_head; g != NULL; g = g->sync_next) {
        if (!may_start_sync(db, g->target))
            continue;
        db->syncer = g;
        db_writer_wake(g, WRITER_SYNCER, wk);
        return;
    }
}

/* Syncs the WAL for everything published so far — after letting the usual
 * crowd of waiting groups gather, unless another sync is running — then
 * finishes the groups it covered. A failure is sticky: the kernel may have
 * dropped pages it could not write. Returns self's status (self may have
 * been finished meanwhile by an overlapping sync), *finished true; or,
 * when it failed but a running sync still covers self, NULL and *finished
 * false: self waits on. REQUIRES: mu held; may_start_sync; `self` waits in
 * the sync list. */
static lsm_status *run_sync(lsm_db *db, struct writer *self, struct wakeups *wk, bool *finished)
{
    assert(mutex_held(&db->mu) && db->syncs_running < db->sync_max && !db->wal_switching);
    db->syncs_running++; /* also keeps the WAL from being switched under us */
    if (db->syncs_running == 1) {
        db->sync_gathering = true;
        db_gather(db, false);
        db->sync_gathering = false;
    }
    uint64_t upto = db_sync_ceiling(db), off = db->wal_written;
    int slot = 0;
    while (db->sync_running_upto[slot] != 0)
        slot++;
    assert(slot < SYNC_MAX && upto > 0);
    db->sync_running_upto[slot] = upto;
    /* S6 was asserted on entry: a switch that began while this sync gathered
     * set wal_switching and waits for it (syncs_running), so db->wal is
     * still the log this sync counted. */
    assert(sync_state_ok(db)); /* S1-S5 */
    int covered = db->sync_waiters;
    lsm_status *s = NULL;
    if (off > db->wal_synced) {
        wal_writer *wal = db->wal;
        db->stats.overlapped_syncs += db->syncs_running > 1;
        if ((uint64_t)db->syncs_running > db->stats.most_syncs_running)
            db->stats.most_syncs_running = (uint64_t)db->syncs_running;
        mutex_unlock(&db->mu);
        db_wakeups_flush(wk); /* the next head (pop_group) need not wait for the disk */
        uint64_t t0 = db->env->now_micros(db->env);
        s = wal_sync(wal);
        uint64_t end = db->env->now_micros(db->env), took = end - t0;
        mutex_lock(&db->mu);
        if (s == NULL) {
            if (off > db->wal_synced)
                db->wal_synced = off;
            db->stats.syncs++;
            db->stats.sync_us += took;
            db->sync_end_us = end;
            learn_sync_time(db, took);
        }
    }
    if (s == NULL) {
        if (upto > db->durable_seq)
            db->durable_seq = upto;
        learn_group_size(db, covered, db->sync_waiters - covered + db->queue_len);
    } else {
        s = status_wrap(s, "write-ahead log %06llu", (unsigned long long)db->wal_number);
        db_set_bg_error(db, status_copy(s));
    }
    db->syncs_running--;
    db->sync_running_upto[slot] = 0;
    assert(sync_state_ok(db));
    pthread_cond_broadcast(&db->sync_cv); /* a memtable switch or a sync head waits */
    bool was_done = atomic_load_explicit(&self->state, memory_order_relaxed) == WRITER_DONE;
    db_finish_synced(db, s, self, wk);
    db_hand_off_sync(db, wk);
    (void)db_hold_wal(db);
    *finished = true;
    if (was_done) { /* an overlapping sync covered self: its verdict stands */
        lsm_status_free(s);
        return self->status;
    }
    if (atomic_load_explicit(&self->state, memory_order_relaxed) != WRITER_DONE) {
        /* This sync failed while a later one that covers self still runs
         * (ARCHITECTURE.md invariant 8): self waits for that one's verdict. */
        lsm_status_free(s);
        *finished = false;
        return NULL;
    }
    lsm_status_free(self->status); /* the copy finish_synced made */
    return s;
}

/* Waits until every write up to `target` is durable, for the group [g, last]
 * of n writers (g is its leader, already off the queue); then g's followers
 * are finished too. REQUIRES: mu held (released while waiting). */
lsm_status *db_wait_durable(lsm_db *db, struct writer *g, struct writer *last, uint64_t target,
                                int n, struct wakeups *wk)
{
    assert(mutex_held(&db->mu) && target <= db->last_seq);
    if (db->durable_seq >= target || db->bg_error != NULL) {
        lsm_status *s = db->durable_seq >= target ? NULL : status_copy(db->bg_error);
        db_finish_group(g, last, s, target, wk);
        return s;
    }
    g->last = last;
    g->target = target;
    g->count = n;
    g->sync_next = NULL;
    if (db->sync_tail)
        db->sync_tail->sync_next = g;
    else
        db->sync_head = g;
    db->sync_tail = g;
    db->sync_waiters += n;
    atomic_store_explicit(&g->state, WRITER_WAITING, memory_order_relaxed);
    db_gather_signal(db);
    (void)db_hold_wal(db);
    for (;;) {
        if (may_start_sync(db, target)) {
            bool finished;
            lsm_status *s = run_sync(db, g, wk, &finished);
            if (finished)
                return s;
            continue;
        }
        mutex_unlock(&db->mu);
        db_wakeups_flush(wk);
        (void)db_writer_wait(g);
        mutex_lock(&db->mu);
        /* Read again under mu: a sync may have finished g since it woke. */
        if (atomic_load_explicit(&g->state, memory_order_relaxed) == WRITER_DONE)
            return g->status;
        assert(db->syncer == g);
        db->syncer = NULL;
        /* Still waiting; a sync may have started meanwhile that covers g. */
        atomic_store_explicit(&g->state, WRITER_WAITING, memory_order_relaxed);
    }
}

lsm_status *db_sync_wait(lsm_db *db, uint64_t target, struct wakeups *wk)
{
    assert(mutex_held(&db->mu));
    struct writer w = {.batch = NULL, .sync = true};
    db->stats.writes++;
    db->stats.barriers++;
    lsm_status *s = status_copy(db->bg_error);
    if (s == NULL)
        s = db_wait_durable(db, &w, &w, target, 1, wk);
    return s;
}
