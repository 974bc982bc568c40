/*
 * fsinfo.h — what `lsmctl info` shows of a filesystem: its superblock and
 * the inodes counted by type, read from a store (lsmctl, a store no one has
 * open) or asked of a live daemon by an ioctl on its root (the daemon alone
 * has its store open). The ioctl number and structure are the interface
 * lsmctl uses; fs_info_scan is libfs's.
 */
#ifndef FS_FSINFO_H
#define FS_FSINFO_H

#include "env.h"
#include "lsm.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

struct lsmfs_info {
    uint32_t format;       /* the superblock's format version */
    uint32_t chunk_size;   /* bytes */
    uint32_t inline_limit; /* bytes */
    uint32_t reserve_pct;  /* the root reserve (reserve.h): percent of the disk, 0 none */
    int64_t created;       /* the superblock's creation time, seconds */
    uint64_t files;        /* regular files */
    uint64_t dirs;         /* directories, the root too */
    uint64_t symlinks;
    uint64_t others;       /* devices, fifos, sockets */
    uint64_t orphans;      /* inodes marked orphan (unlinked, still open or not yet freed) */
    uint64_t file_bytes;   /* the regular files' sizes, summed */
    uint32_t resuid, resgid; /* who else may use the root reserve (resgid 0: no group) */
    /* The store's files (fs_info_files): bytes by kind, and snapshots. */
    uint64_t table_bytes, log_bytes, reserve_bytes, other_bytes;
    uint64_t snapshots;
};

#define LSMFS_IOC_INFO _IOR('L', 0x54, struct lsmfs_info)

/* Reads dir's superblock from db and scans every inode record (and orphan
 * mark) into *out, through one store snapshot, filling no cache. 0, or an
 * errno with the reason in err. */
int fs_info_scan(lsm_db *db, const char *dir, struct lsmfs_info *out, char *err, size_t errlen);
/* Sizes the store's files by kind and counts its snapshots (names in
 * snapshots/ not starting with '.'; none if it is missing) into out,
 * through env, where the store is `path` (a store on RADOS too). 0, or an
 * errno with the reason, naming `dir`, in err. */
int fs_info_files(lsm_env *env, const char *path, const char *dir, struct lsmfs_info *out,
                  char *err, size_t errlen);

#endif
