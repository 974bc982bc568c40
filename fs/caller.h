/*
 * caller.h — what the kernel does not send of a request's caller: its
 * supplementary groups and effective capabilities, read from
 * /proc/TID/task/TID/status (as libfuse's fuse_req_getgroups would, but
 * with no allocation). The kernel sends the fsuid, fsgid and thread
 * id only; a rule such as posix_acl_update_mode's (in_group_or_capable)
 * needs the rest. Each answer errs on the side of less privilege: a caller
 * whose status cannot be read is in no extra group and has no capability.
 */
#ifndef FS_CALLER_H
#define FS_CALLER_H

#include "fuse_api.h"

#include <stdbool.h>
#include <sys/types.h>

/* Is gid the caller's fsgid or one of its supplementary groups? Reads the
 * status in pieces with no allocation: out of memory (or a list of 65536
 * groups) changes no answer. */
bool caller_in_group(fuse_req_t req, gid_t gid);
/* Whether the "Groups:" line of the status text read from fd holds gid. */
bool caller_status_has_group(int fd, gid_t gid);

/* Does the caller hold capability cap (CAP_FSETID, ...) in the daemon's
 * user namespace? A caller in another user namespace is counted as not
 * holding it (the kernel would also require the inode's ids mapped there). */
bool caller_capable(fuse_req_t req, int cap);

/* in_group_or_capable(gid, CAP_FSETID): may the caller keep S_ISGID on a
 * file of group gid when it changes the file's mode? */
bool caller_keeps_sgid(fuse_req_t req, gid_t gid);

/* The effective capability set in a status file's text ("CapEff:\t%16x"):
 * true and *set, or false when the line is missing or malformed. */
bool caller_parse_capeff(const char *status, unsigned long long *set);

#endif
