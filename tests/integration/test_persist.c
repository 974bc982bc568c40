/*
 * Persistence: everything survives unmount and remount -- contents, modes,
 * owners, times to the nanosecond, xattrs, links, special files, inode
 * numbers -- and fsck finds the unmounted store clean.  Also the store's
 * life cycle around the mount: SIGTERM, daemonizing, and the refusals the
 * issue asks of lsmfs and mkfs.lsmfs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "mount.h"
#include "schema.h"

#define TEST_TIMEOUT_S 120

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_persist test", NULL);
}

static ino_t ino_of(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        fail_msg("lstat %s: %s", path, tm_errname(errno));
    return st.st_ino;
}

/* ------------------------------------------------------------ snapshot */

struct entry {
    char *path; /* relative to the mount point; "" is the root */
    struct stat st;
    uint64_t hash; /* regular files: their bytes */
    char *link;    /* symlinks: the target */
    char *xattrs;  /* "name=value-hash;" sorted by name */
    char *listing; /* directories: the sorted names, '/'-separated */
};

struct snapshot {
    struct entry *e;
    int n, cap;
};

static void snap_add(struct snapshot *s, const char *path)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->e = realloc(s->e, (size_t)s->cap * sizeof *s->e);
        assert_non_null(s->e);
    }
    memset(&s->e[s->n], 0, sizeof s->e[s->n]);
    s->e[s->n++].path = strdup(path);
}

static void snap_free(struct snapshot *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->e[i].path);
        free(s->e[i].link);
        free(s->e[i].xattrs);
        free(s->e[i].listing);
    }
    free(s->e);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir (without "." and ".."), count in *n. */
static char **list_dir(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("opendir %s: %s", dir, tm_errname(errno));
    int cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (*n == cap) {
            cap *= 2;
            names = realloc(names, (size_t)cap * sizeof *names);
        }
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Every path under the mount, depth first. */
static void walk(const struct tmount *m, const char *rel, struct snapshot *s)
{
    snap_add(s, rel);
    struct stat st;
    const char *abs = tm_path(m, "%s", rel);
    if (lstat(abs, &st) != 0)
        fail_msg("lstat %s: %s", abs, tm_errname(errno));
    if (!S_ISDIR(st.st_mode))
        return;
    int n;
    char **names = list_dir(abs, &n);
    for (int i = 0; i < n; i++) {
        char child[PATH_MAX];
        snprintf(child, sizeof child, "%s%s%s", rel, *rel ? "/" : "", names[i]);
        walk(m, child, s);
    }
    free_names(names, n);
}

/* Sparse files too big to read whole are hashed at their data only. */
#define SPARSE_BIG (1LL << 36)

static uint64_t hash_sparse(const char *path, off_t size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail_msg("open %s: %s", path, tm_errname(errno));
    char buf[65536];
    uint64_t h = TM_HASH_INIT;
    static const off_t probes[] = {0, 1LL << 30, (1LL << 40) - 4096};
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        ssize_t n = tm_pread_all(fd, buf, sizeof buf, probes[i]);
        if (n < 0)
            fail_msg("read %s: %s", path, tm_errname((int)-n));
        h = tm_hash(buf, (size_t)n, h);
    }
    ssize_t n = tm_pread_all(fd, buf, 4096, size - 4096);
    h = tm_hash(buf, n > 0 ? (size_t)n : 0, h);
    close(fd);
    return h;
}

static char *xattr_digest(const char *path)
{
    char names[16384];
    ssize_t len = llistxattr(path, names, sizeof names);
    if (len < 0)
        fail_msg("llistxattr %s: %s", path, tm_errname(errno));
    char *sorted[512];
    int n = 0;
    for (ssize_t i = 0; i < len && n < 512; i += (ssize_t)strlen(names + i) + 1)
        sorted[n++] = names + i;
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    size_t cap = 64 + (size_t)len * 2 + (size_t)n * 24;
    char *out = calloc(1, cap);
    static char value[65536];
    for (int i = 0; i < n; i++) {
        ssize_t v = lgetxattr(path, sorted[i], value, sizeof value);
        if (v < 0)
            fail_msg("lgetxattr %s %s: %s", path, sorted[i], tm_errname(errno));
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s=%zd:%016llx;", sorted[i], v,
                 (unsigned long long)tm_hash(value, (size_t)v, TM_HASH_INIT));
    }
    return out;
}

static char *listing_of(const char *dir)
{
    int n;
    char **names = list_dir(dir, &n);
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(names[i]) + 1;
    char *out = calloc(1, cap);
    for (int i = 0; i < n; i++) {
        strcat(out, names[i]);
        strcat(out, "/");
    }
    free_names(names, n);
    return out;
}

