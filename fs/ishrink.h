/*
 * ishrink.h — the inode budget (-o max_inodes): keeps the inode cache near
 * a number of entries by asking the kernel to drop entries it holds.
 *
 * The cache must keep every inode the kernel references (icache.h), so the
 * bound comes from the kernel letting go: past the budget, a thread of its
 * own sends FUSE_NOTIFY_INVAL_ENTRY for the least recently used entries
 * (icache_victims) until the cache is at 7/8 of it. The kernel drops each
 * dentry no one uses and then FORGETs its inode, which frees the entry; a
 * later path lookup asks again. Directories are never asked for (that
 * would detach mounts below them), nor inodes pinned by requests or open,
 * nor the root: the cache exceeds the budget by those.
 * A notification waits for the directory's lock, which the kernel may hold
 * until a reply of ours: hence the thread.
 */
#ifndef FS_ISHRINK_H
#define FS_ISHRINK_H

#include "fuse_api.h"
#include "icache.h"

#include <stddef.h>

/* The default budget (its memory: tools/bench/README.md, "scale"). */
#define ISHRINK_DEFAULT_MAX 262144u
/* Below this a budget is refused: directories being walked must fit. */
#define ISHRINK_MIN_MAX 64u

typedef struct ishrink ishrink;

/* Starts the thread for cache c of session se with budget max (0: no
 * budget, no thread: returns NULL with *err 0). NULL with *err set: it
 * could not start. */
ishrink *ishrink_start(icache *c, struct fuse_session *se, size_t max, int *err);
/* Stops and frees it (NULL: nothing). Before the session is destroyed. */
void ishrink_stop(ishrink *k);

#endif
