/*
 * perm.c — POSIX permission checks made by the daemon itself.
 */
#include "perm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static bool in_group(const perm_cred *c, gid_t gid)
{
    if (c->gid == gid)
        return true;
    for (size_t i = 0; i < c->ngroups; i++)
        if (c->groups[i] == gid)
            return true;
    return false;
}

/* The rwx bits (in the R_OK/W_OK/X_OK positions) of the class c falls in. */
static int class_bits(const perm_cred *c, mode_t mode, uid_t uid, gid_t gid)
{
    if (c->uid == uid)
        return (int)(mode >> 6) & 7;
    if (in_group(c, gid))
        return (int)(mode >> 3) & 7;
    return (int)mode & 7;
}

int perm_check(const perm_cred *c, mode_t mode, uid_t uid, gid_t gid, int mask)
{
    mask &= R_OK | W_OK | X_OK;
    if (c->uid == 0) {
        /* Execute needs an execute bit somewhere, except to search a
         * directory (CAP_DAC_OVERRIDE). */
        if (!(mask & X_OK) || S_ISDIR(mode) || (mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
            return 0;
        return EACCES;
    }
    return (mask & ~class_bits(c, mode, uid, gid)) ? EACCES : 0;
}

void perm_cred_of_req(fuse_req_t req, perm_cred *c)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    c->uid = ctx->uid;
    c->gid = ctx->gid;
    c->groups = c->inline_groups;
    int n = fuse_req_getgroups(req, PERM_INLINE_GROUPS, c->groups);
    if (n > PERM_INLINE_GROUPS) {
        gid_t *g = malloc((size_t)n * sizeof *g);
        if (g != NULL) {
            /* The list may have changed in between: take what fits. */
            int m = fuse_req_getgroups(req, n, g);
            if (m >= 0) {
                c->groups = g;
                n = m < n ? m : n;
            } else {
                free(g);
            }
        }
        if (c->groups == c->inline_groups)
            n = PERM_INLINE_GROUPS;
    }
    c->ngroups = n < 0 ? 0 : (size_t)n;
}

void perm_cred_release(perm_cred *c)
{
    if (c->groups != c->inline_groups)
        free(c->groups);
    c->groups = c->inline_groups;
    c->ngroups = 0;
}