/* Everything but the stat fields. */
static void snap_contents(const struct tmount *m, struct snapshot *s)
{
    for (int i = 0; i < s->n; i++) {
        struct entry *e = &s->e[i];
        const char *abs = tm_path(m, "%s", e->path);
        struct stat st;
        if (lstat(abs, &st) != 0)
            fail_msg("lstat %s: %s", abs, tm_errname(errno));
        if (S_ISREG(st.st_mode))
            e->hash = st.st_size > SPARSE_BIG ? hash_sparse(abs, st.st_size) : tm_hash_file(abs);
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX + 1];
            ssize_t n = readlink(abs, target, sizeof target);
            if (n < 0)
                fail_msg("readlink %s: %s", abs, tm_errname(errno));
            target[n] = 0;
            e->link = strdup(target);
        }
        if (S_ISDIR(st.st_mode))
            e->listing = listing_of(abs);
        e->xattrs = xattr_digest(abs);
    }
}

/* Give every path distinct atime/mtime, so that a lost or rounded time
 * stamp cannot go unnoticed. */
static void set_times(const struct tmount *m, struct snapshot *s)
{
    for (int i = 0; i < s->n; i++) {
        struct timespec t[2] = {{1500000000 + i, (long)(i * 7919 % 1000000000)},
                                {1600000000 + i * 3, (long)((i * 104729 + 1) % 1000000000)}};
        if (utimensat(AT_FDCWD, tm_path(m, "%s", s->e[i].path), t, AT_SYMLINK_NOFOLLOW) != 0)
            fail_msg("utimensat %s: %s", s->e[i].path, tm_errname(errno));
    }
}

static void snap_stats(const struct tmount *m, struct snapshot *s)
{
    for (int i = 0; i < s->n; i++) {
        const char *abs = tm_path(m, "%s", s->e[i].path);
        if (lstat(abs, &s->e[i].st) != 0)
            fail_msg("lstat %s: %s", abs, tm_errname(errno));
    }
}

#define SAME_ST(field, fmt, cast)                                                                  \
    do {                                                                                           \
        if (a->st.field != b->field)                                                               \
            fail_msg("\"%s\": %s was " fmt ", now " fmt, a->path, #field, (cast)a->st.field,       \
                     (cast)b->field);                                                              \
    } while (0)

static void compare_stat(const struct entry *a, const struct stat *b, bool atime)
{
    SAME_ST(st_ino, "%llu", unsigned long long);
    SAME_ST(st_mode, "0%llo", unsigned long long);
    SAME_ST(st_nlink, "%llu", unsigned long long);
    SAME_ST(st_uid, "%llu", unsigned long long);
    SAME_ST(st_gid, "%llu", unsigned long long);
    SAME_ST(st_rdev, "0x%llx", unsigned long long);
    SAME_ST(st_size, "%lld", long long);
    SAME_ST(st_mtim.tv_sec, "%lld", long long);
    SAME_ST(st_mtim.tv_nsec, "%lld", long long);
    SAME_ST(st_ctim.tv_sec, "%lld", long long);
    SAME_ST(st_ctim.tv_nsec, "%lld", long long);
    if (atime) {
        SAME_ST(st_atim.tv_sec, "%lld", long long);
        SAME_ST(st_atim.tv_nsec, "%lld", long long);
    }
}

/* After a remount: the stat fields first (before anything reads a file
 * and may move an atime), then a fresh walk and the contents. */
static void verify(const struct tmount *m, const struct snapshot *want, bool atime)
{
    for (int i = 0; i < want->n; i++) {
        const struct entry *a = &want->e[i];
        struct stat st;
        const char *abs = tm_path(m, "%s", a->path);
        if (lstat(abs, &st) != 0)
            fail_msg("after remount, lstat \"%s\": %s", a->path, tm_errname(errno));
        compare_stat(a, &st, atime);
    }
    struct snapshot got = {0};
    walk(m, "", &got);
    if (got.n != want->n)
        fail_msg("after remount the tree has %d paths, expected %d", got.n, want->n);
    snap_contents(m, &got);
    for (int i = 0; i < got.n; i++) {
        const struct entry *a = &want->e[i], *b = &got.e[i];
        if (strcmp(a->path, b->path) != 0)
            fail_msg("after remount, path %d is \"%s\", expected \"%s\"", i, b->path, a->path);
        if (a->hash != b->hash)
            fail_msg("\"%s\": contents changed across the remount", a->path);
        if ((a->link || b->link) && (!a->link || !b->link || strcmp(a->link, b->link)))
            fail_msg("\"%s\": symlink target \"%s\", now \"%s\"", a->path, a->link ? a->link : "-",
                     b->link ? b->link : "-");
        if (strcmp(a->xattrs, b->xattrs) != 0)
            fail_msg("\"%s\": xattrs were {%s}, now {%s}", a->path, a->xattrs, b->xattrs);
        if ((a->listing || b->listing) &&
            (!a->listing || !b->listing || strcmp(a->listing, b->listing)))
            fail_msg("\"%s\": directory listing changed", a->path);
    }
    snap_free(&got);
}

