/*
 * skiplist.h — an ordered set of entries living in an arena, read without
 * locks while one thread writes.
 *
 * An entry is opaque bytes that begin with a varint32 key length and the
 * key; the rest is the caller's. Entries are ordered by their keys under the
 * comparison given at init (internal keys for the memtable). A node and its
 * entry are one arena allocation: skiplist_alloc() returns room for the
 * entry, the caller fills it, skiplist_insert() links it in.
 *
 * Concurrency: one writer at a time (alloc + insert serialised by the
 * caller); any number of readers concurrently with it and each other. A node
 * is published by a release store of the link that points at it and links
 * are read with acquire loads, so a reader that reaches a node sees its entry
 * and lower links complete. Entries are never removed or changed. Level 0
 * is also linked backward; a backward step may skip a node whose insert is
 * still in progress (as if it came later), never one inserted before.
 *
 * Inserts search from the previous insert's path (the splice), not from the
 * head, while keys land near the one before: a key next to the last one
 * inserted, after or before it, costs O(1) comparisons (a finger search),
 * so a sorted or reverse-sorted run of keys is linear. A key far from the
 * one before (random keys) is searched from the head, as the climb from
 * the splice would only add to that.
 */
#ifndef LSM_SKIPLIST_H
#define LSM_SKIPLIST_H

#include "arena.h"
#include "iter.h"

#include <stdint.h>

#define SKIPLIST_MAX_HEIGHT 12
#define SKIPLIST_BRANCHING 4

typedef struct sl_node sl_node;

typedef struct skiplist {
    iter_cmp_fn cmp;    /* immutable after init */
    arena *arena;       /* writer only */
    sl_node *head;      /* immutable after init; links as any node's */
    _Atomic int height; /* tallest node so far; a stale read is harmless */
    uint64_t rnd;       /* writer only: this list's own height generator */
    /* Writer only: the last insert's path. `last` is the node inserted last
     * (the head before any) and `last_height` its height; pred[i] the last
     * node of level i before it (the head if none, and on every level at or
     * above the list height). */
    sl_node *last;
    int last_height;
    sl_node *pred[SKIPLIST_MAX_HEIGHT];
    bool near; /* the last insert landed near the one before: search from it */
} skiplist;

/* The head node comes from `a`, which must outlive the list. false if out of
 * memory. */
bool skiplist_init(skiplist *sl, arena *a, iter_cmp_fn cmp);

/* Room for an entry of n bytes in a new, unlinked node; NULL if out of
 * memory. REQUIRES: writer serialisation. */
char *skiplist_alloc(skiplist *sl, size_t n);
/* Links an entry from skiplist_alloc() (filled in by now). REQUIRES: writer
 * serialisation; no entry with an equal key is present. */
void skiplist_insert(skiplist *sl, char *entry);
bool skiplist_contains(const skiplist *sl, const char *key, size_t n);

/* The key at the front of an entry. */
static inline const char *skiplist_entry_key(const char *entry, size_t *n)
{
    const unsigned char *p = (const unsigned char *)entry;
    uint32_t len = 0;
    int shift = 0;
    /* Written by us in memory, so well-formed: no limit needed. */
    while (*p & 0x80) {
        len |= (uint32_t)(*p++ & 0x7f) << shift;
        shift += 7;
    }
    len |= (uint32_t)*p++ << shift;
    *n = len;
    return (const char *)p;
}

/* A position in the list; plain struct, no allocation. */
typedef struct skiplist_pos {
    const skiplist *list;
    const sl_node *node; /* NULL: not valid */
} skiplist_pos;

void skiplist_pos_init(skiplist_pos *p, const skiplist *sl); /* not valid */
static inline bool skiplist_pos_valid(const skiplist_pos *p)
{
    return p->node != NULL;
}
const char *skiplist_pos_entry(const skiplist_pos *p);              /* REQUIRES: valid */
void skiplist_pos_next(skiplist_pos *p);                            /* REQUIRES: valid */
void skiplist_pos_prev(skiplist_pos *p);                            /* REQUIRES: valid */
void skiplist_pos_seek(skiplist_pos *p, const char *key, size_t n); /* first >= key */
void skiplist_pos_seek_first(skiplist_pos *p);
void skiplist_pos_seek_last(skiplist_pos *p);

#endif
