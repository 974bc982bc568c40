/*
 * env_posix_hook.h — for tests only: the fdatasync through which the posix
 * env syncs its append-only files, and the results of its direct writes
 * (wfile_direct.c), so a test can make one fail at the system-call level as
 * a kernel that lost a page would (the fault env works above the env and
 * cannot reach the env's sync slots or its direct writes).
 */
#ifndef LSM_ENV_POSIX_HOOK_H
#define LSM_ENV_POSIX_HOOK_H

#include <sys/types.h>

/* fdatasync by default. Set only while no file of the env is syncing. */
extern int (*env_posix_fdatasync)(int fd);
/* NULL by default; else given the result of each direct write of a table
 * (bytes written or -errno, wfile_direct.c), it returns the result the env
 * sees. Set only while no file of the env is being written. */
extern ssize_t (*env_posix_direct_done)(ssize_t res);

#endif
