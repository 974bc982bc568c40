/*
 * test_private_store.c — what a second local user (uid 65534, in a child
 * that becomes it) can do to a root store and its tools: nothing. The
 * store, its snapshots, backups and restores are private whatever the
 * umask (LOCK cannot even be opened to flock it); a store left loose is
 * reported by fsck -n and tightened by the mount; backups refuse a
 * directory of someone else's or one others may write to; root's backup
 * of the user's store refuses a table the user pointed at a root file.
 * And what a crash or Ctrl-C leaves is cleaned: half-built snapshots at
 * the next mount, lsmctl's backup snapshot on SIGINT and at the next
 * backup, a backup list cut off before its rename at the next purge.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define OTHER 65534
#define SECRET "SECRET-MAIL-BODY-0123456789"

static char out[1 << 16];
#define lsmctl(...) tm_lsmctl(out, sizeof out, __VA_ARGS__)

static mode_t saved_umask;

/* A fresh mount made with umask 0 (the modes must not depend on it), in a
 * temp dir others may enter, as a home directory. */
static int setup(void **state)
{
    saved_umask = umask(0);
    int r = tm_setup(state, 180, "test_private_store", NULL);
    umask(saved_umask);
    if (r == 0)
        r = chmod(((struct tmount *)*state)->root, 0755);
    return r;
}

/* root/NAME */
static const char *at(const struct tmount *m, const char *name)
{
    static char bufs[4][PATH_MAX + 64];
    static int k;
    char *p = bufs[k++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", m->root, name);
    return p;
}

/* Runs fn(m, arg) in a child as uid/gid 65534: its exit status (0 ok). */
static int as_other(const struct tmount *m, int (*fn)(const struct tmount *, const char *),
                    const char *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setresgid(OTHER, OTHER, OTHER) || setresuid(OTHER, OTHER, OTHER))
            _exit(100);
        _exit(fn(m, arg));
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* ------------------------------------------------------ 28.1: modes */

static int bad_modes;
static char bad_path[PATH_MAX];

static int check_mode(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    unsigned want = flag == FTW_D ? 0700 : 0600;
    if (flag != FTW_SL && (st->st_mode & 0777) != want && bad_modes++ == 0)
        snprintf(bad_path, sizeof bad_path, "%s (mode %o)", path, st->st_mode & 0777);
    return 0;
}

/* Every directory under dir (itself too) 0700, every file 0600. */
static void assert_private_tree(const char *dir)
{
    bad_modes = 0;
    assert_int_equal(nftw(dir, check_mode, 16, FTW_PHYS), 0);
    if (bad_modes != 0)
        fail_msg("%d entries under %s are not private, e.g. %s", bad_modes, dir, bad_path);
}

/* As 65534: nothing of arg (a tree) can be opened, LOCK included. */
static int nothing_opens(const struct tmount *m, const char *dir)
{
    (void)m;
    char lock[PATH_MAX];
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    if (opendir(dir) != NULL || errno != EACCES)
        return 1;
    if (open(lock, O_RDONLY) >= 0 || errno != EACCES)
        return 2;
    return 0;
}

static void test_everything_private(void **state)
{
    struct tmount *m = *state;
    TM_OK(tm_write_file(P("mail"), SECRET, strlen(SECRET), 0600));
    assert_int_equal(lsmctl("snapshot %s s1", m->mnt), 0);
    umask(0);
    int rc = lsmctl("backup %s %s", m->mnt, at(m, "bk"));
    umask(saved_umask);
    if (rc != 0)
        fail_msg("backup: %s", out);
    umask(0);
    rc = lsmctl("backup restore %s 1 %s", at(m, "bk"), at(m, "restored"));
    umask(saved_umask);
    if (rc != 0)
        fail_msg("restore: %s", out);
    assert_private_tree(m->store);
    assert_private_tree(at(m, "bk"));
    assert_private_tree(at(m, "restored"));
    assert_int_equal(as_other(m, nothing_opens, m->store), 0);
    assert_int_equal(as_other(m, nothing_opens, at(m, "bk")), 0);
    assert_int_equal(as_other(m, nothing_opens, at(m, "restored")), 0);
}

/* A store made loose (as older versions left it): fsck -n says so and
 * changes nothing; the mount makes it private again. */
static void test_loose_store_reported_and_tightened(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(tm_unmount(m), 0);
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "chmod 755 %s && chmod 644 %s/*", m->store, m->store);
    assert_int_equal(system(cmd), 0);
    char *argv[] = {(char *)tm_bin("fsck.lsmfs"), "-n", m->store, NULL};
    char log[PATH_MAX + 16];
    snprintf(log, sizeof log, "%s/fsck.log", m->root);
    assert_int_equal(tm_run(argv, log, 60), 4);
    assert_int_equal(tm_read_file(log, out, sizeof out - 1) > 0, 1);
    if (strstr(out, "mode 0755") == NULL || strstr(out, "LOCK: mode 0644") == NULL)
        fail_msg("fsck -n did not report the loose modes:\n%s", out);
    struct stat st;
    TM_OK(stat(m->store, &st));
    assert_int_equal(st.st_mode & 0777, 0755); /* -n wrote nothing */
    assert_int_equal(tm_mount(m), 0);
    assert_private_tree(m->store);
}

