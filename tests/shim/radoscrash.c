/*
 * radoscrash.c — an LD_PRELOAD shim for RADOS tests: the program under it
 * dies, or sees a failure, at its N-th librados call that changes the pool
 * (a write op, sync or aio; a remove; a lock taken, not renewed; an
 * unlock), so a test can cut a real program (mkfs.lsmfs) at each of its
 * RADOS ops:
 *   LSMFS_RADOS_CRASH_AFTER=N  _exit(RADOSCRASH_EXIT) right after the N-th
 *                              call returned (an aio: once it is sent)
 *   LSMFS_RADOS_FAIL_AT=N      the N-th call fails with EIO, nothing sent
 *   LSMFS_RADOS_LOG=FILE       every object such a call named, a line each
 * Without them the calls are librados' own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rados/librados.h>

#define RADOSCRASH_EXIT 86

static atomic_int calls;

static long env_num(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? strtol(v, NULL, 10) : 0;
}

static void log_oid(const char *oid)
{
    const char *file = getenv("LSMFS_RADOS_LOG");
    if (file == NULL || *file == '\0')
        return;
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char line[300];
    int n = snprintf(line, sizeof line, "%s\n", oid);
    if (write(fd, line, (size_t)n) < 0) {
        /* the test then misses an object to check: nothing better to do */
    }
    close(fd);
}

/* Counts a call on oid: its number; -1 if it must fail. */
static int enter_call(const char *oid)
{
    log_oid(oid);
    int n = atomic_fetch_add(&calls, 1) + 1;
    return n == env_num("LSMFS_RADOS_FAIL_AT") ? -1 : n;
}

/* After call n returned: dies if it is the one. */
static void leave_call(int n)
{
    if (n == env_num("LSMFS_RADOS_CRASH_AFTER"))
        _exit(RADOSCRASH_EXIT);
}

static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "radoscrash: no %s in librados\n", name);
        _exit(127);
    }
    return f;
}

int rados_write_op_operate(rados_write_op_t op, rados_ioctx_t io, const char *oid,
                           time_t *mtime, int flags)
{
    int (*f)(rados_write_op_t, rados_ioctx_t, const char *, time_t *, int) =
        real("rados_write_op_operate");
    int n = enter_call(oid);
    if (n < 0)
        return -EIO;
    int r = f(op, io, oid, mtime, flags);
    leave_call(n);
    return r;
}

int rados_aio_write_op_operate(rados_write_op_t op, rados_ioctx_t io, rados_completion_t c,
                               const char *oid, time_t *mtime, int flags)
{
    int (*f)(rados_write_op_t, rados_ioctx_t, rados_completion_t, const char *, time_t *, int) =
        real("rados_aio_write_op_operate");
    int n = enter_call(oid);
    if (n < 0)
        return -EIO;
    int r = f(op, io, c, oid, mtime, flags);
    leave_call(n);
    return r;
}

int rados_remove(rados_ioctx_t io, const char *oid)
{
    int (*f)(rados_ioctx_t, const char *) = real("rados_remove");
    int n = enter_call(oid);
    if (n < 0)
        return -EIO;
    int r = f(io, oid);
    leave_call(n);
    return r;
}

/* A renewal is not counted: when it comes depends on the clock. */
int rados_lock_exclusive(rados_ioctx_t io, const char *oid, const char *name, const char *cookie,
                         const char *desc, struct timeval *duration, uint8_t flags)
{
    int (*f)(rados_ioctx_t, const char *, const char *, const char *, const char *,
             struct timeval *, uint8_t) = real("rados_lock_exclusive");
    if (flags & LIBRADOS_LOCK_FLAG_MUST_RENEW)
        return f(io, oid, name, cookie, desc, duration, flags);
    int n = enter_call(oid);
    if (n < 0)
        return -EIO;
    int r = f(io, oid, name, cookie, desc, duration, flags);
    leave_call(n);
    return r;
}

int rados_unlock(rados_ioctx_t io, const char *oid, const char *name, const char *cookie)
{
    int (*f)(rados_ioctx_t, const char *, const char *, const char *) = real("rados_unlock");
    int n = enter_call(oid);
    if (n < 0)
        return -EIO;
    int r = f(io, oid, name, cookie);
    leave_call(n);
    return r;
}
