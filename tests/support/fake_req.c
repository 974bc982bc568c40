/* fake_req.c — FUSE requests without a kernel; see fake_req.h. */
#include "fake_req.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fake_req_init(struct fuse_req *r, void *userdata, uid_t uid, gid_t gid)
{
    memset(r, 0, sizeof *r);
    r->userdata = userdata;
    r->ctx.uid = uid;
    r->ctx.gid = gid;
    r->ctx.pid = getpid();
    r->ctx.umask = 022;
}

void fake_req_done(struct fuse_req *r)
{
    free(r->reply.buf);
    r->reply.buf = NULL;
}

int fake_req_errno(const struct fuse_req *r)
{
    if (r->reply.kind == FAKE_NO_REPLY)
        return -1;
    return r->reply.kind == FAKE_ERR ? r->reply.err : 0;
}

/* Records one reply of `kind`; its bytes copied when buf is set. */
static fake_reply *got(fuse_req_t req, enum fake_kind kind, const void *buf, size_t len)
{
    fake_reply *f = &req->reply;
    f->kind = kind;
    f->replies++;
    free(f->buf);
    f->buf = NULL;
    f->len = len;
    if (buf != NULL) {
        f->buf = malloc(len + 1); /* the test's own memory: not lsm_malloc's */
        if (f->buf == NULL)
            abort();
        memcpy(f->buf, buf, len);
        f->buf[len] = '\0';
    }
    return f;
}

void *fuse_req_userdata(fuse_req_t req)
{
    return req->userdata;
}

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
    return &req->ctx;
}

int fuse_reply_err(fuse_req_t req, int err)
{
    got(req, FAKE_ERR, NULL, 0)->err = err;
    return 0;
}

void fuse_reply_none(fuse_req_t req)
{
    got(req, FAKE_NONE, NULL, 0);
}

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
    got(req, FAKE_ENTRY, NULL, 0)->entry = *e;
    return 0;
}

int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
                      const struct fuse_file_info *fi)
{
    (void)fi;
    got(req, FAKE_CREATE, NULL, 0)->entry = *e;
    return 0;
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr, double attr_timeout)
{
    (void)attr_timeout;
    got(req, FAKE_ATTR, NULL, 0)->attr = *attr;
    return 0;
}

int fuse_reply_readlink(fuse_req_t req, const char *link)
{
    got(req, FAKE_READLINK, link, strlen(link));
    return 0;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
    (void)fi;
    got(req, FAKE_OPEN, NULL, 0);
    return 0;
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
    got(req, FAKE_WRITE, NULL, 0)->count = count;
    return 0;
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
    got(req, FAKE_BUF, buf != NULL ? buf : "", buf != NULL ? size : 0);
    return 0;
}

int fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf)
{
    got(req, FAKE_STATFS, stbuf, sizeof *stbuf);
    return 0;
}

int fuse_reply_xattr(fuse_req_t req, size_t count)
{
    got(req, FAKE_XATTR, NULL, 0)->count = count;
    return 0;
}

int fuse_reply_lseek(fuse_req_t req, off_t off)
{
    got(req, FAKE_LSEEK, NULL, 0)->off = off;
    return 0;
}

int fuse_reply_ioctl(fuse_req_t req, int result, const void *buf, size_t size)
{
    got(req, FAKE_IOCTL, buf, buf != NULL ? size : 0)->err = result;
    return 0;
}
