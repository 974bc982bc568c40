/* test_fs_oom.c — the daemon's requests out of memory: each op handler
 * (ops.h), called in-process through fake_req.h, with its allocation N
 * failing (only N; lsm_malloc.h's seam, counted on the calling thread), for
 * N = 1, 2, ... until the op runs with none failed. Each answer must be
 * ENOMEM or the op's success; the store must then hold exactly what it held
 * before the op or exactly what an unfailed run leaves (inode times aside),
 * fsck_live must find it clean, the same op repeated unfailed must succeed,
 * and a walk of the tree through the ops (which answer from the caches)
 * must see what the unfailed run's walk saw. With OOM_SWEEP=full (make
 * torture) the sweep runs again with allocation N and every later one
 * failing (memory gone for good), and all of it again mounted -o sync.
 *
 * Each run starts from a copy of one small filesystem, mounted afresh and
 * walked once (so the caches are warm, as after the kernel's lookups);
 * then every op again with cold caches (inodes and listings loaded by the
 * op itself).
 * Every N runs (each run takes milliseconds: the stores are in memory).
 * Environment: FS_OOM_OP=name runs one op; FS_OOM_VERBOSE=1 prints each
 * op's allocation count (unfailed) and the runs made; FS_OOM_TEST=name runs
 * that test only (a cmocka filter).
 *
 * test_inode_scans_out_of_memory: the mount's scans of the store (the
 * highest inode number, the inode count and its background thread), each
 * allocation failing in turn. */
#include "fixture.h"

#include "acl.h"
#include "alloc.h"
#include "alloc_fail.h"
#include "fake_req.h"
#include "fsck.h"
#include "fsinfo.h"
#include "icount.h"
#include "maint.h"
#include "snapshot.h"
#include "lsmfs.h"
#include "orphan.h"
#include "ops.h"
#include "schema.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>

/* The filesystem every run starts from (see make_template):
 *   /f      file, "hello" inline, xattr user.a = "1"
 *   /big    file, 3 chunks and a bit
 *   /d/g    directory d (a default ACL) holding file g ("gg")
 *   /e      empty directory
 *   /m/file00 .. file15   empty files (a 17th grows its listing)
 *   /s      symlink to "f" */
#define BIG_LEN (3 * 4096 + 100)
#define MANY 16

typedef struct fixture {
    char tmpl[160], dir[160];
    lsmfs *fs;
    ops_state st;
    uint64_t ino_f, ino_big, ino_d, ino_g, ino_e, ino_m, ino_s;
    uint64_t lookups_g; /* the kernel's references to /d/g (prep_orphan) */
    uint64_t ino_max; /* the template's highest */
    bool cold;        /* runs start with empty caches (else walked once) */
    bool persistent;  /* allocation N and every later one of the op fail */
    bool sync_all;    /* mounted -o sync */
    int table_level;  /* prep_table_level's */
    /* whose allocations fail: the op's (LSM_ALLOC_MAIN) or, for the work it
     * hands to the reclaimer, every other thread's (LSM_ALLOC_OTHER) */
    enum lsm_alloc_stream stream;
} fixture;

/* ---------------------------------------------------------- requests */

/* One request: *r set up for fx's session, as root. */
static void req_init(fixture *fx, struct fuse_req *r)
{
    fake_req_init(r, &fx->st, 0, 0);
}

