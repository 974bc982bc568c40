/*
 * test_snapshot.c — `lsmctl snapshot` of a mounted lsmfs while writers
 * deliver mail (maildir: create in tmp/, write, fsync, rename into new/,
 * fsync new/): the snapshot holds every delivery acknowledged before the
 * call and no partial file in new/; mounted read-only twice at once while
 * the live mount keeps changing, it serves the tree, refuses every change
 * with EROFS, and fscks clean. Also the listing, deletion (refused while
 * mounted), bad names, taking one on a read-only mount, a user who
 * neither is root nor mounted it, and, with -o writeback, writes the
 * kernel still caches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mount.h"
#include "snapshot.h"
#include "snaptool.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

enum { WRITERS = 8, MAX_DELIVERIES = 100000 };

static int setup(void **state)
{
    return tm_setup(state, 240, "test_snapshot", NULL);
}

static int setup_allow_other(void **state)
{
    return tm_setup(state, 120, "test_snapshot", "allow_other");
}

static char out[1 << 16];

/* `lsmctl ARGS`, output in out; the exit status. */
#define lsmctl(...) tm_lsmctl(out, sizeof out, __VA_ARGS__)

#define mount_snapshot tm_mount_snapshot

/* ------------------------------------------------------------ maildir */

struct writer {
    const struct tmount *m;
    int id;
    atomic_int delivered; /* deliveries [0, delivered) are acknowledged */
    atomic_bool *stop;
    struct tm_errs *errs;
};

static size_t msg_size(int id, int i)
{
    return 1024 + (size_t)((id * 7919 + i * 104729) % (15 * 1024));
}

static uint64_t msg_seed(int id, int i)
{
    return ((uint64_t)id << 32) | (uint64_t)i;
}

/* One maildir delivery: 0, or an errno. */
static int deliver(const struct tmount *m, int id, int i, char *buf)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", tm_path(m, "tmp/%d.%d", id, i));
    snprintf(dst, sizeof dst, "%s", tm_path(m, "new/%d.%d", id, i));
    size_t n = msg_size(id, i);
    tm_fill(buf, n, msg_seed(id, i), 0);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return errno;
    int e = tm_pwrite_all(fd, buf, n, 0);
    if (e == 0 && fsync(fd) != 0)
        e = errno;
    close(fd);
    if (e == 0 && rename(tmp, dst) != 0)
        e = errno;
    if (e == 0)
        e = -tm_sync_path(tm_path(m, "new"), true);
    return e < 0 ? -e : e;
}

static void *writer_main(void *p)
{
    struct writer *w = p;
    char *buf = malloc(16 * KiB);
    for (int i = 0; buf != NULL && i < MAX_DELIVERIES && !atomic_load(w->stop); i++) {
        int e = deliver(w->m, w->id, i, buf);
        if (e != 0) {
            tm_errs_add(w->errs, "writer %d, delivery %d: %s", w->id, i, tm_errname(e));
            break;
        }
        atomic_store(&w->delivered, i + 1);
    }
    free(buf);
    return NULL;
}

/* Every file in s's new/ is a whole delivery, and every delivery of
 * writer w below before[w] is there. Returns the files seen. */
static int check_spool(const struct tmount *s, const int *before)
{
    int seen = 0;
    for (int w = 0; w < WRITERS; w++)
        for (int i = 0; i < before[w]; i++)
            tm_check_file(tm_path(s, "new/%d.%d", w, i), msg_size(w, i), msg_seed(w, i));
    DIR *d = opendir(tm_path(s, "new"));
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int w, i;
        if (e->d_name[0] == '.')
            continue;
        if (sscanf(e->d_name, "%d.%d", &w, &i) != 2)
            fail_msg("new/%s: not a delivery", e->d_name);
        tm_check_file(tm_path(s, "new/%s", e->d_name), msg_size(w, i), msg_seed(w, i));
        seen++;
    }
    closedir(d);
    return seen;
}

/* Every change is refused with EROFS. */
static void check_read_only(const struct tmount *s)
{
    const struct tmount *m = s;
    TM_ERR(open(P("new/x"), O_WRONLY | O_CREAT, 0644), EROFS);
    TM_ERR(mkdir(P("dir"), 0755), EROFS);
    TM_ERR(rename(P("new/0.0"), P("cur/0.0")), EROFS);
    TM_ERR(unlink(P("new/0.0")), EROFS);
    TM_ERR(open(P("new/0.0"), O_WRONLY), EROFS);
    TM_ERR(truncate(P("new/0.0"), 0), EROFS);
    TM_ERR(chmod(P("new/0.0"), 0644), EROFS);
    TM_ERR(setxattr(P("new/0.0"), "user.x", "1", 1, 0), EROFS);
    TM_ERR(symlink("x", P("link")), EROFS);
}

