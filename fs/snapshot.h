/*
 * snapshot.h — snapshots of a mounted filesystem: checkpoints of its store
 * (lsm_checkpoint) kept in STORE/snapshots/NAME, asked of the daemon by
 * ioctls on the mount's root directory (lsmctl snapshot).
 *
 * Why ioctls: a snapshot must be cut inside the daemon (it alone has the
 * store open), at a moment ordered after every operation already answered;
 * an ioctl on the root is a request like those, answered when the copy is
 * durable, with the caller's credentials (only a holder of CAP_SYS_ADMIN
 * or the user who mounted, unless that is root, may take or delete them) and no name in the tree or attribute that
 * tar, rsync or cp -a would trip over.
 *
 * The ioctl numbers and structures below are the interface lsmctl uses;
 * the functions are the daemon's (libfs).
 */
#ifndef FS_SNAPSHOT_H
#define FS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#define LSMFS_SNAPSHOT_DIR "snapshots" /* below the store directory */
#define LSMFS_SNAPSHOT_NAME_MAX 200

/* Take snapshot `name`; the daemon fills in the rest. */
struct lsmfs_snap_create {
    char name[LSMFS_SNAPSHOT_NAME_MAX + 1];
    uint64_t seq;          /* the store's sequence at the cut */
    uint64_t tables;       /* tables in the snapshot */
    uint64_t linked_bytes; /* of their bytes, shared with the live store */
    uint64_t copied_bytes; /* copied (another filesystem) */
    uint64_t micros;       /* time the snapshot took */
};
struct lsmfs_snap_name {
    char name[LSMFS_SNAPSHOT_NAME_MAX + 1];
};
struct lsmfs_snap_dir {
    char path[4096]; /* the absolute directory the snapshots are in */
};

#define LSMFS_IOC_SNAP_CREATE _IOWR('L', 0x51, struct lsmfs_snap_create)
#define LSMFS_IOC_SNAP_DELETE _IOW('L', 0x52, struct lsmfs_snap_name)
/* One snapshot as a listing sees it (LSMFS_IOC_SNAP_NEXT): the caller
 * passes the last name it was given ("" at first) and gets the next one in
 * name order; ENOENT after the last. */
struct lsmfs_snap_entry {
    char name[LSMFS_SNAPSHOT_NAME_MAX + 1];
    uint64_t bytes;       /* its files' bytes */
    uint64_t alone_bytes; /* of them, in files neither the store nor another snapshot holds */
    uint32_t complete;    /* 1 if it has a CURRENT (0: a damaged snapshot) */
    uint32_t unfinished;  /* hidden leftovers of a crash beside the snapshots */
};
#define LSMFS_IOC_SNAP_DIR _IOR('L', 0x53, struct lsmfs_snap_dir)
#define LSMFS_IOC_SNAP_NEXT _IOWR('L', 0x54, struct lsmfs_snap_entry)

/* Whether name may name a snapshot: 1 to LSMFS_SNAPSHOT_NAME_MAX bytes,
 * no '/', no leading '.' (hidden names are the half-built and the
 * half-deleted ones), no control characters. (Inline: lsmctl uses it
 * without libfs.) */
static inline int snapshot_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > LSMFS_SNAPSHOT_NAME_MAX || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (name[i] == '/' || (unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return 0;
    return 1;
}

struct lsmfs;
/* Takes snapshot c->name of fs's store into STORE/snapshots/NAME, fills
 * in c's results. Returns 0 or an errno (EEXIST, EROFS, EIO, ENOSPC...),
 * with a message for the log in err. */
int snapshot_create(struct lsmfs *fs, struct lsmfs_snap_create *c, char *err, size_t errlen);
/* Deletes snapshot `name`: renamed to a hidden name first (so no one sees
 * it half deleted), then its files, then the directory. EBUSY while it is
 * mounted (its LOCK is held), ENOENT if there is none. */
int snapshot_delete(struct lsmfs *fs, const char *name, char *err, size_t errlen);
/* At a read-write mount (the store's LOCK held, so no snapshot is being
 * built or deleted): removes the hidden directories in STORE/snapshots a
 * killed daemon left (".NAME.tmp-*" half built, ".NAME.del-*" half
 * deleted). Best effort: what cannot be removed is said on stderr and left
 * for the next mount. */
void snapshot_sweep_leftovers(const struct lsmfs *fs);
/* The snapshot after e->name in name order, measured, into e (the store's
 * env, so a store on RADOS lists as a local one does). 0, ENOENT after the
 * last, or an errno with a message in err. Hidden names are not
 * snapshots: only counted (e->unfinished). */
int snapshot_next(const struct lsmfs *fs, struct lsmfs_snap_entry *e, char *err, size_t errlen);

#endif