/* Runs a request expected to succeed, outside any sweep. */
#define MUST(fx, call)                                                                             \
    do {                                                                                           \
        struct fuse_req req_;                                                                      \
        req_init(fx, &req_);                                                                       \
        fuse_req_t req = &req_;                                                                    \
        call;                                                                                      \
        if (fake_req_errno(&req_) != 0)                                                            \
            fail_msg("%s: %d", #call, fake_req_errno(&req_));                                      \
        fake_req_done(&req_);                                                                      \
    } while (0)

/* The inode number of (parent, name) by a LOOKUP; 0 when it fails. */
static uint64_t lookup(fixture *fx, uint64_t parent, const char *name)
{
    struct fuse_req r;
    req_init(fx, &r);
    op_lookup(&r, parent, name);
    uint64_t ino = fake_req_errno(&r) == 0 ? r.reply.entry.ino : 0;
    fake_req_done(&r);
    return ino;
}

static uint64_t create(fixture *fx, uint64_t parent, const char *name)
{
    struct fuse_file_info fi = {.flags = O_RDWR};
    MUST(fx, op_create(req, parent, name, 0644, &fi));
    return lookup(fx, parent, name);
}

static uint64_t mkdir_(fixture *fx, uint64_t parent, const char *name)
{
    MUST(fx, op_mkdir(req, parent, name, 0755));
    return lookup(fx, parent, name);
}

static void write_(fixture *fx, uint64_t ino, const char *data, size_t len, off_t off)
{
    MUST(fx, op_write(req, ino, data, len, off, NULL));
}

/* An access or default ACL in its xattr form granting user 7 read: owner
 * rw, named user 7 r, group r, mask r, other r. Returns its length. */
static size_t acl_named_user(char *out)
{
    static const struct {
        uint16_t tag, perm;
        uint32_t id;
    } e[] = {{0x01, 6, UINT32_MAX}, {0x02, 4, 7}, {0x04, 4, UINT32_MAX},
             {0x10, 4, UINT32_MAX}, {0x20, 4, UINT32_MAX}};
    uint32_t version = 2; /* little-endian, as the machine (x86, arm64) */
    memcpy(out, &version, 4);
    for (size_t i = 0; i < 5; i++) {
        memcpy(out + ACL_HEADER_SIZE + i * ACL_ENTRY_SIZE, &e[i].tag, 2);
        memcpy(out + ACL_HEADER_SIZE + i * ACL_ENTRY_SIZE + 2, &e[i].perm, 2);
        memcpy(out + ACL_HEADER_SIZE + i * ACL_ENTRY_SIZE + 4, &e[i].id, 4);
    }
    return ACL_HEADER_SIZE + 5 * ACL_ENTRY_SIZE;
}

/* ------------------------------------------------------- the template */

static void mount_fs(fixture *fx, const char *dir)
{
    lsmfs_config cfg = {
        .store_dir = dir, .timeout = 1.0, .reserve_pct = -1, .resuid = -1, .resgid = -1,
        .sync_all = fx->sync_all};
    char err[256] = "";
    int e = lsmfs_open(&cfg, &fx->fs, err, sizeof err);
    if (e != 0)
        fail_msg("lsmfs_open %s: %s (%d)", dir, err, e);
    fx->st = (ops_state){.fs = fx->fs};
}

static void unmount_fs(fixture *fx)
{
    assert_int_equal(lsmfs_close(fx->fs), 0);
    fx->fs = NULL;
}

/* What mkfs.lsmfs writes: superblock, allocator, root. */
static void mkfs(const char *dir)
{
    lsm_db *db = tu_open_db(dir, NULL, 0);
    schema_super sb = {.version = SCHEMA_VERSION, .chunk_size = 4096, .inline_limit = 4096};
    lsm_batch *b = lsm_batch_new();
    assert_non_null(b);
    assert_true(super_batch_mkfs(b, &sb, 0, 0));
    lsm_write_options wo = {.sync = true};
    ASSERT_OK(lsm_write(db, &wo, b));
    lsm_batch_free(b);
    ASSERT_OK(lsm_close(db));
}

static void make_template(fixture *fx)
{
    mkfs(fx->tmpl);
    mount_fs(fx, fx->tmpl);
    fx->ino_f = create(fx, 1, "f");
    write_(fx, fx->ino_f, "hello", 5, 0);
    MUST(fx, op_setxattr(req, fx->ino_f, "user.a", "1", 1, 0));
    fx->ino_big = create(fx, 1, "big");
    char *big = malloc(BIG_LEN);
    assert_non_null(big);
    for (size_t i = 0; i < BIG_LEN; i++)
        big[i] = (char)('a' + i % 26);
    write_(fx, fx->ino_big, big, BIG_LEN, 0);
    free(big);
    fx->ino_d = mkdir_(fx, 1, "d");
    fx->ino_g = create(fx, fx->ino_d, "g");
    write_(fx, fx->ino_g, "gg", 2, 0);
    fx->ino_e = mkdir_(fx, 1, "e");
    char acl[5 * ACL_ENTRY_SIZE + ACL_HEADER_SIZE];
    size_t acl_len = acl_named_user(acl);
    MUST(fx, op_setxattr(req, fx->ino_d, ACL_NAME_DEFAULT, acl, acl_len, 0));
    fx->ino_m = mkdir_(fx, 1, "m");
    for (int i = 0; i < MANY; i++) {
        char name[16];
        snprintf(name, sizeof name, "file%02d", i);
        MUST(fx, op_mknod(req, fx->ino_m, name, S_IFREG | 0644, 0));
    }
    MUST(fx, op_symlink(req, "f", 1, "s"));
    fx->ino_s = lookup(fx, 1, "s");
    fx->ino_max = fx->ino_s;
    unmount_fs(fx);
}

/* ---------------------------------------------------- what is there */

/* An inode number as the dumps print it: one the template does not hold
 * is "new" (a failed create may have used up a number, so its repeat
 * makes the next one). */
static void put_ino(const fixture *fx, FILE *f, uint64_t ino)
{
    if (ino > fx->ino_max)
        fputs("new", f);
    else
        fprintf(f, "%llu", (unsigned long long)ino);
}

static void put_hex(FILE *f, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", (unsigned char)p[i]);
}

/* One key and its value, decoded; an inode record without its times (a
 * run's clock is its own). */
static void dump_one(const fixture *fx, FILE *f, const char *k, size_t klen, const char *v,
                     size_t vlen)
{
    uint64_t ino, parent, index;
    const char *name, *pl;
    size_t nlen, plen;
    inode_rec r;
    dirent_val d;
    uint8_t type;
    char hdr[INODE_HDR_MAX];
    if (key_parse_ino(k, klen, K_INODE, &ino) && inode_decode(v, vlen, &r, &pl, &plen)) {
        r.atime = r.mtime = r.ctime = (ts){0};
        fputs("I ", f);
        put_ino(fx, f, ino);
        fputs(" parent ", f);
        put_ino(fx, f, r.parent);
        r.parent = 0;
        size_t hlen = inode_encode_hdr(&r, hdr);
        fputc(' ', f);
        put_hex(f, hdr, hlen);
        fprintf(f, " payload %zu: %.*s", plen, (int)plen, pl);
    } else if (key_parse_ino(k, klen, K_ORPHAN, &ino)) {
        fputs("O ", f);
        put_ino(fx, f, ino);
    } else if (key_parse_dirent(k, klen, &parent, &name, &nlen) && dirent_decode(v, vlen, &d)) {
        fputs("D ", f);
        put_ino(fx, f, parent);
        fprintf(f, " %.*s -> ", (int)nlen, name);
        put_ino(fx, f, d.ino);
        fprintf(f, " type %u cookie %llu", d.type, (unsigned long long)d.cookie);
    } else if (key_parse_cookie(k, klen, &parent, &index) &&
               cookie_decode(v, vlen, &ino, &type, &name, &nlen)) {
        fputs("C ", f);
        put_ino(fx, f, parent);
        fprintf(f, " %llu -> ", (unsigned long long)index);
        put_ino(fx, f, ino);
        fprintf(f, " type %u %.*s", type, (int)nlen, name);
    } else if (key_parse_chunk(k, klen, &ino, &index)) {
        fputs("F ", f);
        put_ino(fx, f, ino);
        fprintf(f, " %llu = ", (unsigned long long)index);
        put_hex(f, v, vlen);
    } else if (key_parse_xattr(k, klen, &ino, &name, &nlen)) {
        fputs("X ", f);
        put_ino(fx, f, ino);
        fprintf(f, " %.*s = ", (int)nlen, name);
        put_hex(f, v, vlen);
    } else {
        put_hex(f, k, klen);
        fputs(" = ", f);
        put_hex(f, v, vlen);
    }
    fputc('\n', f);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The keys of the store in dir opened read-only, or -1 if it does not open. */
static long count_keys(const char *dir)
{
    lsm_options o;
    lsm_options_init(&o);
    o.read_only = true;
    lsm_db *db = NULL;
    lsm_status *s = lsm_open(&o, dir, &db);
    if (s != NULL) {
        lsm_status_free(s);
        return -1;
    }
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    lsm_iter *it = lsm_iter_new(db, &ro);
    assert_non_null(it);
    long n = 0;
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it))
        n++;
    ASSERT_OK(lsm_iter_status(it));
    lsm_iter_free(it);
    ASSERT_OK(lsm_close(db));
    return n;
}

/* The store's snapshots (snapshot.h), each with its key count, and the
 * hidden leftovers of one half built or half deleted, by kind. */
static void dump_snapshots(const fixture *fx, FILE *f)
{
    char dir[sizeof fx->dir + 32];
    snprintf(dir, sizeof dir, "%s/" LSMFS_SNAPSHOT_DIR, fx->dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char *names[64];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && n < 64)
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    for (size_t i = 0; i < n; i++) {
        char path[sizeof dir + 256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (names[i][0] == '.')
            fprintf(f, "snapshot leftover %s\n", strstr(names[i], ".tmp-") ? "tmp" : "del");
        else
            fprintf(f, "snapshot %s: %ld keys\n", names[i], count_keys(path));
        free(names[i]);
    }
}

/* Every key of the store and its value, in order, as text, then its
 * snapshots. The allocator's next number is left out: a failed op may
 * have reserved numbers (never reused: ARCHITECTURE.md invariant 1); so is
 * the inode count, which only a clean unmount writes (sweep_handed_on's). */
static char *store_dump(const fixture *fx)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    lsm_iter *it = lsm_iter_new(fx->fs->db, &ro);
    assert_non_null(it);
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t klen, vlen;
        const char *k = lsm_iter_key(it, &klen);
        const char *v = lsm_iter_value(it, &vlen);
        if (k[0] != K_ALLOC && k[0] != K_ICOUNT)
            dump_one(fx, f, k, klen, v, vlen);
    }
    ASSERT_OK(lsm_iter_status(it));
    lsm_iter_free(it);
    dump_snapshots(fx, f);
    fclose(f);
    return text;
}

