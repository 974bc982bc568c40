/*
 * alloc.h — the inode number allocator. Numbers are never reused in a
 * filesystem's life, crash or not: numbers are handed out from a range that
 * was first reserved by a *synchronous* write of the 'A' record (the
 * high-water mark), so no inode using a number can reach the disk before the
 * reservation does. A crash wastes at most the unused rest of one range.
 */
#ifndef FS_ALLOC_H
#define FS_ALLOC_H

#include "lsm.h"
#include "mutex.h"

#include <pthread.h>
#include <stdint.h>

/* Numbers reserved per synchronous 'A' write. */
#define ALLOC_RANGE 65536u

typedef struct ino_alloc {
    mutex mu; /* store/mutex.h: knows its owner (reserve asserts it) */
    lsm_db *db;     /* [const] */
    uint64_t next;  /* [mu] next number to hand out */
    uint64_t limit; /* [mu] first number not yet reserved on disk */
} ino_alloc;

/* Reads the high-water mark (and, defensively, the highest inode key).
 * Returns 0 or an errno (EIO for a damaged record or a failed read) with a
 * message in err that says which (a failed read names the table and offset).
 * alloc_destroy must follow in either case. */
int alloc_init(ino_alloc *a, lsm_db *db, char *err, size_t errlen);
void alloc_destroy(ino_alloc *a);
/* Returns 0 and a fresh number, or an errno (EIO/ENOSPC from the store). */
int alloc_ino(ino_alloc *a, uint64_t *ino);
/* The highest inode key in the store (0 if none); errno on failure. */
int alloc_highest_inode(lsm_db *db, uint64_t *ino);

#endif
