/*
 * op_dir.c — opendir, readdir, readdirplus, releasedir, fsyncdir.
 *
 * Offsets: "." is returned with next offset 1, ".." with 2, and an entry
 * with cookie c (>= SCHEMA_FIRST_COOKIE) with c + 1; a listing at offset o
 * resumes with the entries whose cookie is >= o. Cookies only grow, so an
 * offset stays meaningful however the directory changes in between.
 */
#include "storeio.h"
#include "dir.h"
#include "inode.h"
#include "ops.h"
#include "lsm_malloc.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The listing-cache rule, all of it here. d->listed_seq is d's seq when a
 * listing of it from offset 0 last started, or 0. Every commit that changes
 * d's entries raises d->seq (fs_commit stamps the directory: storeio.h), so
 * listed_seq == seq says d was listed from the start and has not changed
 * since; opendir then lets the kernel cache the listing. listed_seq only
 * takes values seq had, and seq only grows: listed_seq <= seq (asserted;
 * test_listing_cached_from_second). */
static void listing_started(inode *d)
{
    atomic_store(&d->listed_seq, atomic_load(&d->seq));
}

static bool listed_unchanged(inode *d)
{
    uint64_t listed = atomic_load(&d->listed_seq);
    uint64_t seq = atomic_load(&d->seq);
    assert(listed <= seq);
    return listed != 0 && listed == seq;
}

/* The listing-attributes rule, all of it here. A READDIRPLUS entry for an
 * inode the kernel does not hold goes with its attributes (its record
 * loaded, if not cached) only while st->list_attrs, a credit of entries,
 * lasts; else it goes plain if the record is not cached (node id 0: the
 * kernel looks the name up if it wants it). A LOOKUP of a file that is not
 * a directory refills the credit: ls -l, du, rsync and tar stat every file
 * they list, and get attributes with the listing again after one plain
 * stretch; find, wanting names and descending by d_type, looks up
 * directories only, and its listings read no file's record. A mount starts
 * without credit. */
#define LIST_ATTRS_CREDIT 65536u

void op_listing_wants_attrs(ops_state *st)
{
    if (atomic_load_explicit(&st->list_attrs, memory_order_relaxed) < LIST_ATTRS_CREDIT / 2)
        atomic_store_explicit(&st->list_attrs, LIST_ATTRS_CREDIT, memory_order_relaxed);
}

/* Takes one entry's credit; false when none is left. */
static bool take_attrs_credit(ops_state *st)
{
    uint64_t c = atomic_load_explicit(&st->list_attrs, memory_order_relaxed);
    while (c > 0 && !atomic_compare_exchange_weak_explicit(&st->list_attrs, &c, c - 1,
                                                           memory_order_relaxed,
                                                           memory_order_relaxed))
        ;
    return c > 0;
}

/* Handles carry no state (offsets are cookies). What opendir decides is
 * whether the kernel keeps the listing in its page cache: filling that
 * cache slows the first listing (docs/decisions.md, "Listing cache"), which
 * only pays if the directory is listed again before it changes. So the kernel fills its cache during the second listing of
 * an unchanged directory, and the listings after that read it. */
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[OP_OPENDIR]);
    inode *d = op_pin(req, fs, ino, 0);
    if (d == NULL)
        return;
    bool again = listed_unchanged(d);
    icache_put(fs->icache, d);
    fi->fh = 0;
    fi->cache_readdir = again;
    fi->keep_cache = again;
    fuse_reply_open(req, fi);
}

typedef struct listing {
    fuse_req_t req;
    ops_state *st;
    lsmfs *fs;
    uint64_t dir; /* the directory listed */
    bool plus;
    char *buf;
    size_t size, pos;
    int err;
} listing;

/* Adds one entry; returns false when it did not fit. */
static bool add(listing *l, const char *name, uint64_t ino, uint8_t type, uint64_t next_off,
                inode *n)
{
    size_t room = l->size - l->pos;
    size_t used;
    if (!l->plus) {
        struct stat st = {.st_ino = ino, .st_mode = (mode_t)type << 12};
        used = fuse_add_direntry(l->req, l->buf + l->pos, room, name, &st, (off_t)next_off);
    } else {
        struct fuse_entry_param e;
        if (n != NULL) {
            inode_rec r;
            op_read_rec(n, &r);
            op_fill_entry(l->fs, ino, &r, &e);
        } else { /* ".", ".." and known inodes: no attributes, no reference */
            memset(&e, 0, sizeof e);
            e.attr.st_ino = ino;
            e.attr.st_mode = (mode_t)type << 12;
        }
        used = fuse_add_direntry_plus(l->req, l->buf + l->pos, room, name, &e, (off_t)next_off);
        if (used <= room && n != NULL)
            icache_lookup_inc(l->fs->icache, n, l->dir, name, S_ISDIR(e.attr.st_mode));
    }
    if (used > room)
        return false;
    l->pos += used;
    return true;
}

