/*
 * fsck.c — checking and repairing an unmounted lsmfs store (the engine of
 * fsck.lsmfs; see fsck.h).
 *
 * The check reads every key once, in two passes: inodes first (so the rest
 * can be checked against them), then entries, chunks, xattrs and orphan
 * marks. It then walks the tree from the root for reachability and compares
 * link counts, entry counts and cookies with what the entries say. Repairs
 * go into batches written at the end, the last one synchronously.
 */
#include "fsck.h"

#include "grow.h"
#include "icount.h"
#include "lsm.h"
#include "orphan.h"
#include "schema.h"
#include "store_open.h"
#include "super.h"
#include "xattr.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOST_FOUND "lost+found"

typedef struct ino_info {
    uint64_t ino;
    inode_rec rec;
    bool dirty;       /* rec changed by a repair: rewrite it */
    bool deleted;     /* record removed by a repair */
    bool orphan_mark; /* an 'O' key exists */
    bool has_xattrs;  /* 'X' keys exist */
    bool reachable;
    uint32_t refs;    /* entries naming it */
    uint32_t subdirs; /* directories: child directories */
    uint64_t entries; /* directories: entries */
    uint64_t max_cookie;
    uint64_t named_by; /* directories: the first parent whose entry names it */
    size_t plen;       /* the record's payload bytes */
    bool inline_key;   /* an 'L' key exists (kept by a repair) */
    uint64_t chunks;   /* chunk keys kept (not deleted by a repair) */
} ino_info;

typedef struct entry {
    uint64_t parent, ino, cookie;
    uint8_t type;
    bool dropped;
    char name[SCHEMA_NAME_MAX + 1];
} entry;

typedef struct fsck {
    lsm_db *db;
    const lsm_snapshot *snap; /* fsck_live: every read as of it; else NULL */
    bool skip_tables;         /* fsck_live: the tables are checked level by level */
    const char *dir;
    schema_super sb;
    bool repair, verbose, progress;
    int errors, fixed;
    ino_info *inodes;
    size_t ninodes;
    entry *entries;
    size_t nentries, centries;
    FILE *out;      /* where problems are reported */
    lsm_batch *fix; /* pending repairs */
    uint64_t keys;  /* keys scanned */
    size_t ikeys;   /* inode keys, damaged ones too (what icount.h counts) */
    int unfixed;    /* problems no repair can fix (damaged tables); no repair is written */
    bool op_error;
    bool no_memory; /* op_error for lack of memory (out_of_memory) */
    /* The progress line: table bytes of the prefixes scanned so far, of
     * all tables, when the check began and when the line was last drawn. */
    uint64_t bytes_before, total_bytes;
    double started, drawn;
    bool drew;
    /* Inodes the log records recovery did not apply touched (sorted,
     * unique; the first LOST_INODES_MAX of them), and how many in all. */
    uint64_t lost_inodes[256];
    size_t nlost, lost_total;
} fsck;

#define LOST_INODES_MAX 256

/* The action a problem message ends with (": fixing it", ": deleting it"):
 * every message is "<what is wrong>: <what -y does>", and without -y the
 * action is left out. NULL when the message names none. */
static const char *repair_action(const char *msg)
{
    const char *colon = strrchr(msg, ':');
    if (colon == NULL || colon[1] != ' ')
        return NULL;
    const char *word = colon + 2, *end = strpbrk(word, " )");
    size_t n = end ? (size_t)(end - word) : strlen(word);
    return n > 3 && strncmp(word + n - 3, "ing", 3) == 0 ? colon : NULL;
}