/* One entry of the walk: its attributes as GETATTR gives them (times
 * aside), its data (READ or READLINK), its xattrs (LISTXATTR, GETXATTR);
 * a directory's entries (READDIR) each walked. */
static void walk_ino(fixture *fx, FILE *out, uint64_t ino, int depth);

static void walk_entry(fixture *fx, FILE *out, uint64_t dir, const char *name, int depth)
{
    struct fuse_req r;
    req_init(fx, &r);
    op_lookup(&r, dir, name);
    fprintf(out, "%*s%s: lookup %d ino ", depth, "", name, fake_req_errno(&r));
    put_ino(fx, out, r.reply.entry.ino);
    fputc('\n', out);
    uint64_t ino = r.reply.entry.ino;
    fake_req_done(&r);
    if (ino != 0)
        walk_ino(fx, out, ino, depth + 2);
}

static void walk_dir(fixture *fx, FILE *out, uint64_t ino, int depth)
{
    struct fuse_req r;
    req_init(fx, &r);
    op_readdir(&r, ino, 65536, 0, NULL);
    assert_int_equal(fake_req_errno(&r), 0);
    for (size_t off = 0; off < r.reply.len;) {
        const struct fuse_dirent *d = (const void *)(r.reply.buf + off);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)d->namelen, d->name);
        fprintf(out, "%*sentry %s type %u ino ", depth, "", name, d->type);
        put_ino(fx, out, d->ino);
        fputc('\n', out);
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
            walk_entry(fx, out, ino, name, depth);
        off += FUSE_DIRENT_SIZE(d);
    }
    fake_req_done(&r);
}

static void walk_xattrs(fixture *fx, FILE *out, uint64_t ino, int depth)
{
    struct fuse_req r;
    req_init(fx, &r);
    op_listxattr(&r, ino, 4096);
    assert_int_equal(fake_req_errno(&r), 0);
    for (size_t off = 0; off < r.reply.len; off += strlen(r.reply.buf + off) + 1) {
        struct fuse_req g;
        req_init(fx, &g);
        op_getxattr(&g, ino, r.reply.buf + off, 4096);
        fprintf(out, "%*sxattr %s = %d %s\n", depth, "", r.reply.buf + off, fake_req_errno(&g),
                g.reply.buf ? g.reply.buf : "");
        fake_req_done(&g);
    }
    fake_req_done(&r);
}

static void walk_ino(fixture *fx, FILE *out, uint64_t ino, int depth)
{
    struct fuse_req r;
    req_init(fx, &r);
    op_getattr(&r, ino, NULL);
    assert_int_equal(fake_req_errno(&r), 0);
    struct stat st = r.reply.attr;
    fake_req_done(&r);
    fprintf(out, "%*smode %o nlink %llu uid %u size %lld blocks %lld ino ", depth, "", st.st_mode,
            (unsigned long long)st.st_nlink, st.st_uid, (long long)st.st_size,
            (long long)st.st_blocks);
    put_ino(fx, out, st.st_ino);
    fputc('\n', out);
    walk_xattrs(fx, out, ino, depth);
    req_init(fx, &r);
    if (S_ISDIR(st.st_mode)) {
        walk_dir(fx, out, ino, depth);
    } else if (S_ISLNK(st.st_mode)) {
        op_readlink(&r, ino);
        fprintf(out, "%*s-> %s\n", depth, "", r.reply.buf ? r.reply.buf : "?");
    } else {
        op_read(&r, ino, 1 << 20, 0, NULL);
        assert_int_equal(fake_req_errno(&r), 0);
        fprintf(out, "%*sdata %zu: ", depth, "", r.reply.len);
        fwrite(r.reply.buf, 1, r.reply.len, out);
        fputc('\n', out);
    }
    fake_req_done(&r);
}

static char *walk(fixture *fx)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    walk_ino(fx, f, SCHEMA_ROOT_INO, 0);
    fclose(f);
    return text;
}

static void assert_fsck_clean(fixture *fx, const char *what, uint64_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    fsck_result res;
    int rc = fsck_live(fx->fs->db, fx->dir, f, &res);
    fclose(f);
    if (rc != FSCK_CLEAN)
        fail_msg("%s, allocation %llu failed: fsck says %d:\n%s", what, (unsigned long long)n, rc,
                 text);
    free(text);
}

/* -------------------------------------------------------------- ops */

typedef struct op_case {
    const char *name;
    void (*run)(fixture *fx, fuse_req_t req);
    void (*prep)(fixture *fx); /* run unfailed before the op (NULL: none) */
    void (*check)(fixture *fx); /* what the unfailed op must have done (NULL: none) */
    bool changes; /* false: a read, the store must stay as it was */
    bool stamped; /* its reply's bytes hold times: only their length is compared */
    bool counters; /* its reply is text of counters: compared with every number as '#' */
    /* a listing: a shorter one (not empty: that is the end) is right too,
     * the kernel asks again from its last entry's offset */
    bool partial_ok;
    /* with memory gone for good (persistent), its work may stay undone for
     * the next mount to finish (an orphan's mark: orphan.h) */
    bool left_for_mount;
    /* hands work to the reclaimer: its allocations are swept too (sweep_handed_on) */
    bool hands_on;
} op_case;

