/*
 * killpriv.c — set-id bits on write, truncate and chown (killpriv.h).
 */
#include "killpriv.h"

#include "caller.h"
#include "ops.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

void killpriv_init_reply(struct iovec *iov, int count)
{
    if (count < 2 || iov[0].iov_len < sizeof(struct fuse_out_header) ||
        iov[1].iov_len < offsetof(struct fuse_init_out, max_background))
        return;
    const struct fuse_out_header *oh = iov[0].iov_base;
    struct fuse_init_out *o = iov[1].iov_base;
    if (oh->error == 0)
        o->flags |= FUSE_HANDLE_KILLPRIV_V2;
}

/* The INIT request's unique (0: none seen yet). */
static _Atomic uint64_t init_unique;

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    const struct fuse_in_header *h = buf;
    if (n >= (ssize_t)sizeof *h && h->opcode == FUSE_INIT)
        atomic_store(&init_unique, h->unique);
    return n;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    const struct fuse_out_header *oh = iov[0].iov_base;
    if (oh->unique != 0 && oh->unique == atomic_load(&init_unique))
        killpriv_init_reply(iov, count);
    return writev(fd, iov, count);
}

int killpriv_attach(struct fuse_session *se)
{
    static const struct fuse_custom_io io = {.read = dev_read, .writev = dev_writev};
    int err = fuse_session_custom_io(se, &io, fuse_session_fd(se));
    return err < 0 ? err : -err;
}

mode_t killpriv_mode(fuse_req_t req, mode_t mode, gid_t gid)
{
    mode &= ~(mode_t)S_ISUID;
    if ((mode & S_ISGID) && ((mode & S_IXGRP) || !caller_keeps_sgid(req, gid)))
        mode &= ~(mode_t)S_ISGID;
    return mode;
}

void killpriv_changed(fuse_req_t req, fuse_ino_t ino)
{
    struct fuse_session *se = op_state(req)->se;
    if (se != NULL) /* a failure leaves the cached mode until its timeout */
        (void)fuse_lowlevel_notify_inval_inode(se, ino, -1, 0);
}

bool killpriv_write_kills(fuse_req_t req, mode_t mode, bool writepage)
{
    return !writepage && S_ISREG(mode) && (mode & (S_ISUID | S_ISGID)) &&
           !caller_capable(req, CAP_FSETID);
}
