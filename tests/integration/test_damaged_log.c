/*
 * test_damaged_log.c — a damaged write-ahead log never becomes wrong data,
 * and the read-only tools and mount change nothing.
 *
 * Files are written and fsynced through a mount, the daemon is killed so
 * the live log holds them, then a bit of the log is flipped (each offset on
 * a fresh copy of the store): fsck.lsmfs -n names the log and byte or finds
 * nothing, and a mount either refuses (naming the log and byte) or serves
 * every file as written or absent with every file after it. fsck -n,
 * lsmctl check and lsmfs -o ro then work on the store through a read-only
 * bind mount and leave every byte of it as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mount.h"
#include "../unit/testutil.h" /* tu_newest_file, tu_xor_byte, tu_dir_digest */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFILES 40

static size_t file_size_of(int i)
{
    return (size_t)(i % 5 == 0 ? 20000 + 1000 * i : 300 + 97 * i);
}

/* Writes f000.. in order, each fsynced, then kills the daemon: the live
 * log holds them. */
static void write_and_kill(struct tmount *m)
{
    for (int i = 0; i < NFILES; i++) {
        const char *p = P("f%03d", i);
        tm_make_file(p, file_size_of(i), (uint64_t)i + 1);
        tm_fsync_path(p, false);
    }
    tm_fsync_path(m->mnt, true);
    if (tm_crash(m) != 0)
        fail_msg("the daemon was not running at the kill");
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("failed: %s", cmd);
}

/* Name (not path) of the newest log in the store. */
static void newest_log(const char *store, char *out, size_t cap)
{
    char path[PATH_MAX + 32];
    tu_newest_file(store, "log", path, sizeof path);
    snprintf(out, cap, "%s", strrchr(path, '/') + 1);
}

/* Whole text of a file (malloc'd; "" if missing). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

/* Runs a tool with output to `out`; its exit code. */
static int run_tool(const char *out, const char *prog, const char *a1, const char *a2)
{
    unlink(out);
    char *const argv[] = {(char *)tm_bin(prog), (char *)a1, (char *)a2, NULL};
    return tm_run(argv, out, 60);
}

/* Every file is as written, or absent with every file after it; the last
 * file present may also be empty (created, its data not yet written: a
 * state that existed). Returns how many files are complete. */
static int check_prefix(struct tmount *m)
{
    int have = NFILES;
    for (int i = 0; i < NFILES; i++) {
        const char *p = P("f%03d", i);
        struct stat st;
        if (stat(p, &st) != 0) {
            if (errno != ENOENT)
                fail_msg("%s: %s", p, tm_errname(errno));
            if (have == NFILES)
                have = i;
            continue;
        }
        if (have < NFILES)
            fail_msg("%s present although f%03d is not complete: not a prefix", p, have);
        if (st.st_size == 0 && file_size_of(i) != 0) {
            have = i; /* created, not yet written */
            continue;
        }
        tm_check_file(p, file_size_of(i), (uint64_t)i + 1);
    }
    return have;
}

/* ------------------------------------------------------------- the sweep */

static int setup_plain(void **state)
{
    return tm_setup(state, 600, "damaged log", NULL);
}

static void test_flipped_bits_never_wrong_data(void **state)
{
    struct tmount *m = *state;
    write_and_kill(m);
    char pristine[PATH_MAX + 16], log[32], logpath[PATH_MAX + 40], out[PATH_MAX + 16];
    snprintf(pristine, sizeof pristine, "%s/pristine", m->root);
    snprintf(out, sizeof out, "%s/tool.out", m->root);
    sh("cp -a '%s' '%s'", m->store, pristine);
    newest_log(m->store, log, sizeof log);
    snprintf(logpath, sizeof logpath, "%s/%s", m->store, log);
    long used = tu_used_bytes(logpath);
    assert_true(used > 4096);
    int refused = 0, served = 0;
    for (int k = 0; k <= 16; k++) {
        long off = k < 16 ? 11 + (used - 11) * k / 16 : used - 2; /* the last: a torn tail */
        sh("rm -rf '%s' && cp -a '%s' '%s'", m->store, pristine, m->store);
        tu_xor_byte(logpath, off, 1 << (k % 8));
        int rc = run_tool(out, "fsck.lsmfs", "-n", m->store);
        char *report = slurp(out);
        if (rc != 0 && rc != 4)
            fail_msg("offset %ld: fsck -n exit %d:\n%s", off, rc, report);
        bool named = strstr(report, log) != NULL && strstr(report, "at byte") != NULL;
        char *old_log = slurp(m->log);
        long before = (long)strlen(old_log);
        free(old_log);
        int mounted = tm_mount(m);
        char *daemon = slurp(m->log);
        if (mounted != 0) {
            refused++;
            if (strstr(daemon + before, log) == NULL || strstr(daemon + before, "at byte") == NULL)
                fail_msg("offset %ld: the refusal does not name %s and a byte:\n%s", off, log,
                         daemon + before);
            if (!named)
                fail_msg("offset %ld: mount refused but fsck -n did not name the log:\n%s", off,
                         report);
        } else {
            served++;
            check_prefix(m);
            if (tm_unmount(m) != 0)
                fail_msg("offset %ld: unclean unmount", off);
        }
        free(daemon);
        free(report);
    }
    fprintf(stderr, "flipped bits: %d mounts refused, %d served a prefix\n", refused, served);
    assert_true(refused > 0 && served > 0);
    /* leave a mountable store for the teardown */
    sh("rm -rf '%s' && cp -a '%s' '%s'", m->store, pristine, m->store);
    TM_OK(tm_mount(m));
}

