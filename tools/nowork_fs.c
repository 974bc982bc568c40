/*
 * nowork-fs — a FUSE filesystem that does no work: everything lives in
 * memory, fsync is a no-op. It is the ceiling for lsmfs's benchmarks (issue 6):
 * whatever it reaches is the cost of FUSE round trips alone.
 *
 *   nowork-fs MOUNTPOINT [-f] [-s] [-d] [-o opt,...] [-o log=PATH[,log_mb=N]]
 *             [-o uring=off|auto|on] [-o attr_timeout=SEC]
 *
 * -o uring= serves the requests over FUSE's io_uring queues (fs/transport/uring.h,
 * lsmfs's transport) instead of /dev/fuse: the ceiling of that transport.
 * Default off, so the plain ceiling stays what it was. -o attr_timeout=0
 * makes every stat a round trip.
 *
 * Durable mode (-o log=PATH): the ceiling for a filesystem whose fsync
 * means something. Every change is also appended to a log at PATH (a write
 * its data, any other change a 64-byte record) before it is acknowledged,
 * and fsync and fsyncdir are one fdatasync of that log, shared by all who
 * wait for it (see nowork_log.h). That is the least any durable filesystem
 * must do; it still recovers nothing after a crash.
 *
 * It uses the low-level API with the DEFAULT request pattern on purpose: no
 * capabilities asked for or refused in init, entry and attribute timeouts of
 * 1 s (the high-level library's defaults), no negative-entry caching, real
 * open/opendir/flush round trips, readdir without readdirplus. Anything lsmfs
 * does better than this, it does by needing fewer round trips.
 *
 * Concurrency: one mutex (nowork.lock) guards every node and directory; every
 * operation takes it once. The data is in memory only and vanishes at unmount.
 */
#include "../fs/fuse_api.h" /* the API level lsmfs uses */
#include "../fs/transport/uring.h"
#include "nowork_log.h"

#include <linux/fuse.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Default timeouts of libfuse's high-level API; -o attr_timeout= changes
 * the second. [written once before the session starts] */
#define ENTRY_TIMEOUT 1.0
static double attr_timeout = 1.0;
#define ATTR_TIMEOUT attr_timeout

/* ------------------------------------------------------------ structures */

/* One name in a directory. A removed entry keeps its slot (name NULL) so the
 * readdir offsets of the others stay valid while the directory is open. */
typedef struct dent {
    char *name;
    fuse_ino_t ino;
} dent;

/* A directory: entries in creation order plus an open-addressing hash from
 * name to entry index. */
typedef struct dirtab {
    dent *ents;
    size_t nents, cap_ents, live;
    int32_t *slots; /* -1 empty, -2 deleted, else an index into ents */
    size_t nslots, used_slots;
} dirtab;

typedef struct node {
    fuse_ino_t ino;
    struct stat st;
    uint64_t nlookup;  /* kernel references (lookup/create minus forget) */
    unsigned open;     /* open file or directory handles */
    char *data;        /* regular file contents, or a symlink's target */
    size_t cap;        /* bytes allocated at data */
    fuse_ino_t parent; /* directories only */
    dirtab dir;        /* directories only */
} node;

typedef struct nowork {
    pthread_mutex_t lock;
    node **nodes;     /* GUARDED_BY(lock); indexed by inode number, NULL if free */
    size_t nnodes;    /* GUARDED_BY(lock) */
    size_t cap_nodes; /* GUARDED_BY(lock) */
    nw_log *log;      /* durable mode's log (thread-safe itself); NULL if none */
} nowork;

static nowork *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* Bytes logged for a change other than a write: about an inode record and
 * a directory entry. */
#define META_RECORD 64

/* In durable mode, puts a change in the log before it is acknowledged (n
 * bytes of data, or zeros if data is NULL). Returns 0 or an errno. */
static int log_change(nowork *fs, const void *data, size_t n)
{
    return fs->log == NULL ? 0 : nw_log_append(fs->log, data, n);
}

/* ------------------------------------------------------------ directories */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Finds the hash slot holding name, or -1. */
static long dir_find_slot(const dirtab *d, const char *name)
{
    if (d->nslots == 0)
        return -1;
    size_t mask = d->nslots - 1;
    for (size_t i = name_hash(name) & mask, n = 0; n < d->nslots; i = (i + 1) & mask, n++) {
        int32_t e = d->slots[i];
        if (e == -1)
            return -1;
        if (e >= 0 && strcmp(d->ents[e].name, name) == 0)
            return (long)i;
    }
    return -1;
}

