/* writer.c — a writer's hand-off: how a queued or waiting writer learns
 * its fate (see writer.h). */
#include "writer.h"
#include "port.h"
#include "status.h"

/* Publishes w's new state and wakes it now or (wk != NULL) later. Once the
 * state is stored, w may return and its stack frame vanish: the wake then
 * hits a stale address, which port_futex_wake treats as one with no waiter,
 * or wakes a later writer at the same address, which sees WAITING and
 * sleeps again (harmless either way). */
void db_writer_wake(struct writer *w, enum writer_state st, struct wakeups *wk)
{
    atomic_store_explicit(&w->state, st, memory_order_release);
    if (wk != NULL && wk->n < WAKE_BATCH)
        wk->addr[wk->n++] = &w->state;
    else
        port_futex_wake(&w->state);
}

void db_wakeups_flush(struct wakeups *wk)
{
    for (int i = 0; i < wk->n; i++)
        port_futex_wake(wk->addr[i]);
    wk->n = 0;
}

/* Waits, without mu, until w is told to lead or is done. A brief spin
 * first: a non-sync group finishes in microseconds. */
enum writer_state db_writer_wait(struct writer *w)
{
    for (int i = 0; i < 64; i++) {
        int st = atomic_load_explicit(&w->state, memory_order_acquire);
        if (st != WRITER_WAITING)
            return (enum writer_state)st;
        port_cpu_relax();
    }
    int st;
    while ((st = atomic_load_explicit(&w->state, memory_order_acquire)) == WRITER_WAITING)
        port_futex_wait(&w->state, WRITER_WAITING);
    return (enum writer_state)st;
}

/* Hands each follower in (leader, last] its status and sequence and wakes
 * it. REQUIRES: mu held (for the statuses' sake: s is copied). */
void db_finish_group(struct writer *leader, struct writer *last, lsm_status *s, uint64_t seq,
                         struct wakeups *wk)
{
    struct writer *m = leader == last ? NULL : leader->next;
    while (m != NULL) {
        struct writer *next = m == last ? NULL : m->next; /* before m may go */
        m->seq = seq;
        m->status = status_copy(s);
        db_writer_wake(m, WRITER_DONE, wk);
        m = next;
    }
}