/* Snapshot the tree, remount (fsck in between), verify; twice, the second
 * time after the first verification has read everything. */
static void snapshot_remount_verify(struct tmount *m, struct snapshot *s)
{
    walk(m, "", s);
    snap_contents(m, s);
    set_times(m, s);
    snap_stats(m, s);
    long long files = 0;
    struct statvfs sv;
    TM_OK(statvfs(m->mnt, &sv));
    files = (long long)(sv.f_files - sv.f_ffree);
    tm_remount_checked(m);
    verify(m, s, true);
    TM_OK(statvfs(m->mnt, &sv));
    assert_int_equal((long long)(sv.f_files - sv.f_ffree), files);
    tm_remount_checked(m);
    verify(m, s, false);
}

/* --------------------------------------------------------------- tree */

static void build_tree(struct tmount *m, ino_t *gone, int *ngone)
{
    static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 65537, 200000, MiB + 7};
    TM_OK(mkdir(P("files"), 0755));
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        tm_make_file(P("files/size-%zu", sizes[i]), sizes[i], 100 + i);

    /* Sparse, huge, shrunk, and overwritten in the middle. */
    int fd = open(P("files/sparse"), O_RDWR | O_CREAT, 0644);
    TM_OK(tm_pwrite_all(fd, "head", 4, 0));
    TM_OK(tm_pwrite_all(fd, "tail", 4, 5 * MiB + 3));
    close(fd);
    fd = open(P("files/huge"), O_RDWR | O_CREAT, 0644);
    TM_OK(tm_pwrite_all(fd, "far", 3, (1LL << 40) - 1));
    TM_OK(tm_pwrite_all(fd, "near", 4, 1LL << 30));
    close(fd);
    tm_make_file(P("files/shrunk"), 300000, 7);
    TM_OK(truncate(P("files/shrunk"), 123456));
    tm_make_file(P("files/patched"), 500000, 8);
    fd = open(P("files/patched"), O_RDWR);
    TM_OK(tm_pwrite_all(fd, "PATCH", 5, 131070));
    close(fd);

    /* Modes and owners. */
    TM_OK(mkdir(P("modes"), 0755));
    static const mode_t modes[] = {0600, 0644, 0755, 04755, 02711, 0000, 0777};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        tm_touch(P("modes/m%zu", i));
        TM_OK(chmod(P("modes/m%zu", i), modes[i]));
    }
    TM_OK(chown(P("modes/m0"), 1000, 1000));
    TM_OK(chown(P("modes/m1"), 65534, 100));
    TM_OK(mkdir(P("modes/sticky"), 0777));
    TM_OK(chmod(P("modes/sticky"), 01777));
    TM_OK(mkdir(P("modes/setgid"), 0755));
    TM_OK(chown(P("modes/setgid"), 0, 4321));
    TM_OK(chmod(P("modes/setgid"), 02775));
    tm_touch(P("modes/setgid/inherits"));

    /* Links of every kind. */
    TM_OK(mkdir(P("links"), 0755));
    tm_make_file(P("links/target"), 5000, 9);
    TM_OK(link(P("links/target"), P("links/hard1")));
    TM_OK(link(P("links/target"), P("files/hard2")));
    TM_OK(symlink("target", P("links/sym")));
    TM_OK(symlink("/absolute/dangling", P("links/dangling")));
    char longt[PATH_MAX];
    memset(longt, 'q', sizeof longt - 1);
    longt[sizeof longt - 1] = 0;
    TM_OK(symlink(longt, P("links/longtarget")));
    TM_OK(lchown(P("links/sym"), 12, 34));

    /* Special files. */
    TM_OK(mkdir(P("special"), 0755));
    TM_OK(mkfifo(P("special/fifo"), 0620));
    TM_OK(mknod(P("special/sock"), S_IFSOCK | 0600, 0));
    TM_OK(mknod(P("special/chr"), S_IFCHR | 0600, makedev(4, 64)));
    TM_OK(mknod(P("special/blk"), S_IFBLK | 0660, makedev(259, 70000)));

    /* xattrs on a file, a directory and a symlink. */
    TM_OK(setxattr(P("files/size-100"), "user.one", "1", 1, 0));
    TM_OK(setxattr(P("files/size-100"), "user.empty", "", 0, 0));
    char big[2000];
    tm_fill(big, sizeof big, 3, 0);
    TM_OK(setxattr(P("files/size-100"), "user.big", big, sizeof big, 0));
    TM_OK(setxattr(P("files/size-100"), "trusted.t", "T", 1, 0));
    TM_OK(setxattr(P("files"), "user.dir", "D", 1, 0));
    TM_OK(lsetxattr(P("links/sym"), "trusted.l", "L", 1, 0));
    TM_OK(setxattr(P("files/size-0"), "user.gone", "x", 1, 0));
    TM_OK(removexattr(P("files/size-0"), "user.gone"));

    /* Names: long, non-ASCII, many. */
    char n255[256];
    memset(n255, 'n', 255);
    n255[255] = 0;
    tm_touch(P("%s", n255));
    tm_touch(P("caf\xc3\xa9 \xe2\x98\x83 spaces"));
    TM_OK(mkdir(P("many"), 0755));
    for (int i = 0; i < 1000; i++)
        TM_OK(mknod(P("many/entry-%04d", i), S_IFREG | 0644, 0));
    char deep[512] = "deep";
    TM_OK(mkdir(P("%s", deep), 0755));
    for (int i = 0; i < 12; i++) {
        strcat(deep, "/d");
        TM_OK(mkdir(P("%s", deep), 0700));
    }
    tm_make_file(P("%s/leaf", deep), 777, 12);
    TM_OK(mkdir(P("emptydir"), 0755));

    /* History that must not come back: renames, exchanges, deletions. */
    tm_make_file(P("old-name"), 3000, 13);
    TM_OK(rename(P("old-name"), P("files/new-name")));
    TM_OK(mkdir(P("olddir"), 0755));
    tm_touch(P("olddir/kid"));
    TM_OK(rename(P("olddir"), P("links/moveddir")));
    TM_OK(tm_write_file(P("xa"), "AAA", 3, 0644));
    TM_OK(mkdir(P("xb"), 0755));
    TM_OK((int)syscall(SYS_renameat2, AT_FDCWD, P("xa"), AT_FDCWD, P("xb"), RENAME_EXCHANGE));
    *ngone = 0;
    tm_make_file(P("deleted-file"), 10000, 14);
    gone[(*ngone)++] = ino_of(P("deleted-file"));
    TM_OK(unlink(P("deleted-file")));
    TM_OK(mkdir(P("deleted-dir"), 0755));
    gone[(*ngone)++] = ino_of(P("deleted-dir"));
    TM_OK(rmdir(P("deleted-dir")));
    tm_make_file(P("replaced"), 100, 15);
    gone[(*ngone)++] = ino_of(P("replaced"));
    tm_make_file(P("replacer"), 200, 16);
    TM_OK(rename(P("replacer"), P("replaced")));
    for (int i = 0; i < 100; i++)
        TM_OK(unlink(P("many/entry-%04d", i * 10)));
}