static void dir_place(dirtab *d, size_t ent)
{
    size_t mask = d->nslots - 1;
    size_t i = name_hash(d->ents[ent].name) & mask;
    while (d->slots[i] >= 0)
        i = (i + 1) & mask;
    d->slots[i] = (int32_t)ent;
    d->used_slots++;
}

/* Rebuilds the hash at a size fitting the live entries. */
static int dir_rehash(dirtab *d, size_t want_live)
{
    size_t n = 16;
    while (n < want_live * 2 + 2)
        n *= 2;
    int32_t *slots = malloc(n * sizeof(*slots));
    if (slots == NULL)
        return ENOMEM;
    free(d->slots);
    d->slots = slots;
    d->nslots = n;
    d->used_slots = 0;
    memset(slots, 0xff, n * sizeof(*slots)); /* every slot -1 */
    for (size_t e = 0; e < d->nents; e++)
        if (d->ents[e].name != NULL)
            dir_place(d, e);
    return 0;
}

/* Drops removed slots from ents; only while no handle has the dir open,
 * since it moves readdir offsets. */
static int dir_compact(dirtab *d)
{
    size_t j = 0;
    for (size_t e = 0; e < d->nents; e++)
        if (d->ents[e].name != NULL)
            d->ents[j++] = d->ents[e];
    d->nents = j;
    return dir_rehash(d, d->live);
}

static fuse_ino_t dir_lookup(const dirtab *d, const char *name)
{
    long s = dir_find_slot(d, name);
    return s < 0 ? 0 : d->ents[d->slots[s]].ino;
}

/* REQUIRES: name not present. */
static int dir_add(dirtab *d, const char *name, fuse_ino_t ino)
{
    if ((d->used_slots + 1) * 2 > d->nslots && dir_rehash(d, d->live + 1) != 0)
        return ENOMEM;
    if (d->nents == d->cap_ents) {
        size_t cap = d->cap_ents ? d->cap_ents * 2 : 8;
        dent *ents = realloc(d->ents, cap * sizeof(*ents));
        if (ents == NULL)
            return ENOMEM;
        d->ents = ents;
        d->cap_ents = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return ENOMEM;
    d->ents[d->nents] = (dent){.name = copy, .ino = ino};
    dir_place(d, d->nents++);
    d->live++;
    return 0;
}

static void dir_remove(dirtab *d, const char *name, bool may_compact)
{
    long s = dir_find_slot(d, name);
    if (s < 0)
        return;
    dent *e = &d->ents[d->slots[s]];
    free(e->name);
    e->name = NULL;
    d->slots[s] = -2;
    d->live--;
    if (may_compact && d->nents > 64 && d->live < d->nents / 4)
        dir_compact(d); /* on ENOMEM the old layout stays valid */
}

static void dir_free(dirtab *d)
{
    for (size_t e = 0; e < d->nents; e++)
        free(d->ents[e].name);
    free(d->ents);
    free(d->slots);
}

/* ------------------------------------------------------------------ nodes */

static void touch(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
}

/* REQUIRES: fs->lock held. */
static node *get_node(nowork *fs, fuse_ino_t ino)
{
    return ino < fs->nnodes ? fs->nodes[ino] : NULL;
}

/* Allocates a node with a fresh inode number. REQUIRES: fs->lock held. */
static node *new_node(nowork *fs, fuse_req_t req, mode_t mode)
{
    if (fs->nnodes == fs->cap_nodes) {
        size_t cap = fs->cap_nodes ? fs->cap_nodes * 2 : 1024;
        node **nodes = realloc(fs->nodes, cap * sizeof(*nodes));
        if (nodes == NULL)
            return NULL;
        fs->nodes = nodes;
        fs->cap_nodes = cap;
    }
    node *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->ino = fs->nnodes;
    fs->nodes[fs->nnodes++] = n;
    const struct fuse_ctx *ctx = req != NULL ? fuse_req_ctx(req) : NULL;
    n->st.st_ino = n->ino;
    n->st.st_mode = mode;
    n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
    n->st.st_uid = ctx != NULL ? ctx->uid : getuid();
    n->st.st_gid = ctx != NULL ? ctx->gid : getgid();
    n->st.st_blksize = 4096;
    touch(&n->st.st_atim);
    n->st.st_mtim = n->st.st_ctim = n->st.st_atim;
    return n;
}

/* Frees n once nothing names or references it. REQUIRES: fs->lock held. */
static void maybe_free(nowork *fs, node *n)
{
    if (n->st.st_nlink > 0 || n->nlookup > 0 || n->open > 0 || n->ino == FUSE_ROOT_ID)
        return;
    fs->nodes[n->ino] = NULL;
    free(n->data);
    dir_free(&n->dir);
    free(n);
}

static int set_size(node *n, size_t size)
{
    if (size > n->cap) {
        size_t cap = n->cap ? n->cap : 4096;
        while (cap < size)
            cap *= 2;
        char *data = realloc(n->data, cap);
        if (data == NULL)
            return ENOSPC;
        n->data = data;
        n->cap = cap;
    }
    if (size > (size_t)n->st.st_size)
        memset(n->data + n->st.st_size, 0, size - (size_t)n->st.st_size);
    n->st.st_size = (off_t)size;
    n->st.st_blocks = (blkcnt_t)((size + 511) / 512);
    return 0;
}

/* ---------------------------------------------------------------- replies */

static void reply_entry_for(fuse_req_t req, node *n)
{
    struct fuse_entry_param e = {0};
    e.ino = n->ino;
    e.attr = n->st;
    e.attr_timeout = ATTR_TIMEOUT;
    e.entry_timeout = ENTRY_TIMEOUT;
    n->nlookup++;
    fuse_reply_entry(req, &e);
}

static void reply_attr_for(fuse_req_t req, const node *n)
{
    struct stat st = n->st;
    fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* ------------------------------------------------------------- operations */

static void nw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *p = get_node(fs, parent);
    node *n = p != NULL && S_ISDIR(p->st.st_mode) ? get_node(fs, dir_lookup(&p->dir, name)) : NULL;
    if (n != NULL)
        reply_entry_for(req, n);
    else
        fuse_reply_err(req, p == NULL ? ENOENT : S_ISDIR(p->st.st_mode) ? ENOENT : ENOTDIR);
    pthread_mutex_unlock(&fs->lock);
}

static void forget_one(nowork *fs, fuse_ino_t ino, uint64_t nlookup)
{
    node *n = get_node(fs, ino);
    if (n == NULL)
        return;
    n->nlookup = nlookup < n->nlookup ? n->nlookup - nlookup : 0;
    maybe_free(fs, n);
}

static void nw_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    forget_one(fs, ino, nlookup);
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_none(req);
}

