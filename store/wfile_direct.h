/*
 * wfile_direct.h — a POSIX file written around the page cache (O_DIRECT),
 * for the env's write_through files (env.h; tables): appends collect in an
 * aligned buffer that goes to the disk whole, at aligned offsets, so the
 * file's bytes are neither copied into the page cache nor written back from
 * it. What is left at the end (less than a block) is written through the
 * page cache, and the file is buffered from then on.
 */
#ifndef LSM_WFILE_DIRECT_H
#define LSM_WFILE_DIRECT_H

#include <stddef.h>
#include <sys/types.h>

typedef struct wfile_direct wfile_direct;

/* Turns fd (an empty file, just created) to direct writes: a new
 * wfile_direct, or NULL when the filesystem or memory cannot (the caller
 * goes on buffered; nothing changed). */
wfile_direct *wfile_direct_start(int fd);

/* Appends n bytes. 0, or an errno: the file's contents are then unknown.
 * A filesystem that refuses the first direct write (EINVAL) gets that
 * write and all later ones through the page cache instead. */
int wfile_direct_append(wfile_direct *d, const void *p, size_t n);

/* Writes every byte appended (whole blocks directly, the rest through the
 * page cache), leaves fd buffered with its offset at the file's end, and
 * frees d, in every case. 0, or an errno. */
int wfile_direct_finish(wfile_direct *d);

/* env_posix.c's: writes all n bytes across EINTR and short writes, at off
 * when off >= 0 (pwrite), else at the fd's position. 0 or an errno. */
int posix_write_all_at(int fd, const char *p, size_t n, off_t off);

/* Frees d without writing what it kept (the file failed). */
void wfile_direct_drop(wfile_direct *d);

#endif
