/*
 * stats.c — fs request counters rendered as text.
 */
#include "stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Writes body(f, s, arg) to a malloc'd string; NULL if out of memory. */
static char *render(const fs_stats *s, const char *arg,
                    void (*body)(FILE *f, const fs_stats *s, const char *arg))
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (f == NULL)
        return NULL;
    body(f, s, arg);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void text_body(FILE *f, const fs_stats *s, const char *head)
{
    if (head != NULL)
        fputs(head, f);
    fputs("fs requests:\n", f);
    for (int i = 0; i < OP_COUNT; i++) {
        uint64_t v = atomic_load_explicit(&s->ops[i], memory_order_relaxed);
        if (v != 0)
            fprintf(f, "  %-12s %" PRIu64 "\n", op_names[i], v);
    }
    fprintf(f, "fs store writes: %" PRIu64 "\n",
            atomic_load_explicit(&s->store_writes, memory_order_relaxed));
    fprintf(f, "fs store gets: %" PRIu64 "\n",
            atomic_load_explicit(&s->store_gets, memory_order_relaxed));
    fprintf(f, "fs store scans: %" PRIu64 "\n",
            atomic_load_explicit(&s->store_scans, memory_order_relaxed));
    fprintf(f, "fs sync barriers: %" PRIu64 "\n",
            atomic_load_explicit(&s->store_syncs, memory_order_relaxed));
    fprintf(f, "fs fsyncs already durable: %" PRIu64 "\n",
            atomic_load_explicit(&s->sync_free, memory_order_relaxed));
    fprintf(f, "fs fsyncs beside another: %" PRIu64 "\n",
            atomic_load_explicit(&s->sync_shared, memory_order_relaxed));
    fprintf(f, "fs orphans reclaimed: %" PRIu64 "\n",
            atomic_load_explicit(&s->reclaimed, memory_order_relaxed));
    fprintf(f, "fs orphans freed in batches: %" PRIu64 "\n",
            atomic_load_explicit(&s->orphans_freed, memory_order_relaxed));
    fprintf(f, "fs orphan batches: %" PRIu64 "\n",
            atomic_load_explicit(&s->orphan_batches, memory_order_relaxed));
    fprintf(f, "fs transport: %s\n",
            atomic_load_explicit(&s->uring_active, memory_order_relaxed) ? "io_uring" : "/dev/fuse");
    fprintf(f, "fs requests over io_uring: %" PRIu64 "\n",
            atomic_load_explicit(&s->uring_requests, memory_order_relaxed));
    fprintf(f, "fs reader polls: %" PRIu64 "\n",
            atomic_load_explicit(&s->reader_polls, memory_order_relaxed));
    fprintf(f, "fs reader poll hits: %" PRIu64 "\n",
            atomic_load_explicit(&s->reader_poll_hits, memory_order_relaxed));
}

char *stats_text(const fs_stats *s, const char *head)
{
    return render(s, head, text_body);
}

static void metrics_body(FILE *f, const fs_stats *s, const char *store_metrics)
{
    for (int i = 0; i < OP_COUNT; i++)
        fprintf(f, "fs_requests_%s %" PRIu64 "\n", op_names[i],
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
        fprintf(f, "%s %" PRIu64 "\n", c[i].name,
                atomic_load_explicit(c[i].v, memory_order_relaxed));
    fputs(store_metrics, f);
}

char *stats_metrics(const fs_stats *s, const char *store_metrics)
{
    return render(s, store_metrics, metrics_body);
}