static void nw_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    for (size_t i = 0; i < count; i++)
        forget_one(fs, forgets[i].ino, forgets[i].nlookup);
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_none(req);
}

static void nw_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    if (n != NULL)
        reply_attr_for(req, n);
    else
        fuse_reply_err(req, ENOENT);
    pthread_mutex_unlock(&fs->lock);
}

static void set_time(struct timespec *dst, const struct timespec *src, bool now)
{
    if (now)
        touch(dst);
    else
        *dst = *src;
}

/* REQUIRES: fs->lock held. */
static int apply_setattr(node *n, const struct stat *a, int to_set)
{
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (!S_ISREG(n->st.st_mode))
            return S_ISDIR(n->st.st_mode) ? EISDIR : EINVAL;
        int err = set_size(n, (size_t)a->st_size);
        if (err != 0)
            return err;
        touch(&n->st.st_mtim);
    }
    if (to_set & FUSE_SET_ATTR_MODE)
        n->st.st_mode = (n->st.st_mode & S_IFMT) | (a->st_mode & 07777);
    if (to_set & FUSE_SET_ATTR_UID)
        n->st.st_uid = a->st_uid;
    if (to_set & FUSE_SET_ATTR_GID)
        n->st.st_gid = a->st_gid;
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))
        set_time(&n->st.st_atim, &a->st_atim, to_set & FUSE_SET_ATTR_ATIME_NOW);
    if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
        set_time(&n->st.st_mtim, &a->st_mtim, to_set & FUSE_SET_ATTR_MTIME_NOW);
    if (to_set & FUSE_SET_ATTR_CTIME)
        n->st.st_ctim = a->st_ctim;
    else
        touch(&n->st.st_ctim);
    return 0;
}

