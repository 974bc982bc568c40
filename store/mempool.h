/*
 * mempool.h — the process's pooled memory, counted and given back.
 *
 * bufpool.h keeps big batch buffers and direct writes' aligned ones,
 * arena.h freed memtable blocks, so the next big write fills pages already
 * mapped. Both pools are the process's, shared by every open store. They
 * are given back when a store closes (db_free) and when a store has seen
 * no write for a while (db_idle.c, the rule's one place). Every lock they
 * take is a leaf: callable with any store lock held.
 */
#ifndef LSM_MEMPOOL_H
#define LSM_MEMPOOL_H

#include <stddef.h>

/* Bytes both pools keep now (property lsm.pooled-bytes). */
size_t mempool_bytes(void);
/* Frees every kept buffer and block (only kept, unused ones: one in use
 * has left its pool), then returns the C library's free memory to the OS
 * (lsm_malloc_trim). Slow-ish (munmap, a walk of malloc's arenas): call it
 * with no lock held that others wait on. */
void mempool_release(void);

#endif
