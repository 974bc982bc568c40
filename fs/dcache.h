/*
 * dcache.h — one directory's entries in memory, all of them: exactly what
 * the store holds under the directory's 'D' and 'C' keys, so that name
 * lookups and listings need no store access (a store scan costs more per
 * entry than the kernel's whole share of a readdir).
 *
 * Entries are kept in cookie order. Cookies only grow, so a new entry is
 * appended; a removed one is marked dead and space is reclaimed once the
 * dead outnumber the live. A hash table indexes the names, hashed with
 * SipHash under a key random per process (per mount), so that no one can
 * pick names that share a probe sequence (a crafted directory would make
 * every lookup and create in it scan the whole table, lock held).
 *
 * Each entry also carries a `hint`: 32 bits its owner attaches and reads
 * back, never interpreted here (lsmfs's is the told rule: dir.h
 * dir_kernel_holds).
 *
 * Not thread-safe: the owner (a directory's inode, see icache.h) guards it
 * with its lock, and changes it only after the store change it mirrors was
 * committed. Names are byte strings of 1..SCHEMA_NAME_MAX bytes.
 */
#ifndef FS_DCACHE_H
#define FS_DCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dcache dcache;

/* Called for each entry in cookie order; returns non-zero to stop. */
typedef int (*dcache_visit_fn)(void *ctx, uint64_t cookie, uint64_t ino, uint8_t type,
                               const char *name, size_t nlen, uint32_t hint);

/* Sets the hash key of listings made from now on (tests: a fixed key makes
 * probe lengths repeatable). Call before any listing exists. Without it the
 * first dcache_new draws a random key. */
void dcache_set_key(uint64_t k0, uint64_t k1);

/* An empty listing; NULL when out of memory. */
dcache *dcache_new(void);
void dcache_free(dcache *c);

/* Live entries, and the bytes of memory the listing holds. */
size_t dcache_count(const dcache *c);
size_t dcache_bytes(const dcache *c);

/* Adds an entry whose cookie is above every cookie added before. Returns 0,
 * EEXIST (the name is there), EINVAL (cookie not above, or a bad name) or
 * ENOMEM (the listing is unchanged then). */
int dcache_add(dcache *c, const char *name, size_t nlen, uint64_t ino, uint8_t type,
               uint64_t cookie, uint32_t hint);
/* Removes the entry `name`. Returns 0 or ENOENT. */
int dcache_remove(dcache *c, const char *name, size_t nlen);
/* Points the entry `name` (which keeps its cookie) at another inode, as
 * RENAME_EXCHANGE does. Returns 0 or ENOENT. */
int dcache_retarget(dcache *c, const char *name, size_t nlen, uint64_t ino, uint8_t type,
                    uint32_t hint);
/* Looks `name` up: true, with the entry's fields, when it is there. */
bool dcache_find(const dcache *c, const char *name, size_t nlen, uint64_t *ino, uint8_t *type,
                 uint64_t *cookie);
/* The most slots any lookup of a present name examines (a measure of the
 * table's worst case, for tests). */
size_t dcache_longest_probe(const dcache *c);
/* Visits the entries with cookie >= from in cookie order until fn returns
 * non-zero (returned; 0 when all were visited). */
int dcache_scan(const dcache *c, uint64_t from, dcache_visit_fn fn, void *ctx);

#endif
