/*
 * env.h — every file and OS call the store makes goes through an lsm_env, so
 * tests can slow, fail or "power-cut" them (see tests/support/fault_env.h).
 *
 * An env is a table of function pointers; files are objects whose first
 * member points at their own table. The POSIX env is lsm_env_default().
 * All env functions are thread-safe; a single file object is used by one
 * thread at a time unless its comment says otherwise.
 */
#ifndef LSM_ENV_H
#define LSM_ENV_H

#include "lsm.h"

#include <stdint.h>
#include <stddef.h>

/* How a WAL makes room for its appends (see preallocate). */
enum wfile_space { WFILE_MAPPED, WFILE_ZERO_FILL, WFILE_AUTO };

/* An append-only file (WAL, table, MANIFEST being written). */
typedef struct lsm_wfile lsm_wfile;
struct lsm_wfile_ops {
    /* Buffers or writes data at the end of the file. */
    lsm_status *(*append)(lsm_wfile *f, const void *data, size_t n);
    /* Hands everything appended to the OS (a process crash no longer loses it). */
    lsm_status *(*flush)(lsm_wfile *f);
    /* flush, then make the file's data durable (fdatasync). */
    lsm_status *(*sync)(lsm_wfile *f);
    /* For the WAL only (readers must accept a zero tail while it is open).
     * Makes room ahead of the appends, `len` bytes at a time, so syncs of
     * later appends change no metadata. WFILE_MAPPED: the POSIX env
     * reserves the space (fallocate) and appends through a shared mapping
     * (no system call per append). WFILE_ZERO_FILL: appends use pwrite,
     * and once the file is synced a helper thread writes (and syncs) zeros
     * ahead of them — the cheapest syncs. WFILE_AUTO: switches between the
     * two as the share of synced appends changes. close() trims the file
     * to its data. May be a no-op where the filesystem cannot. After this
     * call, syncs may run in several threads at once while another
     * appends; each makes durable at least what was appended before it was
     * called, and each reports any write error that could touch that. */
    lsm_status *(*preallocate)(lsm_wfile *f, uint64_t len, enum wfile_space mode);
    /* flush and close (no sync); frees f in every case. */
    lsm_status *(*close)(lsm_wfile *f);
    /* Optional (NULL: flush never keeps bytes back). on: a sync of f is
     * coming, so flushes may keep their bytes back for it (the sync sends
     * them with its own, one round trip for all); off: whatever was kept
     * back goes now. A caller that turns it on must sync f or turn it off. */
    void (*hold_for_sync)(lsm_wfile *f, bool on);
    /* Optional (NULL: none). Before the first append of a file that will
     * be appended front to back, synced and closed, and read only then (a
     * table): the env may write it around the page cache (the POSIX env
     * with O_DIRECT where the filesystem has it), as nothing reads it
     * while it is written. flush, sync and close keep their contracts. */
    void (*write_through)(lsm_wfile *f);
};
struct lsm_wfile {
    const struct lsm_wfile_ops *ops;
};

/* A file read front to back (WAL and MANIFEST replay). */
typedef struct lsm_sfile lsm_sfile;
struct lsm_sfile_ops {
    /* Reads up to n bytes; *got < n only at end of file. */
    lsm_status *(*read)(lsm_sfile *f, void *buf, size_t n, size_t *got);
    lsm_status *(*skip)(lsm_sfile *f, uint64_t n);
    void (*close)(lsm_sfile *f);
};
struct lsm_sfile {
    const struct lsm_sfile_ops *ops;
};

/* A file read at offsets (tables). pread and read_point are safe from many
 * threads at once.
 *
 * Mapped reads: an env may map a table read-only (map) so a point read is
 * a copy, not a system call. A read through the mapping fails exactly as a
 * pread would — a disk read error or a file cut short behind the store's
 * back is LSM_IO_ERROR (EIO), never a SIGBUS that kills the process (the
 * POSIX env copies only through mapguard.h's guard); only the bytes past a
 * cut in its last page read as zeros, which a block's checksum catches.
 * Reads in order (an iterator's read-ahead) always use pread: read(2)'s
 * read-ahead runs ahead asynchronously where a mapping's faults wait. */
