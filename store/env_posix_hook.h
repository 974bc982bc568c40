/*
 * env_posix_hook.h — for tests only: the fdatasync through which the posix
 * env syncs its append-only files, so a test can make one fail at the
 * system-call level as a kernel that lost a page would (the fault env
 * works above the env and cannot reach the env's sync slots).
 */
#ifndef LSM_ENV_POSIX_HOOK_H
#define LSM_ENV_POSIX_HOOK_H

/* fdatasync by default. Set only while no file of the env is syncing. */
extern int (*env_posix_fdatasync)(int fd);

#endif