static void nw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    int err = n == NULL ? ENOENT : apply_setattr(n, attr, to_set);
    if (err == 0)
        err = log_change(fs, NULL, META_RECORD);
    if (err == 0)
        reply_attr_for(req, n);
    else
        fuse_reply_err(req, err);
    pthread_mutex_unlock(&fs->lock);
}

static void nw_readlink(fuse_req_t req, fuse_ino_t ino)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    if (n == NULL || !S_ISLNK(n->st.st_mode))
        fuse_reply_err(req, n == NULL ? ENOENT : EINVAL);
    else
        fuse_reply_readlink(req, n->data);
    pthread_mutex_unlock(&fs->lock);
}

/* Checks that name can be created in parent. REQUIRES: fs->lock held. */
static int check_new_name(nowork *fs, fuse_ino_t parent, const char *name, node **pp)
{
    node *p = get_node(fs, parent);
    if (p == NULL)
        return ENOENT;
    if (!S_ISDIR(p->st.st_mode))
        return ENOTDIR;
    if (p->st.st_nlink == 0)
        return ENOENT; /* removed while a process still sits in it */
    if (strlen(name) > NAME_MAX)
        return ENAMETOOLONG;
    if (dir_lookup(&p->dir, name) != 0)
        return EEXIST;
    *pp = p;
    return 0;
}

/* Links n under name in p. REQUIRES: fs->lock held. */
static int link_in(node *p, const char *name, node *n)
{
    int err = dir_add(&p->dir, name, n->ino);
    if (err != 0)
        return err;
    if (S_ISDIR(n->st.st_mode)) {
        p->st.st_nlink++;
        n->parent = p->ino;
    }
    touch(&p->st.st_mtim);
    p->st.st_ctim = p->st.st_mtim;
    return 0;
}

/* Creates a node of the given mode under parent/name; returns an errno. On
 * success *out holds the new node. REQUIRES: fs->lock held. */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     const char *target, node **out)
{
    nowork *fs = fs_of(req);
    node *p;
    int err = check_new_name(fs, parent, name, &p);
    if (err != 0)
        return err;
    node *n = new_node(fs, req, mode);
    if (n == NULL)
        return ENOMEM;
    if (target != NULL) {
        n->data = strdup(target);
        n->st.st_size = (off_t)strlen(target);
    }
    err = (target != NULL && n->data == NULL) ? ENOMEM : link_in(p, name, n);
    if (err != 0) {
        n->st.st_nlink = 0;
        maybe_free(fs, n);
        return err;
    }
    *out = n;
    return log_change(fs, NULL, META_RECORD);
}

static void reply_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                       const char *target)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n;
    int err = make_node(req, parent, name, mode, target, &n);
    if (err == 0)
        reply_entry_for(req, n);
    else
        fuse_reply_err(req, err);
    pthread_mutex_unlock(&fs->lock);
}

static void nw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    (void)rdev;
    if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode)) {
        fuse_reply_err(req, EPERM); /* no device nodes in a benchmark filesystem */
        return;
    }
    reply_make(req, parent, name, mode, NULL);
}

static void nw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    reply_make(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void nw_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    reply_make(req, parent, name, S_IFLNK | 0777, link);
}

/* Removes parent/name, a directory if want_dir. REQUIRES: fs->lock held. */
static int remove_name(nowork *fs, fuse_ino_t parent, const char *name, bool want_dir)
{
    node *p = get_node(fs, parent);
    if (p == NULL || !S_ISDIR(p->st.st_mode))
        return p == NULL ? ENOENT : ENOTDIR;
    node *n = get_node(fs, dir_lookup(&p->dir, name));
    if (n == NULL)
        return ENOENT;
    bool is_dir = S_ISDIR(n->st.st_mode);
    if (want_dir != is_dir)
        return want_dir ? ENOTDIR : EISDIR;
    if (is_dir && n->dir.live > 0)
        return ENOTEMPTY;
    dir_remove(&p->dir, name, p->open == 0);
    if (is_dir) {
        p->st.st_nlink--;
        n->st.st_nlink = 0;
    } else {
        n->st.st_nlink--;
    }
    touch(&p->st.st_mtim);
    p->st.st_ctim = p->st.st_mtim;
    n->st.st_ctim = p->st.st_mtim;
    maybe_free(fs, n);
    return 0;
}

static void reply_remove(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    int err = remove_name(fs, parent, name, dir);
    if (err == 0)
        err = log_change(fs, NULL, META_RECORD);
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_err(req, err);
}

