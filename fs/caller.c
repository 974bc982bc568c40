/*
 * caller.c — the caller's groups and capabilities from /proc.
 */
#include "caller.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATUS_MAX 8192

/* /proc/TID/task/TID/status opened for reading, or -1. */
static int open_status(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)tid, (int)tid);
    return tid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
}

bool caller_in_group(fuse_req_t req, gid_t gid)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    if (ctx->gid == gid)
        return true;
    int fd = open_status(ctx->pid);
    if (fd < 0)
        return false;
    bool in = caller_status_has_group(fd, gid);
    close(fd);
    return in;
}

/* The scan of a status text for its "Groups:" line, a byte at a time. */
typedef struct groups_scan {
    size_t matched; /* bytes of "Groups:" matched at this line's start; SIZE_MAX: none */
    bool in_line;   /* past "Groups:" */
    uint64_t num;   /* the id being read */
    bool digits;    /* num has digits */
    bool found, done;
} groups_scan;

static void scan_byte(groups_scan *g, char c, gid_t gid)
{
    static const char tag[] = "Groups:";
    if (!g->in_line) {
        if (c == '\n')
            g->matched = 0;
        else if (g->matched != SIZE_MAX && c == tag[g->matched])
            g->in_line = ++g->matched == sizeof tag - 1;
        else
            g->matched = SIZE_MAX;
        return;
    }
    if (c >= '0' && c <= '9') {
        g->num = g->num > UINT32_MAX ? g->num : g->num * 10 + (uint64_t)(c - '0');
        g->digits = true;
        return;
    }
    g->found |= g->digits && g->num == gid;
    g->num = 0;
    g->digits = false;
    g->done = c == '\n';
}

bool caller_status_has_group(int fd, gid_t gid)
{
    groups_scan g = {0};
    char buf[4096];
    ssize_t r;
    while (!g.done && !g.found && (r = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < r && !g.done; i++)
            scan_byte(&g, buf[i], gid);
    if (!g.done && !g.found) /* the file's end ends the line */
        scan_byte(&g, '\n', gid);
    return g.found;
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
    int fd = open_status(tid);
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
