/* alloc_fail.c — the allocation-failure hook of the tests; see alloc_fail.h. */
#include "alloc_fail.h"

#include "lsm_malloc.h"

#include <stdatomic.h>

static _Atomic uint64_t counts[2];  /* per stream, since arming */
static _Atomic uint64_t fail_at[2]; /* per stream; 0: none */
static _Atomic bool fired;
static _Atomic bool from_on;       /* fail fail_at and every later one of its stream */
static _Thread_local bool is_main; /* this thread armed the hook */

/* lsm_malloc.h's hook while armed: counts this allocation; true if it is
 * the one to fail. */
static bool hook_fails(void)
{
    int s = is_main ? LSM_ALLOC_MAIN : LSM_ALLOC_OTHER;
    uint64_t n = atomic_fetch_add_explicit(&counts[s], 1, memory_order_relaxed) + 1;
    uint64_t at = atomic_load_explicit(&fail_at[s], memory_order_relaxed);
    if (at == 0 || (atomic_load_explicit(&from_on, memory_order_relaxed) ? n < at : n != at))
        return false;
    atomic_store_explicit(&fired, true, memory_order_relaxed);
    return true;
}

void lsm_alloc_hook_arm(enum lsm_alloc_stream stream, uint64_t n)
{
    lsm_alloc_hook_arm_from(stream, n, false);
}

void lsm_alloc_hook_arm_from(enum lsm_alloc_stream stream, uint64_t n, bool every_later)
{
    lsm_alloc_set_fail_hook(NULL);
    atomic_store(&from_on, every_later);
    is_main = true;
    for (int s = 0; s < 2; s++) {
        atomic_store(&counts[s], 0);
        atomic_store(&fail_at[s], (int)stream == s ? n : 0);
    }
    atomic_store(&fired, false);
    lsm_alloc_set_fail_hook(hook_fails);
}

void lsm_alloc_hook_disarm(void)
{
    lsm_alloc_set_fail_hook(NULL);
    is_main = false;
}

uint64_t lsm_alloc_hook_count(enum lsm_alloc_stream stream)
{
    return atomic_load(&counts[stream]);
}

bool lsm_alloc_hook_fired(void)
{
    return atomic_load(&fired);
}
