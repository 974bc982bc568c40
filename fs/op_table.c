/*
 * op_table.c — the fuse_lowlevel_ops table, session setup (init), and which
 * requests may wait (ops.h). It calls into every op_*.c file; none calls it.
 */
#include "ops.h"

#include <linux/fuse.h>

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    ops_state *st = userdata;
    /* Not the first killpriv: the INIT reply asks for the second
     * (FUSE_HANDLE_KILLPRIV_V2, killpriv.h), which libfuse 3.14 cannot. */
    conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
    /* Truncation on open arrives as a setattr (keeps suid clearing exact). */
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
    /* Every change passes through this mount, so the kernel's pages stay
     * right: no dropping a file's whole cache when its mtime moves. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
        conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    /* Directory handles carry no state either, but no OPENDIR would make
     * the kernel cache every listing (op_opendir says why it should not). */
    /* File handles carry none either (unlinked files are kept by the
     * kernel's references: orphan_in_use): no OPEN, no RELEASE.
     * Not with allow_root: libfuse refuses other users there per request
     * but lets READ and WRITE through, counting on OPEN being refused. */
    if ((conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) && !st->fs->cfg.allow_root) {
        conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
        st->fs->no_open = true;
    }
    /* Opt-in: the kernel gathers small writes in its page cache and sends
     * them at fsync, close or writeback; fsync still makes exactly what was
     * written durable (the kernel writes the pages back before FSYNC). */
    if (st->fs->cfg.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    else
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    /* The kernel enforces POSIX ACLs (acl.h); the umask is then ours to
     * apply, as only we know whether a default ACL replaces it. */
    if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
        conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    conn->max_write = 1u << 20;
    if (conn->max_readahead < (1u << 20))
        conn->max_readahead = 1u << 20;
    conn->time_gran = 1;
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
    .create = op_create,
    .fallocate = op_fallocate,
    .lseek = op_lseek,
    .ioctl = op_ioctl,
};

const struct fuse_lowlevel_ops *lsmfs_ops(void)
{
    return &ops;
}

/* How each request may wait on the disk, by opcode: a SYNCS request
 * always (it syncs, or ends the session), a COMMITS one when the store may
 * stall or every change is synced (-o sync). Every handler in `ops` that can
 * reach a store write or sync has its opcode here: test_fs_ops derives those
 * handlers from the code and checks this table against them. */
enum { NO_WAIT, COMMITS, SYNCS };
/* clang-format off */
static const unsigned char op_waits[] = {
    /* An unlinked file's last reference frees it: when forgotten, or when
     * the kernel never got the LOOKUP reply that gave it. */
    [FUSE_LOOKUP] = COMMITS,
    [FUSE_FORGET] = COMMITS,
    [FUSE_BATCH_FORGET] = COMMITS,
    [FUSE_SETATTR] = COMMITS,
    [FUSE_SYMLINK] = COMMITS,
    [FUSE_MKNOD] = COMMITS,
    [FUSE_MKDIR] = COMMITS,
    [FUSE_UNLINK] = COMMITS,
    [FUSE_RMDIR] = COMMITS,
    [FUSE_RENAME] = COMMITS,
    [FUSE_RENAME2] = COMMITS,
    [FUSE_LINK] = COMMITS,
    [FUSE_WRITE] = COMMITS,
    [FUSE_SETXATTR] = COMMITS,
    [FUSE_REMOVEXATTR] = COMMITS,
    [FUSE_CREATE] = COMMITS,
    [FUSE_FALLOCATE] = COMMITS,
    [FUSE_FSYNC] = SYNCS,
    [FUSE_FSYNCDIR] = SYNCS,
    [FUSE_DESTROY] = SYNCS,
    [FUSE_IOCTL] = SYNCS, /* a snapshot flushes the memtable */
};
/* clang-format on */

static int waits(uint32_t opcode)
{
    return opcode < sizeof op_waits ? op_waits[opcode] : NO_WAIT;
}

/* A READ or WRITE larger than this takes long enough that other requests
 * should not wait behind it (docs/decisions.md, "Our own request loop");
 * and large transfers come several at a time (readahead, big writes), which
 * two workers then serve side by side. */
#define LONG_TRANSFER (128u * 1024)

/* The size of a READ or WRITE request's transfer (0 if malformed: the
 * request's own handler rejects it). */
static uint32_t transfer_size(const struct fuse_in_header *in, size_t len)
{
    if (in->opcode == FUSE_READ && len >= sizeof(*in) + sizeof(struct fuse_read_in))
        return ((const struct fuse_read_in *)(in + 1))->size;
    if (in->opcode == FUSE_WRITE && len >= sizeof(*in) + sizeof(struct fuse_write_in))
        return ((const struct fuse_write_in *)(in + 1))->size;
    return 0;
}

bool lsmfs_request_may_wait(void *state, const struct fuse_in_header *in, size_t len)
{
    lsmfs *fs = ((ops_state *)state)->fs;
    int w = waits(in->opcode);
    if (w == SYNCS || transfer_size(in, len) > LONG_TRANSFER)
        return true;
    return w == COMMITS && (fs->cfg.sync_all || lsm_write_may_wait(fs->db));
}