typedef struct lsm_rfile lsm_rfile;
struct lsm_rfile_ops {
    /* Reads up to n bytes at off; *got < n only at end of file. */
    lsm_status *(*pread)(lsm_rfile *f, uint64_t off, void *buf, size_t n, size_t *got);
    void (*close)(lsm_rfile *f);
    /* Optional (NULL: the env cannot map). Maps [0, size) read-only for
     * read_point; a file already shorter than size is not mapped (its
     * reads then say it is cut short, not EIO). An error changes nothing:
     * the file is read with pread.
     * REQUIRES: called once, before the file is shared between threads. */
    lsm_status *(*map)(lsm_rfile *f, uint64_t size);
    /* Optional (NULL: use pread). pread for one block: through the mapping
     * where map succeeded and [off, off + n) lies in it, else pread. */
    lsm_status *(*read_point)(lsm_rfile *f, uint64_t off, void *buf, size_t n, size_t *got);
};
struct lsm_rfile {
    const struct lsm_rfile_ops *ops;
};

typedef struct lsm_filelock lsm_filelock;

/* What lstat(2) says of a path (path_info): the path itself, never a link's
 * target. */
enum lsm_path_kind { LSM_PATH_NONE, LSM_PATH_FILE, LSM_PATH_DIR, LSM_PATH_LINK, LSM_PATH_OTHER };
typedef struct lsm_path_info {
    enum lsm_path_kind kind;
    uint32_t perm; /* the permission bits (07777) */
    uint32_t uid;
    bool mine; /* owned by this process's effective uid */
} lsm_path_info;

/* The privacy rule every env keeps (env_posix.c): whatever the umask, a
 * directory it creates is ENV_DIR_MODE and a file ENV_FILE_MODE (the
 * store's owner only; a LOCK no one else can open, so no one else can
 * flock it); a create never follows a link at its last component and never
 * writes through another name of a file (see new_wfile); a read opens
 * only a regular file, never through a link, owned by the owner of its
 * directory or by this process (so root's tools never read through another
 * user's link or hard link into a file of root's). */
#define ENV_DIR_MODE 0700
#define ENV_FILE_MODE 0600

struct lsm_env {
    /* Creates a new, empty file for appending. A file already at path is
     * emptied and reused only if it is a regular file of this process's
     * user with no other name; a link or another file is refused. */
    lsm_status *(*new_wfile)(lsm_env *env, const char *path, lsm_wfile **out);
    lsm_status *(*new_sfile)(lsm_env *env, const char *path, lsm_sfile **out);
    lsm_status *(*new_rfile)(lsm_env *env, const char *path, lsm_rfile **out);
    bool (*file_exists)(lsm_env *env, const char *path);
    /* *names is a malloc'd array of *n malloc'd names (not "." or ".."). */
    lsm_status *(*get_children)(lsm_env *env, const char *dir, char ***names, int *n);
    lsm_status *(*remove_file)(lsm_env *env, const char *path);
    lsm_status *(*rename_file)(lsm_env *env, const char *from, const char *to);
    /* Makes `to` (which must not exist) a second name of the existing file
     * `from` (a hard link): the caller syncs to's directory. Fails with
     * LSM_NOT_SUPPORTED where the filesystem cannot (another filesystem,
     * no hard links), so the caller may copy instead. NULL in an env
     * without it (callers copy). */
    lsm_status *(*link_file)(lsm_env *env, const char *from, const char *to);
    /* ok if a directory (or a link to one: the caller named it, as a
     * store or backup directory may be) exists at path. */
    lsm_status *(*create_dir)(lsm_env *env, const char *path);
    /* Creates a directory that did not exist: LSM_INVALID_ARGUMENT, naming
     * it, if anything (a link too) is at path. For hidden build directories
     * in places others may write to. */
    lsm_status *(*create_dir_new)(lsm_env *env, const char *path);
    /* lstat(2) of path; kind LSM_PATH_NONE (and success) if nothing is there. */
    lsm_status *(*path_info)(lsm_env *env, const char *path, lsm_path_info *out);
    /* Clears the group and other bits of the file or directory at path
     * (never a link's target): ENV_FILE_MODE/ENV_DIR_MODE at most. */
    lsm_status *(*make_private)(lsm_env *env, const char *path);
    lsm_status *(*remove_dir)(lsm_env *env, const char *path);
    lsm_status *(*file_size)(lsm_env *env, const char *path, uint64_t *size);
    /* Makes the data of an existing file durable, including what an open
     * lsm_wfile of it has flushed (as fsync(2) by path covers another
     * descriptor's writes) and failing if that could not be written:
     * recovery uses it on the logs it replays, db_cut_broken_wal on the
     * open WAL it cut. */
    lsm_status *(*sync_file)(lsm_env *env, const char *path);
    /* Cuts the file at path down to len bytes (nothing if it is shorter):
     * removes a torn record a failed append left at a log's end. */
    lsm_status *(*truncate_file)(lsm_env *env, const char *path, uint64_t len);
    /* Makes the directory's entries (files created, renamed, removed) durable. */
    lsm_status *(*sync_dir)(lsm_env *env, const char *path);
    /* Exclusive advisory lock (flock) on path, created if needed. Fails with
     * LSM_BUSY if another process or another lock in this process holds it. */
    lsm_status *(*lock_file)(lsm_env *env, const char *path, lsm_filelock **out);
    lsm_status *(*unlock_file)(lsm_env *env, lsm_filelock *lock);
    /* Shared lock for a read-only open: opens an existing path read-only
     * and creates nothing (*out NULL, success, when there is no file).
     * LSM_BUSY while an exclusive lock is held. NULL in an env without it
     * (a read-only open then takes no lock). Released by unlock_file. */
    lsm_status *(*lock_file_shared)(lsm_env *env, const char *path, lsm_filelock **out);
    /* Free bytes on the filesystem holding path (for statfs and ENOSPC care). */
    lsm_status *(*disk_free)(lsm_env *env, const char *path, uint64_t *total, uint64_t *avail);
    uint64_t (*now_micros)(lsm_env *env); /* monotonic */
    void (*sleep_micros)(lsm_env *env, uint64_t us);
};

