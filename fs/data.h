/*
 * data.h — file contents. A regular file is either INLINE (its bytes,
 * at most the superblock's inline limit, are one value: schema.h's
 * inode_bytes_apart says which) or chunked: chunk i holds bytes [i*chunk, (i+1)*chunk) under key
 * 'F' ino i. Missing chunks are holes; bytes past the end of a stored
 * chunk or payload read as zeros. Invariant: no stored byte lies at or
 * beyond the file size (truncate trims), so growing a file exposes zeros.
 *
 * The write-side functions add their changes to a batch and update the
 * caller's copy `r` of the record (size, INLINE flag); `pl` says what the
 * inline bytes become. The caller finishes with inode_batch_finish and
 * one fs_commit. All REQUIRE n->lock held for writing (reads: held at
 * least for reading).
 */
#ifndef FS_DATA_H
#define FS_DATA_H

#include "inode.h"
#include "super.h"

#include <stdint.h>
#include <sys/types.h>

/* The largest file size lsmfs accepts (2^62: chunk indexes stay far from
 * overflow), but see data_max_size. */
#define DATA_MAX_SIZE (1ULL << 62)
/* The kernel's limit for a FUSE file (s_maxbytes, MAX_LFS_FILESIZE). */
#define DATA_MAX_SIZE_KERNEL ((uint64_t)INT64_MAX)

/* The largest file size this mount accepts: DATA_MAX_SIZE, or on a
 * writeback mount the kernel's, since there write(2) lands in the kernel's
 * cache up to its own limit and reaches the daemon only at write-back,
 * where a refusal is a late EIO at close (test_write_crossing_max_size). */
uint64_t data_max_size(const lsmfs *fs);
/* Chunk deletes per store batch when a large file is truncated or freed:
 * a batch stays small (a 100 GiB file would make one of ~570 MB). */
#define DATA_DELETE_BATCH 256

/* Reads up to size bytes at off into a malloc'd buffer (*out, *outlen;
 * *out may be NULL when *outlen is 0). */
int data_read(lsmfs *fs, inode *n, uint64_t off, size_t size, char **out, size_t *outlen);
int data_write(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, const char *buf,
               size_t size, uint64_t off);
/* Sets the size to newsize. Shrinking a chunked file by more than
 * DATA_DELETE_BATCH chunks commits batches of its own first, from the end,
 * each deleting at most that many and lowering the stored size to a chunk
 * boundary (so a crash leaves the file cut between the two sizes, with no
 * hole); b gets the last of the deletes and the caller commits it. */
int data_truncate(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, uint64_t newsize);
/* Zeroes [off, off+len) ∩ [0, size): whole chunks are deleted (punched). */
int data_zero(lsmfs *fs, lsm_batch *b, inode *n, inode_rec *r, payload *pl, uint64_t off,
              uint64_t len);
/* SEEK_DATA / SEEK_HOLE. Returns 0, ENXIO or EIO. */
int data_seek(lsmfs *fs, inode *n, uint64_t off, int whence, uint64_t *result);
/* Adds deletes of every chunk of ino with index >= first (at most `max`;
 * *more says whether some were left, *deleted how many it deleted: the
 * caller keeps the record's chunk count; *next, unless NULL, the index the
 * next batch starts from). For truncation and reclaim. */
int data_delete_chunks(lsmfs *fs, lsm_batch *b, uint64_t ino, uint64_t first, uint64_t max,
                       bool *more, uint64_t *deleted, uint64_t *next);

#endif
