/* test_fs_inode_lock.c — who holds an inode's lock (fs/inode_lock.c), as
 * the fs's assertions ask: the writer is known in every build and only to
 * its own thread; readers through the per-thread record; the reclaimer's
 * unordered lock is a writer outside the record. */
#include "inode_lock.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

static void pinned_inode(inode *n, uint64_t ino)
{
    memset(n, 0, sizeof *n);
    n->ino = ino;
    atomic_store(&n->refs, 1);
    pthread_rwlock_init(&n->lock, NULL);
}

static void *other_thread_sees(void *arg)
{
    inode *n = arg;
    return (void *)(uintptr_t)(inode_wrheld(n) || inode_held(n) || inode_locks_held() != 0);
}

static bool seen_by_other_thread(inode *n)
{
    pthread_t t;
    void *r;
    assert_int_equal(pthread_create(&t, NULL, other_thread_sees, n), 0);
    pthread_join(t, &r);
    return r != NULL;
}

static void test_writer_known_to_itself_only(void **state)
{
    (void)state;
    inode n;
    pinned_inode(&n, 7);
    assert_true(inode_pinned(&n));
    assert_false(inode_wrheld(&n));
    assert_false(inode_held(&n));
    inode_wrlock(&n);
    assert_true(inode_wrheld(&n));
    assert_true(inode_held(&n));
    assert_int_equal(inode_locks_held(), 1);
    assert_false(seen_by_other_thread(&n));
    inode_unlock(&n);
    assert_false(inode_wrheld(&n));
    assert_false(inode_held(&n));
    assert_int_equal(inode_locks_held(), 0);
    pthread_rwlock_destroy(&n.lock);
}

static void test_reader_held_not_writer(void **state)
{
    (void)state;
    inode a, b;
    pinned_inode(&a, 3);
    pinned_inode(&b, 9);
    inode_rdlock(&a);
    inode_wrlock(&b);
#ifndef NDEBUG
    assert_true(inode_held(&a));
#endif
    assert_false(inode_wrheld(&a));
    assert_true(inode_wrheld(&b));
    assert_int_equal(inode_locks_held(), 2);
    inode_unlock(&b);
    inode_unlock(&a);
    assert_false(inode_held(&a));
    assert_false(inode_held(&b));
    assert_int_equal(inode_locks_held(), 0);
    pthread_rwlock_destroy(&a.lock);
    pthread_rwlock_destroy(&b.lock);
}

static void test_wrlock_all_and_unordered(void **state)
{
    (void)state;
    inode a, b;
    pinned_inode(&a, 4);
    pinned_inode(&b, 2);
    inode *v[3] = {&a, NULL, &b};
    inode_wrlock_all(v, 3);
    assert_true(inode_wrheld(&a) && inode_wrheld(&b));
    assert_int_equal(inode_locks_held(), 2);
    inode_unlock_all(v, 3);
    assert_false(inode_wrheld(&a) || inode_wrheld(&b));
    inode_wrlock_unordered(&a); /* the reclaimer's batch: outside the record */
    assert_true(inode_wrheld(&a));
    assert_int_equal(inode_locks_held(), 0);
    inode_unlock_unordered(&a);
    assert_false(inode_wrheld(&a));
    pthread_rwlock_destroy(&a.lock);
    pthread_rwlock_destroy(&b.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_known_to_itself_only),
        cmocka_unit_test(test_reader_held_not_writer),
        cmocka_unit_test(test_wrlock_all_and_unordered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