static void do_create(fixture *fx, fuse_req_t req)
{
    (void)fx;
    struct fuse_file_info fi = {.flags = O_RDWR};
    op_create(req, 1, "n", 0644, &fi);
}
static void do_mkdir(fixture *fx, fuse_req_t req)
{
    op_mkdir(req, fx->ino_d, "n", 0755);
}
static void do_mknod(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_mknod(req, 1, "n", S_IFIFO | 0644, 0);
}
static void do_symlink(fixture *fx, fuse_req_t req)
{
    op_symlink(req, "d/g", fx->ino_d, "n");
}
static void do_link(fixture *fx, fuse_req_t req)
{
    op_link(req, fx->ino_f, fx->ino_d, "n");
}
static void do_unlink(fixture *fx, fuse_req_t req)
{
    op_unlink(req, fx->ino_d, "g");
}
static void do_unlink_big(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_unlink(req, 1, "big");
}
static void do_rmdir(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_rmdir(req, 1, "e");
}
static void do_rename(fixture *fx, fuse_req_t req)
{
    op_rename(req, 1, "f", fx->ino_d, "n", 0);
}
static void do_rename_over(fixture *fx, fuse_req_t req)
{
    op_rename(req, fx->ino_d, "g", 1, "f", 0);
}
static void do_rename_dir(fixture *fx, fuse_req_t req)
{
    op_rename(req, 1, "e", fx->ino_d, "n", 0);
}
static void do_rename_exchange(fixture *fx, fuse_req_t req)
{
    op_rename(req, 1, "f", fx->ino_d, "g", RENAME_EXCHANGE);
}
static void do_write(fixture *fx, fuse_req_t req)
{
    op_write(req, fx->ino_f, "HEL", 3, 1, NULL);
}
static void do_write_chunks(fixture *fx, fuse_req_t req)
{
    static char wbuf[6000];
    memset(wbuf, 'w', sizeof wbuf);
    op_write(req, fx->ino_big, wbuf, sizeof wbuf, 1000, NULL);
}
static void do_write_uninline(fixture *fx, fuse_req_t req)
{
    static char ubuf[5000];
    memset(ubuf, 'u', sizeof ubuf);
    op_write(req, fx->ino_f, ubuf, sizeof ubuf, 2, NULL);
}
static void do_chmod(fixture *fx, fuse_req_t req)
{
    struct stat st = {.st_mode = S_IFREG | 0600, .st_uid = 7};
    op_setattr(req, fx->ino_f, &st, FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID, NULL);
}
static void do_truncate_down(fixture *fx, fuse_req_t req)
{
    struct stat st = {.st_size = 10};
    op_setattr(req, fx->ino_big, &st, FUSE_SET_ATTR_SIZE, NULL);
}
static void do_truncate_up(fixture *fx, fuse_req_t req)
{
    struct stat st = {.st_size = 10000};
    op_setattr(req, fx->ino_f, &st, FUSE_SET_ATTR_SIZE, NULL);
}
static void do_setxattr(fixture *fx, fuse_req_t req)
{
    op_setxattr(req, fx->ino_f, "user.b", "bee", 3, 0);
}
static void do_setxattr_replace(fixture *fx, fuse_req_t req)
{
    op_setxattr(req, fx->ino_f, "user.a", "22", 2, XATTR_REPLACE);
}
static void do_removexattr(fixture *fx, fuse_req_t req)
{
    op_removexattr(req, fx->ino_f, "user.a");
}
static void do_fallocate(fixture *fx, fuse_req_t req)
{
    op_fallocate(req, fx->ino_big, 0, 0, 5 * 4096, NULL);
}
static void do_punch(fixture *fx, fuse_req_t req)
{
    op_fallocate(req, fx->ino_big, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096, NULL);
}
static void do_fsync(fixture *fx, fuse_req_t req)
{
    op_fsync(req, fx->ino_f, 0, NULL);
}
static void do_fsyncdir(fixture *fx, fuse_req_t req)
{
    op_fsyncdir(req, fx->ino_d, 0, NULL);
}
static void do_read(fixture *fx, fuse_req_t req)
{
    op_read(req, fx->ino_f, 4096, 0, NULL);
}
static void do_read_chunks(fixture *fx, fuse_req_t req)
{
    op_read(req, fx->ino_big, 65536, 100, NULL);
}
static void do_readdir(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_readdir(req, 1, 4096, 0, NULL);
}
static void do_readdirplus(fixture *fx, fuse_req_t req)
{
    op_readdirplus(req, fx->ino_d, 4096, 0, NULL);
}
static void do_lookup(fixture *fx, fuse_req_t req)
{
    op_lookup(req, fx->ino_d, "g");
}
static void do_getattr(fixture *fx, fuse_req_t req)
{
    op_getattr(req, fx->ino_big, NULL);
}
static void do_readlink(fixture *fx, fuse_req_t req)
{
    op_readlink(req, fx->ino_s);
}
static void do_getxattr(fixture *fx, fuse_req_t req)
{
    op_getxattr(req, fx->ino_f, "user.a", 64);
}
static void do_listxattr(fixture *fx, fuse_req_t req)
{
    op_listxattr(req, fx->ino_f, 64);
}
static void do_lseek(fixture *fx, fuse_req_t req)
{
    op_lseek(req, fx->ino_big, 0, SEEK_HOLE, NULL);
}
static void do_statfs(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_statfs(req, 1);
}

static void do_create_inherit(fixture *fx, fuse_req_t req)
{
    struct fuse_file_info fi = {.flags = O_RDWR};
    op_create(req, fx->ino_d, "n", 0644, &fi);
}
static void do_create_many(fixture *fx, fuse_req_t req)
{
    struct fuse_file_info fi = {.flags = O_RDWR};
    op_create(req, fx->ino_m, "n", 0644, &fi);
}
static void do_unlink_many(fixture *fx, fuse_req_t req)
{
    op_unlink(req, fx->ino_m, "file07");
}
static void do_rename_many(fixture *fx, fuse_req_t req)
{
    op_rename(req, fx->ino_m, "file03", 1, "f", 0);
}
static void do_readdir_many(fixture *fx, fuse_req_t req)
{
    op_readdir(req, fx->ino_m, 512, 5, NULL);
}
static void do_readdirplus_many(fixture *fx, fuse_req_t req)
{
    op_readdirplus(req, fx->ino_m, 4096, 0, NULL);
}
static void do_write_large(fixture *fx, fuse_req_t req)
{
    static char lbuf[200 << 10];
    memset(lbuf, 'L', sizeof lbuf);
    op_write(req, fx->ino_big, lbuf, sizeof lbuf, 0, NULL);
}
static void do_setfacl(fixture *fx, fuse_req_t req)
{
    char acl[5 * ACL_ENTRY_SIZE + ACL_HEADER_SIZE];
    size_t len = acl_named_user(acl);
    op_setxattr(req, fx->ino_f, ACL_NAME_ACCESS, acl, len, 0);
}
static void do_utimens(fixture *fx, fuse_req_t req)
{
    struct stat st = {.st_atim = {.tv_sec = 1000}, .st_mtim = {.tv_sec = 2000}};
    op_setattr(req, fx->ino_d, &st, FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME, NULL);
}
static void do_open(fixture *fx, fuse_req_t req)
{
    struct fuse_file_info fi = {.flags = O_RDWR};
    op_open(req, fx->ino_big, &fi);
}
static void do_opendir(fixture *fx, fuse_req_t req)
{
    struct fuse_file_info fi = {0};
    op_opendir(req, fx->ino_m, &fi);
}

/* The root's attributes of counters: their text, compared with every number
 * as '#' (the counters move with every run). */
static void do_getxattr_stats(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_getxattr(req, SCHEMA_ROOT_INO, "user.lsmfs.stats", 1 << 16);
}
static void do_getxattr_metrics(fixture *fx, fuse_req_t req)
{
    (void)fx;
    op_getxattr(req, SCHEMA_ROOT_INO, "user.lsmfs.metrics", 1 << 16);
}

