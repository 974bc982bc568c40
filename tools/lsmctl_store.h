/*
 * lsmctl_store.h — how lsmctl's commands open a store directory: through
 * store_open (fs/store_open.h), as the daemon does, so a newer format is
 * refused and a writing command writes with the filesystem's settings.
 */
#ifndef LSMCTL_STORE_H
#define LSMCTL_STORE_H

#include "lsm.h"

#include <stdbool.h>

/* Opens dir; read-only (keeping a damaged log's prefix) unless `write`.
 * What recovery dropped goes to report(ctx, line) (NULL: stderr). On
 * failure says why in one line on stderr and returns NULL. A store that is
 * mounted gets mounted_hint (a format with one %s, the mount point;
 * NULL: none) at the end of that line. */
lsm_db *lsmctl_open_store(const char *dir, bool write, void (*report)(void *, const char *),
                          void *ctx, const char *mounted_hint);

#endif
