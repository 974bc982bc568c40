/* mapguard.c — SIGBUS inside a guarded copy becomes an error; see mapguard.h. */
#include "mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* One thread's copy in progress. */
typedef struct guard {
    sigjmp_buf jump;
    uintptr_t lo, hi; /* the source range, widened to whole pages */
} guard;

/* This thread's armed guard, or NULL. Set and cleared by its own thread
 * only; the handler runs on the faulting thread, so no lock is needed. */
static _Thread_local guard *volatile armed;

/* The handler before ours, which gets every SIGBUS not ours. Guarded by
 * install_mu; written only while ours is not installed. */
static struct sigaction previous;
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t page_mask; /* ~(page size - 1), set by the first install [install_mu] */

/* Passes the signal on as if our handler were not there. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, si, uc);
    } else if (previous.sa_handler == SIG_DFL) {
        /* Default action: die. A fault re-raises itself on return; a sent
         * signal is pending (blocked in here) and is delivered then. */
        signal(sig, SIG_DFL);
        raise(sig);
    } else if (previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    guard *g = armed;
    uintptr_t at = si != NULL ? (uintptr_t)si->si_addr : 0;
    if (g != NULL && si != NULL && si->si_code > 0 && at >= g->lo && at < g->hi) {
        armed = NULL;
        siglongjmp(g->jump, 1);
    }
    chain(sig, si, uc);
}

static bool ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigbus;
}

/* Ours goes in once, and again if someone replaced it since (a test
 * harness does, around each test): a table opened after that is guarded
 * again. */
int mapguard_install(void)
{
    pthread_mutex_lock(&install_mu);
    if (page_mask == 0) /* written once: copies read it without the lock */
        page_mask = ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    struct sigaction now, sa;
    int err = 0;
    if (sigaction(SIGBUS, NULL, &now) != 0)
        err = errno;
    else if (!ours(&now)) {
        previous = now;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, NULL) != 0)
            err = errno;
    }
    pthread_mutex_unlock(&install_mu);
    return err;
}

/* The handler ran with SIGBUS blocked and jumped out without restoring the
 * mask (saving it at every copy would cost a system call): unblock it. */
static void unblock_sigbus(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

bool mapguard_copy(void *dst, const void *src, size_t n)
{
    if (n == 0)
        return true;
    guard g;
    g.lo = (uintptr_t)src & page_mask;
    g.hi = ((uintptr_t)src + n + ~page_mask) & page_mask;
    if (sigsetjmp(g.jump, 0) != 0) {
        unblock_sigbus();
        return false;
    }
    armed = &g;
    atomic_signal_fence(memory_order_seq_cst); /* the copy stays inside the guard */
    memcpy(dst, src, n);
    atomic_signal_fence(memory_order_seq_cst);
    armed = NULL;
    return true;
}
