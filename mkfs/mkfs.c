/*
 * mkfs.c — mkfs.lsmfs: make an lsmfs filesystem in a store directory.
 *
 *   mkfs.lsmfs [-f] [-c chunk_size] [-i inline_limit] [-u uid] [-g gid]
 *              [-m reserve_pct] [-U resuid] [-G resgid] [-q]
 *              [-o ceph_conf=PATH,ceph_id=NAME] DIR|rados:POOL/NAME
 *
 * Creates the store, the superblock, the allocator record and the root
 * directory, in one synchronous batch. Refuses a non-empty directory that
 * is not an lsmfs store; -f overwrites an existing (unmounted) lsmfs store.
 * While it works the directory holds STORE_MKFS_MARK (store_open.h): a
 * mkfs that died or failed part-way leaves no store a mount would take,
 * and the next mkfs of the directory makes it again.
 */
#include "env.h"
#include "lsm.h"
#include "schema.h"
#include "store_open.h"
#include "store_uri.h"
#include "super.h"
#include "lsmfs_version.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct mkfs_opts {
    bool force, quiet;
    uint32_t chunk_size, inline_limit;
    uint32_t uid, gid;
    uint32_t reserve_pct, resuid, resgid; /* the root reserve (reserve.h) */
    const char *dir; /* as given: a directory or rados:POOL/NAME */
    lsm_env *env;    /* the env holding it (store_uri.h) */
    char *path;      /* its path in env */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mkfs.lsmfs [-f] [-c chunk_size] [-i inline_limit] [-u uid] [-g gid] "
            "[-m pct] [-U uid] [-G gid] [-q] [-o ceph_conf=PATH,ceph_id=NAME] "
            "DIR|rados:POOL/NAME\n"
            "  -f   overwrite an existing lsmfs filesystem in DIR\n"
            "  -c   data chunk size, a power of two from 4K to 1M (default %uK)\n"
            "  -i   largest file kept inline in its inode, 0 to the chunk size (default %uK)\n"
            "  -u/-g  owner of the root directory (default: the caller)\n"
            "  -m   percent of the disk kept for root, 0 to %u (default %u)\n"
            "  -U/-G  a user and a group that may use it too (default: root only)\n"
            "  -q   quiet\n"
            "  -o   for a store on Ceph: ceph.conf and client name\n",
            SCHEMA_DEFAULT_CHUNK / 1024, SCHEMA_DEFAULT_INLINE / 1024, SCHEMA_MAX_RESERVE_PCT,
            SCHEMA_DEFAULT_RESERVE_PCT);
}