/* ------------------------------------------- 28.2: backup directories */

static int make_dir(const struct tmount *m, const char *dir)
{
    (void)m;
    return mkdir(dir, 0755) != 0;
}

static void test_backup_dir_rules(void **state)
{
    struct tmount *m = *state;
    const char *shared = at(m, "shared");
    TM_OK(mkdir(shared, 01777)); /* as /tmp */
    TM_OK(chmod(shared, 01777));
    assert_int_equal(as_other(m, make_dir, at(m, "shared/bk")), 0);
    assert_int_not_equal(lsmctl("backup %s %s", m->mnt, at(m, "shared/bk")), 0);
    if (strstr(out, "owned by uid 65534") == NULL)
        fail_msg("a backup into 65534's directory: %s", out);
    struct stat st;
    TM_ERR(stat(at(m, "shared/bk/LOCK"), &st), ENOENT);
    TM_OK(mkdir(at(m, "loose"), 0777));
    TM_OK(chmod(at(m, "loose"), 0777));
    assert_int_not_equal(lsmctl("backup %s %s", m->mnt, at(m, "loose")), 0);
    if (strstr(out, "writable by others") == NULL || strstr(out, "chmod go-w") == NULL)
        fail_msg("a backup into a 0777 directory: %s", out);
    /* A new directory in the shared one is made private; a restore there
     * too, and one onto 65534's directory is refused. */
    if (lsmctl("backup %s %s", m->mnt, at(m, "shared/mine")) != 0)
        fail_msg("backup: %s", out);
    assert_int_equal(as_other(m, make_dir, at(m, "shared/dest")), 0);
    assert_int_not_equal(lsmctl("backup restore %s 1 %s", at(m, "shared/mine"),
                                at(m, "shared/dest")), 0);
    if (lsmctl("backup restore %s 1 %s", at(m, "shared/mine"), at(m, "shared/r")) != 0)
        fail_msg("restore: %s", out);
    assert_private_tree(at(m, "shared/r"));
    assert_private_tree(at(m, "shared/mine"));
}

/* ----------------------------------- 28.3: root's backup of a user store */

static int user_mkfs(const struct tmount *m, const char *dir)
{
    (void)m;
    char *argv[] = {(char *)tm_bin("mkfs.lsmfs"), "-q", (char *)dir, NULL};
    return tm_run(argv, NULL, 60);
}

/* As the store's user: its first table becomes a link to arg. */
static const char *user_table;
static int plant_link(const struct tmount *m, const char *target)
{
    (void)m;
    return unlink(user_table) != 0 || symlink(target, user_table) != 0;
}

/* The path of a table (*.ldb) in dir, into p; false if none. */
static bool find_table(const char *dir, char *p, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d != NULL && !found && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".ldb") != NULL) {
            snprintf(p, cap, "%s/%s", dir, e->d_name);
            found = true;
        }
    if (d != NULL)
        closedir(d);
    return found;
}

