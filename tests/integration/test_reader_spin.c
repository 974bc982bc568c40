/*
 * test_reader_spin — the reader stops polling /dev/fuse when polling does
 * not pay (fs/transport/spin.h, issue 30): a caller whose requests come
 * milliseconds apart would have every wait poll its whole spin time in vain.
 * Counted by the daemon's "fs reader polls" (waits that polled); over
 * io_uring nobody reads /dev/fuse, so none poll.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "mount.h"
#include "transport/spin.h"

#define TEST_TIMEOUT_S 60
#define SPACED 200 /* requests, SPACED_MS apart */
#define SPACED_MS 2

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_reader_spin test", NULL);
}

static void spaced_requests(const char *f)
{
    for (int i = 0; i < SPACED; i++) {
        struct statx sx;
        TM_OK(statx(AT_FDCWD, f, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &sx)); /* a GETATTR */
        tm_sleep_ms(SPACED_MS);
    }
}

static void test_spaced_requests_stop_the_polling(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *f = P("f");
    tm_touch(f);
    bool ring = tm_stats_counter(m, "fs requests over io_uring") > 0;
    uint64_t polls0 = tm_stats_counter(m, "fs reader polls");
    spaced_requests(f);
    uint64_t polls = tm_stats_counter(m, "fs reader polls") - polls0;
    if (ring) {
        assert_int_equal(polls, 0);
        return;
    }
    /* The balance runs out after SPIN_BALANCE_SPINS empty polls; then only
     * the probes poll (a few waits more for the stats reads and slack). */
    uint64_t most = SPIN_BALANCE_SPINS + SPACED / SPIN_PROBE_EVERY + 8;
    if (polls > most)
        fail_msg("%llu of %d waits %d ms apart polled; at most %llu should",
                 (unsigned long long)polls, SPACED, SPACED_MS, (unsigned long long)most);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_spaced_requests_stop_the_polling, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