static void nw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    reply_remove(req, parent, name, false);
}

static void nw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    reply_remove(req, parent, name, true);
}

/* The checks rename(2) makes on an existing target. */
static int check_replace(const node *src, const node *dst)
{
    if (S_ISDIR(src->st.st_mode) && !S_ISDIR(dst->st.st_mode))
        return ENOTDIR;
    if (!S_ISDIR(src->st.st_mode) && S_ISDIR(dst->st.st_mode))
        return EISDIR;
    if (S_ISDIR(dst->st.st_mode) && dst->dir.live > 0)
        return ENOTEMPTY;
    return 0;
}

/* REQUIRES: fs->lock held. */
static int do_rename(nowork *fs, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned flags)
{
    if (flags & ~(unsigned)RENAME_NOREPLACE)
        return EINVAL; /* no RENAME_EXCHANGE / WHITEOUT */
    node *p = get_node(fs, parent), *np = get_node(fs, newparent);
    if (p == NULL || np == NULL || !S_ISDIR(p->st.st_mode) || !S_ISDIR(np->st.st_mode))
        return ENOENT;
    node *n = get_node(fs, dir_lookup(&p->dir, name));
    if (n == NULL)
        return ENOENT;
    node *old = get_node(fs, dir_lookup(&np->dir, newname));
    if (old == n)
        return 0;
    if (old != NULL && (flags & RENAME_NOREPLACE))
        return EEXIST;
    if (old != NULL) {
        int err = check_replace(n, old);
        if (err == 0)
            err = remove_name(fs, newparent, newname, S_ISDIR(old->st.st_mode));
        if (err != 0)
            return err;
    }
    int err = dir_add(&np->dir, newname, n->ino);
    if (err != 0)
        return err;
    dir_remove(&p->dir, name, p->open == 0);
    if (S_ISDIR(n->st.st_mode) && p != np) {
        p->st.st_nlink--;
        np->st.st_nlink++;
        n->parent = np->ino;
    }
    touch(&p->st.st_mtim);
    p->st.st_ctim = np->st.st_mtim = np->st.st_ctim = n->st.st_ctim = p->st.st_mtim;
    return 0;
}

static void nw_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    int err = do_rename(fs, parent, name, newparent, newname, flags);
    if (err == 0)
        err = log_change(fs, NULL, META_RECORD);
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_err(req, err);
}

static void nw_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino), *p = NULL;
    int err = n == NULL                ? ENOENT
              : S_ISDIR(n->st.st_mode) ? EPERM
                                       : check_new_name(fs, newparent, newname, &p);
    if (err == 0)
        err = link_in(p, newname, n);
    if (err == 0)
        err = log_change(fs, NULL, META_RECORD);
    if (err == 0) {
        n->st.st_nlink++;
        touch(&n->st.st_ctim);
        reply_entry_for(req, n);
    } else {
        fuse_reply_err(req, err);
    }
    pthread_mutex_unlock(&fs->lock);
}

static void nw_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    int err = n == NULL ? ENOENT : S_ISDIR(n->st.st_mode) ? EISDIR : 0;
    /* libfuse asks for atomic O_TRUNC by default: the truncation comes here. */
    if (err == 0 && (fi->flags & O_TRUNC) && n->st.st_size > 0) {
        err = set_size(n, 0);
        touch(&n->st.st_mtim);
        n->st.st_ctim = n->st.st_mtim;
        if (err == 0)
            err = log_change(fs, NULL, META_RECORD);
    }
    if (err == 0) {
        n->open++;
        fi->fh = ino;
        fuse_reply_open(req, fi);
    } else {
        fuse_reply_err(req, err);
    }
    pthread_mutex_unlock(&fs->lock);
}

static void nw_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n;
    int err = make_node(req, parent, name, S_IFREG | (mode & 07777), NULL, &n);
    if (err == 0) {
        struct fuse_entry_param e = {0};
        e.ino = n->ino;
        e.attr = n->st;
        e.attr_timeout = ATTR_TIMEOUT;
        e.entry_timeout = ENTRY_TIMEOUT;
        n->nlookup++;
        n->open++;
        fi->fh = n->ino;
        fuse_reply_create(req, &e, fi);
    } else {
        fuse_reply_err(req, err);
    }
    pthread_mutex_unlock(&fs->lock);
}

