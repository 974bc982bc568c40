/*
 * store_files.h — the store directory's files by kind (tables, logs, the
 * RESERVE, the rest), sized through the store's env, so a store on RADOS
 * is measured as a local one is. Subdirectories (snapshots/) count nothing.
 * Used by statfs (store_usage.c) and lsmctl info (fsinfo.c).
 */
#ifndef FS_STORE_FILES_H
#define FS_STORE_FILES_H

#include "env.h"

#include <stdint.h>

typedef struct store_files {
    uint64_t tables, logs, reserve, other; /* bytes */
} store_files;

/* One listing of dir in env, a size per file. A file that cannot be sized
 * (a directory; one deleted meanwhile) counts nothing. NULL, or the
 * listing's failure (*out then zero). */
lsm_status *store_files_measure(lsm_env *env, const char *dir, store_files *out);

#endif