static void test_root_backup_of_user_store(void **state)
{
    struct tmount *m = *state;
    const char *shared = at(m, "shared");
    TM_OK(mkdir(shared, 01777));
    TM_OK(chmod(shared, 01777));
    const char *ustore = at(m, "shared/ustore");
    assert_int_equal(as_other(m, user_mkfs, ustore), 0);
    char table[PATH_MAX];
    assert_true(find_table(ustore, table, sizeof table));
    struct stat st;
    TM_OK(stat(table, &st));
    /* A root-only file of the table's size, holding the secret. */
    char *secret = calloc(1, (size_t)st.st_size);
    assert_non_null(secret);
    for (size_t i = 0; i + strlen(SECRET) <= (size_t)st.st_size; i += strlen(SECRET))
        memcpy(secret + i, SECRET, strlen(SECRET));
    TM_OK(tm_write_file(at(m, "rootfile"), secret, (size_t)st.st_size, 0600));
    free(secret);
    user_table = table;
    assert_int_equal(as_other(m, plant_link, at(m, "rootfile")), 0);
    assert_int_not_equal(lsmctl("backup %s %s", ustore, at(m, "rbk")), 0);
    if (strstr(out, table) == NULL || strstr(out, "refused") == NULL)
        fail_msg("root's backup of a store with a planted link: %s", out);
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "grep -rqs %s %s", SECRET, at(m, "rbk"));
    assert_int_not_equal(system(cmd), 0); /* the secret is in no backup file */
}

/* --------------------------------------------------- 29.6: leftovers */

static bool snapshot_named(const struct tmount *m, const char *prefix)
{
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/snapshots", m->store);
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d != NULL && !found && (e = readdir(d)) != NULL)
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d != NULL)
        closedir(d);
    return found;
}

static void test_half_built_snapshot_removed_at_mount(void **state)
{
    struct tmount *m = *state;
    assert_int_equal(lsmctl("snapshot %s s1", m->mnt), 0); /* makes snapshots/ */
    assert_int_equal(tm_unmount(m), 0);
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/snapshots/.s2.tmp-4242-0", m->store);
    TM_OK(mkdir(dir, 0700));
    strcat(dir, "/000009.ldb");
    TM_OK(tm_write_file(dir, "table", 5, 0600));
    snprintf(dir, sizeof dir, "%s/snapshots/.s3.del-4242-0", m->store);
    TM_OK(mkdir(dir, 0700));
    assert_int_equal(tm_mount(m), 0);
    assert_false(snapshot_named(m, ".s2.tmp-"));
    assert_false(snapshot_named(m, ".s3.del-"));
    assert_true(snapshot_named(m, "s1"));
}

static void test_stale_backup_snapshot_removed(void **state)
{
    struct tmount *m = *state;
    /* A stale one of a process that is gone: the next backup removes it. */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    assert_int_equal(lsmctl("snapshot %s lsmctl-backup-%ld-1", m->mnt, (long)dead), 0);
    if (lsmctl("backup %s %s", m->mnt, at(m, "bk")) != 0 || strstr(out, "backup 1:") == NULL)
        fail_msg("backup: %s", out);
    assert_false(snapshot_named(m, "lsmctl-backup-"));
}

/* SIGINT while a backup copies: its snapshot goes, exit 130. */
static void test_sigint_removes_backup_snapshot(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("big"), 256 * MiB, 9);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(tm_bin("lsmctl"), "lsmctl", "backup", m->mnt, at(m, "bk2"), (char *)NULL);
        _exit(127);
    }
    double t0 = tm_now();
    while (!snapshot_named(m, "lsmctl-backup-") && tm_now() - t0 < 60)
        tm_sleep_ms(1);
    assert_true(snapshot_named(m, "lsmctl-backup-"));
    tm_sleep_ms(20);
    TM_OK(kill(pid, SIGINT));
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 130)
        fail_msg("lsmctl backup after SIGINT: %s %d", WIFEXITED(st) ? "exit" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    assert_false(snapshot_named(m, "lsmctl-backup-"));
}

static void test_purge_removes_cut_off_list(void **state)
{
    struct tmount *m = *state;
    if (lsmctl("backup %s %s", m->mnt, at(m, "bk")) != 0)
        fail_msg("backup: %s", out);
    TM_OK(tm_write_file(at(m, "bk/meta/.tmp-2"), "cut off", 7, 0600));
    if (lsmctl("backup purge %s --keep 1", at(m, "bk")) != 0)
        fail_msg("purge: %s", out);
    struct stat st;
    TM_ERR(stat(at(m, "bk/meta/.tmp-2"), &st), ENOENT);
    TM_OK(stat(at(m, "bk/meta/1"), &st));
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_everything_private, setup),
        TM_TEST(test_loose_store_reported_and_tightened, setup),
        TM_TEST(test_backup_dir_rules, setup),
        TM_TEST(test_root_backup_of_user_store, setup),
        TM_TEST(test_half_built_snapshot_removed_at_mount, setup),
        TM_TEST(test_stale_backup_snapshot_removed, setup),
        TM_TEST(test_sigint_removes_backup_snapshot, setup),
        TM_TEST(test_purge_removes_cut_off_list, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
