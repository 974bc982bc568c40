/*
 * killpriv.h — clearing S_ISUID and S_ISGID on write, truncate and chown
 * as ext4 does, with the kernel's FUSE_HANDLE_KILLPRIV_V2 contract.
 *
 * Without it the kernel asks GETXATTR security.capability before every
 * WRITE (file_remove_privs) and, clearing set-id bits itself, keeps
 * S_ISGID without group-execute, which ext4 (setattr_should_drop_sgid)
 * clears for a writer outside the file's group. With it the superblock is
 * SB_NOSEC: an inode found clean once (no set-id bit, no capability) is
 * marked S_NOSEC and its writes ask nothing, until a chmod to a set-id mode
 * or a security.* setxattr clears the mark. The kernel still removes
 * security.capability itself (REMOVEXATTR) while the mark is clear, and
 * leaves the set-id bits to the daemon: a SETATTR of a size or owner
 * carries FATTR_KILL_SUIDGID (libfuse: FUSE_SET_ATTR_KILL_SUID) when they
 * are to go, and a WRITE by a caller without CAP_FSETID would carry
 * FUSE_WRITE_KILL_SUIDGID, which libfuse 3.14 does not pass on: the daemon
 * asks the caller's capabilities itself (caller.h), only for set-id files.
 * libfuse 3.14 cannot ask for the flag either: the INIT reply is edited
 * on its way to the kernel (killpriv_init_reply).
 */
#ifndef FS_KILLPRIV_H
#define FS_KILLPRIV_H

#include "fuse_api.h"

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Sets FUSE_HANDLE_KILLPRIV_V2 in an INIT reply (iov, count as written to
 * /dev/fuse) that accepts the connection; leaves any other reply alone. */
void killpriv_init_reply(struct iovec *iov, int count);

/* Installs /dev/fuse I/O on se that applies killpriv_init_reply to the
 * INIT reply (for a session without the io_uring transport, which calls
 * it itself). 0, or a negative errno (the mount then works without it). */
int killpriv_attach(struct fuse_session *se);

/* The mode of a regular file of group gid after a change that kills
 * set-id bits: S_ISUID goes; S_ISGID goes with group-execute, and without
 * it unless the caller is in group gid or holds CAP_FSETID (ext4:
 * setattr_should_drop_suidgid). */
mode_t killpriv_mode(fuse_req_t req, mode_t mode, gid_t gid);

/* After a WRITE changed the mode: the kernel, which keeps its cached
 * attributes across a WRITE, is told to drop them (before the reply, so
 * the writer's next stat sees the change). */
void killpriv_changed(fuse_req_t req, fuse_ino_t ino);

/* Whether a WRITE by req's caller kills set-id bits of a file of this mode
 * (it has some, and the caller lacks CAP_FSETID); a write-back of cached
 * pages (writepage) kills none, as on ext4. */
bool killpriv_write_kills(fuse_req_t req, mode_t mode, bool writepage);

#endif
