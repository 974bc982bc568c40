/*
 * failsync.c — an LD_PRELOAD shim for integration tests: while the file
 * named by $LSMFS_FAILSYNC exists, fsync and fdatasync of any file fail
 * with EIO without syncing, as a disk that lost the write would answer;
 * without it they are the C library's. The daemon under test needs no
 * test code of its own: the store's posix env syncs through fdatasync and
 * fsync (store/env_posix.c), which the dynamic linker resolves here first.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int failing(void)
{
    const char *trigger = getenv("LSMFS_FAILSYNC");
    return trigger != NULL && *trigger != '\0' && access(trigger, F_OK) == 0;
}

static int forward(const char *name, int fd)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd);
}

int fsync(int fd)
{
    if (failing()) {
        errno = EIO;
        return -1;
    }
    return forward("fsync", fd);
}

int fdatasync(int fd)
{
    if (failing()) {
        errno = EIO;
        return -1;
    }
    return forward("fdatasync", fd);
}
