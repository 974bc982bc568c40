/*
 * lsmctl_info.c — lsmctl info (see lsmctl_info.h). A mount's numbers come
 * from its daemon (the LSMFS_IOC_INFO ioctl, the root's user.lsmfs.metrics);
 * a store's from the store opened read-only: the same scan (fs_info_scan),
 * the same file listing through the store's env (fs_info_files: a store on
 * RADOS has no local directory) and the same metrics either way.
 */
#include "lsmctl_info.h"
#include "fsinfo.h"
#include "lsmctl_snapshot.h"
#include "lsmctl_stats.h"
#include "snapshot.h"
#include "store_uri.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* fs_info_files of the store at dir (a path or rados:POOL/NAME), through
 * its env. */
static int store_files(const char *dir, struct lsmfs_info *fs, char *err, size_t errlen)
{
    lsm_env *env;
    char *path;
    lsm_status *s = store_uri_resolve(dir, &env, &path);
    if (s != NULL) {
        snprintf(err, errlen, "%s", lsm_status_message(s));
        lsm_status_free(s);
        return EIO;
    }
    int e = fs_info_files(env, path, dir, fs, err, errlen);
    free(path);
    return e;
}

static bool from_store(const char *dir, lsmctl_open_ro_fn open_ro, struct info *in)
{
    lsm_db *db = open_ro(dir);
    if (db == NULL)
        return false;
    char err[512];
    int e = fs_info_scan(db, dir, &in->fs, err, sizeof err);
    if (e == 0)
        e = store_files(dir, &in->fs, err, sizeof err);
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
           f->table_bytes + f->log_bytes + f->reserve_bytes + f->other_bytes, f->table_bytes,
           f->log_bytes, f->reserve_bytes, f->other_bytes);
    print_levels(in->metrics);
    printf("Snapshots:           %" PRIu64 " (in %s)\n", f->snapshots, in->snapdir);
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