/* "64K", "1M", "4096" -> bytes; false on junk or overflow. */
static bool parse_size(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return false;
    if (*end == 'k' || *end == 'K')
        v *= 1024, end++;
    else if (*end == 'm' || *end == 'M')
        v *= 1024 * 1024, end++;
    if (*end != '\0' || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool parse_id(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* Applies getopt's option c with its argument arg to o: 0 done, 1 an
 * unknown option (the usage printed) or a bad value (said). -h prints the
 * usage and exits. */
static int take_option(struct mkfs_opts *o, int c, const char *arg)
{
    bool ok = true;
    switch (c) {
    case 'f':
        o->force = true;
        break;
    case 'q':
        o->quiet = true;
        break;
    case 'c':
        ok = parse_size(arg, &o->chunk_size);
        break;
    case 'i':
        ok = parse_size(arg, &o->inline_limit);
        break;
    case 'u':
        ok = parse_id(arg, &o->uid);
        break;
    case 'g':
        ok = parse_id(arg, &o->gid);
        break;
    case 'o': {
        lsm_status *bad = store_uri_options(arg);
        if (bad != NULL)
            fprintf(stderr, "mkfs.lsmfs: %s\n", lsm_status_message(bad));
        ok = bad == NULL;
        lsm_status_free(bad);
        if (!ok)
            return 1;
        break;
    }
    case 'm':
        ok = parse_id(arg, &o->reserve_pct) && o->reserve_pct <= SCHEMA_MAX_RESERVE_PCT;
        break;
    case 'U':
        ok = parse_id(arg, &o->resuid);
        break;
    case 'G':
        ok = parse_id(arg, &o->resgid);
        break;
    case 'h':
        usage(stdout);
        exit(0);
    default:
        usage(stderr);
        return 1;
    }
    if (!ok) {
        fprintf(stderr, "mkfs.lsmfs: bad value for -%c: %s\n", c, arg);
        return 1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct mkfs_opts *o)
{
    *o = (struct mkfs_opts){.chunk_size = SCHEMA_DEFAULT_CHUNK,
                            .inline_limit = SCHEMA_DEFAULT_INLINE,
                            .uid = getuid(),
                            .gid = getgid(),
                            .reserve_pct = SCHEMA_DEFAULT_RESERVE_PCT};
    version_help_or_exit(argc, argv, "mkfs.lsmfs", usage);
    int c;
    while ((c = getopt(argc, argv, "fqc:i:u:g:m:U:G:o:h")) != -1)
        if (take_option(o, c, optarg) != 0)
            return 1;
    if (optind != argc - 1) {
        usage(stderr);
        return 1;
    }
    o->dir = argv[optind];
    const char *why;
    if (!super_params_valid(o->chunk_size, o->inline_limit, &why)) {
        fprintf(stderr, "mkfs.lsmfs: %s\n", why);
        return 1;
    }
    return 0;
}

/* 1 if the store's directory has entries, 0 if empty, -1 on error (said). */
static int dir_nonempty(const struct mkfs_opts *o)
{
    char **names;
    int n;
    lsm_status *s = o->env->get_children(o->env, o->path, &names, &n);
    if (s != NULL) {
        fprintf(stderr, "mkfs.lsmfs: %s: %s\n", o->dir, lsm_status_message(s));
        lsm_status_free(s);
        return -1;
    }
    env_free_children(names, n);
    return n > 0;
}

/* Whether dir holds an lsmfs filesystem: 1 yes, 0 no (no store, or not
 * lsmfs), -1 refused (said on stderr): in use, a newer format, unreadable,
 * damaged. */
static int holds_lsmfs(const char *dir)
{
    store_open_req r = {.dir = dir, .flags = STORE_OPEN_RO | STORE_OPEN_SALVAGE, .ctx = "mkfs.lsmfs"};
    lsm_db *db;
    schema_super sb;
    char err[1024];
    int e = store_open(&r, &db, &sb, err, sizeof err);
    if (e == 0)
        lsm_status_free(lsm_close(db));
    else if (e != EINVAL)
        fprintf(stderr, "mkfs.lsmfs: %s\n", err);
    return e == 0 ? 1 : e == EINVAL ? 0 : -1;
}

/* o's directory's STORE_MKFS_MARK. */
static void mark_path(const struct mkfs_opts *o, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", o->path, STORE_MKFS_MARK);
}

static bool marked(const struct mkfs_opts *o)
{
    char mark[4200];
    mark_path(o, mark, sizeof mark);
    return o->env->file_exists(o->env, mark);
}

/* Sets (durably, before anything else in the directory changes) or
 * removes the mark of a mkfs under way: 0, or 1 (said on stderr). */
static int set_mark(const struct mkfs_opts *o, bool on)
{
    static const char text[] = "mkfs.lsmfs did not finish here: run it again\n";
    char mark[4200];
    mark_path(o, mark, sizeof mark);
    lsm_status *s = on ? env_write_file_sync(o->env, mark, text, sizeof text - 1)
                       : o->env->remove_file(o->env, mark);
    if (s == NULL)
        s = o->env->sync_dir(o->env, o->path);
    if (s == NULL)
        return 0;
    fprintf(stderr, "mkfs.lsmfs: %s: %s the mark of a mkfs under way: %s\n", o->dir,
            on ? "writing" : "removing", lsm_status_message(s));
    lsm_status_free(s);
    if (on && o->env->file_exists(o->env, mark)) /* nothing changed yet: leave none */
        lsm_status_free(o->env->remove_file(o->env, mark));
    return 1;
}

/* Removes the store in dir: 0, or 1 on failure (said on stderr). */
static int remove_store(const struct mkfs_opts *o)
{
    lsm_options lo;
    lsm_options_init(&lo);
    lo.env = o->env;
    lsm_status *s = lsm_destroy(&lo, o->path);
    if (s != NULL) {
        fprintf(stderr, "mkfs.lsmfs: removing the old store: %s\n", lsm_status_message(s));
        lsm_status_free(s);
        return 1;
    }
    return 0;
}

/* Makes sure dir exists and may be (re)used; destroys an old lsmfs store
 * when forced, or what a mkfs that did not finish left. Marks it.
 * *created: mkfs makes (or made) the store's directory. Returns 0 or 1
 * (with a message printed). */
static int prepare_dir(struct mkfs_opts *o, bool *created)
{
    *created = false;
    lsm_status *s = store_uri_resolve(o->dir, &o->env, &o->path);
    if (s == NULL && !store_uri_is_rados(o->dir)) {
        struct stat st;
        int r = stat(o->dir, &st);
        if (r != 0 && errno != ENOENT) {
            fprintf(stderr, "mkfs.lsmfs: %s: %s\n", o->dir, strerror(errno));
            return 1;
        }
        if (r == 0 && !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "mkfs.lsmfs: %s: not a directory\n", o->dir);
            return 1;
        }
    }
    if (s == NULL && !o->env->file_exists(o->env, o->path)) {
        s = env_create_dir_durable(o->env, o->path); /* private, its entry synced */
        *created = s == NULL;
    }
    if (s != NULL) {
        fprintf(stderr, "mkfs.lsmfs: %s: %s\n", o->dir, lsm_status_message(s));
        lsm_status_free(s);
        return 1;
    }
    if (marked(o)) {
        if (!o->quiet)
            printf("mkfs.lsmfs: %s: an earlier mkfs.lsmfs did not finish here; making the "
                   "filesystem again\n",
                   o->dir);
        return remove_store(o);
    }
    int ne = dir_nonempty(o);
    if (ne <= 0)
        return ne < 0 || set_mark(o, true) != 0;
    int holds = holds_lsmfs(o->dir);
    if (holds < 0)
        return 1;
    if (!holds) {
        fprintf(stderr,
                "mkfs.lsmfs: %s is not empty and does not hold an lsmfs filesystem; "
                "refusing to touch it\n",
                o->dir);
        return 1;
    }
    if (!o->force) {
        fprintf(stderr,
                "mkfs.lsmfs: %s already holds an lsmfs filesystem (use -f to overwrite it)\n",
                o->dir);
        return 1;
    }
    return set_mark(o, true) != 0 || remove_store(o) != 0;
}

/* The superblock, allocator and root directory records. */
static bool fill_batch(const struct mkfs_opts *o, lsm_batch *b)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    schema_super sb = {.version = SCHEMA_VERSION,
                       .chunk_size = o->chunk_size,
                       .inline_limit = o->inline_limit,
                       .ctime_sec = now.tv_sec,
                       .ctime_nsec = (uint32_t)now.tv_nsec,
                       .reserve_pct = o->reserve_pct,
                       .resuid = o->resuid,
                       .resgid = o->resgid};
    return super_batch_mkfs(b, &sb, o->uid, o->gid);
}

/* After a failed make_fs: the directory as mkfs found it (without the
 * store a -f destroyed): no store file, no mark, and gone if mkfs made
 * it. What cannot be undone keeps the mark. */
static void undo_make(const struct mkfs_opts *o, bool created)
{
    if (!o->env->file_exists(o->env, o->path) || remove_store(o) != 0 ||
        (marked(o) && set_mark(o, false) != 0) || !created)
        return;
    lsm_status *s = o->env->remove_dir(o->env, o->path);
    if (s != NULL)
        fprintf(stderr, "mkfs.lsmfs: removing %s: %s\n", o->dir, lsm_status_message(s));
    lsm_status_free(s);
}

static int make_fs(const struct mkfs_opts *o)
{
    lsm_options lo;
    lsm_options_init(&lo);
    lo.create_if_missing = true;
    lo.error_if_exists = true;
    lo.env = o->env;
    lsm_db *db;
    lsm_status *s = lsm_open(&lo, o->path, &db);
    if (s != NULL) {
        fprintf(stderr, "mkfs.lsmfs: creating the store in %s: %s\n", o->dir,
                lsm_status_message(s));
        lsm_status_free(s);
        return 1;
    }
    lsm_batch *b = lsm_batch_new();
    int rc = 0;
    if (b == NULL || !fill_batch(o, b)) {
        fprintf(stderr, "mkfs.lsmfs: out of memory\n");
        rc = 1;
    } else {
        lsm_write_options wo = {.sync = true};
        s = lsm_write(db, &wo, b);
    }
    lsm_batch_free(b);
    lsm_status *cs = lsm_close(db);
    if (s != NULL || cs != NULL) {
        fprintf(stderr, "mkfs.lsmfs: writing %s: %s\n", o->dir,
                lsm_status_message(s != NULL ? s : cs));
        rc = 1;
    }
    lsm_status_free(s);
    lsm_status_free(cs);
    return rc;
}

int main(int argc, char **argv)
{
    struct mkfs_opts o;
    bool created = false;
    int rc = parse_args(argc, argv, &o) != 0;
    if (!rc && prepare_dir(&o, &created) != 0) {
        if (created) /* all in it is mkfs's */
            undo_make(&o, created);
        rc = 1;
    }
    if (!rc && make_fs(&o) != 0) {
        undo_make(&o, created);
        rc = 1;
    }
    if (!rc && set_mark(&o, false) != 0) {
        undo_make(&o, created);
        rc = 1;
    }
    free(o.path);
    store_uri_shutdown();
    if (rc)
        return 1;
    if (!o.quiet)
        printf("lsmfs filesystem created in %s (format %d, chunk %u bytes, inline limit %u "
               "bytes)\n",
               o.dir, SCHEMA_VERSION, o.chunk_size, o.inline_limit);
    return 0;
}
