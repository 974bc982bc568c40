/*
 * port.h — the few OS- and CPU-specific primitives the store uses, behind
 * one face (as LevelDB's port/ does). Nothing else in store/ calls
 * syscall(), futexes, gettid or CPU intrinsics directly.
 */
#ifndef LSM_PORT_H
#define LSM_PORT_H

#include <stdatomic.h>

/* Tells the CPU the caller is in a spin-wait loop; no other effect (a no-op
 * where the CPU has no such hint). */
static inline void port_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Sleeps while *addr == expected, until a port_futex_wake on addr. May
 * return early or spuriously: the caller re-checks *addr in a loop. */
void port_futex_wait(_Atomic int *addr, int expected);

/* Wakes one thread sleeping in port_futex_wait on addr, if any; addr may
 * name memory that is no longer in use (then it wakes nobody, or a later
 * waiter at the same address, which re-checks and sleeps again). */
void port_futex_wake(_Atomic int *addr);

/* The OS id of the calling thread, as setpriority(PRIO_PROCESS, id, ...)
 * takes it to act on this one thread (Linux: the tid). */
int port_thread_id(void);

/* Names the calling thread (at most 15 characters; ps -L, /proc/PID/task/
 * TID/comm), so that its CPU can be told from the others'. Best effort. */
void port_thread_name(const char *name);

#endif
