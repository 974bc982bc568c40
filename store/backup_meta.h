/*
 * backup_meta.h — the layout of a backup directory and the list each
 * backup keeps of its files (lsm_backup & co., lsm.h):
 *
 *   DIR/shared/NNNNNN_CRC_SIZE.ldb  tables, one copy for every backup that
 *                                   holds them (the same number, CRC32C of
 *                                   the whole file and size)
 *   DIR/private/ID/                 one backup's MANIFEST, CURRENT and logs
 *   DIR/meta/ID                     one backup's list, written last: a
 *                                   backup without it does not exist
 *   DIR/LOCK                        held by whoever adds or removes files
 *
 * The list is text: a header line, "id", "seq", "time", "copied", one
 * "file S|P NAME SIZE CRC CHUNKCRC..." line per file (S: in shared/, P: in
 * private/ID/; a CRC32C per BACKUP_CHUNK bytes so damage is found to the
 * chunk), and "end CRC" with the CRC32C of every byte before it.
 */
#ifndef LSM_BACKUP_META_H
#define LSM_BACKUP_META_H

#include "coding.h"
#include "env.h"

#include <stdbool.h>
#include <stdint.h>

#define BACKUP_CHUNK (64u << 10)

typedef struct backup_file {
    char *name;  /* the name in the store ("000012.ldb", "CURRENT") */
    bool shared; /* a table, kept in shared/ */
    uint64_t size;
    uint32_t crc;    /* CRC32C of the whole file */
    uint32_t *chunk; /* CRC32C of each BACKUP_CHUNK bytes (the last may be short) */
    size_t nchunk;
} backup_file;

typedef struct backup_meta {
    uint64_t id, seq, copied;
    int64_t time;
    backup_file *files;
    size_t nfiles, cap;
} backup_meta;

void backup_meta_free(backup_meta *m);
/* Adds a file (its name copied, chunk taken over); false if out of memory
 * (chunk is freed then). */
bool backup_meta_add(backup_meta *m, const char *name, bool shared, uint64_t size, uint32_t crc,
                     uint32_t *chunk, size_t nchunk);
/* The list as text (b must be empty). */
bool backup_meta_encode(const backup_meta *m, buf *b);
/* Reads DIR/meta/ID; LSM_CORRUPTION (naming the file) if it is not a whole
 * list of backup id. */
lsm_status *backup_meta_read(lsm_env *env, const char *dir, uint64_t id, backup_meta *m);

/* "DIR/sub" or "DIR/sub/name", malloc'd (NULL if out of memory). */
char *backup_path(const char *dir, const char *sub, const char *name);
/* Where f of backup id lives, relative to DIR ("shared/..." or
 * "private/ID/NAME"), malloc'd. */
char *backup_file_rel(const backup_file *f, uint64_t id);
/* The ids in DIR/sub whose names are decimal numbers, sorted ascending
 * (malloc'd; *n 0 and NULL when sub does not exist). */
lsm_status *backup_ids(lsm_env *env, const char *dir, const char *sub, uint64_t **ids,
                       size_t *n);

/* Reads size bytes of path: whole-file and per-chunk CRC32C (*chunk
 * malloc'd). A file shorter than size is LSM_CORRUPTION. */
lsm_status *backup_hash_file(lsm_env *env, const char *path, uint64_t size, uint32_t *crc,
                             uint32_t **chunk, size_t *nchunk);

#endif