static void test_tree_survives_remount(void **state)
{
    struct tmount *m = *state;
    ino_t gone[16];
    int ngone;
    build_tree(m, gone, &ngone);
    struct snapshot s1 = {0};
    snapshot_remount_verify(m, &s1);

    /* Change things after a remount; the changes persist too, and new
     * inodes never take a number used before -- not even a freed one. */
    int fd = open(P("files/size-4096"), O_WRONLY | O_APPEND);
    TM_OK(tm_pwrite_all(fd, "appended", 8, 4096));
    close(fd);
    TM_OK(unlink(P("links/hard1")));
    TM_OK(rename(P("deep"), P("files/deep")));
    TM_OK(setxattr(P("emptydir"), "user.later", "yes", 3, 0));
    TM_OK(chmod(P("modes/m0"), 0640));
    for (int i = 0; i < 50; i++) {
        tm_touch(P("many/after-%d", i));
        ino_t ino = ino_of(P("many/after-%d", i));
        for (int j = 0; j < s1.n; j++)
            if (s1.e[j].st.st_ino == ino && strcmp(s1.e[j].path, "") != 0)
                fail_msg("new file got inode %llu of \"%s\"", (unsigned long long)ino,
                         s1.e[j].path);
        for (int j = 0; j < ngone; j++)
            if (gone[j] == ino)
                fail_msg("new file reused the freed inode %llu", (unsigned long long)ino);
    }
    struct snapshot s2 = {0};
    snapshot_remount_verify(m, &s2);
    snap_free(&s1);
    snap_free(&s2);
}

