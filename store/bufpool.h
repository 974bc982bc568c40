/*
 * bufpool.h — big buffers kept for reuse.
 *
 * A big write's batch (1 MiB of file data and more) lives as long as its
 * memtable (a deferred batch, db_defer.c; memtable_keep), then goes; the next
 * big batch would take fresh memory, a page fault for every page it fills.
 * Instead the buffer is kept here, BUFPOOL_MAX_BYTES at most (a memtable's
 * worth of big batches), and the next big batch fills pages already
 * mapped. One pool for the process, as arena.c's, under its own mutex (a
 * leaf: nothing is called with it held).
 */
#ifndef LSM_BUFPOOL_H
#define LSM_BUFPOOL_H

#include "coding.h"

#include <stdbool.h>
#include <stddef.h>

/* A buffer this big or bigger is kept; at most this many bytes are. */
#define BUFPOOL_MIN (128u << 10)
#define BUFPOOL_MAX_BYTES (32u << 20)

/* Gives up b's memory: kept when it is big and the pool has room, else
 * freed. b is left empty (buf_init). */
void bufpool_release(buf *b);
/* buf_reserve, but a big buffer is first looked for among the kept ones
 * (b's bytes are copied into it, b's old memory freed). false if out of
 * memory (b unchanged). */
bool bufpool_reserve(buf *b, size_t extra);
/* Aligned buffers of BUFPOOL_ALIGNED bytes for direct writes
 * (wfile_direct.c), kept the same way, at most BUFPOOL_ALIGNED_KEPT.
 * get: NULL if out of memory; put: NULL is ignored. */
#define BUFPOOL_ALIGNED (1u << 20)
#define BUFPOOL_ALIGNED_KEPT 8
char *bufpool_aligned_get(void);
void bufpool_aligned_put(char *b);
/* Frees every kept buffer (none is in use: a taken one left the pool).
 * Who calls it and when: mempool.h. */
void bufpool_drain(void);
/* Bytes kept now, the aligned buffers' too. */
size_t bufpool_bytes(void);

#endif
