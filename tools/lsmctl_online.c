/*
 * lsmctl_online.c — lsmctl compact MNT and lsmctl check MNT (see
 * lsmctl_online.h). Each step is one ioctl on the mount's root: a key range
 * of one kind, or one level's tables; a line per step is the progress.
 */
#include "lsmctl_online.h"
#include "lsm.h"
#include "lsmctl_snapshot.h"
#include "lsmctl_stats.h"
#include "maint.h"
#include "schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Metric name of mount mnt's user.lsmfs.metrics; false after saying why. */
static bool metric(const char *mnt, const char *name, uint64_t *v)
{
    char *buf = malloc(1 << 16);
    ssize_t n = buf != NULL ? getxattr(mnt, "user.lsmfs.metrics", buf, (1 << 16) - 1) : -1;
    if (n < 0) {
        fprintf(stderr, "lsmctl: %s: reading its metrics failed\n", mnt);
        free(buf);
        return false;
    }
    buf[n] = '\0';
    *v = lsmctl_metric(buf, name);
    free(buf);
    return true;
}

int lsmctl_online_compact(const char *mnt)
{
    uint64_t before, after;
    if (!metric(mnt, "store_total_table_bytes", &before))
        return 1;
    double t0 = now();
    for (size_t i = 0; i < schema_nkinds; i++) { /* each key kind on its own */
        struct lsmfs_compact c;
        memset(&c, 0, sizeof c);
        /* [this kind, the next kind]: the whole of this kind's keys */
        c.begin[0] = (uint8_t)schema_kinds[i].kind;
        c.blen = i == 0 ? 0 : 1;
        c.end[0] = i + 1 < schema_nkinds ? (uint8_t)schema_kinds[i + 1].kind : 0;
        c.elen = i + 1 < schema_nkinds ? 1 : 0;
        if (lsmctl_root_ioctl(mnt, LSMFS_IOC_COMPACT, &c, "compact it") != 0)
            return 1;
        printf("compact: %zu/%zu %s done (%.1f s)\n", i + 1, schema_nkinds, schema_kinds[i].what,
               now() - t0);
        fflush(stdout);
    }
    if (!metric(mnt, "store_total_table_bytes", &after))
        return 1;
    printf("%s: compacted: tables %.1f MiB -> %.1f MiB in %.1f s\n", mnt, before / 1048576.0,
           after / 1048576.0, now() - t0);
    return 0;
}

/* Verifies level l's tables; adds its problems to *problems. */
static bool check_level(const char *mnt, int l, int *problems)
{
    struct lsmfs_check_tables t;
    memset(&t, 0, sizeof t);
    t.level = l;
    if (lsmctl_root_ioctl(mnt, LSMFS_IOC_CHECK_TABLES, &t, "check it") != 0)
        return false;
    t.first[sizeof t.first - 1] = '\0';
    if (t.tables > 0 || t.problems > 0)
        printf("check: level %d: %" PRIu64 " table%s, %.1f MiB: %s%s\n", l, t.tables,
               t.tables == 1 ? "" : "s", t.bytes / 1048576.0, t.problems ? "problem: " : "ok",
               t.first);
    fflush(stdout);
    *problems += (int)t.problems;
    return true;
}

/* The fs invariants as of one snapshot; adds its problems to *problems. */
static bool check_fs(const char *mnt, int *problems)
{
    struct lsmfs_check_fs *c = calloc(1, sizeof *c);
    if (c == NULL || lsmctl_root_ioctl(mnt, LSMFS_IOC_CHECK_FS, c, "check it") != 0) {
        free(c);
        return false;
    }
    c->report[sizeof c->report - 1] = '\0';
    fputs(c->report, stdout);
    bool ok = c->status != 8; /* FSCK_OPERATIONAL: the check could not run */
    printf("check: filesystem: %" PRIu64 " inodes, %" PRIu64 " entries: %s\n", c->inodes,
           c->entries,
           !ok           ? "could not be checked"
           : c->problems ? "problems above"
                         : "ok");
    *problems += (int)c->problems + !ok;
    free(c);
    return true;
}

int lsmctl_online_check(const char *mnt)
{
    int problems = 0;
    for (int l = 0; l < LSM_LEVELS; l++)
        if (!check_level(mnt, l, &problems))
            return 1;
    if (!check_fs(mnt, &problems))
        return 1;
    printf("%s: %s (%d problem%s)\n", mnt, problems ? "DAMAGED" : "ok", problems,
           problems == 1 ? "" : "s");
    return problems ? 1 : 0;
}
