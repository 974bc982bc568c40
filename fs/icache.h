/*
 * icache.h — the in-memory inode cache: a cache of the store's inode
 * records plus the references requests and the kernel hold on each inode.
 *
 * Locking (lock order: any number of inode locks in ascending inode number,
 * then at most one shard mutex; never a shard mutex while taking an inode
 * lock):
 *   - a shard mutex guards its hash chains and, for each inode in it, the
 *     fields `next`, `refs`, `nlookup` and `orphan`;
 *   - an inode's `lock` (rwlock) guards `rec`, `gone` and `dc`; every change to
 *     the inode's record in the store is made with it held for writing, so
 *     the cached record always equals the stored one. Operations that read
 *     file data hold it for reading, so writers of the same file are
 *     serialized with them while different files proceed in parallel.
 *     One exception, an orphan's link count: orphan.h orphan_batch_mark;
 *   - `ino` is constant; `loaded` is an atomic set once, after `rec` is
 *     filled, under `lock`.
 * An entry lives while refs (in-flight operations pinning it) or nlookup
 * (kernel references, which open files hold too) is non-zero, or while it
 * is an orphan waiting for the kernel's last reference to go. The root,
 * once loaded, lives until icache_free (icache.c maybe_evict).
 */
#ifndef FS_ICACHE_H
#define FS_ICACHE_H

#include "dcache.h"
#include "schema.h"
#include "super.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct inode {
    /* First, in one cache line: what a hash-chain walk reads. */
    uint64_t ino;       /* [const] */
    struct inode *next; /* [shard] */
    _Atomic uint64_t refs; /* [shard] changed; atomic so inode_pinned may read it */
    uint64_t nlookup;   /* [shard] */
    /* [shard] Its last name is gone but the kernel still references it:
     * free it at the last forget (orphan_in_use, orphan.h). */
    bool orphan;
    _Atomic bool loaded; /* rec is valid */
    bool gone;           /* [lock] the record was deleted from the store */
    /* The sequence number of the last committed batch that changed this
     * inode's record, entries or data (atomic max; see storeio.h): what
     * fsync must make durable. */
    _Atomic uint64_t seq;
    /* A directory's seq when a listing of it last started at offset 0, or
     * 0: op_dir.c's listing-cache rule (listed_unchanged). */
    _Atomic uint64_t listed_seq;
    /* Someone asked to fsync it: its large writes are logged at once, not
     * deferred (the next fsync would log them late anyway, after a copy:
     * 1 MiB write + fsync was 10-15% slower deferred). */
    _Atomic bool fsynced;
    /* The last commit that touched it (fs_commit_as, whatever the op) was
     * COMMIT_DEFER_LOG: the times SETATTR a writeback mount's kernel sends
     * after writing pages back is deferred too (else it carries the large
     * writes into the WAL). Any logged commit of it clears it. */
    _Atomic bool deferred_last;
    /* rec.parent, readable without the lock (is_within walks ancestors
     * while holding other inodes' locks): set with rec when loaded or
     * inserted, and by rename, the one change that moves a directory. */
    _Atomic uint64_t parent;
    /* [shard] The entry the kernel last got it by (lookup, create,
     * readdirplus): what ishrink.h asks the kernel to drop; NULL kname:
     * none known. `referenced`: used since the budget's clock hand last
     * passed (second chance). */
    uint64_t kparent;
    char *kname;
    bool referenced;
    pthread_rwlock_t lock;
    /* The thread holding `lock` for writing (inode.h's inode_wrheld), 0
     * when none: set and cleared by that thread, read by assertions. */
    _Atomic uintptr_t writer;
    inode_rec rec; /* [lock] */
    /* [lock] A regular inline file's bytes as the store holds them (in its
     * 'L' key or its record), when pay_kept (icache_payload_keep); pay is
     * NULL when they are empty. */
    char *pay;
    size_t pay_len;
    bool pay_kept;
    /* [lock] A directory's entries, all of them, in memory (dir.h), or
     * NULL; freed with the inode. */
    dcache *dc;
} inode;

/* Whether n is pinned (by anyone: for assertions that the caller's pin
 * keeps it). Every inode lock is taken on a pinned inode. */
static inline bool inode_pinned(inode *n)
{
    return atomic_load_explicit(&n->refs, memory_order_relaxed) > 0;
}

