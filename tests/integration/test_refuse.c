/*
 * test_refuse — refusals (issue 29 item 4, 5; issue 31's bugs and "one line
 * that says what to do"): every refused command and every read-only path
 * leaves the store byte-for-byte as it was (each file's bytes, size and
 * mtime, and the directory's listing); a newer format is refused by every
 * tool with one line naming both versions; each refusal is the exact line
 * that names the problem and the next command; -o auto_unmount returns; a
 * failed mkfs leaves the directory as it found it; and the -o values it
 * takes are honoured (max_threads).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount.h"
#include "schema.h"
#include "super.h"

#define TEST_TIMEOUT_S 120

static char out[1 << 16];

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_refuse test", NULL);
}

/* ------------------------------------------------------ the store's bytes */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of dir, sorted: name, size, mtime (ns), hash of its bytes;
 * and the directory's own mtime. Malloc'd. */
static char *store_state(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        fail_msg("opendir %s: %s", dir, tm_errname(errno));
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    size_t cap = 256 + (size_t)n * 512;
    char *s = malloc(cap);
    assert_non_null(s);
    struct stat st;
    TM_OK(stat(dir, &st));
    size_t len = (size_t)snprintf(s, cap, "dir mtime %lld.%09ld\n", (long long)st.st_mtim.tv_sec,
                                  st.st_mtim.tv_nsec);
    static char buf[32 << 20];
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        TM_OK(lstat(path, &st));
        ssize_t got = S_ISREG(st.st_mode) ? tm_read_file(path, buf, sizeof buf) : 0;
        if (got < 0)
            fail_msg("read %s: %s", path, tm_errname((int)-got));
        len += (size_t)snprintf(s + len, cap - len, "%s size %lld mtime %lld.%09ld hash %llx\n",
                                names[i], (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                                st.st_mtim.tv_nsec,
                                (unsigned long long)tm_hash(buf, (size_t)got, TM_HASH_INIT));
        free(names[i]);
    }
    return s;
}

/* The store must still be `before` after `what`. */
static void assert_unchanged(const char *dir, const char *before, const char *what)
{
    char *now = store_state(dir);
    if (strcmp(now, before) != 0)
        fail_msg("%s changed the store:\nbefore:\n%safter:\n%s", what, before, now);
    free(now);
}

/* Runs the command line (no mount may result), expects a failure whose
 * output holds the line `want` (NULL: any), and the store unchanged. */
static void refused(const char *store, const char *before, const char *want, const char *mnt,
                    const char *cmd)
{
    int rc = tm_sh(out, sizeof out, "%s", cmd);
    if (mnt != NULL && tm_is_mounted(mnt)) {
        tm_umount_path(mnt);
        fail_msg("%s mounted %s", cmd, mnt);
    }
    if (rc <= 0)
        fail_msg("%s exited %d: %s", cmd, rc, out);
    if (want != NULL && strstr(out, want) == NULL)
        fail_msg("%s said:\n%swanted the line:\n%s", cmd, out, want);
    assert_unchanged(store, before, cmd);
}

/* Runs the command line, which must succeed and change nothing. */
static void read_only(const char *store, const char *before, const char *cmd)
{
    int rc = tm_sh(out, sizeof out, "%s", cmd);
    if (rc != 0)
        fail_msg("%s exited %d: %s", cmd, rc, out);
    assert_unchanged(store, before, cmd);
}

/* A few files, then unmounted: a store with tables, a MANIFEST, a RESERVE. */
static void fill_and_unmount(struct tmount *m)
{
    TM_OK(mkdir(P("d"), 0755));
    for (int i = 0; i < 50; i++)
        tm_make_file(P("d/f%d", i), 3000 + 700 * (size_t)i, (uint64_t)i);
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
}

/* Waits (20 s at most) until no process holds the store's lock. */
static void wait_store_free(const char *store)
{
    char lock[PATH_MAX + 8];
    snprintf(lock, sizeof lock, "%s/LOCK", store);
    double end = tm_now() + 20;
    for (;;) {
        int fd = open(lock, O_RDONLY | O_CLOEXEC);
        bool free_now = fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0;
        if (fd >= 0)
            close(fd);
        if (free_now)
            return;
        if (tm_now() > end)
            fail_msg("%s is still locked 20 s after its unmount", store);
        tm_sleep_ms(20);
    }
}

