/*
 * fake_req.h — for tests: FUSE requests without a kernel. A test calls an
 * op handler (ops.h) with a fake_req's `req`; libfuse's request and reply
 * functions the handlers call are defined here (a test program linking this
 * file gets these, not libfuse's), and the one reply is captured.
 *
 * Only the functions fs/ calls with a request are defined; a handler that
 * called another would reach libfuse's with a request libfuse never made.
 */
#ifndef LSMFS_FAKE_REQ_H
#define LSMFS_FAKE_REQ_H

#include "fuse_api.h"

#include <stdbool.h>
#include <sys/statvfs.h>

/* Which reply function answered. */
enum fake_kind {
    FAKE_NO_REPLY = 0,
    FAKE_ERR, /* fuse_reply_err: `err` (0: success with no data) */
    FAKE_NONE,
    FAKE_ENTRY, /* entry */
    FAKE_CREATE, /* entry */
    FAKE_ATTR,   /* attr */
    FAKE_READLINK, /* buf */
    FAKE_OPEN,
    FAKE_WRITE, /* count */
    FAKE_BUF,   /* buf */
    FAKE_STATFS,
    FAKE_XATTR, /* count */
    FAKE_LSEEK, /* off */
    FAKE_IOCTL, /* err (the result), buf */
};

typedef struct fake_reply {
    enum fake_kind kind;
    int replies; /* how many reply calls the request got (1 is right) */
    int err;
    struct fuse_entry_param entry;
    struct stat attr;
    size_t count;
    off_t off;
    char *buf; /* malloc'd copy of the reply's bytes */
    size_t len;
} fake_reply;

struct fuse_req {
    void *userdata;
    struct fuse_ctx ctx;
    fake_reply reply;
};

/* A request from uid/gid (the calling process's pid) of the session whose
 * userdata is `userdata` (the ops_state). */
void fake_req_init(struct fuse_req *r, void *userdata, uid_t uid, gid_t gid);
/* Frees what the reply holds. */
void fake_req_done(struct fuse_req *r);
/* The reply's errno: fuse_reply_err's, 0 for any other reply, -1 for none. */
int fake_req_errno(const struct fuse_req *r);

#endif
