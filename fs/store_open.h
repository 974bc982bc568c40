/*
 * store_open.h — opening a filesystem's store: the one way the daemon and
 * every tool (mkfs.lsmfs, fsck.lsmfs, lsmctl) open one. It checks the
 * store's format with a read-only open before anything may write (a store
 * of a newer format is refused with every byte left as it was), and opens
 * with the filesystem's own settings (block size, table partitions, WAL
 * mode, reserve), so a tool that writes (fsck -y, lsmctl compact) writes
 * tables as the daemon would.
 */
#ifndef FS_STORE_OPEN_H
#define FS_STORE_OPEN_H

#include "lsm.h"
#include "schema.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A file mkfs.lsmfs keeps in the store's directory while it works (made
 * durable first, removed last): a store that has it is no filesystem yet
 * (store_open refuses it), and the next mkfs makes it again. */
#define STORE_MKFS_MARK "MKFS-UNFINISHED"

/* How store_open opens the store (flags, or-ed). */
enum {
    STORE_OPEN_RW = 0,
    STORE_OPEN_RO = 1,      /* lsm_options.read_only: no byte changes */
    STORE_OPEN_SALVAGE = 2, /* lsm_options.salvage_log: keep a damaged log's prefix */
    STORE_OPEN_ANY = 4,     /* a store with no lsmfs superblock opens too (lsmctl) */
};

typedef struct store_open_req {
    const char *dir; /* a directory, or rados:POOL/NAME (store_uri.h) */
    int flags;
    lsm_env *env; /* NULL: store_uri_resolve's (tests give a fault env; dir is then its path) */
    /* What recovery dropped: report(ctx, line); NULL: a line on stderr
     * prefixed by ctx (a const char *, the tool's name). */
    void (*report)(void *ctx, const char *line);
    /* The keys of the records recovery left out (NULL: not wanted). */
    void (*dropped_key)(void *ctx, const void *key, size_t len);
    void *ctx;
} store_open_req;

/* Opens the existing store r->dir (never creates one) and reads its
 * superblock into *sb (zeroed for a STORE_OPEN_ANY store that has none).
 * A read-write open first checks the format read-only. On failure returns
 * an errno and one line for the user in err: EINVAL not an lsmfs store
 * (or one whose mkfs did not finish),
 * EPROTONOSUPPORT a newer format (names both versions, says to upgrade),
 * EBUSY in use (names the mount point and pid when found), EACCES, EROFS
 * (read-write on a read-only medium: says to use -o ro), ENOSPC, EIO. */
int store_open(const store_open_req *r, lsm_db **db, schema_super *sb, char *err,
               size_t errlen);

/* Where the lsmfs serving the store `dir` is mounted (into mnt, mntlen
 * bytes) and the pid holding its lock (0 if not found). false: no lsmfs
 * mount of it is listed in /proc/self/mounts. */
bool store_mounted_at(const char *dir, char *mnt, size_t mntlen, pid_t *pid);

#endif
