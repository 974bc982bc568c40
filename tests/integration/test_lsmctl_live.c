/*
 * test_lsmctl_live.c — lsmctl on a mounted lsmfs: stats --json,
 * --prometheus and --watch (the daemon's user.lsmfs.metrics); info of a
 * mount and of its store; compact and check through the mount while it
 * serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fsinfo.h"
#include "maint.h"
#include "mount.h"
#include "schema.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static char out[1 << 20];

#define lsmctl(...) tm_lsmctl(out, sizeof out, __VA_ARGS__)

static int setup(void **state)
{
    return tm_setup(state, 240, "test_lsmctl_live", NULL);
}

/* The number after "\"name\": " in --json's output; fails if absent. */
static uint64_t json_field(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *p = strstr(out, key);
    if (p == NULL)
        fail_msg("no %s in:\n%s", key, out);
    return strtoull(p + strlen(key), NULL, 10);
}

/* --json: one object, one "name": number per line, counting what was done. */
static void test_stats_json(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(lsmctl("stats %s --json", m->mnt), 0);
    uint64_t mkdirs = json_field("fs_requests_mkdir");
    uint64_t writes = json_field("store_writes");
    TM_OK(mkdir(P("d1"), 0755));
    TM_OK(mkdir(P("d2"), 0755));
    assert_int_equal(lsmctl("stats %s --json", m->mnt), 0);
    assert_int_equal(json_field("fs_requests_mkdir"), mkdirs + 2);
    assert_true(json_field("store_writes") >= writes + 2);
    json_field("store_wal_syncs");
    json_field("store_stall_us");
    json_field("store_tables_level_0");
    assert_int_equal(out[0], '{');
    assert_string_equal(out + strlen(out) - 2, "}\n");
    int lines = 0;
    for (char *l = strchr(out, '\n') + 1; *l != '}'; l = strchr(l, '\n') + 1, lines++) {
        char name[64];
        unsigned long long v;
        if (sscanf(l, " \"%63[a-z0-9_]\": %llu", name, &v) != 2)
            fail_msg("not a \"name\": number line: %.60s", l);
    }
    assert_true(lines > 60);
}

/* --prometheus: a # TYPE line once per family, counters end in _total. */
static void test_stats_prometheus(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("d"), 0755));
    assert_int_equal(lsmctl("stats %s --prometheus", m->mnt), 0);
    assert_non_null(strstr(out, "# TYPE lsmfs_fs_requests_total counter\n"));
    assert_non_null(strstr(out, "lsmfs_fs_requests_total{op=\"mkdir\"} 1\n"));
    assert_non_null(strstr(out, "# TYPE lsmfs_store_tables gauge\n"));
    assert_non_null(strstr(out, "lsmfs_store_tables{level=\"0\"} "));
    assert_non_null(strstr(out, "lsmfs_store_wal_syncs_total "));
    const char *first = strstr(out, "# TYPE lsmfs_store_tables ");
    assert_null(strstr(first + 1, "# TYPE lsmfs_store_tables ")); /* once */
}

/* --watch=SEC --count=N: a header and N lines of rates; refused on a store. */
static void test_stats_watch(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(lsmctl("stats %s --watch=1 --count=2", m->mnt), 0);
    assert_non_null(strstr(out, "req/s"));
    assert_non_null(strstr(out, "wr/sync"));
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    assert_int_equal(lines, 3);
    assert_int_equal(lsmctl("stats %s --watch=0", m->mnt), 2);
    assert_int_equal(lsmctl("stats %s --json --prometheus", m->mnt), 2);
    assert_int_equal(lsmctl("stats %s --watch --count=1", m->root), 1);
    assert_non_null(strstr(out, "not the mount point of a running lsmfs"));
}

/* The value after "label:" in info's output; fails if absent. */
static uint64_t info_field(const char *label)
{
    const char *p = strstr(out, label);
    if (p == NULL)
        fail_msg("no %s in:\n%s", label, out);
    return strtoull(p + strlen(label) + strspn(p + strlen(label), " "), NULL, 10);
}

/* The counts info gives for the tree test_info makes. */
static void check_info_counts(void)
{
    assert_int_equal(info_field("Format version:"), SCHEMA_VERSION);
    assert_int_equal(info_field("Chunk size:"), 4096);
    assert_int_equal(info_field("Inline limit:"), 4096);
    assert_int_equal(info_field("Root reserve:"), 5); /* mkfs.lsmfs's default -m */
    assert_int_equal(info_field("Files:"), 3);
    assert_int_equal(info_field("Directories:"), 3); /* the root too */
    assert_int_equal(info_field("Symlinks:"), 1);
    assert_int_equal(info_field("Bytes stored:"), 100 + 5000 + 300000);
    assert_int_equal(info_field("Snapshots:"), 1);
    assert_true(info_field("Bytes on disk:") > 300000);
    assert_non_null(strstr(out, "Tables per level:"));
}

/* info of a mount (asked of its daemon) and of the store (unmounted): the
 * same counts. */
static void test_info(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("a"), 0755));
    TM_OK(mkdir(P("a/b"), 0755));
    tm_make_file(P("f1"), 100, 1);
    tm_make_file(P("a/f2"), 5000, 2);
    tm_make_file(P("a/b/f3"), 300000, 3);
    TM_OK(symlink("f1", P("l")));
    assert_int_equal(lsmctl("snapshot %s one", m->mnt), 0);
    assert_int_equal(lsmctl("info %s", m->mnt), 0);
    check_info_counts();
    assert_non_null(strstr(out, m->mnt));
    TM_OK(tm_unmount(m));
    assert_int_equal(lsmctl("info %s", m->store), 0);
    check_info_counts();
    assert_non_null(strstr(out, "(not mounted)"));
    assert_int_equal(lsmctl("info %s", m->root), 1); /* not a store */
    assert_non_null(strstr(out, "not an lsmfs"));
    TM_OK(tm_mount(m));
}

