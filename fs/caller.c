/*
 * caller.c — the caller's groups and capabilities from /proc.
 */
#include "caller.h"

#include "lsm_malloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATUS_MAX 8192
#define GROUPS_FIRST 32

bool caller_in_group(fuse_req_t req, gid_t gid)
{
    if (fuse_req_ctx(req)->gid == gid)
        return true;
    gid_t first[GROUPS_FIRST];
    gid_t *list = first;
    int n = fuse_req_getgroups(req, GROUPS_FIRST, first);
    if (n > GROUPS_FIRST) { /* the list may change between two reads: take min */
        list = lsm_malloc((size_t)n * sizeof *list);
        int again = list != NULL ? fuse_req_getgroups(req, n, list) : -ENOMEM;
        n = again < n ? again : n;
    }
    bool in = false;
    for (int i = 0; i < n && !in; i++)
        in = list[i] == gid;
    if (list != first)
        free(list);
    return in;
}

bool caller_parse_capeff(const char *status, unsigned long long *set)
{
    const char *p = strstr(status, "\nCapEff:");
    if (p == NULL)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p + strlen("\nCapEff:"), &end, 16);
    if (errno != 0 || end == p + strlen("\nCapEff:") || (*end != '\n' && *end != '\0'))
        return false;
    *set = v;
    return true;
}

/* The text of /proc/TID/task/TID/status into buf (NUL-terminated). */
static bool read_status(pid_t tid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)tid, (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    return len > 0;
}

/* Is the thread in the daemon's own user namespace? */
static bool same_user_ns(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/ns/user", (int)tid, (int)tid);
    struct stat theirs, ours;
    return stat(path, &theirs) == 0 && stat("/proc/self/ns/user", &ours) == 0 &&
           theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

bool caller_capable(fuse_req_t req, int cap)
{
    pid_t tid = fuse_req_ctx(req)->pid;
    char status[STATUS_MAX]; /* no allocation: out of memory is no reason to refuse */
    unsigned long long set = 0;
    bool ok = tid > 0 && read_status(tid, status, sizeof status) &&
              caller_parse_capeff(status, &set);
    return ok && cap >= 0 && cap < 64 && (set >> cap & 1) && same_user_ns(tid);
}

bool caller_keeps_sgid(fuse_req_t req, gid_t gid)
{
    return caller_in_group(req, gid) || caller_capable(req, CAP_FSETID);
}