static void problem(fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(fsck *f, const char *fmt, ...)
{
    f->errors++;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *action = repair_action(msg);
    if (f->repair)
        fprintf(f->out, "fixing: %s\n", msg);
    else
        fprintf(f->out, "error: %.*s\n", action ? (int)(action - msg) : (int)strlen(msg), msg);
}

/* A problem fsck cannot repair: reported as an error even with -y, and the
 * check ends with FSCK_UNFIXED, writing no repair. */
static void unfixable(fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void unfixable(fsck *f, const char *fmt, ...)
{
    f->errors++;
    f->unfixed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(f->out, "error: ");
    vfprintf(f->out, fmt, ap);
    fprintf(f->out, "\n");
    va_end(ap);
}

/* Ends the check as an operational error: nothing found wrong, nothing
 * checked from here on, no verdict (res->no_memory). */
static void out_of_memory(fsck *f, const char *what)
{
    fprintf(stderr, "fsck.lsmfs: %s: out of memory\n", what);
    f->op_error = true;
    f->no_memory = true;
}

/* A read of the store that failed: out of memory ends the check as an
 * operational error (nothing was found wrong); anything else is damage
 * that fsck cannot repair. */
static void read_failed(fsck *f, const char *what, const lsm_status *s)
{
    if (lsm_status_code(s) == LSM_NO_MEMORY) {
        out_of_memory(f, what);
    } else {
        unfixable(f, "%s: %s", what, lsm_status_message(s));
    }
}

static double now_s(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Redraws the progress line (at most twice a second): inodes and entries
 * checked, table bytes read of all, and the time left at the rate so far. */
static void draw_progress(fsck *f, const char *key, size_t klen)
{
    double t = now_s();
    if (t - f->drawn < 0.5)
        return;
    f->drawn = t;
    uint64_t done = f->bytes_before + lsm_approximate_size(f->db, key, 1, key, klen);
    if (done > f->total_bytes)
        done = f->total_bytes;
    double rate = (double)done / (t - f->started);
    double eta = rate > 0 ? (double)(f->total_bytes - done) / rate : 0;
    fprintf(stderr,
            "\rfsck.lsmfs: %zu inodes, %zu entries, %" PRIu64 " of %" PRIu64
            " MiB read, ETA %.0f s   ",
            f->ninodes, f->nentries, done >> 20, f->total_bytes >> 20, eta);
    fflush(stderr);
    f->drew = true;
}

static void tick(fsck *f, const char *key, size_t klen)
{
    if (++f->keys % 1024 == 0 && f->progress)
        draw_progress(f, key, klen);
}

/* Read options for every read of the check: as of f->snap. */
static void read_opts(const fsck *f, lsm_read_options *ro)
{
    lsm_read_options_init(ro);
    ro->snapshot = f->snap;
}

/* ------------------------------------------------------------- repairs */

static void fix_put(fsck *f, const schema_key *k, const void *v, size_t vlen)
{
    if (f->repair && !lsm_batch_put(f->fix, k->b, k->len, v, vlen))
        out_of_memory(f, "a repair");
}

static void fix_del(fsck *f, const char *k, size_t klen)
{
    if (f->repair && !lsm_batch_delete(f->fix, k, klen))
        out_of_memory(f, "a repair");
}

/* Writes the pending repairs (sync when last). */
static void fix_flush(fsck *f, bool sync)
{
    if (!f->repair || f->op_error || f->unfixed)
        return;
    if (lsm_batch_count(f->fix) == 0 && !sync)
        return;
    lsm_write_options wo = {.sync = sync};
    lsm_status *s = lsm_write(f->db, &wo, f->fix);
    if (s != NULL) {
        fprintf(stderr, "fsck.lsmfs: writing repairs: %s\n", lsm_status_message(s));
        lsm_status_free(s);
        f->op_error = true;
    }
    lsm_batch_clear(f->fix);
}

/* ------------------------------------------------------------- lookups */

static ino_info *find_ino(fsck *f, uint64_t ino)
{
    size_t lo = 0, hi = f->ninodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->inodes[mid].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < f->ninodes && f->inodes[lo].ino == ino && !f->inodes[lo].deleted)
        return &f->inodes[lo];
    return NULL;
}

static bool is_dir(const ino_info *i)
{
    return S_ISDIR(i->rec.mode);
}

/* ---------------------------------------------------------- pass 1: I */

static bool push_inode(fsck *f, uint64_t ino, const inode_rec *r, size_t plen, size_t *cap)
{
    ino_info *n = lsm_grow(f->inodes, cap, f->ninodes + 1, sizeof *n, 1024);
    if (n == NULL)
        return false;
    f->inodes = n;
    f->inodes[f->ninodes++] = (ino_info){.ino = ino, .rec = *r, .plen = plen};
    return true;
}

static bool type_valid(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK:
        return true;
    default:
        return false;
    }
}

static void check_inode_record(fsck *f, const char *key, size_t klen, const char *v, size_t vlen,
                               size_t *cap)
{
    uint64_t ino;
    inode_rec r;
    const char *p;
    size_t plen;
    f->ikeys++;
    if (!key_parse_ino(key, klen, K_INODE, &ino) || ino == 0) {
        problem(f, "malformed inode key: deleting it");
        fix_del(f, key, klen);
        return;
    }
    if (!inode_decode(v, vlen, &r, &p, &plen) || !type_valid(r.mode)) {
        problem(f, "inode %" PRIu64 ": damaged record: deleting it", ino);
        fix_del(f, key, klen);
        return;
    }
    (void)p;
    if (!push_inode(f, ino, &r, plen, cap))
        out_of_memory(f, "the inode table");
}

static int scan_prefix(fsck *f, char kind,
                       void (*fn)(fsck *, const char *, size_t, const char *, size_t, void *),
                       void *ctx)
{
    lsm_read_options ro;
    read_opts(f, &ro);
    ro.fill_cache = false;
    ro.verify_checksums = true;
    lsm_iter *it = lsm_iter_new(f->db, &ro);
    if (it == NULL) {
        out_of_memory(f, "reading the store");
        return ENOMEM;
    }
    char prefix = kind;
    for (lsm_iter_seek(it, &prefix, 1); lsm_iter_valid(it) && !f->op_error; lsm_iter_next(it)) {
        size_t klen, vlen;
        const char *k = lsm_iter_key(it, &klen);
        if (klen == 0 || k[0] != kind)
            break;
        const char *v = lsm_iter_value(it, &vlen);
        tick(f, k, klen);
        fn(f, k, klen, v, vlen, ctx);
    }
    lsm_status *s = lsm_iter_status(it);
    int err = 0;
    if (s != NULL) {
        read_failed(f, "reading the store", s);
        err = EIO;
    }
    lsm_status_free(s);
    lsm_iter_free(it);
    char next = (char)(kind + 1);
    f->bytes_before += lsm_approximate_size(f->db, &prefix, 1, &next, 1);
    return err;
}

static void inode_cb(fsck *f, const char *k, size_t kl, const char *v, size_t vl, void *ctx)
{
    check_inode_record(f, k, kl, v, vl, ctx);
}

/* ------------------------------------------------------ pass 2: D and C */

static void dirent_cb(fsck *f, const char *k, size_t klen, const char *v, size_t vlen, void *ctx)
{
    (void)ctx;
    uint64_t parent;
    const char *name;
    size_t nlen;
    dirent_val d;
    if (!key_parse_dirent(k, klen, &parent, &name, &nlen) || memchr(name, '/', nlen) ||
        memchr(name, 0, nlen) || (nlen == 1 && name[0] == '.') ||
        (nlen == 2 && name[0] == '.' && name[1] == '.')) {
        problem(f, "malformed directory entry key: deleting it");
        fix_del(f, k, klen);
        return;
    }
    if (!dirent_decode(v, vlen, &d)) {
        problem(f, "directory %" PRIu64 ": entry '%.*s' damaged: deleting it", parent, (int)nlen,
                name);
        fix_del(f, k, klen);
        return;
    }
    entry *n = lsm_grow(f->entries, &f->centries, f->nentries + 1, sizeof *n, 1024);
    if (n == NULL) {
        out_of_memory(f, "the entry table");
        return;
    }
    f->entries = n;
    entry *e = &f->entries[f->nentries++];
    *e = (entry){.parent = parent, .ino = d.ino, .cookie = d.cookie, .type = d.type};
    memcpy(e->name, name, nlen);
    e->name[nlen] = '\0';
}

static void put_entry(fsck *f, const entry *e)
{
    schema_key k;
    size_t nlen = strlen(e->name);
    key_dirent(&k, e->parent, e->name, nlen);
    char dv[DIRENT_VAL_LEN];
    dirent_encode(&(dirent_val){.ino = e->ino, .type = e->type, .cookie = e->cookie}, dv);
    fix_put(f, &k, dv, sizeof dv);
    char cv[COOKIE_VAL_HDR + SCHEMA_NAME_MAX];
    size_t cvlen = cookie_encode(e->ino, e->type, e->name, nlen, cv);
    key_cookie(&k, e->parent, e->cookie);
    fix_put(f, &k, cv, cvlen);
}

static void drop_entry(fsck *f, entry *e)
{
    schema_key k;
    key_dirent(&k, e->parent, e->name, strlen(e->name));
    fix_del(f, k.b, k.len);
    key_cookie(&k, e->parent, e->cookie);
    fix_del(f, k.b, k.len);
    e->dropped = true;
}

/* Checks one entry against the inodes; counts the references it makes. */
static void check_entry(fsck *f, entry *e)
{
    ino_info *p = find_ino(f, e->parent), *c = find_ino(f, e->ino);
    if (p == NULL || !is_dir(p)) {
        problem(f, "entry '%s' in %" PRIu64 ": parent is not a directory: dropping it", e->name,
                e->parent);
        drop_entry(f, e);
        return;
    }
    if (c == NULL || c->ino == SCHEMA_ROOT_INO) {
        problem(f, "entry '%s' in %" PRIu64 ": points to %s inode %" PRIu64 ": dropping it",
                e->name, e->parent, c ? "the root" : "missing", e->ino);
        drop_entry(f, e);
        return;
    }
    if (is_dir(c) && c->refs > 0) {
        problem(f, "directory %" PRIu64 " has a second name '%s' in %" PRIu64 ": dropping it",
                c->ino, e->name, e->parent);
        drop_entry(f, e);
        return;
    }
    uint8_t type = (uint8_t)((c->rec.mode & S_IFMT) >> 12);
    if (e->type != type) {
        problem(f, "entry '%s' in %" PRIu64 ": wrong type: fixing it", e->name, e->parent);
        e->type = type;
        put_entry(f, e);
    }
    c->refs++;
    if (is_dir(c)) {
        c->named_by = p->ino;
        p->subdirs++;
    }
    p->entries++;
    if (e->cookie > p->max_cookie)
        p->max_cookie = e->cookie;
}

static int cmp_entry_cookie(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

static entry *find_by_cookie(fsck *f, uint64_t parent, uint64_t cookie)
{
    entry key = {.parent = parent, .cookie = cookie};
    if (f->nentries == 0)
        return NULL;
    return bsearch(&key, f->entries, f->nentries, sizeof *f->entries, cmp_entry_cookie);
}

/* Entries sharing a cookie in one directory: all but the first get fresh
 * cookies. REQUIRES: entries sorted by (parent, cookie). */
static void check_cookie_clashes(fsck *f)
{
    for (size_t i = 1; i < f->nentries; i++) {
        entry *a = &f->entries[i - 1], *b = &f->entries[i];
        if (a->parent == b->parent && a->cookie == b->cookie) {
            problem(f, "entries '%s' and '%s' in %" PRIu64 " share a cookie: dropping '%s'",
                    a->name, b->name, b->parent, b->name);
            schema_key k;
            key_dirent(&k, b->parent, b->name, strlen(b->name));
            fix_del(f, k.b, k.len);
            b->dropped = true;
        }
    }
}

static void cookie_cb(fsck *f, const char *k, size_t klen, const char *v, size_t vlen, void *ctx)
{
    (void)ctx;
    uint64_t parent, cookie, ino;
    uint8_t type;
    const char *name;
    size_t nlen;
    if (!key_parse_cookie(k, klen, &parent, &cookie) ||
        !cookie_decode(v, vlen, &ino, &type, &name, &nlen)) {
        problem(f, "damaged readdir index key: deleting it");
        fix_del(f, k, klen);
        return;
    }
    entry *e = find_by_cookie(f, parent, cookie);
    if (e == NULL || e->dropped || e->ino != ino || strlen(e->name) != nlen ||
        memcmp(e->name, name, nlen) != 0) {
        problem(f, "directory %" PRIu64 ": stale readdir index for cookie %" PRIu64 ": deleting it",
                parent, cookie);
        fix_del(f, k, klen);
        return;
    }
    e->type |= 0x80; /* indexed; the bit is cleared by check_indexed */
}

/* Every live entry must have its 'C' index key. */
static void check_indexed(fsck *f)
{
    for (size_t i = 0; i < f->nentries; i++) {
        entry *e = &f->entries[i];
        bool indexed = (e->type & 0x80) != 0;
        e->type &= 0x7f;
        if (!indexed && !e->dropped) {
            problem(f, "entry '%s' in %" PRIu64 ": missing readdir index: adding it", e->name,
                    e->parent);
            put_entry(f, e);
        }
    }
}

/* ------------------------------------------------- pass 2: F, X, O keys */

static void chunk_cb(fsck *f, const char *k, size_t klen, const char *v, size_t vlen, void *ctx)
{
    (void)ctx;
    uint64_t ino, idx;
    if (!key_parse_chunk(k, klen, &ino, &idx)) {
        problem(f, "malformed chunk key: deleting it");
        fix_del(f, k, klen);
        return;
    }
    ino_info *i = find_ino(f, ino);
    uint64_t cs = f->sb.chunk_size;
    if (i == NULL || !S_ISREG(i->rec.mode) || (i->rec.flags & INODE_F_INLINE)) {
        problem(f, "stray chunk %" PRIu64 " of inode %" PRIu64 " (%s): deleting it", idx, ino,
                i == NULL ? "no such inode" : "not a chunked file");
        fix_del(f, k, klen);
        return;
    }
    if (vlen > cs || idx >= i->rec.size / cs + 1 || idx * cs >= i->rec.size) {
        problem(f, "chunk %" PRIu64 " of inode %" PRIu64 " lies beyond its size: deleting it", idx,
                ino);
        fix_del(f, k, klen);
        return;
    }
    i->chunks++;
    if (idx * cs + vlen > i->rec.size) {
        problem(f, "chunk %" PRIu64 " of inode %" PRIu64 " runs past the file size: trimming", idx,
                ino);
        schema_key key;
        key_chunk(&key, ino, idx);
        fix_put(f, &key, v, (size_t)(i->rec.size - idx * cs));
    }
}

/* An 'L' key: the bytes of an inline file whose record says they are
 * apart (schema.h's inode_bytes_apart), within its size. */
static void inline_cb(fsck *f, const char *k, size_t klen, const char *v, size_t vlen, void *ctx)
{
    (void)ctx;
    uint64_t ino;
    if (!key_parse_ino(k, klen, K_INLINE, &ino)) {
        problem(f, "malformed inline data key: deleting it");
        fix_del(f, k, klen);
        return;
    }
    ino_info *i = find_ino(f, ino);
    if (i == NULL || !inode_has_inline_key(&i->rec)) {
        problem(f, "stray inline data of inode %" PRIu64 " (%s): deleting it", ino,
                i == NULL                    ? "no such inode"
                : inode_bytes_apart(&i->rec) ? "an empty file"
                                             : "not a file with its inline data apart");
        fix_del(f, k, klen);
        return;
    }
    i->inline_key = true;
    size_t lim = inode_inline_max(&i->rec, f->sb.inline_limit);
    if (vlen > lim) {
        problem(f, "inline data of inode %" PRIu64 " runs past the file size: trimming it", ino);
        schema_key key;
        key_inline(&key, ino);
        fix_put(f, &key, v, lim);
    }
}

static void xattr_cb(fsck *f, const char *k, size_t klen, const char *v, size_t vlen, void *ctx)
{
    (void)ctx;
    (void)v;
    (void)vlen;
    uint64_t ino;
    const char *name;
    size_t nlen;
    ino_info *i = NULL;
    if (!key_parse_xattr(k, klen, &ino, &name, &nlen) || (i = find_ino(f, ino)) == NULL) {
        problem(f, "extended attribute of a missing inode: deleting it");
        fix_del(f, k, klen);
        return;
    }
    if (!xattr_stored_name_kept(name, nlen)) {
        problem(f,
                "inode %" PRIu64 ": extended attribute '%.*s' is in no namespace lsmfs keeps: "
                "deleting it",
                ino, (int)(nlen < 64 ? nlen : 64), name);
        fix_del(f, k, klen);
        return;
    }
    i->has_xattrs = true;
}

static void orphan_cb(fsck *f, const char *k, size_t klen, const char *v, size_t vlen, void *ctx)
{
    (void)ctx;
    (void)v;
    (void)vlen;
    uint64_t ino;
    ino_info *i = NULL;
    if (!key_parse_ino(k, klen, K_ORPHAN, &ino) || (i = find_ino(f, ino)) == NULL) {
        problem(f, "stale orphan mark: deleting it");
        fix_del(f, k, klen);
        return;
    }
    i->orphan_mark = true; /* a name found for it unmarks it */
}

/* Keys of kinds lsmfs does not write. */
static int check_unknown_kinds(fsck *f)
{
    lsm_read_options ro;
    read_opts(f, &ro);
    ro.fill_cache = false;
    lsm_iter *it = lsm_iter_new(f->db, &ro);
    if (it == NULL) {
        out_of_memory(f, "reading the store");
        return ENOMEM;
    }
    lsm_iter_seek_first(it);
    while (lsm_iter_valid(it)) {
        size_t klen;
        const char *k = lsm_iter_key(it, &klen);
        char kind = klen ? k[0] : 0;
        if (klen == 0 || !schema_kind_known(kind)) {
            problem(f, "key of unknown kind 0x%02x: deleting it", (unsigned char)kind);
            fix_del(f, k, klen);
            lsm_iter_next(it);
            continue;
        }
        /* Skip the rest of this kind. */
        char next = (char)(kind + 1);
        lsm_iter_seek(it, &next, 1);
    }
    lsm_status *s = lsm_iter_status(it);
    int err = s ? EIO : 0;
    if (s != NULL)
        read_failed(f, "reading the store", s);
    lsm_status_free(s);
    lsm_iter_free(it);
    return err;
}

/* A current inode count record (icount.h) equals the inode keys; a stale
 * one is no problem (the next mount counts). */
static void check_icount(fsck *f, bool current, uint64_t count)
{
    if (!current || count == f->ikeys)
        return;
    problem(f, "inode count record says %" PRIu64 ", the store holds %zu: deleting it", count,
            f->ikeys);
    schema_key k;
    key_icount(&k);
    fix_del(f, k.b, k.len);
}

/* ------------------------------------------------ reachability, repairs */

static size_t first_entry_of(fsck *f, uint64_t parent)
{
    size_t lo = 0, hi = f->nentries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->entries[mid].parent < parent)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Marks everything reachable from dir. REQUIRES: entries sorted. */
static void walk(fsck *f, uint64_t start)
{
    size_t cap = 0, len = 0;
    uint64_t *stack = lsm_grow(NULL, &cap, 1, sizeof *stack, 64);
    if (stack == NULL) {
        out_of_memory(f, "the walk from the root");
        return;
    }
    stack[len++] = start;
    while (len > 0 && !f->op_error) {
        uint64_t d = stack[--len];
        for (size_t i = first_entry_of(f, d); i < f->nentries && f->entries[i].parent == d; i++) {
            entry *e = &f->entries[i];
            ino_info *c = e->dropped ? NULL : find_ino(f, e->ino);
            if (c == NULL || c->reachable)
                continue;
            c->reachable = true;
            if (!is_dir(c))
                continue;
            uint64_t *n = lsm_grow(stack, &cap, len + 1, sizeof *n, 64);
            if (n == NULL) {
                out_of_memory(f, "the walk from the root");
                break;
            }
            stack = n;
            stack[len++] = c->ino;
        }
    }
    free(stack);
}

static uint64_t next_ino(fsck *f, uint64_t *alloc_next)
{
    uint64_t max = f->ninodes ? f->inodes[f->ninodes - 1].ino : SCHEMA_ROOT_INO;
    if (*alloc_next <= max)
        *alloc_next = max + 1;
    return (*alloc_next)++;
}

/* Adds an entry to dir d (in memory and in the repair batch). */
static void add_entry(fsck *f, ino_info *d, const char *name, ino_info *c)
{
    entry e = {.parent = d->ino,
               .ino = c->ino,
               .cookie = d->rec.next_cookie++,
               .type = (uint8_t)((c->rec.mode & S_IFMT) >> 12)};
    snprintf(e.name, sizeof e.name, "%s", name);
    put_entry(f, &e);
    d->entries++;
    d->dirty = true;
    if (is_dir(c)) {
        d->subdirs++;
        c->rec.parent = d->ino;
        c->named_by = d->ino;
    }
    c->refs++;
    c->dirty = true;
}

/* Finds or makes /lost+found. NULL if it cannot be had. */
static ino_info *lost_found(fsck *f, uint64_t *alloc_next)
{
    ino_info *root = find_ino(f, SCHEMA_ROOT_INO);
    for (size_t i = first_entry_of(f, SCHEMA_ROOT_INO);
         i < f->nentries && f->entries[i].parent == SCHEMA_ROOT_INO; i++) {
        entry *e = &f->entries[i];
        ino_info *c = e->dropped ? NULL : find_ino(f, e->ino);
        if (c != NULL && is_dir(c) && strcmp(e->name, LOST_FOUND) == 0)
            return c;
    }
    /* Make it: appended to the sorted inode array (its number is the
     * largest), so lookups keep working. */
    size_t cap = f->ninodes;
    uint64_t ino = next_ino(f, alloc_next);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ts t = {.sec = now.tv_sec, .nsec = (uint32_t)now.tv_nsec};
    inode_rec r = {.mode = S_IFDIR | 0700,
                   .nlink = 2,
                   .generation = 1,
                   .atime = t,
                   .mtime = t,
                   .ctime = t,
                   .next_cookie = SCHEMA_FIRST_COOKIE};
    if (!push_inode(f, ino, &r, 0, &cap)) {
        out_of_memory(f, "the inode table");
        return NULL;
    }
    root = find_ino(f, SCHEMA_ROOT_INO); /* the array may have moved */
    ino_info *lf = find_ino(f, ino);
    lf->reachable = true;
    fprintf(f->out, "%s: creating /%s\n", f->repair ? "fixing" : "would fix", LOST_FOUND);
    add_entry(f, root, LOST_FOUND, lf);
    return lf;
}

/* An inode without names the daemon still has to free: no entry names it
 * and its links are gone (marked, or with no link left). */
static bool is_orphan(const ino_info *i)
{
    return i->refs == 0 && orphan_nlink(&i->rec, i->orphan_mark) == 0;
}

/* Reconnects unreachable linked inodes under /lost+found as "#ino". */
static void reconnect(fsck *f, uint64_t *alloc_next)
{
    for (size_t i = 0; i < f->ninodes; i++) {
        ino_info *c = &f->inodes[i];
        if (c->deleted || c->reachable || c->ino == SCHEMA_ROOT_INO || is_orphan(c))
            continue;
        if (c->refs > 0 && !is_dir(c))
            continue; /* named from an unreachable directory: follows it */
        if (c->refs > 0) {
            /* A directory named from an unreachable place: its name is cut
             * (it may be a cycle) and it is reconnected itself. */
            for (size_t j = 0; j < f->nentries; j++) {
                entry *e = &f->entries[j];
                if (!e->dropped && e->ino == c->ino) {
                    drop_entry(f, e);
                    ino_info *p = find_ino(f, e->parent);
                    if (p != NULL) {
                        p->entries--;
                        p->subdirs--;
                    }
                }
            }
            c->refs = 0;
        }
        problem(f, "inode %" PRIu64 " is not reachable: reconnecting it to /%s", c->ino,
                LOST_FOUND);
        ino_info *lf = lost_found(f, alloc_next);
        if (lf == NULL)
            return;
        c = find_ino(f, f->inodes[i].ino); /* the array may have moved */
        char name[32];
        snprintf(name, sizeof name, "#%" PRIu64, c->ino);
        add_entry(f, lf, name, c);
        c->reachable = true;
        if (is_dir(c))
            walk(f, c->ino);
        else /* other names it had are gone */
            c->refs = 1;
    }
}

/* Link counts, entry counts, cookies, parents, payloads. */
static void check_counts(fsck *f, ino_info *i)
{
    inode_rec *r = &i->rec;
    if (is_orphan(i)) {
        if (!i->orphan_mark) {
            problem(f, "inode %" PRIu64 ": unlinked but not marked orphan: marking it", i->ino);
            schema_key k;
            key_orphan(&k, i->ino);
            fix_put(f, &k, "", 0);
        }
        return;
    }
    if (i->orphan_mark && i->refs > 0) {
        problem(f, "inode %" PRIu64 ": marked orphan but still named: unmarking it", i->ino);
        schema_key k;
        key_orphan(&k, i->ino);
        fix_del(f, k.b, k.len);
    }
    uint32_t want = is_dir(i) ? 2 + i->subdirs : i->refs;
    if (i->ino == SCHEMA_ROOT_INO && !is_dir(i)) {
        problem(f, "the root inode is not a directory (cannot repair)");
        f->op_error = true;
        return;
    }
    if (r->nlink != want) {
        problem(f, "inode %" PRIu64 ": link count %u, should be %u: fixing it", i->ino, r->nlink,
                want);
        r->nlink = want;
        i->dirty = true;
    }
    if (is_dir(i)) {
        if (r->size != i->entries) {
            problem(f,
                    "directory %" PRIu64 ": entry count %" PRIu64 ", should be %" PRIu64
                    ": fixing it",
                    i->ino, r->size, i->entries);
            r->size = i->entries;
            i->dirty = true;
        }
        uint64_t min_cookie =
            i->max_cookie >= SCHEMA_FIRST_COOKIE ? i->max_cookie + 1 : SCHEMA_FIRST_COOKIE;
        if (r->next_cookie < min_cookie) {
            problem(f, "directory %" PRIu64 ": cookie counter behind its entries: fixing it",
                    i->ino);
            r->next_cookie = min_cookie;
            i->dirty = true;
        }
        uint64_t parent = i->ino == SCHEMA_ROOT_INO ? SCHEMA_ROOT_INO : i->named_by;
        if (r->parent != parent) {
            problem(f,
                    "directory %" PRIu64 ": parent %" PRIu64 ", should be %" PRIu64 ": fixing it",
                    i->ino, r->parent, parent);
            r->parent = parent;
            i->dirty = true;
        }
    }
    if (i->has_xattrs && !(r->flags & INODE_F_XATTR)) {
        problem(f, "inode %" PRIu64 ": has xattrs but no xattr flag: fixing it", i->ino);
        r->flags |= INODE_F_XATTR;
        i->dirty = true;
    }
}

/* The record's chunk count against the chunk keys kept: the keys are the
 * truth (schema.h). A record of version 1 (count unknown) is no problem;
 * when it is rewritten anyway it gets the count. An orphan's is left: the
 * reclaimer deletes its chunks in batches that do not follow the count (the
 * record goes last), so a crash leaves it above the keys. */
static void check_chunk_count(fsck *f, ino_info *i)
{
    inode_rec *r = &i->rec;
    if (is_orphan(i))
        return;
    if (r->chunks == INODE_CHUNKS_UNKNOWN) {
        if (i->dirty)
            r->chunks = i->chunks;
        return;
    }
    if (r->chunks != i->chunks) {
        problem(f, "inode %" PRIu64 ": chunk count %" PRIu64 ", should be %" PRIu64 ": fixing it",
                i->ino, r->chunks, i->chunks);
        r->chunks = i->chunks;
        i->dirty = true;
    }
}

/* The payload an inode's record may keep (schema.h). */
static size_t payload_limit(const fsck *f, const inode_rec *r)
{
    if (S_ISLNK(r->mode))
        return SCHEMA_SYMLINK_MAX;
    if (S_ISREG(r->mode) && (r->flags & INODE_F_INLINE) && !inode_bytes_apart(r))
        return inode_inline_max(r, f->sb.inline_limit);
    return 0;
}

static void check_payload(fsck *f, ino_info *i)
{
    if (i->plen > payload_limit(f, &i->rec)) {
        problem(f, "inode %" PRIu64 ": inline data longer than allowed: trimming it", i->ino);
        i->dirty = true;
    }
    if (inode_has_inline_key(&i->rec) && !i->inline_key) {
        problem(f, "inode %" PRIu64 ": inline data missing (reads as zeros): adding it empty",
                i->ino);
        schema_key k;
        key_inline(&k, i->ino);
        fix_put(f, &k, "", 0);
        i->inline_key = true;
    }
    if (S_ISLNK(i->rec.mode) && (i->plen == 0 || i->rec.size != i->plen)) {
        problem(f, "symlink %" PRIu64 ": size does not match its target: fixing it", i->ino);
        i->rec.size = i->plen;
        i->dirty = true;
    }
}

/* Marks a store of an older format current in the repair batch before
 * the first record of the current version goes into it, as a read-write
 * mount does (super_batch_upgrade). */
static void mark_format(fsck *f)
{
    uint32_t was = f->sb.version;
    if (!f->repair || was >= SCHEMA_VERSION)
        return;
    if (!super_batch_upgrade(f->fix, &f->sb))
        out_of_memory(f, "a repair");
    else
        fprintf(f->out, "fixing: store format %u marked %u: repairs write records of format %u\n",
                was, SCHEMA_VERSION, SCHEMA_VERSION);
}

/* Rewrites a repaired inode record, keeping its (trimmed) payload. */
static void write_inode(fsck *f, ino_info *i)
{
    mark_format(f);
    schema_key k;
    key_inode(&k, i->ino);
    lsm_read_options ro;
    read_opts(f, &ro);
    char *v = NULL;
    size_t vlen = 0;
    const char *p = NULL;
    size_t plen = 0;
    inode_rec old;
    lsm_status *s = lsm_get(f->db, &ro, k.b, k.len, &v, &vlen);
    if (s != NULL && lsm_status_code(s) != LSM_NOT_FOUND) { /* keep a payload not read */
        read_failed(f, "reading an inode record", s);
        lsm_status_free(s);
        free(v);
        return;
    }
    bool found = s == NULL;
    lsm_status_free(s);
    if (found && inode_decode(v, vlen, &old, &p, &plen)) {
        size_t lim = payload_limit(f, &i->rec);
        plen = plen < lim ? plen : lim;
    } else {
        plen = 0;
    }
    char *nv = lsm_malloc(INODE_HDR_MAX + plen);
    if (nv == NULL) {
        out_of_memory(f, "a repair");
    } else {
        size_t hlen = inode_encode_hdr(&i->rec, nv);
        if (plen > 0)
            memcpy(nv + hlen, p, plen);
        fix_put(f, &k, nv, hlen + plen);
    }
    free(nv);
    free(v);
}

/* ----------------------------------------------------------- top level */

static int read_alloc(fsck *f, uint64_t *next)
{
    schema_key k;
    key_alloc(&k);
    lsm_read_options ro;
    read_opts(f, &ro);
    char *v = NULL;
    size_t vlen = 0;
    lsm_status *s = lsm_get(f->db, &ro, k.b, k.len, &v, &vlen);
    int ok = s == NULL && alloc_decode(v, vlen, next);
    if (lsm_status_code(s) == LSM_NO_MEMORY) {
        read_failed(f, "reading the inode allocator record", s);
        *next = 0;
        ok = 1; /* nothing found wrong; op_error ends the check unrepaired */
    }
    lsm_status_free(s);
    free(v);
    if (!ok) {
        problem(f, "inode allocator record missing or damaged: rewriting it");
        *next = 0;
    }
    return ok;
}

static void check_alloc(fsck *f, uint64_t orig, uint64_t next)
{
    uint64_t max = f->ninodes ? f->inodes[f->ninodes - 1].ino : SCHEMA_ROOT_INO;
    if (next <= max) {
        if (orig != 0)
            problem(f, "inode allocator (%" PRIu64 ") behind inode %" PRIu64 ": fixing it", orig,
                    max);
        next = max + 1;
    }
    if (next != orig) {
        char v[SCHEMA_ALLOC_LEN];
        alloc_encode(next, v);
        schema_key k;
        key_alloc(&k);
        fix_put(f, &k, v, sizeof v);
    }
}

static int cmp_entry_parent(const void *a, const void *b)
{
    return cmp_entry_cookie(a, b);
}

/* Reports each damaged table block (lsm_verify's message names the table
 * and offset). */
static void table_problem(void *ctx, const char *msg)
{
    unfixable(ctx, "%s", msg);
}

static void run_checks(fsck *f)
{
    size_t cap = 0;
    /* Repairs computed from a store whose tables cannot all be read would
     * drop what is only unreadable: the tables first, and no repair after
     * damage there. */
    if (!f->skip_tables) {
        lsm_status *s = lsm_verify(f->db, table_problem, f);
        if (lsm_status_code(s) == LSM_NO_MEMORY)
            read_failed(f, "verifying the tables", s);
        lsm_status_free(s);
    }
    if (f->unfixed || f->op_error)
        return;
    bool icount_ok;
    uint64_t icount;
    int e = icount_current(f->db, &icount_ok, &icount);
    if (e == ENOMEM) {
        out_of_memory(f, "reading the inode count record");
        return;
    }
    if (e != 0) {
        unfixable(f, "reading the inode count record: I/O error");
        return;
    }
    if (scan_prefix(f, K_INODE, inode_cb, &cap) != 0 || f->op_error)
        return;
    check_icount(f, icount_ok, icount);
    ino_info *root = find_ino(f, SCHEMA_ROOT_INO);
    if (root == NULL || !is_dir(root)) {
        fprintf(stderr, "fsck.lsmfs: %s: the root directory is missing or damaged\n", f->dir);
        f->op_error = true;
        return;
    }
    root->reachable = true;
    uint64_t alloc_orig = 0, alloc_next;
    read_alloc(f, &alloc_orig);
    alloc_next = alloc_orig;
    if (scan_prefix(f, K_DIRENT, dirent_cb, NULL) != 0 || f->op_error)
        return;
    for (size_t i = 0; i < f->nentries; i++)
        check_entry(f, &f->entries[i]);
    if (f->nentries > 0)
        qsort(f->entries, f->nentries, sizeof *f->entries, cmp_entry_parent);
    check_cookie_clashes(f);
    if (scan_prefix(f, K_COOKIE, cookie_cb, NULL) != 0 ||
        scan_prefix(f, K_CHUNK, chunk_cb, NULL) != 0 ||
        scan_prefix(f, K_INLINE, inline_cb, NULL) != 0 ||
        scan_prefix(f, K_XATTR, xattr_cb, NULL) != 0 ||
        scan_prefix(f, K_ORPHAN, orphan_cb, NULL) != 0 || check_unknown_kinds(f) != 0)
        return;
    if (f->op_error)
        return;
    check_indexed(f);
    walk(f, SCHEMA_ROOT_INO);
    reconnect(f, &alloc_next);
    for (size_t i = 0; i < f->ninodes && !f->op_error; i++) {
        check_counts(f, &f->inodes[i]);
        check_payload(f, &f->inodes[i]);
        check_chunk_count(f, &f->inodes[i]);
    }
    check_alloc(f, alloc_orig, alloc_next);
    for (size_t i = 0; i < f->ninodes; i++)
        if (f->inodes[i].dirty)
            write_inode(f, &f->inodes[i]);
}

/* What recovery dropped from a damaged log: a problem, repaired by -y (the
 * prefix is kept and the log goes). */
static void log_problem(void *ctx, const char *msg)
{
    fsck *f = ctx;
    if (strstr(msg, "torn tail") != NULL) { /* normal after a power cut */
        if (f->verbose)
            fprintf(f->out, "note: %s\n", msg);
        return;
    }
    problem(f, "%s: keeping what precedes the damage", msg);
}

/* The inode a key belongs to (its own, or its directory's for entries and
 * readdir index keys). false for the superblock, the allocator and junk. */
static bool owner_inode(const char *k, size_t klen, uint64_t *ino)
{
    const char *name;
    size_t nlen;
    uint64_t x;
    if (klen == 0)
        return false;
    switch (k[0]) {
    case K_INODE:
    case K_INLINE:
    case K_ORPHAN:
        return key_parse_ino(k, klen, k[0], ino);
    case K_DIRENT:
        return key_parse_dirent(k, klen, ino, &name, &nlen);
    case K_COOKIE:
        return key_parse_cookie(k, klen, ino, &x);
    case K_CHUNK:
        return key_parse_chunk(k, klen, ino, &x);
    case K_XATTR:
        return key_parse_xattr(k, klen, ino, &name, &nlen);
    default:
        return false;
    }
}

/* Notes the inode of a key of a log record recovery did not apply. */
static void lost_key(void *ctx, const void *key, size_t klen)
{
    fsck *f = ctx;
    uint64_t ino;
    if (!owner_inode(key, klen, &ino))
        return;
    size_t lo = 0, hi = f->nlost;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->lost_inodes[mid] < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < f->nlost && f->lost_inodes[lo] == ino)
        return;
    f->lost_total++;
    if (f->nlost == LOST_INODES_MAX)
        return;
    memmove(&f->lost_inodes[lo + 1], &f->lost_inodes[lo], (f->nlost - lo) * sizeof(uint64_t));
    f->lost_inodes[lo] = ino;
    f->nlost++;
}

/* One line naming the inodes the records left out of the log touched. */
static void print_lost_inodes(fsck *f)
{
    if (f->lost_total == 0)
        return;
    fprintf(f->out, "%s: the log records left out touched %zu inode%s:",
            f->repair ? "dropped" : "would drop", f->lost_total, f->lost_total == 1 ? "" : "s");
    for (size_t i = 0; i < f->nlost; i++)
        fprintf(f->out, " %" PRIu64, f->lost_inodes[i]);
    fprintf(f->out, "%s\n", f->lost_total > f->nlost ? " ..." : "");
}

/* Frees what the check built, fills res; the FSCK_* code. */
static int finish(fsck *f, fsck_result *res)
{
    lsm_batch_free(f->fix);
    free(f->inodes);
    free(f->entries);
    res->problems = f->errors;
    res->inodes = f->ninodes;
    res->entries = f->nentries;
    res->no_memory = f->no_memory;
    if (f->op_error)
        return FSCK_OPERATIONAL;
    if (f->errors == 0)
        return FSCK_CLEAN;
    return f->repair && f->unfixed == 0 ? FSCK_FIXED : FSCK_UNFIXED;
}

int fsck_store(const char *dir, const fsck_options *o, fsck_result *res)
{
    fsck f = {.dir = dir,
              .repair = o->repair,
              .verbose = o->verbose,
              .progress = o->progress,
              .out = o->out ? o->out : stdout};
    memset(res, 0, sizeof *res);
    char err[1024];
    /* -n changes no byte (read-only open); both read a damaged log up to
     * the damage, -y then keeps that prefix for good. */
    store_open_req req = {.dir = dir,
                          .flags = STORE_OPEN_SALVAGE | (o->repair ? STORE_OPEN_RW : STORE_OPEN_RO),
                          .report = log_problem,
                          .dropped_key = lost_key,
                          .ctx = &f};
    if (store_open(&req, &f.db, &f.sb, err, sizeof err) != 0) {
        fprintf(stderr, "fsck.lsmfs: %s\n", err);
        return FSCK_OPERATIONAL;
    }
    print_lost_inodes(&f);
    uint64_t total = 0;
    if (lsm_property_u64(f.db, "lsm.total-table-bytes", &total))
        f.total_bytes = total;
    f.started = now_s();
    f.fix = lsm_batch_new();
    if (f.fix == NULL)
        out_of_memory(&f, "the repairs");
    else
        run_checks(&f);
    if (f.drew)
        fprintf(stderr, "\n");
    fix_flush(&f, true);
    lsm_status *cs = lsm_close(f.db);
    if (cs != NULL) {
        fprintf(stderr, "fsck.lsmfs: closing the store: %s\n", lsm_status_message(cs));
        f.op_error = f.repair || f.op_error;
    }
    lsm_status_free(cs);
    return finish(&f, res);
}

int fsck_live(lsm_db *db, const char *dir, FILE *out, fsck_result *res)
{
    fsck f = {.db = db, .dir = dir, .out = out, .skip_tables = true};
    memset(res, 0, sizeof *res);
    char err[1024];
    int e = super_read(db, dir, &f.sb, err, sizeof err);
    if (e != 0) {
        fprintf(out, "%s\n", err);
        res->no_memory = e == ENOMEM;
        return FSCK_OPERATIONAL;
    }
    f.snap = lsm_snapshot_new(db);
    f.fix = lsm_batch_new(); /* stays empty: f.repair is false */
    if (f.snap == NULL || f.fix == NULL)
        out_of_memory(&f, "a store snapshot");
    else
        run_checks(&f);
    if (f.snap != NULL)
        lsm_snapshot_release(db, f.snap);
    return finish(&f, res);
}
