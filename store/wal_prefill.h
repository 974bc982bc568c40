/*
 * wal_prefill.h — a WAL's zero-filled mode: a helper thread (the zeroer)
 * writes zeros ahead of the appends and syncs them, so that a later sync of
 * the log writes just the appended blocks (no extent to convert, no size to
 * update). A policy over the env's file: the file's I/O comes in as calls
 * (struct wal_prefill_io), this module owns only when and where zeros go.
 *
 * Syncs are what the zeros speed up: the zeroer runs a round only when a
 * sync of the log finds the zeros less than a step ahead, so a log that is
 * never synced is never zero-filled. Appends in this mode go through
 * wal_prefill_append, which orders them against the zeroer's writes so that
 * zeros never land on appended data.
 */
#ifndef LSM_WAL_PREFILL_H
#define LSM_WAL_PREFILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The file under the mode. Each returns 0 or an errno. */
struct wal_prefill_io {
    int (*write_at)(void *ctx, const void *p, size_t n, uint64_t off); /* all n bytes */
    int (*sync)(void *ctx); /* fdatasync; a failure is the file's for good */
    void *ctx;
};

struct wal_prefill;

/* Zero-filling (active, or paused for the auto mode) of a file whose data
 * ends at `end`, keeping about `step` bytes of zeros ahead of the appends.
 * *pos is the file's append offset: set to end here, advanced by
 * wal_prefill_append, read by the zeroer; it must outlive the mode, and
 * while the mode is active nothing else may touch it. NULL if out of
 * memory. */
struct wal_prefill *wal_prefill_new(const struct wal_prefill_io *io, uint64_t *pos, uint64_t end,
                                    uint64_t step, bool active);
/* Writes data at *pos and advances it. Returns 0 or an errno (then *pos
 * stays). [appender] */
int wal_prefill_append(struct wal_prefill *z, const void *data, size_t n);
/* After a successful sync of the file: asks the zeroer for more rounds once
 * the zeros are less than a step ahead (starting it the first time). */
void wal_prefill_after_sync(struct wal_prefill *z);
/* Auto mode, from mapped appends back to zero-filled ones: zeros go from
 * *pos on; `reserved` is how far the file reaches already. [appender] */
void wal_prefill_resume(struct wal_prefill *z, uint64_t reserved);
/* Auto mode, to mapped appends: the zeroer stops before its next piece
 * (from then on *pos is the appender's alone). Returns the file's size as
 * appends and zeros made it. [appender] */
uint64_t wal_prefill_pause(struct wal_prefill *z);
/* Stops the zeroer and frees the mode; the file keeps its zeros. Returns
 * the file's size as appends and zeros made it. */
uint64_t wal_prefill_free(struct wal_prefill *z);

#endif
