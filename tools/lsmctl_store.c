/*
 * lsmctl_store.c — lsmctl_open_store (see lsmctl_store.h).
 */
#include "lsmctl_store.h"

#include "store_open.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

lsm_db *lsmctl_open_store(const char *dir, bool write, void (*report)(void *, const char *),
                          void *ctx, const char *mounted_hint)
{
    store_open_req r = {.dir = dir,
                        .flags = STORE_OPEN_ANY |
                                 (write ? STORE_OPEN_RW : STORE_OPEN_RO | STORE_OPEN_SALVAGE),
                        .report = report,
                        .ctx = report != NULL ? ctx : "lsmctl"};
    lsm_db *db;
    schema_super sb;
    char msg[1024];
    int e = store_open(&r, &db, &sb, msg, sizeof msg);
    if (e == 0)
        return db;
    char mnt[PATH_MAX];
    pid_t pid;
    fprintf(stderr, "lsmctl: %s", msg);
    if (e == EBUSY && mounted_hint != NULL && store_mounted_at(dir, mnt, sizeof mnt, &pid)) {
        fputs(": ", stderr);
        fprintf(stderr, mounted_hint, mnt);
    }
    fputc('\n', stderr);
    return NULL;
}
