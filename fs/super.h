/*
 * super.h — a mounted filesystem's state (struct lsmfs: the store, its
 * superblock and the in-memory state built on them; lsmfs.h opens and
 * closes it) and the superblock checks mkfs.lsmfs and fsck.lsmfs share
 * with the daemon (the store itself opens through store_open.h).
 */
#ifndef FS_SUPER_H
#define FS_SUPER_H

#include "alloc.h"
#include "lsm.h"
#include "reserve.h"
#include "schema.h"
#include "stats.h"
#include "store_usage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct icache icache;
typedef struct reclaimer reclaimer;

typedef struct lsmfs_config {
    const char *store_dir;
    bool sync_all;  /* -o sync: every operation durable before it returns */
    bool writeback; /* -o writeback: the kernel's writeback cache (opt-in) */
    double timeout; /* entry/attr cache timeout given to the kernel, seconds */
    bool allow_root; /* -o allow_root: libfuse refuses other users per request */
    bool read_only; /* -o ro: the store opens read_only, as of a damaged log's prefix */
    /* -o reserve=, resuid=, resgid=: the root reserve for this mount
     * (reserve.h); -1: the superblock's. */
    int64_t reserve_pct, resuid, resgid;
} lsmfs_config;

/* Fields marked [const] are set by lsmfs_open and never change; the others
 * say what guards them. */
typedef struct lsmfs {
    lsm_db *db;         /* [const] */
    schema_super sb;    /* [const] */
    lsmfs_config cfg;   /* [const] (store_dir points at `dir`) */
    char *dir;          /* [const] absolute store directory, or rados:POOL/NAME */
    lsm_env *env;       /* [const] the env holding the store (store_uri.h) */
    char *path;         /* [const] the store's path in env */
    icache *icache;     /* [const] pointer; the cache has its own locks */
    ino_alloc alloc;    /* its own mutex */
    reclaimer *reclaim; /* [const] pointer; its own mutex */
    root_reserve reserve; /* its fields say */
    fs_stats stats;     /* atomics */
    store_usage usage;  /* its own mutex: statfs's used bytes */
    /* The kernel opens files without asking (FUSE_CAP_NO_OPEN_SUPPORT): no
     * OPEN/CREATE/RELEASE requests (an unlinked file is kept by the
     * kernel's references either way: orphan_in_use). Set by the FUSE init
     * request before any other request; read-only afterwards. */
    bool no_open;
    /* Live inode records (statfs). After an unclean shutdown it starts at
     * 0 and `icount` adds the records the store held at mount once it has
     * counted them (icount.h), setting inodes_known. */
    _Atomic int64_t inodes;
    _Atomic bool inodes_known;
    struct icount_job *icount; /* [const] pointer; NULL: none ran */
    _Atomic bool write_error; /* a store write failed: logged once */
    _Atomic bool nospace_logged; /* a full disk was logged; the next write
                                  * that succeeds clears it */
    /* Durability (storeio.c): the highest sequence number fs_commit got
     * back and the highest a finished sync covered (both atomic max), and
     * how many syncs are in flight. */
    _Atomic uint64_t committed_seq;
    _Atomic uint64_t durable_seq; /* every write <= it is on disk */
    _Atomic int syncs_in_flight;
} lsmfs;

/* Whoever writes records of the current format (inode records of version
 * 2) into a store of an older one marks the store SCHEMA_VERSION first or
 * in the same batch, so an older lsmfs refuses it instead of reading them
 * as damage. Adds that superblock to b and updates *sb; nothing when sb is
 * current. false: out of memory. */
bool super_batch_upgrade(lsm_batch *b, schema_super *sb);
/* A new filesystem (mkfs.lsmfs): the superblock sb (its ctime is the
 * root's times), the allocator and the root directory, owned by uid:gid,
 * added to b. false: out of memory. */
bool super_batch_mkfs(lsm_batch *b, const schema_super *sb, uint32_t uid, uint32_t gid);
/* Reads and checks the superblock; err explains a refusal. Returns 0,
 * EINVAL (not lsmfs), EPROTONOSUPPORT (newer format) or EIO. */
int super_read(lsm_db *db, const char *dir, schema_super *sb, char *err, size_t errlen);
/* A read-write mount marks the store current before it writes anything
 * (super_batch_upgrade): one synced write, nothing when sb is current.
 * Returns 0 or an errno with err set. */
int super_upgrade(lsm_db *db, schema_super *sb, char *err, size_t errlen);

#endif