/* 64 MiB of pseudo-random bytes, checked per MiB across remounts. */
static void test_64mib_checksums(void **state)
{
    struct tmount *m = *state;
    enum { MIBS = 64 };
    uint64_t sums[MIBS];
    char *buf = malloc(MiB);
    int fd = open(P("big"), O_WRONLY | O_CREAT | O_EXCL, 0644);
    TM_OK(fd);
    for (int i = 0; i < MIBS; i++) {
        tm_fill(buf, MiB, 64, (uint64_t)i * MiB);
        sums[i] = tm_hash(buf, MiB, TM_HASH_INIT);
        int rc = tm_pwrite_all(fd, buf, MiB, (off_t)i * MiB);
        if (rc)
            fail_msg("write MiB %d: %s", i, tm_errname(-rc));
    }
    TM_OK(fsync(fd));
    close(fd);

    for (int round = 0; round < 2; round++) {
        tm_remount_checked(m);
        fd = open(P("big"), O_RDONLY);
        TM_OK(fd);
        struct stat st;
        TM_OK(fstat(fd, &st));
        assert_int_equal(st.st_size, MIBS * MiB);
        for (int i = 0; i < MIBS; i++) {
            ssize_t n = tm_pread_all(fd, buf, MiB, (off_t)i * MiB);
            if (n != MiB)
                fail_msg("round %d: MiB %d: read %zd", round, i, n);
            if (tm_hash(buf, MiB, TM_HASH_INIT) != sums[i])
                fail_msg("round %d: MiB %d has the wrong checksum", round, i);
        }
        close(fd);
        if (round == 0) {
            /* Overwrite unaligned pieces, then check them after the next
             * remount along with the rest. */
            fd = open(P("big"), O_RDWR);
            static const off_t at[] = {12345, 5 * MiB - 100, 33 * MiB + 1, MIBS * MiB - 7};
            for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
                off_t i = at[k] / MiB, rel = at[k] - i * MiB;
                size_t len = MiB - rel < 5000 ? (size_t)(MiB - rel) : 5000;
                TM_OK(tm_pread_all(fd, buf, MiB, i * MiB));
                memset(buf + rel, 0xA5, len);
                TM_OK(tm_pwrite_all(fd, buf + rel, len, at[k]));
                sums[i] = tm_hash(buf, MiB, TM_HASH_INIT);
            }
            close(fd);
        }
    }
    free(buf);
}

/* ---------------------------------------------------------- life cycle */

/* SIGTERM: the daemon finishes, unmounts, closes the store cleanly. */
static void test_sigterm(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip(); /* a plain directory has no daemon to test */
    tm_make_file(P("before-term"), 100000, 1);
    TM_OK(mkdir(P("dir"), 0700));
    /* An orderly shutdown: exit status 0, the mount gone.  Checked last so
     * a failure still reports whether the store itself came through. */
    int stopped = tm_stop(m, SIGTERM);
    assert_int_equal(tm_fsck(m), 0);
    if (tm_mount(m) != 0)
        fail_msg("mount after SIGTERM failed");
    struct stat st;
    TM_OK(lstat(P("before-term"), &st));
    assert_int_equal(st.st_size, 100000);
    TM_OK(lstat(P("dir"), &st));
    assert_int_equal(st.st_mode & 07777, 0700);
    if (stopped != 0)
        fail_msg("lsmfs did not exit with status 0 on SIGTERM (store and "
                 "data were fine)");
}