static void nw_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    if (n == NULL) {
        fuse_reply_err(req, ENOENT);
    } else {
        size_t len = (size_t)n->st.st_size;
        size_t start = off < 0 ? 0 : (size_t)off < len ? (size_t)off : len;
        size_t count = size < len - start ? size : len - start;
        /* fuse_reply_buf copies before it returns, so the lock covers it. */
        fuse_reply_buf(req, count > 0 ? n->data + start : NULL, count);
    }
    pthread_mutex_unlock(&fs->lock);
}

static void nw_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    size_t start = (fi->flags & O_APPEND) && n != NULL ? (size_t)n->st.st_size : (size_t)off;
    int err = n == NULL ? ENOENT : off < 0 ? EINVAL : 0;
    if (err == 0 && start + size > (size_t)n->st.st_size)
        err = set_size(n, start + size);
    if (err == 0) {
        memcpy(n->data + start, buf, size);
        touch(&n->st.st_mtim);
        n->st.st_ctim = n->st.st_mtim;
        err = log_change(fs, buf, size);
    }
    if (err == 0) {
        fuse_reply_write(req, size);
    } else {
        fuse_reply_err(req, err);
    }
    pthread_mutex_unlock(&fs->lock);
}

static void nw_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

static void close_handle(fuse_req_t req, fuse_ino_t ino)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    if (n != NULL && n->open > 0) {
        n->open--;
        if (n->open == 0 && S_ISDIR(n->st.st_mode) && n->dir.nents > 64 &&
            n->dir.live < n->dir.nents / 4)
            dir_compact(&n->dir);
        maybe_free(fs, n);
    }
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_err(req, 0);
}

static void nw_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    close_handle(req, ino);
}

/* The ceiling: durability costs nothing here, or (durable mode) one shared
 * sync of the log. */
static void nw_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    nowork *fs = fs_of(req);
    fuse_reply_err(req, fs->log == NULL ? 0 : nw_log_sync(fs->log));
}

static void nw_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    nowork *fs = fs_of(req);
    pthread_mutex_lock(&fs->lock);
    node *n = get_node(fs, ino);
    int err = n == NULL ? ENOENT : !S_ISDIR(n->st.st_mode) ? ENOTDIR : 0;
    if (err == 0) {
        n->open++;
        fi->fh = ino;
        fuse_reply_open(req, fi);
    } else {
        fuse_reply_err(req, err);
    }
    pthread_mutex_unlock(&fs->lock);
}

/* Adds one entry at offset index+1 of the listing; false when buf is full. */
static bool add_dirent(fuse_req_t req, char *buf, size_t size, size_t *used, const char *name,
                       fuse_ino_t ino, mode_t mode, off_t next)
{
    struct stat st = {.st_ino = ino, .st_mode = mode};
    size_t len = fuse_add_direntry(req, buf + *used, size - *used, name, &st, next);
    if (len > size - *used)
        return false;
    *used += len;
    return true;
}

/* Offsets: 0 start, 1 after ".", 2 after "..", 3+i after entry i. */
static size_t fill_dir(fuse_req_t req, nowork *fs, node *d, char *buf, size_t size, off_t off)
{
    size_t used = 0;
    if (off < 1 && !add_dirent(req, buf, size, &used, ".", d->ino, S_IFDIR, 1))
        return used;
    if (off < 2 && !add_dirent(req, buf, size, &used, "..", d->parent, S_IFDIR, 2))
        return used;
    for (size_t i = off > 2 ? (size_t)off - 2 : 0; i < d->dir.nents; i++) {
        const dent *e = &d->dir.ents[i];
        if (e->name == NULL)
            continue;
        node *n = get_node(fs, e->ino);
        mode_t mode = n != NULL ? n->st.st_mode : 0;
        if (!add_dirent(req, buf, size, &used, e->name, e->ino, mode, (off_t)i + 3))
            break;
    }
    return used;
}

static void nw_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    nowork *fs = fs_of(req);
    char *buf = malloc(size);
    if (buf == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pthread_mutex_lock(&fs->lock);
    node *d = get_node(fs, ino);
    if (d == NULL || !S_ISDIR(d->st.st_mode))
        fuse_reply_err(req, d == NULL ? ENOENT : ENOTDIR);
    else
        fuse_reply_buf(req, buf, fill_dir(req, fs, d, buf, size, off));
    pthread_mutex_unlock(&fs->lock);
    free(buf);
}