/* The ioctls on the root (op_ioctl.c), asked by root. */
static void ioctl_(fuse_req_t req, unsigned int cmd, const void *in, size_t insz, size_t outsz)
{
    op_ioctl(req, SCHEMA_ROOT_INO, cmd, NULL, NULL, 0, in, insz, outsz);
}
static void snap_create(fuse_req_t req, const char *name)
{
    struct lsmfs_snap_create c = {0};
    snprintf(c.name, sizeof c.name, "%s", name);
    ioctl_(req, LSMFS_IOC_SNAP_CREATE, &c, sizeof c, sizeof c);
}
static void do_snap_create(fixture *fx, fuse_req_t req)
{
    (void)fx;
    snap_create(req, "s1");
}
/* A snapshot s0 of the template. */
static void prep_snapshot(fixture *fx)
{
    MUST(fx, snap_create(req, "s0"));
}
static void do_snap_delete(fixture *fx, fuse_req_t req)
{
    (void)fx;
    struct lsmfs_snap_name n = {.name = "s0"};
    ioctl_(req, LSMFS_IOC_SNAP_DELETE, &n, sizeof n, 0);
}
static void do_snap_next(fixture *fx, fuse_req_t req)
{
    (void)fx;
    struct lsmfs_snap_entry e = {.name = ""};
    ioctl_(req, LSMFS_IOC_SNAP_NEXT, &e, sizeof e, sizeof e);
}
static void do_snap_dir(fixture *fx, fuse_req_t req)
{
    (void)fx;
    ioctl_(req, LSMFS_IOC_SNAP_DIR, NULL, 0, sizeof(struct lsmfs_snap_dir));
}
static void do_info(fixture *fx, fuse_req_t req)
{
    (void)fx;
    ioctl_(req, LSMFS_IOC_INFO, NULL, 0, sizeof(struct lsmfs_info));
}
/* A compaction of every key (the template's allocator key, written by each
 * create, has versions in several tables). */
static void do_compact(fixture *fx, fuse_req_t req)
{
    (void)fx;
    struct lsmfs_compact c = {.blen = 0};
    ioctl_(req, LSMFS_IOC_COMPACT, &c, sizeof c, 0);
}
/* The deepest level holding tables. */
static void prep_table_level(fixture *fx)
{
    fx->table_level = -1;
    for (int l = 0; l < LSM_LEVELS; l++) {
        char name[40];
        uint64_t n = 0;
        snprintf(name, sizeof name, "lsm.num-files-at-level%d", l);
        assert_true(lsm_property_u64(fx->fs->db, name, &n));
        if (n > 0)
            fx->table_level = l;
    }
    assert_true(fx->table_level >= 0);
}
static void do_check_tables(fixture *fx, fuse_req_t req)
{
    struct lsmfs_check_tables t = {.level = fx->table_level};
    ioctl_(req, LSMFS_IOC_CHECK_TABLES, &t, sizeof t, sizeof t);
}
static void do_check_fs(fixture *fx, fuse_req_t req)
{
    (void)fx;
    ioctl_(req, LSMFS_IOC_CHECK_FS, NULL, 0, sizeof(struct lsmfs_check_fs));
}

/* A caller in many groups (the one of /f last) without CAP_FSETID: a
 * process of its own, whose /proc status the daemon reads (caller.h). */
#define MEMBER_GID 4242
#define MEMBER_NGROUPS 40
static gid_t member_groups[MEMBER_NGROUPS];
static pid_t member_pid;
static int member_ready[2];