/* ------------------------------------------------------------- read-only */

static char robind[PATH_MAX - 64];

static int setup_ro(void **state)
{
    robind[0] = '\0';
    return tm_setup(state, 300, "read-only store", NULL);
}

static int teardown_ro(void **state)
{
    if (robind[0] != '\0') {
        umount2(robind, MNT_DETACH);
        rmdir(robind);
        robind[0] = '\0';
    }
    return tm_teardown(state);
}

/* fsck -n, lsmctl check and lsmfs -o ro on the store through a read-only
 * bind mount; returns after checking every byte of the store is unchanged.
 * `damaged`: the log is damaged (the tools report it, the mount serves the
 * prefix). */
static void check_read_only_tools(struct tmount *m, bool damaged)
{
    char *before = tu_dir_digest(m->store);
    char out[PATH_MAX + 16], log[32];
    snprintf(out, sizeof out, "%s/tool.out", m->root);
    newest_log(m->store, log, sizeof log);

    int rc = run_tool(out, "fsck.lsmfs", "-n", robind);
    char *report = slurp(out);
    if (rc != (damaged ? 4 : 0))
        fail_msg("fsck -n on a read-only medium: exit %d:\n%s", rc, report);
    if (damaged && strstr(report, log) == NULL)
        fail_msg("fsck -n does not name %s:\n%s", log, report);
    free(report);
    rc = run_tool(out, "lsmctl", "check", robind);
    report = slurp(out);
    if (rc != (damaged ? 1 : 0))
        fail_msg("lsmctl check on a read-only medium: exit %d:\n%s", rc, report);
    free(report);

    char saved[PATH_MAX];
    snprintf(saved, sizeof saved, "%s", m->store);
    snprintf(m->store, sizeof m->store, "%s", robind);
    snprintf(m->opts, sizeof m->opts, "ro");
    int mounted = tm_mount(m);
    snprintf(m->store, sizeof m->store, "%s", saved);
    m->opts[0] = '\0';
    TM_OK(mounted);
    int have = check_prefix(m);
    assert_true(damaged ? have < NFILES : have == NFILES);
    TM_ERR(open(P("new"), O_WRONLY | O_CREAT, 0644), EROFS);
    TM_ERR(mkdir(P("dir"), 0755), EROFS);
    TM_ERR(unlink(P("f000")), EROFS);
    TM_OK(tm_unmount(m));

    tu_assert_dir_unchanged(m->store, before);
    free(before);
}

static void bind_read_only(struct tmount *m)
{
    if (snprintf(robind, sizeof robind, "%s/ro", m->root) >= (int)sizeof robind)
        fail_msg("path too long");
    TM_OK(mkdir(robind, 0755));
    TM_OK(mount(m->store, robind, NULL, MS_BIND, NULL));
    TM_OK(mount(NULL, robind, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL));
    TM_ERR(open(tm_path(m, "../ro/probe"), O_WRONLY | O_CREAT, 0644), EROFS);
}

/* A store whose log is not flushed (the daemon was killed). */
static void test_read_only_tools_change_nothing(void **state)
{
    struct tmount *m = *state;
    write_and_kill(m);
    bind_read_only(m);
    check_read_only_tools(m, false);
    umount2(robind, MNT_DETACH);
    rmdir(robind);
    robind[0] = '\0';
    TM_OK(tm_mount(m));
}

/* The same store with a flipped bit in the middle of its log. */
static void test_read_only_tools_on_damaged_log(void **state)
{
    struct tmount *m = *state;
    write_and_kill(m);
    char log[32], logpath[PATH_MAX + 40];
    newest_log(m->store, log, sizeof log);
    snprintf(logpath, sizeof logpath, "%s/%s", m->store, log);
    tu_xor_byte(logpath, tu_used_bytes(logpath) / 2, 0x08);
    bind_read_only(m);
    check_read_only_tools(m, true);
    umount2(robind, MNT_DETACH);
    rmdir(robind);
    robind[0] = '\0';
    /* a read-write mount refuses; fsck -y keeps the prefix; then it mounts */
    assert_int_not_equal(tm_mount(m), 0);
    char out[PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/tool.out", m->root);
    int rc = run_tool(out, "fsck.lsmfs", "-y", m->store);
    char *report = slurp(out);
    if (rc != 1 || strstr(report, log) == NULL)
        fail_msg("fsck -y: exit %d:\n%s", rc, report);
    free(report);
    TM_OK(tm_mount(m));
    int have = check_prefix(m);
    assert_true(have < NFILES);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_flipped_bits_never_wrong_data, setup_plain),
        cmocka_unit_test_setup_teardown(test_read_only_tools_change_nothing, setup_ro, teardown_ro),
        cmocka_unit_test_setup_teardown(test_read_only_tools_on_damaged_log, setup_ro, teardown_ro),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