/* The pid of a process whose command line mentions `needle`, or 0. */
static pid_t find_process(const char *needle)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d)) != NULL) {
        pid_t pid = atoi(e->d_name);
        if (pid <= 0 || pid == getpid())
            continue;
        char path[64], cmd[4096];
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        for (ssize_t i = 0; i < n; i++)
            if (cmd[i] == 0)
                cmd[i] = ' ';
        cmd[n > 0 ? n : 0] = 0;
        if (strstr(cmd, needle))
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

/* Without -f, lsmfs returns once the mount is up and keeps serving it. */
static void test_daemonizes(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip(); /* a plain directory has no daemon to test */
    tm_make_file(P("seen"), 1234, 2);
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    char lsmfs_bin[PATH_MAX];
    snprintf(lsmfs_bin, sizeof lsmfs_bin, "%s", tm_bin("lsmfs"));
    char *argv[] = {lsmfs_bin, m->store, m->mnt, NULL};
    int rc = tm_run(argv, m->log, 20);
    bool mounted = tm_is_mounted(m->mnt);
    struct stat st;
    int seen = mounted ? lstat(P("seen"), &st) : -1;
    tm_umount_path(m->mnt);
    /* The detached daemon must exit on unmount and release the store. */
    double end = tm_now() + 20;
    pid_t left;
    while ((left = find_process(m->store)) != 0 && tm_now() < end)
        tm_sleep_ms(20);
    if (left)
        kill(left, SIGKILL);
    assert_int_equal(rc, 0);
    assert_true(mounted);
    assert_int_equal(seen, 0);
    assert_int_equal(st.st_size, 1234);
    if (left)
        fail_msg("the detached lsmfs (pid %d) still runs after the unmount", (int)left);
    assert_int_equal(tm_fsck(m), 0);
    if (tm_mount(m) != 0)
        fail_msg("mount after the detached run failed");
}

/* Run argv (which must fail) and clean up if it mounted `mnt` after all. */
static int run_refused(char *const argv[], const char *log, const char *mnt)
{
    int rc = tm_run(argv, log, 20);
    if (mnt && tm_is_mounted(mnt)) {
        tm_umount_path(mnt);
        fail_msg("%s mounted %s though it should have refused", argv[0], mnt);
    }
    return rc;
}

static void test_refusals(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip(); /* a plain directory has no daemon to test */
    char lsmfs_bin[PATH_MAX], mkfs[PATH_MAX];
    snprintf(lsmfs_bin, sizeof lsmfs_bin, "%s", tm_bin("lsmfs"));
    snprintf(mkfs, sizeof mkfs, "%s", tm_bin("mkfs.lsmfs"));
    char mnt2[PATH_MAX + 8], junk[PATH_MAX + 8], empty[PATH_MAX + 8];
    snprintf(mnt2, sizeof mnt2, "%s/mnt2", m->root);
    snprintf(junk, sizeof junk, "%s/junk", m->root);
    snprintf(empty, sizeof empty, "%s/empty", m->root);
    TM_OK(mkdir(mnt2, 0755));
    TM_OK(mkdir(junk, 0755));
    TM_OK(mkdir(empty, 0755));
    TM_OK(tm_write_file(P("keep"), "kept", 4, 0644));
    char junkfile[PATH_MAX + 32];
    snprintf(junkfile, sizeof junkfile, "%s/precious", junk);
    TM_OK(tm_write_file(junkfile, "mine", 4, 0644));

    /* The store is open by the running daemon. */
    char *twice[] = {lsmfs_bin, m->store, mnt2, "-f", NULL};
    int rc = run_refused(twice, m->log, mnt2);
    if (rc <= 0)
        fail_msg("a second lsmfs on a mounted store exited %d", rc);
    /* Not a store: a directory with other files, an empty directory. */
    char *notstore[] = {lsmfs_bin, junk, mnt2, "-f", NULL};
    rc = run_refused(notstore, m->log, mnt2);
    if (rc <= 0)
        fail_msg("lsmfs on a non-store directory exited %d", rc);
    char *emptystore[] = {lsmfs_bin, empty, mnt2, "-f", NULL};
    rc = run_refused(emptystore, m->log, mnt2);
    if (rc <= 0)
        fail_msg("lsmfs on an empty directory exited %d", rc);
    /* mkfs will not take a directory that holds something else... */
    char *mkjunk[] = {mkfs, junk, NULL};
    rc = run_refused(mkjunk, m->log, NULL);
    if (rc <= 0)
        fail_msg("mkfs.lsmfs on a non-empty directory exited %d", rc);
    char buf[16];
    assert_int_equal(tm_read_file(junkfile, buf, sizeof buf), 4);
    assert_memory_equal(buf, "mine", 4);
    /* ... nor an existing store without -f. */
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    char *mkagain[] = {mkfs, m->store, NULL};
    rc = run_refused(mkagain, m->log, NULL);
    if (rc <= 0)
        fail_msg("mkfs.lsmfs over an existing store (no -f) exited %d", rc);
    /* A mount point that is not empty. */
    char inmnt[PATH_MAX + 32];
    snprintf(inmnt, sizeof inmnt, "%s/occupied", mnt2);
    TM_OK(tm_write_file(inmnt, "x", 1, 0644));
    char *occupied[] = {lsmfs_bin, m->store, mnt2, "-f", NULL};
    rc = run_refused(occupied, m->log, mnt2);
    if (rc <= 0)
        fail_msg("lsmfs on a non-empty mount point exited %d", rc);
    /* None of that hurt the store. */
    assert_int_equal(tm_fsck(m), 0);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
    assert_int_equal(tm_read_file(P("keep"), buf, sizeof buf), 4);
    assert_memory_equal(buf, "kept", 4);

    /* mkfs -f does start afresh. */
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    char *force[] = {mkfs, "-f", m->store, NULL};
    rc = tm_run(force, m->log, 60);
    assert_int_equal(rc, 0);
    if (tm_mount(m) != 0)
        fail_msg("mount after mkfs -f failed");
    struct stat st;
    TM_ERR(lstat(P("keep"), &st), ENOENT);
    TM_OK(lstat(m->mnt, &st));
    assert_int_equal(st.st_mode & 07777, 0755);
}

/* Deletes inode ino's record from the (unmounted) store: damage. */
static void delete_inode_record(const struct tmount *m, uint64_t ino)
{
    lsm_db *db = tm_open_store(m);
    schema_key k;
    key_inode(&k, ino);
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_delete(db, &wo, k.b, k.len);
    assert_null(s);
    assert_null(lsm_close(db));
}

/* A listing of a directory holding an entry whose inode record is gone
 * does not skip that entry silently: readdirplus (the kernel's first
 * request) fails there with EIO, after which the kernel's plain READDIR
 * lists the name, as a listing that loads no inode does (ext4 too); the
 * name itself then answers EIO. */
static void test_listing_with_damaged_inode_fails(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    TM_OK(mkdir(P("d"), 0755));
    for (int i = 0; i < 3; i++)
        tm_touch(P("d/f%d", i));
    struct stat st;
    TM_OK(stat(P("d/f1"), &st));
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    delete_inode_record(m, (uint64_t)st.st_ino);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
    DIR *d = opendir(P("d"));
    assert_non_null(d);
    int names = 0, err = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            err = errno;
            break;
        }
        names++;
    }
    closedir(d);
    if (err != EIO && names != 5)
        fail_msg("listing gave %d of 5 names and ended with %s", names, tm_errname(err));
    TM_ERR(stat(P("d/f1"), &st), EIO);
}

