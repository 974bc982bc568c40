/*
 * nowork_log.h — the least durable work a filesystem can do, for nowork-fs's
 * durable mode (-o log=PATH): every change is appended once to a log and an
 * fsync is one fdatasync of that log, shared by every fsync waiting for it.
 *
 * The log is a ring of zeros written and synced when it is opened, so an
 * append overwrites blocks that exist on disk and its fdatasync writes only
 * those blocks: no allocation, no inode update, no journal commit. Nothing
 * ever reads the log back; it exists to put the disk's share of durability
 * into the ceiling that nowork-fs measures.
 *
 * Thread-safe: appends and syncs may come from any thread at once.
 */
#ifndef LSMFS_NOWORK_LOG_H
#define LSMFS_NOWORK_LOG_H

#include <stddef.h>

typedef struct nw_log nw_log;

/* Creates (or truncates) the log at path, a ring of ring_bytes zeros, synced
 * with its directory entry. Returns 0 or an errno. */
int nw_log_open(const char *path, size_t ring_bytes, nw_log **out);

/* Appends n bytes (data, or zeros when data is NULL) at the ring's head.
 * Returns 0 or an errno. */
int nw_log_append(nw_log *l, const void *data, size_t n);

/* Returns once every append that returned before the call is on disk: at
 * most one fdatasync runs at a time, and each covers every append made
 * before it started, so concurrent callers share it. Returns 0 or an errno
 * (a failed sync fails every later one: written pages may be lost). */
int nw_log_sync(nw_log *l);

void nw_log_close(nw_log *l);

#endif