static void test_snapshot_during_delivery(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("tmp"), 0700));
    TM_OK(mkdir(P("new"), 0700));
    TM_OK(mkdir(P("cur"), 0700));
    atomic_bool stop = false;
    struct tm_errs errs;
    tm_errs_init(&errs);
    struct writer w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.m = m, .id = i, .stop = &stop, .errs = &errs};
        assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
    }
    tm_sleep_ms(1500);
    int before[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        before[i] = atomic_load(&w[i].delivered);
    int rc = lsmctl("snapshot %s spool1", m->mnt);
    tm_sleep_ms(300);
    int after[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        after[i] = atomic_load(&w[i].delivered);
    if (rc != 0) {
        atomic_store(&stop, true);
        for (int i = 0; i < WRITERS; i++)
            pthread_join(t[i], NULL);
        fail_msg("lsmctl snapshot: exit %d: %s", rc, out);
    }
    /* Mounted twice, read-only, while the writers go on. */
    struct tmount *s1 = mount_snapshot(m, "spool1");
    struct tmount *s2 = mount_snapshot(m, "spool1");
    int seen = check_spool(s1, before);
    assert_int_equal(check_spool(s2, before), seen);
    check_read_only(s1);
    int total = 0;
    for (int i = 0; i < WRITERS; i++)
        total += before[i];
    atomic_store(&stop, true);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    tm_errs_check(&errs);
    int later = 0;
    for (int i = 0; i < WRITERS; i++)
        later += atomic_load(&w[i].delivered) - after[i];
    print_message("snapshot: %d deliveries acknowledged before it, %d in it, %d after it "
                  "while mounted (%s)",
                  total, seen, later, out);
    assert_true(later > 0); /* the live mount kept changing */
    assert_int_equal(tm_unmount(s1), 0);
    assert_int_equal(tm_unmount(s2), 0);
    assert_int_equal(tm_fsck(s1), 0);
    tm_free(s1);
    tm_free(s2);
}

/* --------------------------------------------------- list and delete */

static void test_snapshot_list_and_delete(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("a"), 5000, 1);
    assert_int_equal(lsmctl("snapshot %s one", m->mnt), 0);
    tm_make_file(P("b"), 5000, 2);
    assert_int_equal(lsmctl("snapshot %s two", m->mnt), 0);
    assert_int_equal(lsmctl("snapshot %s one", m->mnt), 1); /* exists */
    assert_non_null(strstr(out, "File exists"));
    assert_int_equal(lsmctl("snapshot %s .hidden", m->mnt), 2);
    assert_int_equal(lsmctl("snapshot %s a/b", m->mnt), 2);
    assert_int_equal(lsmctl("snapshot %s --list", m->mnt), 0);
    if (strstr(out, "\none ") == NULL || strstr(out, "\ntwo ") == NULL)
        fail_msg("listing: %s", out);
    struct tmount *s = mount_snapshot(m, "one");
    tm_check_file(tm_path(s, "a"), 5000, 1);
    TM_ERR(access(tm_path(s, "b"), F_OK), ENOENT);
    /* A mounted snapshot is not deleted; a read-only mount takes none. */
    assert_int_equal(lsmctl("snapshot %s --delete one", m->mnt), 1);
    assert_non_null(strstr(out, "busy"));
    assert_int_equal(lsmctl("snapshot %s three", s->mnt), 1);
    assert_non_null(strstr(out, "Read-only"));
    assert_int_equal(tm_unmount(s), 0);
    tm_free(s);
    assert_int_equal(lsmctl("snapshot %s --delete one", m->mnt), 0);
    assert_int_equal(lsmctl("snapshot %s --delete one", m->mnt), 1);
    assert_int_equal(lsmctl("snapshot %s --list", m->mnt), 0);
    if (strstr(out, "\none ") != NULL || strstr(out, "\ntwo ") == NULL)
        fail_msg("listing after delete: %s", out);
    /* The live tree is untouched by all of it. */
    tm_check_file(P("a"), 5000, 1);
    tm_check_file(P("b"), 5000, 2);
}

/* The options may come first, as with most tools; an unknown option is
 * refused and creates nothing (it was taken for MNT NAME: "--list MNT"
 * tried to snapshot a mount called "--list"). */
static void test_snapshot_options_before_mnt(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("a"), 5000, 1);
    assert_int_equal(lsmctl("snapshot %s one", m->mnt), 0);
    assert_int_equal(lsmctl("snapshot --list %s", m->mnt), 0);
    if (strstr(out, "\none ") == NULL)
        fail_msg("listing with --list first: %s", out);
    assert_int_equal(lsmctl("snapshot --bogus %s", m->mnt), 2);
    assert_non_null(strstr(out, "unexpected '--bogus'"));
    assert_int_equal(lsmctl("snapshot %s two --list", m->mnt), 2);
    assert_int_equal(lsmctl("snapshot --delete one %s", m->mnt), 0);
    assert_int_equal(lsmctl("snapshot %s --list", m->mnt), 0);
    if (strstr(out, "\none ") != NULL || strstr(out, "\ntwo ") != NULL)
        fail_msg("listing after delete: %s", out);
}

