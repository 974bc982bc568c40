/*
 * inode_lock.c — inode locks in the lock order, and who holds them
 * (inode_lock.h).
 */
#include "inode_lock.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#ifndef NDEBUG
/* The inode numbers whose locks this thread holds through inode_*lock*, in
 * the order taken, which the lock order makes ascending. */
static _Thread_local struct {
    uint64_t ino[2 * INODE_LOCKS_MAX];
    int n;
} held;
#endif

/* Checks that taking ino's lock keeps the lock order, and records it. */
static void order_take(uint64_t ino)
{
#ifndef NDEBUG
    assert(held.n < 2 * INODE_LOCKS_MAX);
    assert(held.n == 0 || held.ino[held.n - 1] < ino); /* the lock order */
    held.ino[held.n++] = ino;
#else
    (void)ino;
#endif
}

static void order_drop(uint64_t ino)
{
#ifndef NDEBUG
    int i = held.n - 1;
    while (i >= 0 && held.ino[i] != ino)
        i--;
    assert(i >= 0); /* unlocked without inode_*lock */
    if (i < 0)
        return;
    memmove(&held.ino[i], &held.ino[i + 1], (size_t)(held.n - i - 1) * sizeof held.ino[0]);
    held.n--;
#else
    (void)ino;
#endif
}

static uintptr_t self(void)
{
    return (uintptr_t)pthread_self();
}

void inode_wrlock_unordered(inode *n)
{
    assert(inode_pinned(n));
    pthread_rwlock_wrlock(&n->lock);
    atomic_store_explicit(&n->writer, self(), memory_order_relaxed);
}

void inode_unlock_unordered(inode *n)
{
    if (inode_wrheld(n))
        atomic_store_explicit(&n->writer, 0, memory_order_relaxed);
    pthread_rwlock_unlock(&n->lock);
}

void inode_wrlock(inode *n)
{
    order_take(n->ino);
    inode_wrlock_unordered(n);
}

void inode_rdlock(inode *n)
{
    assert(inode_pinned(n));
    order_take(n->ino);
    pthread_rwlock_rdlock(&n->lock);
}

void inode_unlock(inode *n)
{
    order_drop(n->ino);
    inode_unlock_unordered(n);
}

bool inode_wrheld(inode *n)
{
    return atomic_load_explicit(&n->writer, memory_order_relaxed) == self();
}

bool inode_held(inode *n)
{
#ifndef NDEBUG
    for (int i = 0; i < held.n; i++)
        if (held.ino[i] == n->ino)
            return true;
#endif
    return inode_wrheld(n);
}

int inode_locks_held(void)
{
#ifndef NDEBUG
    return held.n;
#else
    return 0;
#endif
}
