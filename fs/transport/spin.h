/*
 * spin.h — whether the reader polls /dev/fuse before it sleeps: only while
 * polling pays (loop.h says why it polls at all).
 *
 * A poll that catches the next request saves the daemon a wake-up
 * (SPIN_WAKE_NS: a woken round trip takes ~10 us, a polled one 2-3) and
 * spends the time it polled; one that runs out spends the whole spin time
 * of a CPU the callers may need. With many callers (mta.sh) the polls
 * spent more than they saved: 360-410 reads of /dev/fuse per delivered
 * message, hits 4-64 us after the reply. So the gate keeps a balance of
 * what the polls saved minus what they spent, at most SPIN_BALANCE_SPINS
 * spin times, and the reader polls while it is positive: a caller whose
 * requests follow each other within SPIN_WAKE_NS keeps it full; a few
 * empty or slow polls close it. While closed, every SPIN_PROBE_EVERY-th
 * wait polls anyway, so the gate opens again when polling pays again.
 */
#ifndef FS_SPIN_H
#define FS_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#define SPIN_WAKE_NS 8000u
#define SPIN_BALANCE_SPINS 4u
#define SPIN_PROBE_EVERY 64u

/* Guarded by the reader's turn: only the worker reading /dev/fuse uses it
 * (the turn passes under the loop's mutex). */
typedef struct spin_gate {
    uint64_t spin_ns;    /* [const] the spin time; 0: never poll */
    uint64_t balance_ns; /* saved minus spent, in [0, SPIN_BALANCE_SPINS * spin_ns] */
    unsigned closed;     /* waits without a poll since the last one */
} spin_gate;

/* A gate for spin_ns of polling, open (balance full). */
void spin_gate_init(spin_gate *g, uint64_t spin_ns);
/* Whether the wait that begins now polls first (counts the waits that do
 * not, for the probes). */
bool spin_gate_poll(spin_gate *g);
/* A polled wait got its request gap_ns after it began. */
void spin_gate_hit(spin_gate *g, uint64_t gap_ns);
/* A polled wait polled spent_ns without a request, then slept. */
void spin_gate_miss(spin_gate *g, uint64_t spent_ns);

#endif
