/* test_fs_task_state.c — a thread's state from /proc (fs/transport/task_state.c):
 * a thread asleep on a condition variable is blocked and says where; a
 * running one is not; an unknown thread is not. */
#include "transport/task_state.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool go;
static atomic_int sleeper_tid;

static void *sleeper(void *arg)
{
    (void)arg;
    atomic_store(&sleeper_tid, (int)syscall(SYS_gettid));
    pthread_mutex_lock(&mu);
    while (!go)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void test_sleeping_thread_is_blocked(void **state)
{
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sleeper, NULL), 0);
    char wchan[64] = "unset";
    bool blocked = false;
    for (int i = 0; i < 2000 && !blocked; i++) { /* until it sleeps: up to 2 s */
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        int tid = atomic_load(&sleeper_tid);
        blocked = tid != 0 && task_blocked(tid, wchan, sizeof wchan);
    }
    assert_true(blocked);
    assert_string_not_equal(wchan, "unset"); /* read: a symbol, "0" or "" */
    pthread_mutex_lock(&mu);
    go = true;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
}

static void test_running_thread_is_not_blocked(void **state)
{
    (void)state;
    char wchan[64] = "unset";
    assert_false(task_blocked((int)syscall(SYS_gettid), wchan, sizeof wchan));
    assert_string_equal(wchan, "unset"); /* untouched */
}

static void test_unknown_thread_is_not_blocked(void **state)
{
    (void)state;
    char wchan[64] = "unset";
    assert_false(task_blocked(-1, wchan, sizeof wchan));
    assert_false(task_blocked(0x7ffffff0, wchan, sizeof wchan));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleeping_thread_is_blocked),
        cmocka_unit_test(test_running_thread_is_not_blocked),
        cmocka_unit_test(test_unknown_thread_is_not_blocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