/* Puts xattr `name` of inode ino into the (unmounted) store, as an earlier
 * version of lsmfs could have. */
static void put_xattr_key(const struct tmount *m, uint64_t ino, const char *name)
{
    lsm_db *db = tm_open_store(m);
    schema_key k;
    key_xattr(&k, ino, name, strlen(name));
    lsm_write_options wo = {.sync = true};
    assert_null(lsm_put(db, &wo, k.b, k.len, "old", 3));
    assert_null(lsm_close(db));
}

static void check_only_user_a(const struct tmount *m)
{
    char list[256];
    assert_int_equal(listxattr(P("f"), list, sizeof list), (ssize_t)sizeof "user.a");
    assert_string_equal(list, "user.a");
    assert_int_equal(listxattr(P("f"), NULL, 0), (ssize_t)sizeof "user.a");
}

/* Xattrs stored outside the namespaces lsmfs keeps (an earlier version took
 * any system.* name) are not listed (before: listxattr showed them, and
 * tar --xattrs, cp -a failed on them); fsck -n reports them, fsck -y
 * deletes them. */
static void test_unsupported_stored_xattr_hidden(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_touch(P("f"));
    TM_OK(setxattr(P("f"), "user.a", "1", 1, 0));
    struct stat st;
    TM_OK(stat(P("f"), &st));
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    put_xattr_key(m, (uint64_t)st.st_ino, "system.evil");
    put_xattr_key(m, (uint64_t)st.st_ino, "other.x");
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
    check_only_user_a(m);
    char buf[16];
    TM_ERR(getxattr(P("f"), "system.evil", buf, sizeof buf), EOPNOTSUPP);
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    assert_int_equal(tm_fsck(m), 4);
    char *repair[] = {(char *)tm_bin("fsck.lsmfs"), "-y", m->store, NULL};
    assert_int_equal(tm_run(repair, m->log, 60), 1);
    assert_int_equal(tm_fsck(m), 0);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
    check_only_user_a(m);
}

/* lsmfs refuses to mount over a live lsmfs mount (the mounts would stack,
 * the first one hidden) and at a mount point inside the store directory
 * (the daemon would write its tables into its own mount), even with -o
 * nonempty, and both refusals leave every store as it was. */