icache *icache_new(void);
/* REQUIRES: no operation in flight. Frees every entry. */
void icache_free(icache *c);

/* Pins the inode, loading its record from the store if it is not cached.
 * Returns 0, ENOENT (no such inode) or EIO. */
int icache_get(lsmfs *fs, uint64_t ino, inode **out);
/* Pins the inode only if its record is cached (no store read): NULL if not. */
inode *icache_get_cached(icache *c, uint64_t ino);
/* Pins an entry for a new inode number before its record is committed
 * (ENOMEM), so that nothing can fail after the commit (ops.h); must be
 * paired with icache_fill once committed, or icache_put if not. */
int icache_reserve(icache *c, uint64_t ino, inode **out);
/* The reserved entry gets the committed record `rec`. */
void icache_fill(lsmfs *fs, inode *n, const inode_rec *rec);
/* The parent of a directory whose record is cached (the `parent` copy: no
 * lock, no pin, no load); false when it is not cached. */
bool icache_cached_parent(icache *c, uint64_t ino, uint64_t *parent);
/* Drops a pin; the entry is freed once nothing references it. */
void icache_put(icache *c, inode *n);

/* Kernel lookup references (an entry reply adds one; forget removes n).
 * The reply was for entry `name` of directory `parent` (NULL: not known),
 * which becomes n's kname unless n is a directory: asking the kernel to
 * drop a directory's entry would detach whatever is mounted below it. */
void icache_lookup_inc(icache *c, inode *n, uint64_t parent, const char *name, bool is_dir);
/* Does the kernel hold a reference to ino? (No pin, no load: a hint for
 * readdirplus, which may race with a forget and then sends the entry the
 * kernel looks up again.) */
bool icache_kernel_knows(icache *c, uint64_t ino);
/* A number that changes whenever the kernel drops its last reference to
 * any inode (never 0): while it has not changed, every inode the kernel
 * held before still is. Read by dir.h's told rule (dir_kernel_holds). */
uint32_t icache_forget_epoch(icache *c);
/* Drops n kernel references. Returns the inode, pinned, when that was the
 * last reference to an orphan (the caller asks orphan_in_use again and
 * frees it); NULL otherwise. */
inode *icache_forget(icache *c, uint64_t ino, uint64_t n);
/* Sets n's orphan flag to whether the kernel holds a reference to it, and
 * returns that; orphan_in_use (orphan.h) is its one caller.
 * REQUIRES: n->lock held for writing. */
bool icache_mark_orphan(icache *c, inode *n);

/* Entries cached, all shards together (relaxed: a gauge). */
size_t icache_count(icache *c);
/* An entry the kernel holds, by the name it got it by. */
typedef struct icache_victim {
    uint64_t parent;
    char name[SCHEMA_NAME_MAX + 1];
} icache_victim;
/* Moves the clock hand over the entries, at most `scan` of them, and
 * returns (up to max, in out) those the kernel holds by a known name that
 * no request pins and nothing used since the hand last passed; it clears
 * the `referenced` mark of the others it passes. Only one thread may call
 * it (the hand is its own). */
size_t icache_victims(icache *c, icache_victim *out, size_t max, size_t scan);

/* Bytes of directory listings (inode `dc`s) held, all inodes together:
 * whoever changes a listing charges the difference; freeing an inode
 * refunds its listing. */
void icache_dcache_charge(icache *c, int64_t delta);
int64_t icache_dcache_bytes(icache *c);

/* Inline payloads kept with their cached records, so that reading or
 * writing a small file costs no store get for its bytes. Kept when a
 * record holding them is loaded (icache_get; stores before format 4:
 * schema.h's inode_bytes_apart) and replaced by the one commit that
 * changes a payload (ops.h op_commit_one_as); all inodes' together at most
 * ICACHE_PAYLOAD_BUDGET bytes: past it a payload is not kept, and is read
 * from the store (inode_payload). */
#define ICACHE_PAYLOAD_BUDGET ((int64_t)16 << 20)
/* Makes p (malloc'd, taken; NULL when len is 0) n's kept payload if it
 * fits the budget, else frees it and n keeps none.
 * REQUIRES: n->lock held for writing. */
void icache_payload_keep(icache *c, inode *n, char *p, size_t len);
int64_t icache_payload_bytes(icache *c);

#endif