/* Only root and the user who mounted may take or delete snapshots. */
static void test_snapshot_refused_to_others(void **state)
{
    struct tmount *m = *state;
    if (geteuid() != 0)
        skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        int fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
            _exit(11);
        struct lsmfs_snap_create c;
        memset(&c, 0, sizeof c);
        snprintf(c.name, sizeof c.name, "theirs");
        int r = ioctl(fd, LSMFS_IOC_SNAP_CREATE, &c);
        _exit(r == -1 && errno == EPERM ? 0 : 12);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char snap[PATH_MAX + 64];
    snprintf(snap, sizeof snap, "%s/" LSMFS_SNAPSHOT_DIR "/theirs", m->store);
    TM_ERR(access(snap, F_OK), ENOENT);
}

/* --------------------------------------------------- -o writeback */

static int setup_writeback(void **state)
{
    return tm_setup(state, 120, "test_snapshot", "writeback");
}

/* Whether snapshot `name` of m holds file `file` as size bytes hashing to h. */
static bool snapshot_has(const struct tmount *m, const char *name, const char *file, size_t size,
                         uint64_t h)
{
    struct tmount *s = mount_snapshot(m, name);
    struct stat st;
    bool has = stat(tm_path(s, "%s", file), &st) == 0 && (size_t)st.st_size == size &&
               tm_hash_file(tm_path(s, "%s", file)) == h;
    assert_int_equal(tm_unmount(s), 0);
    tm_free(s);
    return has;
}

/* With the kernel's writeback cache, what a process wrote to a file it
 * still has open is in the page cache, not in the daemon; lsmctl's syncfs
 * has the kernel write it back before the snapshot. The kernel does not
 * wait for a FUSE mount's write-back on syncfs (6.18: FUSE mappings have
 * no data integrity), so now and then the writes reach the daemon only
 * after the cut: of TRIES snapshots, each of a file written just before
 * and still open, one at least must hold its file. Without the syncfs
 * none does (the write-back comes later). */
static void test_snapshot_has_cached_writes(void **state)
{
    struct tmount *m = *state;
    enum { SIZE = 300 * 1024, TRIES = 5 };
    char *buf = malloc(SIZE);
    assert_non_null(buf);
    uint64_t h[TRIES];
    int hits = 0;
    for (int i = 0; i < TRIES; i++) {
        tm_fill(buf, SIZE, 19 + (uint64_t)i, 0);
        h[i] = tm_hash(buf, SIZE, TM_HASH_INIT);
        int fd = open(P("open%d", i), O_WRONLY | O_CREAT | O_EXCL, 0644);
        TM_OK(fd);
        int e = tm_pwrite_all(fd, buf, SIZE, 0);
        int rc = e == 0 ? lsmctl("snapshot %s cached%d", m->mnt, i) : -1;
        close(fd);
        assert_int_equal(e, 0);
        if (rc != 0)
            fail_msg("lsmctl snapshot: exit %d: %s", rc, out);
    }
    free(buf);
    for (int i = 0; i < TRIES; i++) {
        char name[32], file[32];
        snprintf(name, sizeof name, "cached%d", i);
        snprintf(file, sizeof file, "open%d", i);
        hits += snapshot_has(m, name, file, SIZE, h[i]);
    }
    print_message("%d of %d snapshots hold the writes cached when they were taken\n", hits, TRIES);
    assert_true(hits > 0);
}

/* The write-back before a snapshot syncs no disk: the kernel passes syncfs
 * on to no /dev/fuse daemon, only the cached pages. */
static void test_syncfs_syncs_no_disk(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("a"), 5000, 1);
    uint64_t syncs = tm_stats_counter(m, "wal syncs");
    int fd = open(P("b"), O_WRONLY | O_CREAT | O_EXCL, 0644);
    TM_OK(fd);
    char buf[8192];
    tm_fill(buf, sizeof buf, 2, 0);
    int e = tm_pwrite_all(fd, buf, sizeof buf, 0);
    int dfd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    int r = dfd >= 0 ? syncfs(dfd) : -1;
    if (dfd >= 0)
        close(dfd);
    close(fd);
    assert_int_equal(e, 0);
    TM_OK(r);
    assert_int_equal(tm_stats_counter(m, "wal syncs"), syncs);
    tm_check_file(P("b"), sizeof buf, 2);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_snapshot_during_delivery, setup),
        TM_TEST(test_snapshot_list_and_delete, setup),
        TM_TEST(test_snapshot_options_before_mnt, setup),
        TM_TEST(test_snapshot_refused_to_others, setup_allow_other),
        TM_TEST(test_snapshot_has_cached_writes, setup_writeback),
        TM_TEST(test_syncfs_syncs_no_disk, setup_writeback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
