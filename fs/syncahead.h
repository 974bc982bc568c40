/*
 * syncahead.h — WAL syncs started before an fsync asks for them.
 *
 * The kernel runs FSYNCDIR holding the directory's inode lock, and a rename
 * into the directory needs that lock too. In a maildir (rename into new/,
 * then fsync new/) every delivery's fsyncdir then held new/ for the whole
 * WAL sync that its rename needed, and renames queued behind it. So a
 * rename into a directory that was fsynced within the last second starts a
 * sync at once, on a thread of its own: by the time the writer's fsyncdir
 * gets the lock, its rename is usually durable already (or its sync is
 * under way) and the lock is held for a round trip, not a disk flush.
 * Directories nobody fsyncs (tar, mv) never cause a sync.
 */
#ifndef FS_SYNCAHEAD_H
#define FS_SYNCAHEAD_H

#include "icache.h"
#include "super.h"

/* Starts the thread. Returns 0 or an errno. */
int syncahead_start(lsmfs *fs, syncahead **out);
/* Stops and frees it (NULL is fine); a sync it runs finishes first. */
void syncahead_stop(syncahead *sa);

/* Notes that directory d was fsynced now. */
void syncahead_note_fsyncdir(inode *d);
/* A change was committed in directory d: if d is fsynced often, starts a
 * sync of everything committed (without waiting for it). */
void syncahead_changed(syncahead *sa, inode *d);

#endif
