/* test_fs_spin.c — the reader's spin gate (fs/transport/spin.c): a caller
 * whose requests follow each other keeps it open; empty or slow polls
 * close it; while closed it probes every SPIN_PROBE_EVERY-th wait and a
 * fast hit opens it again; spin 0 never polls. */
#include "transport/spin.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define SPIN_NS 50000u

/* Waits until the gate polls; returns how many waits that took. */
static unsigned waits_to_poll(spin_gate *g)
{
    unsigned n = 1;
    while (!spin_gate_poll(g) && n <= 10 * SPIN_PROBE_EVERY)
        n++;
    return n;
}

/* SPIN_BALANCE_SPINS empty polls in a row, each polled (they close it). */
static void miss_until_closed(spin_gate *g)
{
    for (unsigned i = 0; i < SPIN_BALANCE_SPINS; i++) {
        assert_true(spin_gate_poll(g));
        spin_gate_miss(g, SPIN_NS);
    }
}

static void test_fast_hits_keep_it_open(void **state)
{
    (void)state;
    spin_gate g;
    spin_gate_init(&g, SPIN_NS);
    for (int i = 0; i < 1000; i++) {
        assert_true(spin_gate_poll(&g));
        spin_gate_hit(&g, 2000); /* a round trip's gap: the next request 2 us on */
    }
    /* A miss now and then (the caller thinking) does not close it. */
    for (int i = 0; i < 100; i++) {
        assert_true(spin_gate_poll(&g));
        spin_gate_miss(&g, SPIN_NS);
        for (int j = 0; j < 10; j++) {
            assert_true(spin_gate_poll(&g));
            spin_gate_hit(&g, 2000);
        }
    }
}

static void test_misses_in_a_row_close_it(void **state)
{
    (void)state;
    spin_gate g;
    spin_gate_init(&g, SPIN_NS);
    miss_until_closed(&g);
    assert_false(spin_gate_poll(&g));
}

static void test_slow_hits_close_it(void **state)
{
    (void)state;
    spin_gate g;
    spin_gate_init(&g, SPIN_NS);
    /* Hits 30 us after the reply spend more than the wake-up they save. */
    unsigned i = 0;
    while (spin_gate_poll(&g) && i++ < 100)
        spin_gate_hit(&g, 30000);
    assert_true(i < 100);
}

static void test_closed_probes_and_reopens(void **state)
{
    (void)state;
    spin_gate g;
    spin_gate_init(&g, SPIN_NS);
    miss_until_closed(&g);
    /* Closed: only every SPIN_PROBE_EVERY-th wait polls; an empty probe
     * keeps it closed. */
    assert_int_equal(waits_to_poll(&g), SPIN_PROBE_EVERY);
    spin_gate_miss(&g, SPIN_NS);
    assert_int_equal(waits_to_poll(&g), SPIN_PROBE_EVERY);
    /* A probe that catches a request 1 us on opens it. */
    spin_gate_hit(&g, 1000);
    assert_true(spin_gate_poll(&g));
    assert_true(spin_gate_poll(&g));
}

static void test_balance_is_bounded(void **state)
{
    (void)state;
    spin_gate g;
    spin_gate_init(&g, SPIN_NS);
    for (int i = 0; i < 100000; i++)
        spin_gate_hit(&g, 0);
    /* However long it paid, SPIN_BALANCE_SPINS misses close it. */
    miss_until_closed(&g);
    assert_false(spin_gate_poll(&g));
}

static void test_spin_zero_never_polls(void **state)
{
    (void)state;
    spin_gate g;
    spin_gate_init(&g, 0);
    for (unsigned i = 0; i < 10 * SPIN_PROBE_EVERY; i++)
        assert_false(spin_gate_poll(&g));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_hits_keep_it_open),
        cmocka_unit_test(test_misses_in_a_row_close_it),
        cmocka_unit_test(test_slow_hits_close_it),
        cmocka_unit_test(test_closed_probes_and_reopens),
        cmocka_unit_test(test_balance_is_bounded),
        cmocka_unit_test(test_spin_zero_never_polls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