static void nw_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    close_handle(req, ino);
}

static void nw_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    nw_fsync(req, ino, datasync, fi);
}

static void nw_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs sv = {0};
    sv.f_bsize = 4096;
    sv.f_frsize = 4096;
    sv.f_blocks = sv.f_bfree = sv.f_bavail = 1ull << 28; /* 1 TiB */
    sv.f_files = sv.f_ffree = sv.f_favail = 1ull << 32;
    sv.f_namemax = NAME_MAX;
    fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops nowork_ops = {
    .lookup = nw_lookup,
    .forget = nw_forget,
    .forget_multi = nw_forget_multi,
    .getattr = nw_getattr,
    .setattr = nw_setattr,
    .readlink = nw_readlink,
    .mknod = nw_mknod,
    .mkdir = nw_mkdir,
    .unlink = nw_unlink,
    .rmdir = nw_rmdir,
    .symlink = nw_symlink,
    .rename = nw_rename,
    .link = nw_link,
    .open = nw_open,
    .read = nw_read,
    .write = nw_write,
    .flush = nw_flush,
    .release = nw_release,
    .fsync = nw_fsync,
    .opendir = nw_opendir,
    .readdir = nw_readdir,
    .releasedir = nw_releasedir,
    .fsyncdir = nw_fsyncdir,
    .statfs = nw_statfs,
    .create = nw_create,
};

/* ------------------------------------------------------------------- main */

static int nowork_init(nowork *fs)
{
    memset(fs, 0, sizeof(*fs));
    pthread_mutex_init(&fs->lock, NULL);
    node *unused = new_node(fs, NULL, S_IFDIR | 0755); /* inode 0 is never used */
    node *root = new_node(fs, NULL, S_IFDIR | 0755);
    if (unused == NULL || root == NULL)
        return ENOMEM;
    free(unused);
    fs->nodes[0] = NULL;
    root->parent = FUSE_ROOT_ID;
    return 0;
}

static void nowork_free(nowork *fs)
{
    for (size_t i = 0; i < fs->nnodes; i++) {
        node *n = fs->nodes[i];
        if (n == NULL)
            continue;
        free(n->data);
        dir_free(&n->dir);
        free(n);
    }
    free(fs->nodes);
    nw_log_close(fs->log);
    pthread_mutex_destroy(&fs->lock);
}

/* ring: the io_uring transport is installed. Its custom I/O knows the
 * session's device only, and a clone_fd worker reads and answers on a
 * clone of it (INIT included), which would bypass the ring: clone_fd is
 * left off then, and said so. */
static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *opts, bool ring)
{
    if (opts->singlethread)
        return fuse_session_loop(se);
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (cfg == NULL)
        return -1;
    if (ring && opts->clone_fd)
        fprintf(stderr, "nowork-fs: -o clone_fd: ignored with -o uring (the ring's queues are "
                        "per CPU already; /dev/fuse keeps one descriptor)\n");
    fuse_loop_cfg_set_clone_fd(cfg, ring ? 0u : (unsigned)opts->clone_fd);
    /* UINT_MAX means "not given": keep libfuse's defaults then. */
    if (opts->max_idle_threads != UINT_MAX)
        fuse_loop_cfg_set_idle_threads(cfg, opts->max_idle_threads);
    if (opts->max_threads != UINT_MAX)
        fuse_loop_cfg_set_max_threads(cfg, opts->max_threads);
    int rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
    return rc;
}

/* In durable mode an fsync waits for the log's sync: over the ring it goes
 * to a worker, so the other requests of its CPU go on. */
static bool nw_may_wait(void *ctx, const struct fuse_in_header *in, size_t len)
{
    (void)len;
    const nowork *fs = ctx;
    return fs->log != NULL && (in->opcode == FUSE_FSYNC || in->opcode == FUSE_FSYNCDIR);
}

