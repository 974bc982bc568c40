/*
 * stats.c — fs request counters rendered as text.
 */
#include "stats.h"
#include "textbuf.h"

#include <inttypes.h>
#include <string.h>

static const char *const op_names[OP_COUNT] = {
    "lookup",     "forget",   "getattr",   "setattr",  "readlink", "mknod",     "mkdir",
    "unlink",     "rmdir",    "symlink",   "rename",   "link",     "open",      "read",
    "write",      "flush",    "release",   "fsync",    "opendir",  "readdir",   "readdirplus",
    "releasedir", "fsyncdir", "statfs",    "setxattr", "getxattr", "listxattr", "removexattr",
    "access",     "create",   "fallocate", "lseek",     "ioctl",
};

const char *stats_op_name(enum fs_op op)
{
    return op < OP_COUNT ? op_names[op] : "?";
}

/* body(t, s, arg)'s text, lsm_malloc'd; NULL if out of memory. */
static char *render(const fs_stats *s, const char *arg,
                    void (*body)(textbuf *t, const fs_stats *s, const char *arg))
{
    textbuf t;
    textbuf_init(&t);
    body(&t, s, arg);
    return textbuf_take(&t);
}

static void text_body(textbuf *t, const fs_stats *s, const char *head)
{
    if (head != NULL)
        textbuf_puts(t, head);
    textbuf_puts(t, "fs requests:\n");
    for (int i = 0; i < OP_COUNT; i++) {
        uint64_t v = atomic_load_explicit(&s->ops[i], memory_order_relaxed);
        if (v != 0)
            textbuf_printf(t, "  %-12s %" PRIu64 "\n", op_names[i], v);
    }
    const struct {
        const char *label;
        const _Atomic uint64_t *v;
    } c[] = {
        {"fs store writes", &s->store_writes},
        {"fs store gets", &s->store_gets},
        {"fs store scans", &s->store_scans},
        {"fs sync barriers", &s->store_syncs},
        {"fs fsyncs already durable", &s->sync_free},
        {"fs fsyncs beside another", &s->sync_shared},
        {"fs orphans reclaimed", &s->reclaimed},
        {"fs orphans freed in batches", &s->orphans_freed},
        {"fs orphan batches", &s->orphan_batches},
        {"fs transport", &s->uring_active}, /* a name, not a number */
        {"fs requests over io_uring", &s->uring_requests},
        {"fs reader polls", &s->reader_polls},
        {"fs reader poll hits", &s->reader_poll_hits},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint64_t v = atomic_load_explicit(c[i].v, memory_order_relaxed);
        if (c[i].v == &s->uring_active)
            textbuf_printf(t, "%s: %s\n", c[i].label, v ? "io_uring" : "/dev/fuse");
        else
            textbuf_printf(t, "%s: %" PRIu64 "\n", c[i].label, v);
    }
}

char *stats_text(const fs_stats *s, const char *head)
{
    return render(s, head, text_body);
}

static void metrics_body(textbuf *t, const fs_stats *s, const char *store_metrics)
{
    for (int i = 0; i < OP_COUNT; i++)
        textbuf_printf(t, "fs_requests_%s %" PRIu64 "\n", op_names[i],
                atomic_load_explicit(&s->ops[i], memory_order_relaxed));
    const struct {
        const char *name;
        const _Atomic uint64_t *v;
    } c[] = {
        {"fs_store_writes", &s->store_writes},     {"fs_store_gets", &s->store_gets},
        {"fs_store_scans", &s->store_scans},       {"fs_sync_barriers", &s->store_syncs},
        {"fs_fsyncs_already_durable", &s->sync_free}, {"fs_fsyncs_shared", &s->sync_shared},
        {"fs_orphans_reclaimed", &s->reclaimed},   {"fs_orphans_freed", &s->orphans_freed},
        {"fs_orphan_batches", &s->orphan_batches}, {"fs_transport_uring", &s->uring_active},
        {"fs_uring_requests", &s->uring_requests}, {"fs_reader_polls", &s->reader_polls},
        {"fs_reader_poll_hits", &s->reader_poll_hits},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        textbuf_printf(t, "%s %" PRIu64 "\n", c[i].name,
                atomic_load_explicit(c[i].v, memory_order_relaxed));
    textbuf_puts(t, store_metrics);
}

char *stats_metrics(const fs_stats *s, const char *store_metrics)
{
    return render(s, store_metrics, metrics_body);
}