/* f's read_point where it has one, else its pread. */
lsm_status *env_read_point(lsm_rfile *f, uint64_t off, void *dst, size_t n, size_t *got);
/* Maps f (its map op) when it can; true if it did. A failure to map is not
 * an error: f is then read with pread, as before. */
bool env_try_map(lsm_rfile *f, uint64_t size);

/* Convenience: frees a get_children() result. */
void env_free_children(char **names, int n);
/* Writes data to a new file at path and syncs it (used for CURRENT and
 * similar small files; the caller syncs the directory). */
lsm_status *env_write_file_sync(lsm_env *env, const char *path, const void *data, size_t n);
/* Reads a whole (small) file into a malloc'd buffer. */
lsm_status *env_read_file(lsm_env *env, const char *path, char **data, size_t *n);

/* Reads [0, size) of path front to back, passing each piece (up to 1 MiB,
 * starting at a multiple of 1 MiB) to fn, stopping at fn's first error. A
 * file shorter than size is LSM_CORRUPTION. */
lsm_status *env_read_chunks(lsm_env *env, const char *path, uint64_t size,
                            lsm_status *(*fn)(void *ctx, const char *data, size_t n), void *ctx);
/* Called as a copy goes on with the bytes it has just copied. */
typedef struct env_copy_progress {
    void (*step)(void *ctx, uint64_t bytes);
    void *ctx;
} env_copy_progress;
/* Copies the first size bytes of src (in from) to a new file dst (in to,
 * which may be another env: a local disk and RADOS) truncated if it
 * exists, and syncs it; the caller syncs dst's directory. A src shorter
 * than size is LSM_CORRUPTION. *crc (if not NULL) gets the CRC32C of the
 * bytes copied; progress may be NULL. */
lsm_status *env_copy_file(lsm_env *from, const char *src, lsm_env *to, const char *dst,
                          uint64_t size, uint32_t *crc, const env_copy_progress *progress);
/* The last step of building directory dest in a hidden sibling tmp (see
 * hidden_sibling_name): tmp renamed to dest (LSM_INVALID_ARGUMENT if dest
 * exists), then parent synced. An error before the rename removes tmp
 * (best effort); one after it leaves dest, complete, and says its name may
 * not be durable. */
lsm_status *env_publish_dir(lsm_env *env, const char *tmp, const char *dest, const char *parent);
/* create_dir, and when it made path, path's entry made durable (its
 * parent synced). */
lsm_status *env_create_dir_durable(lsm_env *env, const char *path);
/* Best effort: removes the files in dir, then dir (no subdirectories). */
void env_remove_tree(lsm_env *env, const char *dir);
/* Best effort: removes dir/name, allocating nothing (but what the env
 * does): for undoing what a call made out of memory, when a listing
 * (env_remove_tree's) cannot be had. */
void env_remove_in(lsm_env *env, const char *dir, const char *name);

#endif