static void test_refuses_stacked_and_nested_mounts(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    char lsmfs_bin[PATH_MAX], mkfs[PATH_MAX];
    snprintf(lsmfs_bin, sizeof lsmfs_bin, "%s", tm_bin("lsmfs"));
    snprintf(mkfs, sizeof mkfs, "%s", tm_bin("mkfs.lsmfs"));
    char store2[PATH_MAX + 16], inside[PATH_MAX + 32];
    snprintf(store2, sizeof store2, "%s/store2", m->root);
    snprintf(inside, sizeof inside, "%s/sub", store2);
    char *mk[] = {mkfs, store2, NULL};
    assert_int_equal(tm_run(mk, m->log, 60), 0);
    tm_make_file(P("kept"), 100, 7);
    char *stacked[] = {lsmfs_bin, store2, m->mnt, "-f", "-o", "nonempty", NULL};
    int rc = tm_run(stacked, m->log, 20);
    if (rc <= 0) {
        tm_umount_path(m->mnt); /* the second mount, on top */
        fail_msg("lsmfs over a live lsmfs mount exited %d", rc);
    }
    tm_check_file(P("kept"), 100, 7); /* still the first mount */
    TM_OK(mkdir(inside, 0755));
    char *nested[] = {lsmfs_bin, store2, inside, "-f", NULL};
    rc = run_refused(nested, m->log, inside);
    TM_OK(rmdir(inside));
    if (rc <= 0)
        fail_msg("lsmfs at a mount point inside its store exited %d", rc);
    char *check[] = {(char *)tm_bin("fsck.lsmfs"), "-n", store2, NULL};
    assert_int_equal(tm_run(check, m->log, 60), 0);
}

/* The mount options of the mount at mnt as /proc/mounts shows them ("" if
 * not mounted; static storage). */
static const char *mount_options(const char *mnt)
{
    static char opts[512];
    opts[0] = '\0';
    FILE *f = fopen("/proc/mounts", "r");
    assert_non_null(f);
    char dev[PATH_MAX], dir[PATH_MAX], type[64];
    while (fscanf(f, "%4095s %4095s %63s %511s %*d %*d", dev, dir, type, opts) == 4)
        if (strcmp(dir, mnt) == 0)
            break;
        else
            opts[0] = '\0';
    fclose(f);
    return opts;
}

/* Reads do not update access times, and the mount says so (noatime); asking
 * for atime updates is refused, not silently ignored. */
static void test_mounted_noatime(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    const char *opts = mount_options(m->mnt);
    if (strstr(opts, "noatime") == NULL)
        fail_msg("mounted with %s: no noatime", opts);
    tm_make_file(P("f"), 100, 1);
    struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 2000}};
    TM_OK(utimensat(AT_FDCWD, P("f"), old, 0));
    tm_check_file(P("f"), 100, 1);
    struct stat st;
    TM_OK(stat(P("f"), &st));
    assert_int_equal(st.st_atime, 1000);
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    char lsmfs_bin[PATH_MAX];
    snprintf(lsmfs_bin, sizeof lsmfs_bin, "%s", tm_bin("lsmfs"));
    static const char *const asks[] = {"strictatime", "relatime", "atime"};
    for (size_t i = 0; i < sizeof asks / sizeof *asks; i++) {
        char *argv[] = {lsmfs_bin, m->store, m->mnt, "-f", "-o", (char *)asks[i], NULL};
        int rc = run_refused(argv, m->log, m->mnt);
        if (rc <= 0)
            fail_msg("lsmfs -o %s exited %d", asks[i], rc);
    }
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

static void test_help_version(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip(); /* a plain directory has no daemon to test */
    char lsmfs_bin[PATH_MAX];
    snprintf(lsmfs_bin, sizeof lsmfs_bin, "%s", tm_bin("lsmfs"));
    char *version[] = {lsmfs_bin, "--version", NULL};
    char *help[] = {lsmfs_bin, "--help", NULL};
    assert_int_equal(tm_run(version, m->log, 10), 0);
    assert_int_equal(tm_run(help, m->log, 10), 0);
}

int main(void)
{
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_tree_survives_remount, setup),
        TM_TEST(test_64mib_checksums, setup),
        TM_TEST(test_sigterm, setup),
        TM_TEST(test_daemonizes, setup),
        TM_TEST(test_refusals, setup),
        TM_TEST(test_help_version, setup),
        TM_TEST(test_mounted_noatime, setup),
        TM_TEST(test_refuses_stacked_and_nested_mounts, setup),
        TM_TEST(test_listing_with_damaged_inode_fails, setup),
        TM_TEST(test_unsupported_stored_xattr_hidden, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
