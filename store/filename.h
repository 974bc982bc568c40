/*
 * filename.h — the names of the files in a store directory:
 *   NNNNNN.log       write-ahead logs
 *   NNNNNN.ldb       tables
 *   MANIFEST-NNNNNN  version edits (which tables make up the store)
 *   CURRENT          the name of the live MANIFEST
 *   LOCK             held (flock) by the process that has the store open
 *   NNNNNN.dbtmp     temporary files (renamed into place)
 * File numbers come from one counter and are never reused. Every number is
 * below MAX_FILE_NUMBER: a name with a larger one is not the store's, a
 * MANIFEST field with one is corrupt, so the counter can never wrap.
 */
#ifndef LSM_FILENAME_H
#define LSM_FILENAME_H

#include <stdbool.h>
#include <stdint.h>

#define MAX_FILE_NUMBER (UINT64_C(1) << 62)

enum file_type {
    FILE_LOG,
    FILE_TABLE,
    FILE_MANIFEST,
    FILE_CURRENT,
    FILE_LOCK,
    FILE_TEMP,
    FILE_INFO_LOG,
    FILE_RESERVE, /* the space reserve, or a larger one being written (db_reserve.c) */
};

/* "dir/name", malloc'd through lsm_malloc.h (NULL if out of memory): the
 * one way the store joins a directory and a name. */
char *path_join(const char *dir, const char *name);

/* The bare name of numbered file `number` of type (FILE_LOG, FILE_TABLE,
 * FILE_MANIFEST, FILE_TEMP) into out: no allocation. */
#define FILE_NAME_MAX 40
void numbered_file_name(enum file_type type, uint64_t number, char out[FILE_NAME_MAX]);

/* A malloc'd path "dir/<name>" (NULL if out of memory). */
char *log_file_name(const char *dir, uint64_t number);
char *table_file_name(const char *dir, uint64_t number);
char *manifest_file_name(const char *dir, uint64_t number);
char *temp_file_name(const char *dir, uint64_t number);
char *current_file_name(const char *dir);
char *lock_file_name(const char *dir);
char *reserve_file_name(const char *dir);
/* A larger reserve being written, renamed over RESERVE once whole. */
char *reserve_new_file_name(const char *dir);

/* The directory holding path ("dir" of "dir/base", "." of "base", "/" of
 * "/base"), malloc'd (NULL if out of memory). */
char *parent_dir_name(const char *path);

/* For a directory dest "dir/base" that is to appear whole or not at all:
 * a hidden sibling "dir/.base.tmp-PID-R" (R 64 random bits: no one can
 * plant it beforehand; create it with create_dir_new) to build it in,
 * renamed to dest last, and the parent "dir" (synced after the rename),
 * both malloc'd. LSM_INVALID_ARGUMENT for "", ".", "..". */
struct lsm_status *hidden_sibling_name(const char *dest, char **tmp, char **parent);

/* Recognises a bare file name; false for names that are not the store's. */
bool parse_file_name(const char *name, uint64_t *number, enum file_type *type);

#endif
