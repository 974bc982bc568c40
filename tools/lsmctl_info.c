/*
 * lsmctl_info.c — lsmctl info (see lsmctl_info.h). A mount's numbers come
 * from its daemon (the LSMFS_IOC_INFO ioctl, the root's user.lsmfs.metrics);
 * a store's from the store opened read-only: the same scan (fs_info_scan)
 * and the same metrics either way.
 */
#include "lsmctl_info.h"
#include "filename.h"
#include "fsinfo.h"
#include "lsmctl_snapshot.h"
#include "lsmctl_stats.h"
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#define NUM_LEVELS_SHOWN 7

/* What info shows, gathered from a mount or a store. */
struct info {
    struct lsmfs_info fs;
    char *metrics; /* "name value" lines (malloc'd) */
    char store[PATH_MAX + 16];
    char snapdir[PATH_MAX + 16];
};

/* The sizes of the store's own files by kind (not recursing into snapshots/). */
struct disk {
    uint64_t tables, logs, reserve, other;
};

static void disk_usage(const char *dir, struct disk *d)
{
    memset(d, 0, sizeof *d);
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        char p[PATH_MAX + 256];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        uint64_t n = (uint64_t)st.st_size, number;
        enum file_type type;
        if (!parse_file_name(e->d_name, &number, &type))
            d->other += n;
        else if (type == FILE_TABLE)
            d->tables += n;
        else if (type == FILE_LOG)
            d->logs += n;
        else if (type == FILE_RESERVE)
            d->reserve += n;
        else
            d->other += n;
    }
    closedir(dp);
}

/* Snapshot names in dir (hidden ones are half-built or half-deleted). */
static int count_snapshots(const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL)
        n += e->d_name[0] != '.';
    closedir(dp);
    return n;
}

static bool from_mount(const char *mnt, struct info *in)
{
    if (lsmctl_root_ioctl(mnt, LSMFS_IOC_INFO, &in->fs, "read its info") != 0 ||
        lsmctl_snapshot_dir(mnt, in->snapdir, sizeof in->snapdir) != 0)
        return false;
    snprintf(in->store, sizeof in->store, "%s", in->snapdir);
    char *slash = strrchr(in->store, '/');
    if (slash != NULL)
        *slash = '\0';
    size_t cap = 1 << 16;
    in->metrics = malloc(cap);
    ssize_t n = in->metrics ? getxattr(mnt, "user.lsmfs.metrics", in->metrics, cap - 1) : -1;
    if (n < 0) {
        fprintf(stderr, "lsmctl: %s: reading its metrics: %s\n", mnt, strerror(errno));
        return false;
    }
    in->metrics[n] = '\0';
    return true;
}

static bool from_store(const char *dir, lsmctl_open_ro_fn open_ro, struct info *in)
{
    lsm_db *db = open_ro(dir);
    if (db == NULL)
        return false;
    char err[512];
    int e = fs_info_scan(db, dir, &in->fs, err, sizeof err);
    if (e != 0)
        fprintf(stderr, "lsmctl: %s\n", err);
    in->metrics = e == 0 ? lsm_property(db, "lsm.metrics") : NULL;
    lsm_status_free(lsm_close(db));
    if (e != 0)
        return false;
    if (in->metrics == NULL) {
        fprintf(stderr, "lsmctl: out of memory\n");
        return false;
    }
    snprintf(in->store, sizeof in->store, "%s", dir);
    snprintf(in->snapdir, sizeof in->snapdir, "%s/" LSMFS_SNAPSHOT_DIR, dir);
    return true;
}

static void print_levels(const char *metrics)
{
    printf("Tables per level:    ");
    const char *sep = "";
    for (int l = 0; l < NUM_LEVELS_SHOWN; l++) {
        char k[64], b[64];
        snprintf(k, sizeof k, "store_tables_level_%d", l);
        snprintf(b, sizeof b, "store_table_bytes_level_%d", l);
        uint64_t n = lsmctl_metric(metrics, k);
        if (n != 0)
            printf("%sL%d %" PRIu64 " (%.1f MiB)", sep, l, n, lsmctl_metric(metrics, b) / 1048576.0);
        sep = n != 0 ? ", " : sep;
    }
    printf("%s\n", *sep ? "" : "none");
}

static void print_info(const char *path, bool mounted, const struct info *in)
{
    const struct lsmfs_info *f = &in->fs;
    char when[64] = "?";
    time_t t = (time_t)f->created;
    struct tm tm;
    if (gmtime_r(&t, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    struct disk d;
    disk_usage(in->store, &d);
    printf("Store:               %s\n", in->store);
    printf("Mounted at:          %s\n", mounted ? path : "(not mounted)");
    printf("Format version:      %u\n", f->format);
    printf("Created:             %s\n", when);
    printf("Chunk size:          %u\n", f->chunk_size);
    printf("Inline limit:        %u\n", f->inline_limit);
    if (f->resgid != 0)
        printf("Root reserve:        %u (%% of the disk; root, uid %u and gid %u may use it)\n",
               f->reserve_pct, f->resuid, f->resgid);
    else
        printf("Root reserve:        %u (%% of the disk; root and uid %u may use it)\n",
               f->reserve_pct, f->resuid);
    printf("Files:               %" PRIu64 "\n", f->files);
    printf("Directories:         %" PRIu64 "\n", f->dirs);
    printf("Symlinks:            %" PRIu64 "\n", f->symlinks);
    printf("Other inodes:        %" PRIu64 "\n", f->others);
    printf("Orphans:             %" PRIu64 "\n", f->orphans);
    printf("Bytes stored:        %" PRIu64 " (file sizes)\n", f->file_bytes);
    printf("Bytes on disk:       %" PRIu64 " (tables %" PRIu64 ", logs %" PRIu64 ", reserve %" PRIu64
           ", other %" PRIu64 ")\n",
           d.tables + d.logs + d.reserve + d.other, d.tables, d.logs, d.reserve, d.other);
    print_levels(in->metrics);
    printf("Snapshots:           %d (in %s)\n", count_snapshots(in->snapdir), in->snapdir);
}

int lsmctl_info(const char *path, lsmctl_open_ro_fn open_ro)
{
    static struct info in;
    bool mounted = lsmctl_is_lsmfs_mount(path);
    bool ok = mounted ? from_mount(path, &in) : from_store(path, open_ro, &in);
    if (ok)
        print_info(path, mounted, &in);
    free(in.metrics);
    return ok ? 0 : 1;
}
