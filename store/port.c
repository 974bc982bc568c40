/*
 * port.c — the Linux implementations of port.h (another OS adds its own
 * branch here; nothing outside this file changes).
 */
#include "port.h"

#include <pthread.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>

void port_futex_wait(_Atomic int *addr, int expected)
{
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void port_futex_wake(_Atomic int *addr)
{
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int port_thread_id(void)
{
    return (int)syscall(SYS_gettid);
}

void port_thread_name(const char *name)
{
    (void)pthread_setname_np(pthread_self(), name);
}
#else
#error "store/port.c: port_futex_* and port_thread_id need an implementation for this OS"
#endif
