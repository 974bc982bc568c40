/*
 * task_state.h — whether a thread of this process sleeps, and where, read
 * from /proc/self/task/TID: the transports' stall watches use it to tell a
 * request that waits on something from one that merely runs long (or waits
 * for a CPU), which is no stall.
 */
#ifndef FS_TRANSPORT_TASK_STATE_H
#define FS_TRANSPORT_TASK_STATE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether thread tid of this process sleeps (state S or D), as against
 * running or waiting for a CPU; if so, where in the kernel: wchan (size > 1)
 * gets /proc's wchan, "" if unreadable. False if tid is not found. */
bool task_blocked(int tid, char *wchan, size_t size);

#endif