static int run(struct fuse_args *args, const struct fuse_cmdline_opts *opts, nowork *fs,
               uring_mode mode)
{
    if (mode == URING_ON && !uring_kernel_offers()) {
        fprintf(stderr, "nowork-fs: -o uring=on: the kernel does not offer FUSE over io_uring "
                        "(%s is not Y)\n", URING_PARAM_PATH);
        return 1;
    }
    struct fuse_session *se = fuse_session_new(args, &nowork_ops, sizeof(nowork_ops), fs);
    if (se == NULL)
        return 1;
    int rc = 1;
    if (fuse_set_signal_handlers(se) == 0) {
        if (fuse_session_mount(se, opts->mountpoint) == 0) {
            struct uring *u = NULL;
            uring_config uc = {.mode = mode, .depth = 8, .max_workers = 8,
                               .may_wait = nw_may_wait, .ctx = fs};
            int err = mode == URING_OFF ? 0 : uring_attach(se, &uc, &u);
            if (err != 0)
                fprintf(stderr, "nowork-fs: io_uring transport: %s\n", strerror(-err));
            fuse_daemonize(opts->foreground);
            if (err == 0 || mode != URING_ON)
                rc = serve(se, opts, u != NULL) != 0;
            if (mode == URING_ON && !uring_active(u))
                rc = 1;
            if (uring_active(u))
                fprintf(stderr, "nowork-fs: %llu requests served over io_uring\n",
                        (unsigned long long)uring_requests(u));
            uring_stop(u);
            fuse_session_unmount(se);
        }
        fuse_remove_signal_handlers(se);
    }
    fuse_session_destroy(se);
    return rc;
}

/* Durable mode's options. */
struct log_opts {
    char *path;
    unsigned mib;
    char *uring;   /* -o uring= */
    double attr_timeout;
};

static const struct fuse_opt log_opt_spec[] = {
    {"log=%s", offsetof(struct log_opts, path), 0},
    {"log_mb=%u", offsetof(struct log_opts, mib), 0},
    {"uring=%s", offsetof(struct log_opts, uring), 0},
    {"attr_timeout=%lf", offsetof(struct log_opts, attr_timeout), 0},
    FUSE_OPT_END,
};

/* Opens the durable mode's log if -o log= was given. Returns 0 or 1. */
static int open_log(const struct log_opts *lo, nowork *fs)
{
    if (lo->path == NULL)
        return 0;
    int err = nw_log_open(lo->path, (size_t)lo->mib << 20, &fs->log);
    if (err != 0)
        fprintf(stderr, "nowork-fs: log %s (%u MiB): %s\n", lo->path, lo->mib, strerror(err));
    return err != 0;
}

int main(int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct log_opts lo = {.path = NULL, .mib = 64, .attr_timeout = 1.0};
    if (fuse_opt_parse(&args, &lo, log_opt_spec, NULL) != 0)
        return 1;
    uring_mode mode = URING_OFF;
    if (lo.uring != NULL && uring_parse_mode(lo.uring, &mode) != 0) {
        fprintf(stderr, "nowork-fs: uring=%s: give off, auto or on\n", lo.uring);
        return 1;
    }
    if (lo.attr_timeout < 0) {
        fprintf(stderr, "nowork-fs: attr_timeout must not be negative\n");
        return 1;
    }
    attr_timeout = lo.attr_timeout;
    struct fuse_cmdline_opts opts;
    if (fuse_parse_cmdline(&args, &opts) != 0)
        return 1;
    int rc = 0;
    if (opts.show_help || opts.mountpoint == NULL) {
        printf("usage: %s MOUNTPOINT [-f] [-s] [-d] [-o options]\n"
               "An in-memory FUSE filesystem that does no work (fsync is a no-op),\n"
               "with libfuse's default request pattern: the FUSE ceiling.\n\n"
               "    -o log=PATH     durable mode: log every change to PATH, fsync syncs it\n"
               "    -o log_mb=N     size of that log's ring (default 64 MiB)\n"
               "    -o uring=MODE   off (default), auto or on: serve over FUSE's io_uring\n"
               "    -o attr_timeout=SEC  attribute timeout (default 1)\n\n",
               argv[0]);
        if (opts.show_help) {
            fuse_cmdline_help();
            fuse_lowlevel_help();
        }
        rc = opts.show_help ? 0 : 1;
    } else if (opts.show_version) {
        printf("FUSE library version %s\n", fuse_pkgversion());
        fuse_lowlevel_version();
    } else {
        nowork fs;
        rc = nowork_init(&fs) != 0 || fuse_opt_add_arg(&args, "-ofsname=nowork-fs") != 0 ||
             open_log(&lo, &fs) != 0;
        if (rc == 0)
            rc = run(&args, &opts, &fs, mode);
        nowork_free(&fs);
    }
    free(opts.mountpoint);
    free(lo.path);
    free(lo.uring);
    fuse_opt_free_args(&args);
    return rc;
}