/* Unmounts the detached daemon mounted at mnt and waits for it to let go. */
static void unmount_detached(const char *store, const char *mnt)
{
    if (tm_umount_path(mnt) != 0)
        fail_msg("cannot unmount %s", mnt);
    wait_store_free(store);
}

/* Refused options, read-only commands, -o ro: not a byte changes. */
static void test_refused_and_read_only_write_nothing(void **state)
{
    struct tmount *m = *state;
    fill_and_unmount(m);
    char *before = store_state(m->store);
    char bin[PATH_MAX + 64], cmd[4 * PATH_MAX];
    snprintf(bin, sizeof bin, "%s", tm_bin(""));
    static const struct {
        const char *opt, *line;
    } bad[] = {
        {"foo", "fuse: unknown option(s): `-o foo'\n"},
        {"spin=10x", "lsmfs: -o spin=10x: give 0 to 100000 microseconds\n"},
        {"readahead=-1", "lsmfs: -o readahead=-1: give 0 to 1048576 KiB\n"},
        {"max_threads=0", "lsmfs: -o max_threads=0: give 1 to 4096 threads\n"},
        {"max_threads=4x", "lsmfs: -o max_threads=4x: give 1 to 4096 threads\n"},
        {"cache_timeout=-1", "lsmfs: -o cache_timeout=-1: give a number of seconds from 0 to "
                             "1e9\n"},
        {"cache_timeout=1s", "lsmfs: -o cache_timeout=1s: give a number of seconds from 0 to "
                             "1e9\n"},
        {"relatime", "lsmfs: -o relatime: reads do not update access times on lsmfs (every "
                     "mount is noatime)\n"},
        {"atime", "lsmfs: -o atime: reads do not update access times on lsmfs (every mount is "
                  "noatime)\n"},
        {"strictatime", "lsmfs: -o strictatime: reads do not update access times on lsmfs "
                        "(every mount is noatime)\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        /* in the foreground and daemonizing; the output is that line only */
        for (int fg = 0; fg < 2; fg++) {
            snprintf(cmd, sizeof cmd, "%slsmfs %s %s %s -o %s", bin, m->store, m->mnt,
                     fg ? "-f" : "", bad[i].opt);
            refused(m->store, before, bad[i].line, m->mnt, cmd);
            if (strcmp(out, bad[i].line) != 0)
                fail_msg("%s said:\n%swanted only:\n%s", cmd, out, bad[i].line);
        }
    }
    snprintf(cmd, sizeof cmd, "%slsmfs %s %s/nowhere -f", bin, m->store, m->root);
    refused(m->store, before, NULL, NULL, cmd);
    static const char *const reads[] = {"fsck.lsmfs -n", "fsck.lsmfs", "lsmctl stats",
                                        "lsmctl check", "lsmctl dump", "lsmctl tables"};
    for (size_t i = 0; i < sizeof reads / sizeof *reads; i++) {
        snprintf(cmd, sizeof cmd, "%s%s %s >/dev/null", bin, reads[i], m->store);
        read_only(m->store, before, cmd);
    }
    snprintf(cmd, sizeof cmd, "%slsmfs %s %s -o ro", bin, m->store, m->mnt);
    read_only(m->store, before, cmd);
    tm_check_file(P("d/f7"), 3000 + 700 * 7, 7);
    unmount_detached(m->store, m->mnt);
    assert_unchanged(m->store, before, "a -o ro mount");
    free(before);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

/* Marks the unmounted store of m as of format SCHEMA_VERSION + 1. */
static void make_newer(const struct tmount *m)
{
    lsm_db *db = tm_open_store(m);
    schema_super sb;
    char err[512];
    if (super_read(db, m->store, &sb, err, sizeof err) != 0)
        fail_msg("%s", err);
    sb.version = SCHEMA_VERSION + 1;
    char v[SCHEMA_SUPER_LEN];
    super_encode(&sb, v);
    schema_key k;
    key_super(&k);
    lsm_write_options wo = {.sync = true};
    assert_null(lsm_put(db, &wo, k.b, k.len, v, sizeof v));
    assert_null(lsm_close(db));
}

/* A store of a newer format: every tool refuses it with one line naming
 * both versions, and changes nothing (before: lsmfs rewrote MANIFEST,
 * CURRENT and RESERVE before refusing; lsmctl took it silently). */
static void test_newer_format_refused_by_every_tool(void **state)
{
    struct tmount *m = *state;
    fill_and_unmount(m);
    make_newer(m);
    char *before = store_state(m->store);
    char bin[PATH_MAX + 64], cmd[4 * PATH_MAX], want[2 * PATH_MAX], bk[PATH_MAX + 8];
    snprintf(bin, sizeof bin, "%s", tm_bin(""));
    snprintf(bk, sizeof bk, "%s/bk", m->root);
    snprintf(want, sizeof want,
             "%s: lsmfs format version %d is newer than this lsmfs supports (%d): upgrade "
             "lsmfs\n",
             m->store, SCHEMA_VERSION + 1, SCHEMA_VERSION);
    const char *tools[] = {"lsmfs %s %s -f", "lsmfs %s %s -f -o ro", "lsmfs %s %s",
                           "fsck.lsmfs -n %s", "fsck.lsmfs -y %s", "lsmctl stats %s",
                           "lsmctl check %s", "lsmctl dump %s", "lsmctl tables %s",
                           "lsmctl compact %s", "lsmctl backup %s %s", "mkfs.lsmfs %s",
                           "mkfs.lsmfs -f %s"};
    for (size_t i = 0; i < sizeof tools / sizeof *tools; i++) {
        char line[PATH_MAX];
        snprintf(line, sizeof line, tools[i], m->store,
                 strncmp(tools[i], "lsmfs", 5) == 0 ? m->mnt : bk);
        snprintf(cmd, sizeof cmd, "%s%s", bin, line);
        refused(m->store, before, want, m->mnt, cmd);
    }
    free(before);
    /* the fixture's teardown needs a mountable store */
    char *mk[] = {(char *)tm_bin("mkfs.lsmfs"), "-q", m->store, NULL};
    TM_OK(tm_rmtree(m->store));
    TM_OK(mkdir(m->store, 0755));
    assert_int_equal(tm_run(mk, m->log, 60), 0);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

/* -o auto_unmount (daemonizing) returns once mounted (before: it hung,
 * the fusermount3 helper holding the startup pipe). */
static void test_auto_unmount_returns(void **state)
{
    struct tmount *m = *state;
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    char *argv[] = {(char *)strdup(tm_bin("lsmfs")), m->store, m->mnt, "-o", "auto_unmount",
                    NULL};
    int rc = tm_run(argv, m->log, 20);
    free(argv[0]);
    bool mounted = tm_is_mounted(m->mnt);
    if (mounted)
        unmount_detached(m->store, m->mnt);
    if (rc != 0 || !mounted)
        fail_msg("lsmfs -o auto_unmount exited %d, %s", rc, mounted ? "mounted" : "not mounted");
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

/* A mount whose daemon was killed: lsmfs names it and the command that
 * clears it (before: "fuse: bad mount point ...: Transport endpoint is not
 * connected"); make mount's script clears it and mounts (before: "already
 * mounted", exit 0). */
static void test_dead_mount_named(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(tm_kill(m), 0);
    char cmd[4 * PATH_MAX], want[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "%slsmfs %s %s -f", tm_bin(""), m->store, m->mnt);
    snprintf(want, sizeof want, "lsmfs: %s is a dead lsmfs mount: run `fusermount3 -u %s`\n",
             m->mnt, m->mnt);
    int rc = tm_sh(out, sizeof out, "%s", cmd);
    if (rc != 1 || strcmp(out, want) != 0)
        fail_msg("%s exited %d:\n%swanted:\n%s", cmd, rc, out, want);
    char bindir[PATH_MAX + 64];
    snprintf(bindir, sizeof bindir, "%s", tm_bin(""));
    rc = tm_sh(out, sizeof out, "tools/mount.sh %s %s %s", bindir, m->store, m->mnt);
    DIR *d = opendir(m->mnt);
    bool alive = d != NULL && tm_is_mounted(m->mnt);
    if (d != NULL)
        closedir(d);
    if (tm_is_mounted(m->mnt))
        unmount_detached(m->store, m->mnt);
    if (rc != 0 || !alive)
        fail_msg("tools/mount.sh on a dead mount exited %d (%s):\n%s", rc,
                 alive ? "mounted" : "no live mount", out);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

/* A store in use names its mount and pid; lsmctl stats of a mounted store
 * names the mount point to use (before: "in use by another process (or is
 * mounted)"). */
static void test_store_in_use_named(void **state)
{
    struct tmount *m = *state;
    char mnt2[PATH_MAX + 8], cmd[4 * PATH_MAX], want[4 * PATH_MAX];
    snprintf(mnt2, sizeof mnt2, "%s/mnt2", m->root);
    TM_OK(mkdir(mnt2, 0755));
    snprintf(cmd, sizeof cmd, "%slsmfs %s %s -f", tm_bin(""), m->store, mnt2);
    snprintf(want, sizeof want, "lsmfs: %s: the store is mounted at %s (pid %d)\n", m->store,
             m->mnt, (int)m->daemon);
    int rc = tm_sh(out, sizeof out, "%s", cmd);
    if (tm_is_mounted(mnt2))
        tm_umount_path(mnt2);
    if (rc != 1 || strcmp(out, want) != 0)
        fail_msg("%s exited %d:\n%swanted:\n%s", cmd, rc, out, want);
    snprintf(want, sizeof want,
             "lsmctl: %s: the store is mounted at %s (pid %d): use the mount point: lsmctl "
             "stats %s\n",
             m->store, m->mnt, (int)m->daemon, m->mnt);
    rc = tm_lsmctl(out, sizeof out, "stats %s", m->store);
    if (rc != 1 || strcmp(out, want) != 0)
        fail_msg("lsmctl stats STORE exited %d:\n%swanted:\n%s", rc, out, want);
    assert_int_equal(tm_lsmctl(out, sizeof out, "stats %s", m->mnt), 0);
}

/* A user who may not read the store is told so (before: "not an lsmfs store
 * (no CURRENT file)"). */
static void test_permission_denied_said(void **state)
{
    struct tmount *m = *state;
    fill_and_unmount(m);
    TM_OK(chmod(m->root, 0755));
    TM_OK(chmod(m->store, 0700));
    char *before = store_state(m->store);
    char cmd[4 * PATH_MAX], want[2 * PATH_MAX];
    snprintf(want, sizeof want, "lsmctl: %s: permission denied: this user may not read the store\n",
             m->store);
    static const char *const cmds[] = {"dump", "stats", "check", "compact"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        snprintf(cmd, sizeof cmd,
                 "setpriv --reuid=65534 --regid=65534 --clear-groups %slsmctl %s %s", tm_bin(""),
                 cmds[i], m->store);
        int rc = tm_sh(out, sizeof out, "%s", cmd);
        if (rc != 1 || strcmp(out, want) != 0)
            fail_msg("%s exited %d:\n%swanted:\n%s", cmd, rc, out, want);
        assert_unchanged(m->store, before, cmd);
    }
    free(before);
    TM_OK(chmod(m->store, 0755));
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

/* A store on a read-only medium (a read-only bind mount): a read-write
 * mount says to mount with -o ro, which works. */
static void test_read_only_medium_said(void **state)
{
    struct tmount *m = *state;
    fill_and_unmount(m);
    char ro[PATH_MAX + 8], cmd[4 * PATH_MAX], want[2 * PATH_MAX];
    snprintf(ro, sizeof ro, "%s/ro", m->root);
    TM_OK(mkdir(ro, 0755));
    TM_OK(mount(m->store, ro, NULL, MS_BIND, NULL));
    if (mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) {
        umount2(ro, MNT_DETACH);
        fail_msg("remount read-only: %s", tm_errname(errno));
    }
    snprintf(cmd, sizeof cmd, "%slsmfs %s %s -f", tm_bin(""), ro, m->mnt);
    snprintf(want, sizeof want,
             "lsmfs: %s: the store is on a read-only filesystem: mount with -o ro (or check "
             "with fsck.lsmfs -n)\n",
             ro);
    int rc = tm_sh(out, sizeof out, "%s", cmd);
    if (tm_is_mounted(m->mnt))
        tm_umount_path(m->mnt);
    snprintf(cmd, sizeof cmd, "%slsmfs %s %s -o ro", tm_bin(""), ro, m->mnt);
    int rorc = tm_sh(out + strlen(out), sizeof out - strlen(out), "%s", cmd);
    bool mounted = tm_is_mounted(m->mnt);
    if (mounted)
        unmount_detached(ro, m->mnt);
    umount2(ro, MNT_DETACH);
    if (rc != 1 || strncmp(out, want, strlen(want)) != 0)
        fail_msg("lsmfs on a read-only medium exited %d:\n%swanted:\n%s", rc, out, want);
    if (rorc != 0 || !mounted)
        fail_msg("lsmfs -o ro on a read-only medium exited %d: %s", rorc, out);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
}

/* backup list of no backup directory fails (before: an empty table, exit
 * 0); a backup into a directory a backup or purge holds says so (before:
 * "MNT is in use: give the mount point"). */
static void test_backup_refusals_said(void **state)
{
    struct tmount *m = *state;
    char bk[PATH_MAX + 8], want[2 * PATH_MAX];
    snprintf(bk, sizeof bk, "%s/bk", m->root);
    int rc = tm_lsmctl(out, sizeof out, "backup list %s/no/such/dir", m->root);
    snprintf(want, sizeof want, "lsmctl: %s/no/such/dir: not a backup directory\n", m->root);
    if (rc != 1 || strcmp(out, want) != 0)
        fail_msg("backup list of no directory exited %d:\n%swanted:\n%s", rc, out, want);
    tm_make_file(P("f"), 10000, 1);
    assert_int_equal(tm_lsmctl(out, sizeof out, "backup %s %s", m->mnt, bk), 0);
    char lock[PATH_MAX + 16];
    snprintf(lock, sizeof lock, "%s/LOCK", bk);
    int fd = open(lock, O_RDONLY | O_CLOEXEC);
    TM_OK(fd);
    TM_OK(flock(fd, LOCK_EX));
    rc = tm_lsmctl(out, sizeof out, "backup %s %s", m->mnt, bk);
    close(fd);
    snprintf(want, sizeof want,
             "lsmctl: %s: a backup or purge is running in it: try again when it is done\n", bk);
    if (rc != 1 || strcmp(out, want) != 0)
        fail_msg("backup into a locked directory exited %d:\n%swanted:\n%s", rc, out, want);
    assert_int_equal(tm_lsmctl(out, sizeof out, "snapshot %s --list", m->mnt), 0);
    if (strstr(out, "lsmctl-backup") != NULL)
        fail_msg("the backup's snapshot was left: %s", out);
}

/* mkfs.lsmfs on a full disk fails and leaves the directory as it found
 * it: no LOCK left (before: LOCK stayed, and the retry was refused as "not
 * empty and does not hold an lsmfs filesystem"); once there is room the
 * retry works. */
static void test_failed_mkfs_leaves_dir(void **state)
{
    struct tmount *m = *state;
    char host[PATH_MAX + 8], fill[PATH_MAX + 16], made[PATH_MAX + 16], empty[PATH_MAX + 16];
    snprintf(host, sizeof host, "%s/host", m->root);
    snprintf(fill, sizeof fill, "%s/fill", host);
    snprintf(made, sizeof made, "%s/made", host);
    snprintf(empty, sizeof empty, "%s/empty", host);
    TM_OK(mkdir(host, 0755));
    TM_OK(mount("tmpfs", host, "tmpfs", 0, "size=64k"));
    TM_OK(mkdir(empty, 0755));
    int rc = tm_sh(out, sizeof out, "dd if=/dev/zero of=%s bs=4k 2>/dev/null; %smkfs.lsmfs %s; "
                   "%smkfs.lsmfs %s",
                   fill, tm_bin(""), made, tm_bin(""), empty);
    struct stat st;
    int made_gone = stat(made, &st) != 0 && errno == ENOENT;
    DIR *d = opendir(empty);
    int left = 0;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
        left += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d != NULL)
        closedir(d);
    unlink(fill);
    int again = tm_sh(out + strlen(out), sizeof out - strlen(out), "%smkfs.lsmfs -q %s",
                      tm_bin(""), empty);
    umount2(host, MNT_DETACH);
    if (rc == 0 || !made_gone || left != 0)
        fail_msg("mkfs on a full disk: exit %d, %s, %d files left in the empty directory:\n%s",
                 rc, made_gone ? "its new directory removed" : "its new directory left", left,
                 out);
    if (again != 0)
        fail_msg("mkfs once there is room exited %d:\n%s", again, out);
}

/* fsck.lsmfs --help exits 0; a usage error 16, as fsck(8) says (before:
 * 8, "invalid option -- '-'"). */
static void test_fsck_usage_codes(void **state)
{
    (void)state;
    assert_int_equal(tm_sh(out, sizeof out, "%sfsck.lsmfs --help", tm_bin("")), 0);
    assert_non_null(strstr(out, "usage: fsck.lsmfs"));
    assert_int_equal(tm_sh(out, sizeof out, "%sfsck.lsmfs --bogus x", tm_bin("")), 16);
    assert_int_equal(tm_sh(out, sizeof out, "%sfsck.lsmfs", tm_bin("")), 16);
    assert_int_equal(tm_sh(out, sizeof out, "%sfsck.lsmfs -n -y x", tm_bin("")), 16);
}

enum { SYNCERS = 16, SYNCS_EACH = 20 };

struct syncer {
    struct tmount *m;
    int id;
    struct tm_errs *errs;
};

/* Small files, each fsynced: requests that wait, many at once. */
static void *sync_files(void *arg)
{
    struct syncer *a = arg;
    for (int i = 0; i < SYNCS_EACH; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/s%d-%d", a->m->mnt, a->id, i);
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "x", 1) != 1 || fsync(fd) != 0)
            tm_errs_add(a->errs, "%s: %s", path, tm_errname(errno));
        if (fd >= 0)
            close(fd);
    }
    return NULL;
}

/* -o max_threads=2 is honoured (before: anything below 64 was silently
 * raised to 64): 16 writers fsyncing at once leave the daemon with at most
 * 2 request workers more than it had idle. */
static void test_max_threads_honoured(void **state)
{
    struct tmount *m = *state;
    long idle = tm_proc_status(m->daemon, "Threads");
    struct tm_errs errs;
    tm_errs_init(&errs);
    struct syncer args[SYNCERS];
    for (int i = 0; i < SYNCERS; i++)
        args[i] = (struct syncer){.m = m, .id = i, .errs = &errs};
    tm_run_threads(SYNCERS, sync_files, args, sizeof args[0]);
    tm_errs_check(&errs);
    long busy = tm_proc_status(m->daemon, "Threads");
    if (idle < 1 || busy > idle + 2)
        fail_msg("-o max_threads=2: the daemon went from %ld threads idle to %ld", idle, busy);
}

static int setup_two_threads(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_refuse test", "max_threads=2");
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_refused_and_read_only_write_nothing, setup),
        TM_TEST(test_newer_format_refused_by_every_tool, setup),
        TM_TEST(test_auto_unmount_returns, setup),
        TM_TEST(test_dead_mount_named, setup),
        TM_TEST(test_store_in_use_named, setup),
        TM_TEST(test_permission_denied_said, setup),
        TM_TEST(test_read_only_medium_said, setup),
        TM_TEST(test_backup_refusals_said, setup),
        TM_TEST(test_failed_mkfs_leaves_dir, setup),
        TM_TEST(test_fsck_usage_codes, setup),
        TM_TEST(test_max_threads_honoured, setup_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