/* An entry whose inode is not in the store: gone since the listing's
 * snapshot (skip it: 0), or a damaged directory (EIO, logged), which must
 * not read as a shorter listing. */
static int missing_inode(listing *l, const char *name, uint64_t ino)
{
    dirent_val now;
    int err = dir_lookup(l->fs, l->dir, name, &now);
    if (err == ENOENT || (err == 0 && now.ino != ino))
        return 0;
    if (err == 0) {
        fuse_log(FUSE_LOG_ERR, "lsmfs: directory %llu: entry %s names inode %llu, which is missing\n",
                 (unsigned long long)l->dir, name, (unsigned long long)ino);
        err = EIO;
    }
    return err;
}

static int visit(void *ctx, uint64_t cookie, uint64_t ino, uint8_t type, const char *name,
                 size_t nlen, uint32_t hint)
{
    listing *l = ctx;
    char cname[SCHEMA_NAME_MAX + 1];
    memcpy(cname, name, nlen);
    cname[nlen] = '\0';
    /* The plain entry for an inode the kernel holds costs it no dentry and
     * inode work and hands out no reference (dir.h's told rule). */
    inode *n = NULL;
    if (l->plus && !dir_kernel_holds(l->fs, ino, hint) &&
        (n = icache_get_cached(l->fs->icache, ino)) == NULL && take_attrs_credit(l->st)) {
        int err = icache_get(l->fs, ino, &n);
        if (err == ENOENT)
            err = missing_inode(l, cname, ino);
        if (err == 0 && n == NULL)
            return 0;
        if (err != 0) {
            l->err = err;
            return 1;
        }
    }
    bool fit = add(l, cname, ino, type, cookie + 1, n);
    icache_put(l->fs->icache, n);
    return fit ? 0 : 1;
}

static void list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    lsmfs *fs = op_fs(req);
    stats_inc(&fs->stats.ops[plus ? OP_READDIRPLUS : OP_READDIR]);
    inode *d = op_pin(req, fs, ino, off < 0 ? EINVAL : 0);
    if (d == NULL)
        return;
    int err = 0;
    inode_rec r;
    op_read_rec(d, &r);
    listing l = {.req = req, .st = op_state(req), .fs = fs, .dir = ino, .plus = plus,
                 .size = size};
    if (!S_ISDIR(r.mode) || (l.buf = lsm_malloc(size)) == NULL) {
        fuse_reply_err(req, S_ISDIR(r.mode) ? ENOMEM : ENOTDIR);
        icache_put(fs->icache, d);
        return;
    }
    if (off == 0)
        listing_started(d);
    uint64_t parent = ino == SCHEMA_ROOT_INO ? ino : r.parent;
    bool fit = true;
    if (off < 1)
        fit = add(&l, ".", ino, S_IFDIR >> 12, 1, NULL);
    if (fit && off < 2)
        fit = add(&l, "..", parent, S_IFDIR >> 12, 2, NULL);
    uint64_t from = (uint64_t)off < SCHEMA_FIRST_COOKIE ? SCHEMA_FIRST_COOKIE : (uint64_t)off;
    if (fit)
        err = dir_list(fs, d, from, size - l.pos, visit, &l);
    icache_put(fs->icache, d);
    if (err == 0)
        err = l.err;
    /* Entries already packed were counted as lookups: send them even when
     * the scan failed part way, unless nothing was packed. */
    if (err != 0 && l.pos == 0)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, l.buf, l.pos);
    free(l.buf);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    list(req, ino, size, off, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    list(req, ino, size, off, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    stats_inc(&op_fs(req)->stats.ops[OP_RELEASEDIR]);
    fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)datasync;
    (void)fi;
    stats_inc(&op_fs(req)->stats.ops[OP_FSYNCDIR]);
    op_sync_inode(req, ino);
}
