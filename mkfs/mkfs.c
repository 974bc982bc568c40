/*
 * mkfs.c — mkfs.lsmfs: make an lsmfs filesystem in a store directory.
 *
 *   mkfs.lsmfs [-f] [-c chunk_size] [-i inline_limit] [-u uid] [-g gid] [-q] DIR
 *
 * Creates the store, the superblock, the allocator record and the root
 * directory, in one synchronous batch. Refuses a non-empty directory that
 * is not an lsmfs store; -f overwrites an existing (unmounted) lsmfs store.
 */
#include "lsm.h"
#include "schema.h"
#include "store_open.h"
#include "super.h"

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
    const char *dir;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mkfs.lsmfs [-f] [-c chunk_size] [-i inline_limit] [-u uid] [-g gid] "
            "[-q] DIR\n"
            "  -f   overwrite an existing lsmfs filesystem in DIR\n"
            "  -c   data chunk size, a power of two from 4K to 1M (default %uK)\n"
            "  -i   largest file kept inline in its inode, 0 to the chunk size (default %uK)\n"
            "  -u/-g  owner of the root directory (default: the caller)\n"
            "  -q   quiet\n",
            SCHEMA_DEFAULT_CHUNK / 1024, SCHEMA_DEFAULT_INLINE / 1024);
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
                            .gid = getgid()};
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        exit(0);
    }
    int c;
    while ((c = getopt(argc, argv, "fqc:i:u:g:h")) != -1)
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

/* 1 if dir has entries other than . and .., 0 if empty, -1 on error. */
static int dir_nonempty(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            found = 1;
    closedir(d);
    return found;
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

/* Removes the store in dir: 0, or 1 on failure (said on stderr). */
static int remove_store(const char *dir)
{
    lsm_options lo;
    lsm_options_init(&lo);
    lsm_status *s = lsm_destroy(&lo, dir);
    if (s != NULL) {
        fprintf(stderr, "mkfs.lsmfs: removing the old store: %s\n", lsm_status_message(s));
        lsm_status_free(s);
        return 1;
    }
    return 0;
}

/* Makes sure dir exists and may be (re)used; destroys an old lsmfs store
 * when forced. *created: mkfs made dir. Returns 0 or 1 (with a message
 * printed). */
static int prepare_dir(const struct mkfs_opts *o, bool *created)
{
    struct stat st;
    *created = false;
    if (stat(o->dir, &st) != 0) {
        if (errno == ENOENT && mkdir(o->dir, 0755) == 0) {
            *created = true;
            return 0;
        }
        fprintf(stderr, "mkfs.lsmfs: %s: %s\n", o->dir, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "mkfs.lsmfs: %s: not a directory\n", o->dir);
        return 1;
    }
    int ne = dir_nonempty(o->dir);
    if (ne <= 0) {
        if (ne < 0)
            fprintf(stderr, "mkfs.lsmfs: %s: %s\n", o->dir, strerror(errno));
        return ne < 0;
    }
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
    return remove_store(o->dir);
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
                       .ctime_nsec = (uint32_t)now.tv_nsec};
    char sv[SCHEMA_SUPER_LEN], av[SCHEMA_ALLOC_LEN], iv[INODE_HDR_LEN];
    super_encode(&sb, sv);
    alloc_encode(SCHEMA_FIRST_INO, av);
    ts t = {.sec = now.tv_sec, .nsec = (uint32_t)now.tv_nsec};
    inode_rec root = {.mode = S_IFDIR | 0755,
                      .uid = o->uid,
                      .gid = o->gid,
                      .nlink = 2,
                      .generation = 1,
                      .atime = t,
                      .mtime = t,
                      .ctime = t,
                      .parent = SCHEMA_ROOT_INO,
                      .next_cookie = SCHEMA_FIRST_COOKIE};
    inode_encode_hdr(&root, iv);
    schema_key ks, ka, ki;
    key_super(&ks);
    key_alloc(&ka);
    key_inode(&ki, SCHEMA_ROOT_INO);
    return lsm_batch_put(b, ks.b, ks.len, sv, sizeof sv) &&
           lsm_batch_put(b, ka.b, ka.len, av, sizeof av) &&
           lsm_batch_put(b, ki.b, ki.len, iv, sizeof iv);
}

/* After a failed make_fs: the directory as mkfs found it (without the
 * store a -f destroyed): no store file, and gone if mkfs made it. */
static void undo_make(const struct mkfs_opts *o, bool created)
{
    if (remove_store(o->dir) == 0 && created && rmdir(o->dir) != 0)
        fprintf(stderr, "mkfs.lsmfs: removing %s: %s\n", o->dir, strerror(errno));
}

static int make_fs(const struct mkfs_opts *o)
{
    lsm_options lo;
    lsm_options_init(&lo);
    lo.create_if_missing = true;
    lo.error_if_exists = true;
    lsm_db *db;
    lsm_status *s = lsm_open(&lo, o->dir, &db);
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
    bool created;
    if (parse_args(argc, argv, &o) != 0 || prepare_dir(&o, &created) != 0)
        return 1;
    if (make_fs(&o) != 0) {
        undo_make(&o, created);
        return 1;
    }
    if (!o.quiet)
        printf("lsmfs filesystem created in %s (format %d, chunk %u bytes, inline limit %u "
               "bytes)\n",
               o.dir, SCHEMA_VERSION, o.chunk_size, o.inline_limit);
    return 0;
}
