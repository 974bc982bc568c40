/*
 * slowread.c — an LD_PRELOAD shim for integration tests: while the file
 * named by $LSMFS_SLOWREAD exists, every pread of a table file (*.ldb) by
 * the daemon takes SLOW_MS longer, and $LSMFS_SLOWREAD.count says how many
 * such reads there were and the most that were ever in flight at once
 * ("TOTAL MOST"). So a test sees whether the
 * daemon serves reads side by side, by counting, not by timing. Without
 * the trigger file pread is the C library's. Reads of 64 KiB and more are
 * left alone: those are scans (compaction's read-ahead), not a request's
 * blocks.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Shorter than the request loop's stall watch (10 ms, fs/transport/loop.c),
 * which would otherwise hand the turn on by itself. */
#define SLOW_MS 2

static atomic_int in_flight, total, most;

static const char *trigger(void)
{
    const char *t = getenv("LSMFS_SLOWREAD");
    return t != NULL && *t != '\0' && access(t, F_OK) == 0 ? t : NULL;
}

static int is_table(int fd)
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 4)
        return 0;
    path[n] = '\0';
    return strcmp(path + n - 4, ".ldb") == 0;
}

/* Counts a slow read that began with `now` in flight (itself included),
 * and writes "TOTAL MOST" to the .count file, whole each time. */
static void note(const char *t, int now)
{
    atomic_fetch_add(&total, 1);
    int seen = atomic_load(&most);
    while (now > seen && !atomic_compare_exchange_weak(&most, &seen, now)) {
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s.count", t);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char line[32];
        int len = snprintf(line, sizeof line, "%d %d\n", atomic_load(&total),
                           atomic_load(&most));
        if (write(fd, line, (size_t)len) < 0) { /* the test then sees no count */
        }
        close(fd);
    }
}

static ssize_t slow(const char *name, int fd, void *buf, size_t n, off_t off)
{
    ssize_t (*real)(int, void *, size_t, off_t) =
        (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, name);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    const char *t = trigger();
    if (t == NULL || n >= 64 * 1024 || !is_table(fd))
        return real(fd, buf, n, off);
    note(t, atomic_fetch_add(&in_flight, 1) + 1);
    struct timespec d = {0, SLOW_MS * 1000000L};
    nanosleep(&d, NULL);
    ssize_t r = real(fd, buf, n, off);
    int e = errno;
    atomic_fetch_sub(&in_flight, 1);
    errno = e;
    return r;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    return slow("pread", fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    return slow("pread64", fd, buf, n, off);
}
