/*
 * test_backup.c — `lsmctl backup` of a mounted lsmfs: two backups with
 * changes between (the second copies less), each restored, mounted
 * read-only and compared (diff -r) with the tree expected at its time,
 * built in a plain directory by the same steps; the snapshot each backup
 * took is gone afterwards; verify's exit status is 0 on a sound backup
 * and 3 on a damaged one; the mounted store's own directory is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mount.h"
#include "snaptool.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int setup(void **state)
{
    return tm_setup(state, 180, "test_backup", NULL);
}

static char out[1 << 16];

/* `lsmctl ARGS`, output in out; the exit status. */
#define lsmctl(...) tm_lsmctl(out, sizeof out, __VA_ARGS__)

static void mkdir_at(const char *base, const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", base, name);
    if (mkdir(p, 0755) != 0)
        fail_msg("mkdir %s: %s", p, strerror(errno));
}

static void file_at(const char *base, const char *name, size_t size, uint64_t seed)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", base, name);
    unlink(p);
    tm_make_file(p, size, seed);
}

/* The first tree: directories, files of several sizes (inline, chunked,
 * megabytes), a symlink. */
static void tree_v1(const char *base)
{
    mkdir_at(base, "docs");
    mkdir_at(base, "docs/old");
    mkdir_at(base, "data");
    for (int i = 0; i < 40; i++) {
        char name[64];
        snprintf(name, sizeof name, "docs/note%02d.txt", i);
        file_at(base, name, 100 + (size_t)i * 397, (uint64_t)i);
    }
    for (int i = 0; i < 6; i++) {
        char name[64];
        snprintf(name, sizeof name, "data/blob%d", i);
        file_at(base, name, (size_t)(1 + i) * MiB + 123, 1000 + (uint64_t)i);
    }
    file_at(base, "docs/old/keep", 5000, 77);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/link", base);
    assert_int_equal(symlink("docs/note01.txt", p), 0);
}

/* A small change: two notes rewritten, one removed, a file added. */
static void tree_v2(const char *base)
{
    file_at(base, "docs/note03.txt", 9000, 5003);
    file_at(base, "docs/note04.txt", 10, 5004);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/docs/note05.txt", base);
    assert_int_equal(unlink(p), 0);
    file_at(base, "docs/new.txt", 3000, 5005);
}

/* The number after `key` in out ("copied" of "... N copied"). */
static unsigned long long number_before(const char *word)
{
    const char *w = strstr(out, word);
    if (w == NULL)
        fail_msg("no \"%s\" in: %s", word, out);
    while (w > out && w[-1] == ' ')
        w--;
    while (w > out && w[-1] >= '0' && w[-1] <= '9')
        w--;
    return strtoull(w, NULL, 10);
}

/* Restores backup id, mounts it read-only, diffs it against want. */
static void check_restored(const struct tmount *m, const char *bk, int id, const char *want)
{
    char dest[PATH_MAX + 32];
    snprintf(dest, sizeof dest, "%s/restored-%d", m->root, id);
    if (lsmctl("backup restore %s %d %s", bk, id, dest) != 0)
        fail_msg("restore %d: %s", id, out);
    struct tmount *r = tm_mount_ro_dir(dest, "restored backup");
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "diff -r --no-dereference '%s' '%s' >&2", want, r->mnt);
    int rc = system(cmd);
    assert_int_equal(tm_unmount(r), 0);
    tm_free(r);
    if (rc != 0)
        fail_msg("backup %d restored differs from the expected tree (diff above)", id);
}

/* Whether any snapshot of m is left (lsmctl backup deletes its own). */
static void assert_no_snapshots(const struct tmount *m)
{
    if (lsmctl("snapshot %s --list", m->mnt) != 0)
        fail_msg("snapshot --list: %s", out);
    if (strstr(out, "lsmctl-backup") != NULL)
        fail_msg("a backup's snapshot is left: %s", out);
}

static void test_backup_mounted(void **state)
{
    struct tmount *m = *state;
    char want1[PATH_MAX], want2[PATH_MAX], bk[PATH_MAX + 16];
    assert_int_equal(tm_mkdtemp(want1, "backup-want1"), 0);
    assert_int_equal(tm_mkdtemp(want2, "backup-want2"), 0);
    snprintf(bk, sizeof bk, "%s/backups", m->root);
    tree_v1(m->mnt);
    tree_v1(want1);
    tree_v1(want2);
    if (lsmctl("backup %s %s", m->mnt, bk) != 0)
        fail_msg("backup 1: %s", out);
    unsigned long long copied1 = number_before(" copied");
    assert_no_snapshots(m);
    tree_v2(m->mnt);
    tree_v2(want2);
    if (lsmctl("backup %s %s", m->mnt, bk) != 0)
        fail_msg("backup 2: %s", out);
    unsigned long long copied2 = number_before(" copied");
    print_message("backup 1 copied %llu bytes, backup 2 %llu\n", copied1, copied2);
    assert_true(copied1 > 6 * MiB);
    assert_true(copied2 * 4 < copied1);
    assert_no_snapshots(m);
    assert_int_equal(lsmctl("backup list %s", bk), 0);
    assert_non_null(strstr(out, "\n1 "));
    assert_non_null(strstr(out, "\n2 "));
    if (lsmctl("backup verify %s", bk) != 0)
        fail_msg("verify: %s", out);
    check_restored(m, bk, 1, want1);
    check_restored(m, bk, 2, want2);
    /* The store of a mount is in use: refused, naming the way. */
    assert_int_equal(lsmctl("backup %s %s", m->store, bk), 1);
    char want[4 * PATH_MAX];
    snprintf(want, sizeof want, ": the store is mounted at %s (pid %d): give the mount point: "
             "lsmctl backup %s DIR\n", m->mnt, (int)m->daemon, m->mnt);
    if (strstr(out, want) == NULL)
        fail_msg("refusal: %s", out);
    /* Damage: exit status 3, naming the file. */
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd,
             "f=$(ls -S '%s'/shared/* | head -1) && printf 'Z' | "
             "dd of=\"$f\" bs=1 seek=4097 conv=notrunc 2>/dev/null",
             bk);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(lsmctl("backup verify %s", bk), 3);
    assert_non_null(strstr(out, "damaged at offset 0"));
    assert_int_equal(lsmctl("backup restore %s 2 %s/again", bk, m->root), 3);
    assert_int_equal(lsmctl("backup purge %s --keep x", bk), 2);
    assert_int_equal(lsmctl("backup purge %s --keep 1", bk), 0);
    assert_int_equal(lsmctl("backup list %s", bk), 0);
    assert_null(strstr(out, "\n1 "));
    assert_int_equal(tm_rmtree(want1), 0);
    assert_int_equal(tm_rmtree(want2), 0);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_backup_mounted, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
