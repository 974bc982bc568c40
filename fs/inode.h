/*
 * inode.h — inode records: reading and writing them in the store, turning
 * them into struct stat, and the rules for new inodes and timestamps.
 */
#ifndef FS_INODE_H
#define FS_INODE_H

#include "inode_lock.h"
#include "schema.h"
#include "super.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct inode inode;

ts ts_now(void);
static inline ts ts_from_timespec(struct timespec t)
{
    return (ts){.sec = t.tv_sec, .nsec = (uint32_t)t.tv_nsec};
}

/* Reads an inode record from the store. When pay is non-NULL it gets a
 * malloc'd copy of the record's payload (NULL when empty): a symlink's
 * target, or the bytes of an inline file whose record holds them
 * (schema.h's inode_bytes_apart). Returns 0, ENOENT, EIO or ENOMEM (the
 * copy failed; *r is read). */
int inode_load(lsmfs *fs, uint64_t ino, inode_rec *r, char **pay, size_t *plen);

/* n's inline bytes or symlink target, malloc'd (NULL when empty): the kept
 * ones (icache_payload_keep), else read from the store: one get of its 'L'
 * key when they are apart, else of its record. REQUIRES: n->lock held.
 * Returns 0, EIO (no record, or bytes missing or too long: damage) or
 * ENOMEM. */
int inode_payload(lsmfs *fs, inode *n, char **p, size_t *plen);

/* Adds a put of a new inode's record r, placed (inode_rec_place), with a
 * symlink's target (NULL and 0 for any other: a new file has no bytes).
 * Returns 0 or ENOMEM. */
int inode_batch_put(lsm_batch *b, uint64_t ino, inode_rec *r, const char *target, size_t tlen);
/* What a data operation decided about an inline file's bytes: keep the
 * stored ones, or replace them (data is malloc'd; NULL when len is 0). */
typedef struct payload {
    bool replace;
    char *data;
    size_t len;
} payload;

static inline void payload_free(payload *p)
{
    free(p->data);
    p->data = NULL;
    p->len = 0;
    p->replace = false;
}

/* Adds the put of n's new record r, placed (inode_rec_place: the caller
 * caches r as changed), and of its bytes by the decision pl (NULL: keep
 * the stored ones): an 'L' key put, or deleted when the file is emptied or
 * leaves inline; an older record's bytes move apart. REQUIRES: n->lock held
 * for writing. Returns 0, ENOMEM or EIO. */
int inode_batch_finish(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, const payload *pl);
/* inode_batch_finish keeping the stored bytes. */
int inode_batch_update(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r);

/* A new inode's record: owner from the caller, setgid-directory
 * inheritance from the parent, all times now. */
void inode_init(inode_rec *r, uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev,
                const inode_rec *parent);

void inode_to_stat(uint64_t ino, const inode_rec *r, uint32_t chunk_size, struct stat *st);

static inline uint8_t inode_type(const inode_rec *r)
{
    return (uint8_t)((r->mode & S_IFMT) >> 12);
}

#endif