static void member_main(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    char ok = 1;
    /* Gone with the test, even one that aborts (its pipe would keep a
     * caller waiting for its output). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
        _exit(1);
    if (setgroups(MEMBER_NGROUPS, member_groups) != 0 || syscall(SYS_capget, &h, d) != 0)
        ok = 0;
    d[CAP_TO_INDEX(CAP_FSETID)].effective &= ~CAP_TO_MASK(CAP_FSETID);
    if (ok && syscall(SYS_capset, &h, d) != 0)
        ok = 0;
    if (write(member_ready[1], &ok, 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

static void member_start(void)
{
    for (int i = 0; i < MEMBER_NGROUPS; i++)
        member_groups[i] = (gid_t)(5000 + i);
    member_groups[MEMBER_NGROUPS - 1] = MEMBER_GID;
    assert_int_equal(pipe(member_ready), 0);
    member_pid = fork();
    assert_true(member_pid >= 0);
    if (member_pid == 0)
        member_main();
    char ok = 0;
    assert_int_equal(read(member_ready[0], &ok, 1), 1);
    if (!ok)
        fail_msg("the member process could not take its groups or drop CAP_FSETID");
}

static void member_stop(void)
{
    if (member_pid > 0) {
        kill(member_pid, SIGKILL);
        waitpid(member_pid, NULL, 0);
        close(member_ready[0]);
        close(member_ready[1]);
    }
    member_pid = 0;
}

/* /f set-group-id, of the member's last group. */
static void prep_sgid(fixture *fx)
{
    struct stat st = {.st_mode = S_IFREG | 02664, .st_gid = MEMBER_GID};
    MUST(fx, op_setattr(req, fx->ino_f, &st, FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_GID, NULL));
}
/* An access ACL set by the member keeps the bit (ext4's
 * posix_acl_update_mode: in the file's group). */
static void do_setfacl_member(fixture *fx, fuse_req_t req)
{
    req->ctx.pid = member_pid;
    do_setfacl(fx, req);
}

static void check_sgid_kept(fixture *fx)
{
    struct fuse_req r;
    req_init(fx, &r);
    op_getattr(&r, fx->ino_f, NULL);
    assert_int_equal(fake_req_errno(&r), 0);
    if (!(r.reply.attr.st_mode & S_ISGID))
        fail_msg("the member's ACL cleared the set-group-id bit: mode %o", r.reply.attr.st_mode);
    fake_req_done(&r);
}

/* /d/g unlinked while the kernel holds it: an orphan until its forget. */
static void prep_orphan(fixture *fx)
{
    fx->lookups_g = fx->cold ? 1 : 2; /* the walk looked it up once */
    assert_int_equal(lookup(fx, fx->ino_d, "g"), fx->ino_g);
    MUST(fx, op_unlink(req, fx->ino_d, "g"));
}
static void do_forget_orphan(fixture *fx, fuse_req_t req)
{
    op_forget(req, fx->ino_g, fx->lookups_g);
}

/* /big grown past ORPHAN_DIRECT_CHUNKS chunks (the reclaimer frees it a
 * batch at a time, then compacts its range), then unlinked while the
 * kernel holds it. */
static void prep_big_orphan(fixture *fx)
{
    static char more[3 * 4096];
    memset(more, 'm', sizeof more);
    write_(fx, fx->ino_big, more, sizeof more, BIG_LEN);
    fx->lookups_g = fx->cold ? 1 : 2; /* the walk looked it up once */
    assert_int_equal(lookup(fx, 1, "big"), fx->ino_big);
    MUST(fx, op_unlink(req, 1, "big"));
}
static void do_forget_big_orphan(fixture *fx, fuse_req_t req)
{
    op_forget(req, fx->ino_big, fx->lookups_g);
}


static const op_case cases[] = {
    {.name = "getxattr_stats", .run = do_getxattr_stats, .counters = true},
    {.name = "getxattr_metrics", .run = do_getxattr_metrics, .counters = true},
    {.name = "snap_create", .run = do_snap_create, .changes = true, .stamped = true},
    {.name = "snap_delete", .run = do_snap_delete, .prep = prep_snapshot, .changes = true},
    {.name = "snap_next", .run = do_snap_next, .prep = prep_snapshot},
    {.name = "snap_dir", .run = do_snap_dir},
    {.name = "info", .run = do_info},
    {.name = "check_tables", .run = do_check_tables, .prep = prep_table_level},
    {.name = "check_fs", .run = do_check_fs},
    {.name = "create_inherit", .run = do_create_inherit, .changes = true},
    {.name = "create_many", .run = do_create_many, .changes = true},
    {.name = "unlink_many", .run = do_unlink_many, .changes = true},
    {.name = "rename_many", .run = do_rename_many, .changes = true},
    {.name = "readdir_many", .run = do_readdir_many, .partial_ok = true},
    {.name = "readdirplus_many", .run = do_readdirplus_many, .stamped = true, .partial_ok = true},
    {.name = "write_large", .run = do_write_large, .changes = true},
    {.name = "setfacl", .run = do_setfacl, .changes = true},
    {.name = "utimens", .run = do_utimens, .changes = true},
    {.name = "open", .run = do_open},
    {.name = "opendir", .run = do_opendir},
    {.name = "setfacl_member", .run = do_setfacl_member, .prep = prep_sgid,
     .check = check_sgid_kept, .changes = true},
    {.name = "forget_orphan", .run = do_forget_orphan, .prep = prep_orphan, .changes = true,
     .left_for_mount = true, .hands_on = true},
    {.name = "forget_big_orphan", .run = do_forget_big_orphan, .prep = prep_big_orphan,
     .changes = true, .left_for_mount = true, .hands_on = true},
    {.name = "create", .run = do_create, .changes = true},
    {.name = "mkdir", .run = do_mkdir, .changes = true},
    {.name = "mknod", .run = do_mknod, .changes = true},
    {.name = "symlink", .run = do_symlink, .changes = true},
    {.name = "link", .run = do_link, .changes = true},
    {.name = "unlink", .run = do_unlink, .changes = true},
    {.name = "unlink_big", .run = do_unlink_big, .changes = true},
    {.name = "rmdir", .run = do_rmdir, .changes = true},
    {.name = "rename", .run = do_rename, .changes = true},
    {.name = "rename_over", .run = do_rename_over, .changes = true},
    {.name = "rename_dir", .run = do_rename_dir, .changes = true},
    {.name = "rename_exchange", .run = do_rename_exchange, .changes = true},
    {.name = "write", .run = do_write, .changes = true},
    {.name = "write_chunks", .run = do_write_chunks, .changes = true},
    {.name = "write_uninline", .run = do_write_uninline, .changes = true},
    {.name = "chmod_chown", .run = do_chmod, .changes = true},
    {.name = "truncate_down", .run = do_truncate_down, .changes = true},
    {.name = "truncate_up", .run = do_truncate_up, .changes = true},
    {.name = "setxattr", .run = do_setxattr, .changes = true},
    {.name = "setxattr_replace", .run = do_setxattr_replace, .changes = true},
    {.name = "removexattr", .run = do_removexattr, .changes = true},
    {.name = "fallocate", .run = do_fallocate, .changes = true},
    {.name = "punch_hole", .run = do_punch, .changes = true},
    {.name = "fsync", .run = do_fsync},
    {.name = "fsyncdir", .run = do_fsyncdir},
    {.name = "read", .run = do_read},
    {.name = "read_chunks", .run = do_read_chunks},
    {.name = "readdir", .run = do_readdir, .partial_ok = true},
    {.name = "readdirplus", .run = do_readdirplus, .stamped = true, .partial_ok = true},
    {.name = "lookup", .run = do_lookup},
    {.name = "getattr", .run = do_getattr},
    {.name = "readlink", .run = do_readlink},
    {.name = "getxattr", .run = do_getxattr},
    {.name = "listxattr", .run = do_listxattr},
    {.name = "lseek", .run = do_lseek},
    {.name = "statfs", .run = do_statfs, .stamped = true},
    {.name = "compact", .run = do_compact},
};

/* ------------------------------------------------------------ a run */

/* The filesystem of the template mounted afresh in fx->dir and, unless
 * fx->cold, walked once (the caches warm); then c's preparation. */
static void fresh(fixture *fx, const op_case *c)
{
    if (access(fx->dir, F_OK) == 0)
        tu_rmtree(fx->dir);
    tu_copy_dir_but(fx->tmpl, fx->dir, "RESERVE"); /* each open makes it anew */
    mount_fs(fx, fx->dir);
    if (!fx->cold)
        free(walk(fx));
    if (c->prep != NULL)
        c->prep(fx);
}

/* What an unfailed run of op leaves. */
typedef struct outcome {
    char *before, *after; /* store dumps */
    char *walk_after;
    fake_reply reply; /* its buf: NULL */
    char *reply_buf;
    uint64_t allocs; /* the op's allocations */
} outcome;

/* Runs c on fx with allocation n failing (0: none), its reply in *r.
 * Returns whether the failure happened. */
static bool run_op(fixture *fx, const op_case *c, uint64_t n, struct fuse_req *r)
{
    req_init(fx, r);
    lsm_alloc_hook_arm_from(fx->stream, n, fx->persistent);
    c->run(fx, r);
    if (fx->stream == LSM_ALLOC_OTHER)
        reclaimer_drain(fx->fs->reclaim); /* what the op handed on runs armed */
    lsm_alloc_hook_disarm();
    reclaimer_drain(fx->fs->reclaim); /* what the op handed on is done */
    if (r->reply.replies != 1)
        fail_msg("%s, allocation %llu failing: %d replies", c->name, (unsigned long long)n,
                 r->reply.replies);
    return lsm_alloc_hook_fired();
}

static void reference(fixture *fx, const op_case *c, outcome *o)
{
    fresh(fx, c);
    o->before = store_dump(fx);
    struct fuse_req r;
    run_op(fx, c, 0, &r);
    o->allocs = lsm_alloc_hook_count(LSM_ALLOC_MAIN);
    if (fake_req_errno(&r) != 0)
        fail_msg("%s unfailed: error %d", c->name, fake_req_errno(&r));
    o->reply = r.reply;
    o->reply_buf = r.reply.buf;
    o->reply.buf = NULL;
    o->after = store_dump(fx);
    if (!c->changes && strcmp(o->before, o->after) != 0)
        fail_msg("%s changed the store:\n%s\nafter:\n%s", c->name, o->before, o->after);
    assert_fsck_clean(fx, c->name, 0);
    if (c->check != NULL)
        c->check(fx);
    o->walk_after = walk(fx);
    unmount_fs(fx);
}

static void outcome_free(outcome *o)
{
    free(o->before);
    free(o->after);
    free(o->walk_after);
    free(o->reply_buf);
}

/* The reply of a successful run equals the unfailed run's (times aside). */
/* ino, or all ones for a number the template does not hold (put_ino). */
static uint64_t norm_ino(const fixture *fx, uint64_t ino)
{
    return ino > fx->ino_max ? UINT64_MAX : ino;
}

/* Whether texts a and b are the same but for the digits of their numbers. */
static bool same_but_numbers(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t i = 0, j = 0;
    while (i < alen && j < blen) {
        bool da = a[i] >= '0' && a[i] <= '9', db = b[j] >= '0' && b[j] <= '9';
        if (da != db || (!da && a[i] != b[j]))
            return false;
        for (i++, j++; da && i < alen && a[i] >= '0' && a[i] <= '9'; i++)
            ;
        for (; db && j < blen && b[j] >= '0' && b[j] <= '9'; j++)
            ;
    }
    return i == alen && j == blen;
}

/* Whether a reply's bytes are the unfailed run's, as c compares them. */
static bool same_bytes(const op_case *c, const fake_reply *got, const outcome *o)
{
    if (c->counters)
        return same_but_numbers(got->buf, got->len, o->reply_buf, o->reply.len);
    return got->len == o->reply.len &&
           (got->len == 0 || c->stamped || memcmp(got->buf, o->reply_buf, got->len) == 0);
}

static void check_reply(const fixture *fx, const op_case *c, uint64_t n, const outcome *o,
                        const fake_reply *got)
{
    bool same = got->kind == o->reply.kind && same_bytes(c, got, o) &&
                got->count == o->reply.count && got->off == o->reply.off &&
                norm_ino(fx, got->entry.ino) == norm_ino(fx, o->reply.entry.ino) && got->attr.st_ino == o->reply.attr.st_ino &&
                got->attr.st_size == o->reply.attr.st_size;
    bool prefix = c->partial_ok && got->kind == FAKE_BUF && got->len > 0 &&
                  got->len < o->reply.len &&
                  (c->stamped || memcmp(got->buf, o->reply_buf, got->len) == 0);
    if (!same && !prefix && c->counters)
        fail_msg("%s, allocation %llu failing: succeeded with another text:\n%.*s\nunfailed:\n%.*s",
                 c->name, (unsigned long long)n, (int)got->len, got->buf, (int)o->reply.len,
                 o->reply_buf);
    if (!same && !prefix)
        fail_msg("%s, allocation %llu failing: succeeded with another reply (kind %d len %zu "
                 "ino %llu size %lld, unfailed: kind %d len %zu ino %llu size %lld)",
                 c->name, (unsigned long long)n, got->kind, got->len,
                 (unsigned long long)(got->entry.ino | got->attr.st_ino),
                 (long long)(got->entry.attr.st_size | got->attr.st_size), o->reply.kind,
                 o->reply.len, (unsigned long long)(o->reply.entry.ino | o->reply.attr.st_ino),
                 (long long)(o->reply.entry.attr.st_size | o->reply.attr.st_size));
}

static void check_dump(fixture *fx, const op_case *c, uint64_t n, const char *want,
                       const char *what)
{
    char *now = store_dump(fx);
    if (strcmp(now, want) != 0) {
        const char *a = now, *b = want; /* the first line that differs */
        for (const char *na, *nb; (na = strchr(a, '\n')) != NULL && (nb = strchr(b, '\n')) != NULL &&
                                  na - a == nb - b && memcmp(a, b, (size_t)(na - a)) == 0;)
            a = na + 1, b = nb + 1;
        fail_msg("%s, allocation %llu failing: the store is not %s: it holds\n%.300s\nnot\n%.300s",
                 c->name, (unsigned long long)n, what, a, b);
    }
    free(now);
}

/* One run with allocation n failing; false when the op made fewer than n
 * allocations (nothing failed). */
static bool sweep_one(fixture *fx, const op_case *c, const outcome *o, uint64_t n)
{
    fresh(fx, c);
    struct fuse_req r;
    bool fired = run_op(fx, c, n, &r);
    int err = fake_req_errno(&r);
    if (err != 0 && err != ENOMEM)
        fail_msg("%s, allocation %llu failing: error %d, not ENOMEM", c->name,
                 (unsigned long long)n, err);
    if (!fired && err != 0)
        fail_msg("%s: error %d with no allocation failed", c->name, err);
    if (err == 0 && fx->persistent && c->left_for_mount && fired) {
        check_dump(fx, c, n, o->before, "as before the op, its work left for the next mount");
    } else if (err == 0) {
        check_reply(fx, c, n, o, &r.reply);
        check_dump(fx, c, n, o->after, "the op's whole effect");
    } else {
        if (atomic_load(&fx->fs->write_error))
            fail_msg("%s, allocation %llu failing: taken for a store write error", c->name,
                     (unsigned long long)n);
        check_dump(fx, c, n, o->before, "as before the failed op");
        assert_fsck_clean(fx, c->name, n);
        fake_req_done(&r);
        run_op(fx, c, 0, &r);
        if (fake_req_errno(&r) != 0)
            fail_msg("%s after allocation %llu failed: the op repeated fails with %d", c->name,
                     (unsigned long long)n, fake_req_errno(&r));
        check_reply(fx, c, n, o, &r.reply);
        check_dump(fx, c, n, o->after, "the op's whole effect once repeated");
    }
    fake_req_done(&r);
    assert_fsck_clean(fx, c->name, n);
    char *w = walk(fx);
    if (strcmp(w, o->walk_after) != 0)
        fail_msg("%s, allocation %llu failing (answer %d): the ops see\n%s\nnot\n%s", c->name,
                 (unsigned long long)n, err, w, o->walk_after);
    free(w);
    unmount_fs(fx);
    return fired;
}

/* The reclaimer's allocation n failing (the op's own succeed): the op
 * succeeds; the store holds the op's whole effect or, its freeing left for
 * the next mount, what it held before; the next mount finishes it. False
 * when the reclaimer made fewer than n allocations. */
static bool sweep_handed_on(fixture *fx, const op_case *c, const outcome *o, uint64_t n)
{
    fresh(fx, c);
    struct fuse_req r;
    fx->stream = LSM_ALLOC_OTHER;
    bool fired = run_op(fx, c, n, &r);
    fx->stream = LSM_ALLOC_MAIN;
    if (fake_req_errno(&r) != 0)
        fail_msg("%s, reclaimer allocation %llu failing: the op answered %d", c->name,
                 (unsigned long long)n, fake_req_errno(&r));
    fake_req_done(&r);
    char *now = store_dump(fx);
    bool left = strcmp(now, o->after) != 0;
    free(now);
    if (left)
        check_dump(fx, c, n, o->before, "as before the op, its freeing left for the next mount");
    assert_fsck_clean(fx, c->name, n);
    unmount_fs(fx);
    mount_fs(fx, fx->dir); /* its scan of the orphan marks frees what was left */
    reclaimer_drain(fx->fs->reclaim);
    check_dump(fx, c, n, o->after, "the op's whole effect after a mount");
    unmount_fs(fx);
    return fired;
}

static void sweep_case(fixture *fx, const op_case *c)
{
    outcome o = {0};
    reference(fx, c, &o);
    uint64_t runs = 0, n;
    for (n = 1; sweep_one(fx, c, &o, n); n++)
        runs++;
    if (n <= o.allocs)
        fail_msg("%s: %llu allocations unfailed, but only %llu with one failing", c->name,
                 (unsigned long long)o.allocs, (unsigned long long)n - 1);
    uint64_t handed = 0;
    while (c->hands_on && !fx->persistent && sweep_handed_on(fx, c, &o, handed + 1))
        handed++;
    if (getenv("FS_OOM_VERBOSE") != NULL)
        print_message("%-18s %s %s%s %3llu allocations, %3llu runs, %llu of the reclaimer\n",
                      c->name, fx->cold ? "cold" : "warm", fx->persistent ? "from N on" : "N only",
                      fx->sync_all ? " -o sync" : "", (unsigned long long)o.allocs,
                      (unsigned long long)runs, (unsigned long long)handed);
    outcome_free(&o);
}

/* The stores live in memory when they can (/dev/shm): each run copies
 * one and opens it, and on a disk the syncs and the zero-filled log and
 * reserve files of each open cost a hundred times the op. */
static char base[sizeof tu_dir];

static int setup(void **state)
{
    int rc = tu_setup(state);
    snprintf(base, sizeof base, "/dev/shm/lsmfs-fs-oom-XXXXXX");
    if (mkdtemp(base) == NULL)
        snprintf(base, sizeof base, "%s", tu_dir);
    return rc;
}

static int teardown(void **state)
{
    member_stop();
    if (strcmp(base, tu_dir) != 0)
        tu_rmtree(base);
    return tu_teardown(state);
}

static void test_every_op_out_of_memory(void **state)
{
    (void)state;
    fixture fx = {0};
    snprintf(fx.tmpl, sizeof fx.tmpl, "%s/template", base);
    snprintf(fx.dir, sizeof fx.dir, "%s/fs", base);
    make_template(&fx);
    member_start();
    const char *only = getenv("FS_OOM_OP");
    int ran = 0;
    const char *sweep = getenv("OOM_SWEEP");
    bool full = sweep != NULL && strcmp(sweep, "full") == 0;
    for (int mode = 0; mode < 8; mode++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (mode >= 2 && !full) /* make torture's */
                continue;
            if (only != NULL && strcmp(only, cases[i].name) != 0)
                continue;
            fx.cold = mode & 1;
            fx.persistent = mode & 2;
            fx.sync_all = mode & 4;
            sweep_case(&fx, &cases[i]);
            ran++;
        }
    assert_true(ran > 0);
}

/* ------------------------------------------- the store's inode scans */

/* More inode keys than icount_start counts before it returns: its thread
 * counts the rest. Keys only (the scans read no record). */
enum { SCAN_INODES = 6000, SCAN_FIRST = 1000 };

static lsm_db *open_scan_store(const char *dir)
{
    lsm_db *db = tu_open_db(dir, NULL, 64 << 10);
    for (uint64_t ino = SCAN_FIRST; ino < SCAN_FIRST + SCAN_INODES; ino++) {
        schema_key k;
        key_inode(&k, ino);
        ASSERT_OK(lsm_put(db, NULL, k.b, k.len, "rec", 3));
    }
    ASSERT_OK(lsm_compact_range(db, NULL, 0, NULL, 0)); /* in tables: reads allocate */
    return db;
}

/* The count icount_start gives with allocation n of stream failing (0:
 * none), the background part waited for; *e its answer. Returns whether
 * allocation n came. */
static bool start_count(lsm_db *db, enum lsm_alloc_stream stream, uint64_t n, int *e,
                        int64_t *total, bool *known)
{
    _Atomic int64_t t = 0;
    _Atomic bool k = false;
    icount_job *j = NULL;
    lsm_alloc_hook_arm(stream, n);
    *e = icount_start(db, &t, &k, &j);
    for (int i = 0; i < 1000 && j != NULL && !atomic_load(&k); i++)
        usleep(10000); /* (a recount after out of memory pauses first) */
    lsm_alloc_hook_disarm();
    icount_stop(j);
    *total = atomic_load(&t);
    *known = atomic_load(&k);
    return lsm_alloc_hook_fired();
}

/* A scan of the store: its answer (an errno), its result in *got. */
typedef int (*scan_fn)(lsm_db *db, uint64_t *got);

static int highest(lsm_db *db, uint64_t *got)
{
    return alloc_highest_inode(db, got);
}

static int scan_count(lsm_db *db, uint64_t *got)
{
    int64_t count = 0;
    int e = icount_scan(db, &count);
    *got = (uint64_t)count;
    return e;
}

/* fn with each of its allocations failing in turn: want or ENOMEM. */
static void sweep_scan(lsm_db *db, const char *what, scan_fn fn, uint64_t want)
{
    uint64_t n = 1;
    for (;; n++) {
        uint64_t got = 0;
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        int e = fn(db, &got);
        lsm_alloc_hook_disarm();
        if (e != 0 && e != ENOMEM)
            fail_msg("%s, allocation %" PRIu64 " failing: error %d", what, n, e);
        if (e == 0 && got != want)
            fail_msg("%s, allocation %" PRIu64 " failing: %" PRIu64 ", not %" PRIu64, what, n,
                     got, want);
        if (!lsm_alloc_hook_fired())
            break;
    }
    assert_true(n > 1); /* it allocates */
}

/* The highest inode (alloc.c, at mount: no number is reused) and the inode
 * count (icount.c: statfs's files) over a store iterator out of memory,
 * each allocation failing in turn: the right answer or ENOMEM, never a
 * wrong one. The count's background thread out of memory counts again
 * (a count that stayed unknown showed statfs fewer files for the mount). */
static void test_inode_scans_out_of_memory(void **state)
{
    (void)state;
    char dir[sizeof base + 16];
    snprintf(dir, sizeof dir, "%s/scan", base);
    lsm_db *db = open_scan_store(dir);
    sweep_scan(db, "highest inode", highest, SCAN_FIRST + SCAN_INODES - 1);
    sweep_scan(db, "inode scan", scan_count, SCAN_INODES);
    uint64_t n;
    int e = 0;
    int64_t count = 0;
    for (int stream = LSM_ALLOC_MAIN; stream <= LSM_ALLOC_OTHER; stream++)
        for (n = 1;; n++) {
            bool known;
            bool fired = start_count(db, (enum lsm_alloc_stream)stream, n, &e, &count, &known);
            if (e != 0 && (e != ENOMEM || stream == LSM_ALLOC_OTHER))
                fail_msg("count, allocation %" PRIu64 " of stream %d failing: error %d", n,
                         stream, e);
            if (e == 0 && !known)
                fail_msg("count, allocation %" PRIu64 " of stream %d failing: never known", n,
                         stream);
            if (e == 0 && count != SCAN_INODES)
                fail_msg("count, allocation %" PRIu64 " of stream %d failing: %" PRId64, n,
                         stream, count);
            if (!fired)
                break;
        }
    ASSERT_OK(lsm_close(db));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_op_out_of_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inode_scans_out_of_memory, setup, teardown),
    };
    if (getenv("FS_OOM_TEST") != NULL)
        cmocka_set_test_filter(getenv("FS_OOM_TEST"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
