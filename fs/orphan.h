/*
 * orphan.h — inodes whose last name is gone. An 'O' ino record marks an
 * inode without names whose keys still have to be deleted: it is written in
 * the same batch that drops the last link (when the file is still in use or
 * has chunks to free), and deleted in the batch that removes the inode
 * record. The mark, not the record, is what says so (orphan_nlink). A
 * background thread reclaims chunked files in bounded batches so
 * unlink never waits for a large file's chunks; orphans left by a crash or
 * an unmount are picked up again at the next mount.
 */
#ifndef FS_ORPHAN_H
#define FS_ORPHAN_H

#include "data.h"
#include "schema.h"
#include "super.h"

/* Chunks deleted per background batch. */
#define ORPHAN_BATCH_CHUNKS DATA_DELETE_BATCH
/* A large orphan's range deleted so far is compacted after this many
 * batches (64 MiB of 4 KiB chunks), so its space comes back as it goes. */
#define ORPHAN_COMPACT_BATCHES 64
/* A file of at most this many chunks is freed in one batch, its chunks
 * deleted by name (no scan, no background work). */
#define ORPHAN_DIRECT_CHUNKS 4

/* Small orphans the kernel let go of are freed together, up to this many
 * in one store batch (all of them locked until it is in)... Under
 * ThreadSanitizer fewer: its deadlock detector aborts a thread that holds
 * more than 64 locks. */
#ifdef __SANITIZE_THREAD__
#define ORPHAN_FREE_BATCH 48
#else
#define ORPHAN_FREE_BATCH 256
#endif
/* ... gathered for at most this long after the first one arrives. */
#define ORPHAN_GATHER_MS 2

typedef struct inode inode;

/* Is unlinked inode n still in use? The one liveness rule, whether the
 * kernel sends OPEN and RELEASE or not (fs->no_open): while the kernel holds
 * a lookup reference to it, which every open file does (the kernel forgets
 * an inode only after its last RELEASE). A directory never is. The answer
 * is kept in n's orphan flag atomically with the check (icache_mark_orphan),
 * so the forget of the last reference, which may come at any time, hands n
 * back to be freed (icache_forget). Asked when the last name goes
 * (op_drop_inode) and again before freeing (a readdirplus working from an
 * older snapshot may have handed out a new reference meanwhile).
 * REQUIRES: n->lock held for writing. */
bool orphan_in_use(lsmfs *fs, inode *n);

/* Starts the reclaimer thread and queues every orphan found in the store. */
int reclaimer_start(lsmfs *fs, reclaimer **out);
/* Queues ino (whose orphan record is committed) for reclaim. If memory
 * runs out the orphan just waits for the next mount. */
void reclaimer_enqueue(reclaimer *r, uint64_t ino);
/* Takes over orphan n, pinned, whose last kernel reference is gone (its
 * orphan mark is committed, so a crash before it is freed loses nothing:
 * the next mount frees it). It is freed with others in one batch within
 * ORPHAN_GATHER_MS, on the reclaimer's thread, which then drops the pin; a
 * chunked one goes on to the reclaimer's queue. Returns false (n not taken)
 * when out of memory or stopping: the caller frees it itself. */
bool reclaimer_free_later(reclaimer *r, inode *n);
/* Waits until both queues are empty (tests and fsync-before-unmount). */
void reclaimer_drain(reclaimer *r);
/* Stops after the batch in progress, having freed the small orphans taken
 * over; queued large orphans stay for next mount. */
void reclaimer_stop(reclaimer *r);

/* Must the data of an unlinked inode with record r be freed in the
 * background (more than ORPHAN_DIRECT_CHUNKS chunks), or can its keys go in
 * one batch? */
bool orphan_needs_reclaim(const lsmfs *fs, const inode_rec *r);
/* Adds to b the deletes of ino's record, its inline bytes ('L'), its
 * xattrs, its orphan record and, unless it needs the reclaimer (which
 * deletes those first), its chunks.
 * REQUIRES: r is its true record, nlink 0 (asserted; see orphan_nlink). */
int orphan_batch_destroy(lsmfs *fs, lsm_batch *b, uint64_t ino, const inode_rec *r);

/* The one exception to "the cached record equals the stored one"
 * (icache.h), in these two functions. orphan_batch_mark adds ino's orphan
 * mark to b and nothing else: the batch that drops the last link with it
 * leaves the stored record as it was, with the link count and ctime it had,
 * while the cached record says nlink 0 (rewriting the record would read an
 * inline file's payload back on every unlink). The inode's next change
 * rewrites the record from the cache. Returns 0 or ENOMEM. */
int orphan_batch_mark(lsm_batch *b, uint64_t ino);
/* So whoever reads a stored record r takes its link count from here:
 * 0 when the inode is `marked` (its 'O' key exists), else r->nlink. */
uint32_t orphan_nlink(const inode_rec *r, bool marked);

#endif
