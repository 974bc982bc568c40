/*
 * aschild.h — running a check as another user, or as a root without some
 * capabilities, in a forked child of an integration test (cmocka; main
 * thread only). The child takes the credentials, runs the check, and its
 * first unexpected result fails the test in the parent.
 */
#ifndef LSMFS_TEST_ASCHILD_H
#define LSMFS_TEST_ASCHILD_H

#include "mount.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Who the child becomes: uid, gid and supplementary groups (ngroups of
 * groups), and then which capabilities it drops from every set (a mask of
 * 1 << CAP_...; ~0ull: all, as capsh --drop or setpriv --bounding-set=-all). */
struct tm_cred {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[4];
    unsigned long long drop_caps;
};

#define TM_NOBODY ((struct tm_cred){.uid = 65534, .gid = 65534})
#define TM_CAPLESS_ROOT ((struct tm_cred){.drop_caps = ~0ull})

/* A check run in the child: NULL, or what went wrong (tm_why is there to
 * hold it). */
typedef const char *(*tm_check_fn)(const struct tmount *m, void *arg);
extern _Thread_local char tm_why[512];

/* Runs run(ctx) in a child; fails the test with its message (prefixed by
 * who) when it returns one or dies. */
void tm_in_child(const char *who, const char *(*run)(void *ctx), void *ctx);

/* Runs check(m, arg) in a child with credentials *c; fails the test with
 * the child's message when the credentials cannot be taken or the check
 * fails. */
void tm_as(const struct tm_cred *c, tm_check_fn check, const struct tmount *m, void *arg);

/* For checks: return a message from the child when cond is false. */
#define TM_EXPECT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(tm_why, sizeof tm_why, __VA_ARGS__);                                          \
            return tm_why;                                                                         \
        }                                                                                          \
    } while (0)
#define TM_EXPECT_ERR(expr, err)                                                                   \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(expr);                                                                    \
        TM_EXPECT(r_ == -1 && errno == (err), "%s = %ld, errno %s; expected %s", #expr, r_,        \
                  tm_errname(errno), tm_errname(err));                                             \
    } while (0)
#define TM_EXPECT_OK(expr)                                                                         \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(expr);                                                                    \
        TM_EXPECT(r_ >= 0, "%s = %ld, errno %s", #expr, r_, tm_errname(errno));                   \
    } while (0)

#endif
