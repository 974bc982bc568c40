/*
 * fsck.h — checking an unmounted lsmfs store, and repairing it: what
 * fsck.lsmfs runs (a library so that unit tests can run it on stores they
 * break by hand).
 *
 * Checked: superblock and allocator; every inode record decodes; every
 * directory entry names a live inode of the type it says, from a live
 * directory, with a matching readdir index key and a cookie below its
 * directory's counter; every inode is reachable from the root or an orphan
 * (nlink 0 with an orphan mark); link counts equal the names (directories:
 * 2 + subdirectories); directory entry counts and parents agree; no chunk
 * of a non-chunked file, beyond the file size or oversized; each record's
 * chunk count equals its chunk keys (unless unknown, version 1); inline data
 * within limits; no xattr or orphan mark of a missing inode; no xattr
 * outside the namespaces lsmfs keeps (xattr_stored_name_kept); no unknown key.
 * Repairs reconnect unreachable inodes to /lost+found as "#ino", fix counts,
 * drop dangling entries and stray keys.
 */
#ifndef FS_FSCK_H
#define FS_FSCK_H

#include "lsm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Exit codes, as fsck(8). */
#define FSCK_CLEAN 0
#define FSCK_FIXED 1
#define FSCK_UNFIXED 4
#define FSCK_OPERATIONAL 8
#define FSCK_USAGE 16 /* a usage or syntax error (fsck(8)) */

typedef struct fsck_options {
    bool repair; /* -y: write repairs */
    bool verbose;
    bool progress; /* a progress line on stderr */
    FILE *out;     /* problem reports (stdout when NULL) */
} fsck_options;

typedef struct fsck_result {
    int problems;
    size_t inodes, entries;
    bool no_memory; /* FSCK_OPERATIONAL for lack of memory: no verdict, try again */
} fsck_result;

/* Checks the store in dir; returns one of the FSCK_* codes. */
int fsck_store(const char *dir, const fsck_options *o, fsck_result *res);

/* Checks the filesystem in db, open and maybe serving a mount, read-only and
 * as of one store snapshot (every operation is one batch, so a snapshot is
 * consistent): every check above but the tables' (lsm_verify_level does
 * those, level by level) and no repair. Problems go to out (dir names the
 * store in them). FSCK_CLEAN, FSCK_UNFIXED (problems) or FSCK_OPERATIONAL. */
int fsck_live(lsm_db *db, const char *dir, FILE *out, fsck_result *res);

#endif
