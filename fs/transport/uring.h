/*
 * uring.h — FUSE over io_uring: the kernel's per-CPU request queues served
 * by one thread bound to each CPU, beside /dev/fuse.
 *
 * Why: over /dev/fuse a round trip wakes a daemon thread (often on the
 * other CPU) and costs a read and a write system call. Over the ring the
 * kernel queues a request on the caller's CPU, the thread bound to that
 * CPU takes it from its ring, and one io_uring_enter both commits the
 * reply and waits for the next request: no cross-CPU hand-off.
 *
 * Protocol (kernel 6.14+, FUSE 7.42, Documentation/filesystems/
 * fuse-io-uring.rst): after FUSE_INIT every CPU's queue is registered with
 * IORING_OP_URING_CMD (FUSE_IO_URING_CMD_REGISTER, one per entry: a header
 * buffer and a payload buffer); the kernel completes an entry's command
 * when it has put a request in it, and the daemon answers with
 * FUSE_IO_URING_CMD_COMMIT_AND_FETCH, which hands the reply back and
 * re-arms the entry. The kernel accepts the registration only when the
 * INIT reply carried FUSE_OVER_IO_URING; libfuse 3.14 knows nothing of it,
 * so this module installs libfuse's custom I/O on the session, watches the
 * INIT request go by (the kernel offers the flag only when the fuse module
 * parameter enable_uring is Y) and sets the flag in the INIT reply on its
 * way to /dev/fuse, once every queue's ring is set up.
 *
 * Requests from the ring are served by fuse_session_process_buf, so the
 * same op handlers run; their reply, which libfuse writes through the
 * custom I/O, is captured into the request's ring entry instead of
 * /dev/fuse. FORGET, INTERRUPT and notifications keep /dev/fuse: the
 * session's usual loop keeps reading it.
 *
 * A request that may wait (may_wait) is handed to a worker thread, so the
 * other requests of its CPU go on; the worker's reply goes back to the
 * queue thread, which commits it (woken through an eventfd only if it
 * sleeps). Any other request its queue thread serves itself; should one
 * wait after all, every request of that CPU waits behind it (no other
 * thread may serve that ring): a watch logs each that runs 10 ms or more.
 */
#ifndef FS_URING_H
#define FS_URING_H

#include "fuse_api.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct fuse_in_header; /* <linux/fuse.h> */

typedef enum {
    URING_OFF,  /* /dev/fuse only */
    URING_AUTO, /* the ring when the kernel offers it, else /dev/fuse */
    URING_ON,   /* the ring or nothing */
} uring_mode;

/* The module parameter that lets FUSE connections use io_uring. */
#define URING_PARAM_PATH "/sys/module/fuse/parameters/enable_uring"

/* Parses "auto", "on" or "off". Returns 0, or -1 for anything else. */
int uring_parse_mode(const char *s, uring_mode *out);

/* Whether the kernel lets FUSE use io_uring: 1 (enable_uring is Y), 0 (it
 * is N, or the kernel has no FUSE over io_uring, or io_uring is disabled
 * by kernel.io_uring_disabled). Reads, never changes, the settings. */
int uring_kernel_offers(void);

typedef struct uring_config {
    uring_mode mode;
    unsigned depth;       /* entries per queue (>= 1) */
    unsigned max_workers; /* threads for requests that may wait (>= 1) */
    /* NULL: every request is served on its queue's thread. Else, as
     * loop_config.may_wait: such requests go to a worker. */
    bool (*may_wait)(void *ctx, const struct fuse_in_header *in, size_t len);
    void *ctx;
    /* If not NULL, kept up to date for the caller's statistics (relaxed
     * atomics): requests served over the ring; 1 once the ring serves. */
    _Atomic uint64_t *served;
    _Atomic uint64_t *active;
    /* If not NULL: called once the kernel has taken the INIT reply, before
     * the ring serves any request (as loop_config.on_init; with the ring
     * a request may be served before the /dev/fuse loop's on_init runs). */
    void (*on_init)(void *init_ctx);
    void *init_ctx;
    /* If not NULL: may edit libfuse's INIT reply (iov, count) before the
     * kernel gets it (flags libfuse cannot ask for). */
    void (*init_reply)(struct iovec *iov, int count);
} uring_config;

struct uring;

/* Installs the transport on se, which must be mounted (fuse_session_mount)
 * and not yet served. Nothing else changes until FUSE_INIT arrives through
 * the session's loop. Returns 0 or a negative errno. */
int uring_attach(struct fuse_session *se, const uring_config *cfg, struct uring **out);

/* After FUSE_INIT: whether requests are served over the ring. */
bool uring_active(const struct uring *u);

/* Requests served over the ring so far (a counter, for the stats). */
uint64_t uring_requests(const struct uring *u);

/* Requests a queue thread served itself that ran 10 ms or more (each is
 * logged: the other requests of its CPU waited behind it). */
uint64_t uring_stalls(const struct uring *u);

/* Stops the ring's threads (they finish the requests they hold) and frees
 * u. Call after the session's loop ended, before fuse_session_unmount
 * (which closes the device the rings use). NULL is a no-op. */
void uring_stop(struct uring *u);

#endif
