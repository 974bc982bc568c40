/*
 * maint.c — the online maintenance ioctls (maint.h).
 */
#include "maint.h"
#include "fsck.h"
#include "ops.h"
#include "super.h"
#include "lsm_malloc.h"
#include "textbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool maint_ioctl_cmd(unsigned int cmd)
{
    return cmd == LSMFS_IOC_COMPACT || cmd == LSMFS_IOC_CHECK_TABLES || cmd == LSMFS_IOC_CHECK_FS;
}

static void compact(fuse_req_t req, lsmfs *fs, const void *in, size_t insz)
{
    struct lsmfs_compact c;
    if (!op_ioctl_arg(req, in, insz, 0, false, &c, sizeof c))
        return;
    if (c.blen > LSMFS_MAINT_KEY_MAX || c.elen > LSMFS_MAINT_KEY_MAX) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    lsm_status *s = lsm_compact_range(fs->db, c.blen ? c.begin : NULL, c.blen,
                                      c.elen ? c.end : NULL, c.elen);
    if (s != NULL) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: compacting: %s\n", lsm_status_message(s));
        int e = lsm_status_errno(s); /* ENOSPC, ENOMEM: the next may work */
        lsm_status_free(s);
        fuse_reply_err(req, e);
        return;
    }
    fuse_reply_ioctl(req, 0, NULL, 0);
}

static void count_problem(void *ctx, const char *msg)
{
    struct lsmfs_check_tables *t = ctx;
    if (t->problems++ == 0)
        snprintf(t->first, sizeof t->first, "%s", msg);
}

static void check_tables(fuse_req_t req, lsmfs *fs, const void *in, size_t insz, size_t outsz)
{
    struct lsmfs_check_tables t;
    if (!op_ioctl_arg(req, in, insz, outsz, true, &t, sizeof t))
        return;
    if (t.level < 0 || t.level >= LSM_LEVELS) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    t.problems = 0;
    t.first[0] = '\0';
    lsm_status *s = lsm_verify_level(fs->db, t.level, count_problem, &t, &t.tables, &t.bytes);
    bool no_memory = lsm_status_code(s) == LSM_NO_MEMORY; /* no verdict */
    lsm_status_free(s);
    if (no_memory)
        fuse_reply_err(req, ENOMEM);
    else
        fuse_reply_ioctl(req, 0, &t, sizeof t);
}

static void check_fs(fuse_req_t req, lsmfs *fs, size_t outsz)
{
    if (outsz < sizeof(struct lsmfs_check_fs)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    struct lsmfs_check_fs *c = lsm_calloc(1, sizeof *c);
    textbuf report;
    textbuf_init(&report);
    FILE *out = c != NULL ? textbuf_stream(&report) : NULL;
    if (out == NULL) {
        free(c);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fsck_result r;
    c->status = fsck_live(fs->db, fs->dir, out, &r);
    fclose(out);
    char *text = textbuf_take(&report); /* NULL: a line of it was lost */
    c->problems = (uint32_t)r.problems;
    c->inodes = r.inodes;
    c->entries = r.entries;
    snprintf(c->report, sizeof c->report, "%s", text != NULL ? text : "");
    if (text == NULL || r.no_memory) /* no verdict: lsmctl must not say DAMAGED */
        fuse_reply_err(req, ENOMEM);
    else
        fuse_reply_ioctl(req, 0, c, sizeof *c);
    free(text);
    free(c);
}

void maint_ioctl(fuse_req_t req, lsmfs *fs, unsigned int cmd, const void *in, size_t insz,
                 size_t outsz)
{
    if (cmd == LSMFS_IOC_COMPACT)
        compact(req, fs, in, insz);
    else if (cmd == LSMFS_IOC_CHECK_TABLES)
        check_tables(req, fs, in, insz, outsz);
    else
        check_fs(req, fs, outsz);
}
