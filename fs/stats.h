/*
 * stats.h — request counters per FUSE operation and the stats text shown by
 * the root's `user.lsmfs.stats` xattr. Counters are relaxed atomics: they
 * are read for reporting only, so no lock guards them.
 */
#ifndef FS_STATS_H
#define FS_STATS_H

#include <stdatomic.h>
#include <stdint.h>

enum fs_op {
    OP_LOOKUP,
    OP_FORGET,
    OP_GETATTR,
    OP_SETATTR,
    OP_READLINK,
    OP_MKNOD,
    OP_MKDIR,
    OP_UNLINK,
    OP_RMDIR,
    OP_SYMLINK,
    OP_RENAME,
    OP_LINK,
    OP_OPEN,
    OP_READ,
    OP_WRITE,
    OP_FLUSH,
    OP_RELEASE,
    OP_FSYNC,
    OP_OPENDIR,
    OP_READDIR,
    OP_READDIRPLUS,
    OP_RELEASEDIR,
    OP_FSYNCDIR,
    OP_STATFS,
    OP_SETXATTR,
    OP_GETXATTR,
    OP_LISTXATTR,
    OP_REMOVEXATTR,
    OP_ACCESS,
    OP_CREATE,
    OP_FALLOCATE,
    OP_LSEEK,
    OP_IOCTL,
    OP_COUNT
};

typedef struct fs_stats {
    _Atomic uint64_t ops[OP_COUNT];
    _Atomic uint64_t store_writes; /* lsm_write calls made by the fs */
    _Atomic uint64_t store_gets;   /* point reads (lsm_get) made by the fs */
    _Atomic uint64_t store_scans;  /* store iterators the fs opened */
    _Atomic uint64_t store_syncs;  /* sync barriers asked of the store */
    _Atomic uint64_t sync_free;    /* fsyncs already durable: no sync at all */
    _Atomic uint64_t sync_shared;  /* fsyncs that reached the store while another
                                    * was there (it merges or overlaps them) */
    _Atomic uint64_t reclaimed;    /* orphan inodes whose data was freed */
    _Atomic uint64_t orphans_freed; /* small orphans freed by the batcher */
    _Atomic uint64_t orphan_batches; /* the store writes that freed them */
    _Atomic uint64_t uring_active;   /* 1: requests come over io_uring (uring.h) */
    _Atomic uint64_t uring_requests; /* requests served over io_uring */
    _Atomic uint64_t reader_polls;   /* waits for a request that polled /dev/fuse (loop.h) */
    _Atomic uint64_t reader_poll_hits; /* of those, ended by a request while polling */
} fs_stats;

static inline void stats_inc(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

const char *stats_op_name(enum fs_op op);
/* Appends the counters as "name value" lines to a malloc'd string that
 * starts with `head` (which may be NULL); returns NULL if out of memory. */
char *stats_text(const fs_stats *s, const char *head);
/* The counters as "name value" lines, the names stable (lsmctl stats --json
 * and --prometheus show them; lsmctl.8 lists them): fs_requests_OP for every
 * op (stats_op_name), then the fs_* counters below, then store_metrics (the
 * store's "lsm.metrics"). A malloc'd string, NULL if out of memory. */
char *stats_metrics(const fs_stats *s, const char *store_metrics);

#endif
