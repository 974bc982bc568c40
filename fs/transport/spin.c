/*
 * spin.c — the reader's spin balance (see spin.h).
 */
#include "spin.h"

static uint64_t balance_max(const spin_gate *g)
{
    return (uint64_t)SPIN_BALANCE_SPINS * g->spin_ns;
}

static void spend(spin_gate *g, uint64_t ns)
{
    g->balance_ns = g->balance_ns > ns ? g->balance_ns - ns : 0;
}

void spin_gate_init(spin_gate *g, uint64_t spin_ns)
{
    g->spin_ns = spin_ns;
    g->balance_ns = balance_max(g);
    g->closed = 0;
}

bool spin_gate_poll(spin_gate *g)
{
    if (g->spin_ns == 0)
        return false;
    if (g->balance_ns > 0 || ++g->closed >= SPIN_PROBE_EVERY) {
        g->closed = 0;
        return true;
    }
    return false;
}

void spin_gate_hit(spin_gate *g, uint64_t gap_ns)
{
    if (gap_ns >= SPIN_WAKE_NS) {
        spend(g, gap_ns - SPIN_WAKE_NS);
        return;
    }
    uint64_t b = g->balance_ns + (SPIN_WAKE_NS - gap_ns);
    g->balance_ns = b < balance_max(g) ? b : balance_max(g);
}

void spin_gate_miss(spin_gate *g, uint64_t spent_ns)
{
    spend(g, spent_ns);
}