static int setup_allow_other(void **state)
{
    return tm_setup(state, 240, "test_lsmctl_live", "allow_other");
}

/* The info ioctl (a scan of every inode), compaction and the live check are
 * for root and the mounter only, as snapshots are: another user who may
 * enter gets EPERM. */
static void test_info_refused_to_others(void **state)
{
    struct tmount *m = *state;
    if (geteuid() != 0)
        fail_msg("needs root (to become another user)");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        int fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
            _exit(11);
        struct lsmfs_info in;
        int r = ioctl(fd, LSMFS_IOC_INFO, &in);
        if (r != -1 || errno != EPERM)
            _exit(12);
        struct lsmfs_compact c;
        memset(&c, 0, sizeof c);
        r = ioctl(fd, LSMFS_IOC_COMPACT, &c);
        if (r != -1 || errno != EPERM)
            _exit(13);
        static struct lsmfs_check_fs cf;
        r = ioctl(fd, LSMFS_IOC_CHECK_FS, &cf);
        _exit(r == -1 && errno == EPERM ? 0 : 14);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* A writer making files while the mount is compacted and checked. */
struct writer {
    const struct tmount *m;
    atomic_bool stop;
    int made;
    struct tm_errs errs;
};

static void *write_files(void *arg)
{
    struct writer *w = arg;
    char path[PATH_MAX + 32], buf[2000];
    memset(buf, 'w', sizeof buf);
    while (!atomic_load(&w->stop)) {
        snprintf(path, sizeof path, "%s/w%d", w->m->mnt, w->made);
        int err = tm_write_file(path, buf, sizeof buf, 0644);
        if (err != 0)
            tm_errs_add(&w->errs, "writing %s: %s", path, tm_errname(-err));
        w->made++;
    }
    return NULL;
}

/* compact MNT and check MNT while the mount serves a writer: progress lines,
 * the before/after line, sound; every file still reads back. */
static void test_online_compact_and_check(void **state)
{
    struct tmount *m = *state;
    for (int i = 0; i < 3000; i++)
        tm_make_file(P("f%d", i), 3000, (uint64_t)i);
    for (int i = 0; i < 3000; i += 2)
        TM_OK(unlink(P("f%d", i)));
    struct writer w = {.m = m};
    tm_errs_init(&w.errs);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_files, &w), 0);
    int rc = lsmctl("compact %s", m->mnt);
    char compact_out[4096];
    snprintf(compact_out, sizeof compact_out, "%.4000s", out);
    int rc2 = lsmctl("check %s", m->mnt);
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    tm_errs_check(&w.errs);
    if (rc != 0)
        fail_msg("compact: %d\n%s", rc, compact_out);
    assert_non_null(strstr(compact_out, "compact: 4/10 file data done"));
    assert_non_null(strstr(compact_out, "compact: 10/10 "));
    assert_non_null(strstr(compact_out, ": compacted: tables "));
    assert_non_null(strstr(compact_out, " MiB -> "));
    if (rc2 != 0)
        fail_msg("check: %d\n%s", rc2, out);
    assert_non_null(strstr(out, "check: level "));
    assert_non_null(strstr(out, "check: filesystem: "));
    assert_non_null(strstr(out, ": ok (0 problems)"));
    assert_true(w.made > 0);
    for (int i = 1; i < 3000; i += 2)
        tm_check_file(P("f%d", i), 3000, (uint64_t)i);
    assert_int_equal(tm_stats_counter(m, "fs store writes") > 0, 1);
}

/* The largest table file in dir into path. */
static off_t largest_table(const char *dir, char *path, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    off_t best = 0;
    while ((e = readdir(d)) != NULL) {
        char p[PATH_MAX + 256];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".ldb") != NULL && stat(p, &st) == 0 && st.st_size > best) {
            best = st.st_size;
            snprintf(path, cap, "%s", p);
        }
    }
    closedir(d);
    return best;
}

static void flip(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    TM_OK(fd);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, off), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

/* A damaged table of the live store: check MNT names it and exits 1. */
static void test_online_check_finds_damage(void **state)
{
    struct tmount *m = *state;
    for (int i = 0; i < 2000; i++)
        tm_make_file(P("f%d", i), 3000, (uint64_t)i);
    assert_int_equal(lsmctl("compact %s", m->mnt), 0);
    char path[PATH_MAX + 256];
    off_t size = largest_table(m->store, path, sizeof path);
    assert_true(size > 10000);
    flip(path, size / 3);
    int rc = lsmctl("check %s", m->mnt);
    flip(path, size / 3); /* undone before the daemon reads it itself */
    if (rc != 1)
        fail_msg("check of a damaged store: %d\n%s", rc, out);
    assert_non_null(strstr(out, "problem: "));
    assert_non_null(strstr(out, "DAMAGED"));
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_stats_json, setup),
        TM_TEST(test_stats_prometheus, setup),
        TM_TEST(test_stats_watch, setup),
        TM_TEST(test_info, setup),
        TM_TEST(test_info_refused_to_others, setup_allow_other),
        TM_TEST(test_online_compact_and_check, setup),
        TM_TEST(test_online_check_finds_damage, setup),
    };
    return cmocka_run_group_tests_name("lsmctl_live", tests, NULL, NULL);
}
