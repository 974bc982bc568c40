/*
 * test_tools.c — the four tools behave alike: --help and --version (exit 0,
 * one version) on lsmfs, mkfs.lsmfs, fsck.lsmfs, lsmctl and mount.lsmfs;
 * the exit codes their man pages' tables give; mount(8)'s helper
 * (mount -t lsmfs, an fstab line of type lsmfs); make install / uninstall
 * into a DESTDIR. Run from the source tree (make test does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mount.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char out[1 << 16];
static char bindir[PATH_MAX];

/* `sh -c CMD` with stdout and stderr into a file, then into out (a file, not
 * a pipe: a detached daemon that logs to stderr keeps it open). Its exit
 * status, or -1. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[4 * PATH_MAX], file[] = "/tmp/lsmfs-test-tools-XXXXXX";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int fd = mkstemp(file);
    if (fd < 0)
        return -1;
    close(fd);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int rc = tm_run(argv, file, 120);
    FILE *f = fopen(file, "r");
    size_t n = f != NULL ? fread(out, 1, sizeof out - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    out[n] = '\0';
    unlink(file);
    return rc;
}

static const char *const tools[] = {"lsmfs", "mkfs.lsmfs", "fsck.lsmfs", "lsmctl", "mount.lsmfs"};

/* Every tool: --help exits 0 with its usage on stdout; --version exits 0
 * with "TOOL (lsmfs) VERSION, on-disk format N", the same VERSION for all. */
static void test_help_and_version(void **state)
{
    (void)state;
    char first[128] = "";
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        assert_int_equal(sh("%s/%s --help 2>/dev/null", bindir, tools[i]), 0);
        assert_non_null(strstr(out, "usage"));
        assert_int_equal(sh("%s/%s --version 2>/dev/null", bindir, tools[i]), 0);
        char want[64];
        snprintf(want, sizeof want, "%s (lsmfs) ", tools[i]);
        if (strncmp(out, want, strlen(want)) != 0)
            fail_msg("%s --version: %s", tools[i], out);
        const char *v = out + strlen(want);
        size_t len = strcspn(v, "\n");
        if (first[0] == '\0')
            snprintf(first, sizeof first, "%.*s", (int)len, v);
        else if (strlen(first) != len || strncmp(first, v, len) != 0)
            fail_msg("%s --version says %.*s, lsmfs %s", tools[i], (int)len, v, first);
    }
    assert_non_null(strstr(first, ", on-disk format "));
}

/* The codes of the man pages' EXIT STATUS tables. */
static void test_exit_codes(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    TM_OK(tm_mkdtemp(dir, "tools"));
    /* mkfs.lsmfs: 0 made, 1 any error (a usage error too) */
    assert_int_equal(sh("%s/mkfs.lsmfs -q %s/s", bindir, dir), 0);
    assert_int_equal(sh("%s/mkfs.lsmfs -q %s/s", bindir, dir), 1); /* exists: -f needed */
    assert_int_equal(sh("%s/mkfs.lsmfs -Z %s/t", bindir, dir), 1);
    /* fsck.lsmfs: 0 clean, 8 not a store */
    assert_int_equal(sh("%s/fsck.lsmfs -n %s/s", bindir, dir), 0);
    assert_int_equal(sh("%s/fsck.lsmfs -n %s", bindir, dir), 8);
    /* lsmctl: 0 ok, 1 failure, 2 usage */
    assert_int_equal(sh("%s/lsmctl tables %s/s", bindir, dir), 0);
    assert_int_equal(sh("%s/lsmctl tables %s", bindir, dir), 1);
    assert_int_equal(sh("%s/lsmctl frobnicate %s", bindir, dir), 2);
    /* lsmfs: 1 for every refusal, a usage error too */
    assert_int_equal(sh("%s/lsmfs %s %s/s", bindir, dir, dir), 1);
    assert_int_equal(sh("%s/lsmfs", bindir), 1);
    /* mount.lsmfs: 1 for a usage error, lsmfs's otherwise */
    assert_int_equal(sh("%s/mount.lsmfs %s", bindir, dir), 1);
    assert_int_equal(sh("%s/mount.lsmfs %s %s/s -x", bindir, dir, dir), 1);
    assert_int_equal(sh("%s/mount.lsmfs %s %s/s", bindir, dir, dir), 1);
    TM_OK(tm_rmtree(dir));
}

/* mount(8)'s helper called as mount(8) calls it: mount(8)'s own options are
 * dropped, lsmfs's passed; -f mounts nothing. */
static void test_mount_helper_direct(void **state)
{
    (void)state;
    struct tmount *m = tm_new_external();
    assert_non_null(m);
    assert_int_equal(sh("%s/mkfs.lsmfs -q %s", bindir, m->store), 0);
    assert_int_equal(sh("%s/mount.lsmfs %s %s -fv -o defaults,noauto", bindir, m->store, m->mnt), 0);
    assert_false(tm_is_mounted(m->mnt));
    assert_int_equal(sh("%s/mount.lsmfs %s %s -n -o defaults,noauto,nofail,_netdev,"
                        "x-systemd.automount,rw,readahead=256,log=%s/log",
                        bindir, m->store, m->mnt, m->root),
                     0);
    assert_true(tm_is_mounted(m->mnt));
    tm_touch(P("f"));
    TM_OK(tm_umount_path(m->mnt));
    /* an option lsmfs does not know is lsmfs's refusal */
    assert_int_equal(sh("%s/mount.lsmfs %s %s -o frob=1,log=%s/log", bindir, m->store, m->mnt,
                        m->root),
                     1);
    assert_false(tm_is_mounted(m->mnt));
    tm_sleep_ms(300);
    tm_free(m);
}

/* Through util-linux: `mount -t lsmfs` and an fstab line of type lsmfs,
 * with the helper at /sbin/mount.lsmfs and that fstab in a mount namespace
 * of their own (the machine's /sbin and /etc/fstab are not touched). */
static void test_mount_t_lsmfs_and_fstab(void **state)
{
    (void)state;
    if (geteuid() != 0)
        fail_msg("needs root (a private mount namespace for /sbin and /etc/fstab)");
    struct tmount *m = tm_new_external();
    assert_non_null(m);
    assert_int_equal(sh("%s/mkfs.lsmfs -q %s", bindir, m->store), 0);
    char fstab[PATH_MAX + 16];
    snprintf(fstab, sizeof fstab, "%s/fstab", m->root);
    FILE *f = fopen(fstab, "w");
    assert_non_null(f);
    fprintf(f, "%s %s lsmfs defaults,noauto,log=%s/log 0 0\n", m->store, m->mnt, m->root);
    fclose(f);
    /* In the namespace: the helper in a tmpfs over /sbin's directory; mount
     * -t, look, unmount; mount by the fstab line, look, unmount. */
    int rc = sh("unshare -m --propagation private /bin/sh -ec '"
                "trap \"umount -l %s 2>/dev/null || true\" EXIT; "
                "mount -t tmpfs none \"$(realpath /sbin)\"; ln -s %s/mount.lsmfs /sbin/mount.lsmfs; "
                "mount -t lsmfs -o nonempty,log=%s/log %s %s; grep \" %s fuse.lsmfs \" /proc/self/mounts; "
                "touch %s/by-type; umount %s; "
                "mount --bind %s /etc/fstab; mount %s; grep \" %s fuse.lsmfs \" /proc/self/mounts; "
                "ls %s; umount %s; echo done'",
                m->mnt, bindir, m->root, m->store, m->mnt, m->mnt, m->mnt, m->mnt, fstab, m->mnt, m->mnt,
                m->mnt, m->mnt);
    if (rc != 0 || strstr(out, "done") == NULL)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "by-type")); /* the fstab mount shows the file */
    tm_sleep_ms(300); /* the daemons exit after their unmounts */
    tm_free(m);
}

/* make install into a DESTDIR puts the tools, the helper and the man pages
 * where the Makefile says, no benchmark; make uninstall leaves no file. */
static void test_install_uninstall(void **state)
{
    (void)state;
    if (access("Makefile", R_OK) != 0 || access("tools/mount.lsmfs.in", R_OK) != 0)
        fail_msg("run from the source tree (make test does)");
    char dest[PATH_MAX];
    TM_OK(tm_mkdtemp(dest, "install"));
    assert_int_equal(sh("make -s --no-print-directory install NOBUILD=1 BIN=%s DESTDIR=%s "
                        "PREFIX=/usr/local",
                        bindir, dest),
                     0);
    const char *want[] = {"/usr/local/bin/lsmfs", "/usr/local/bin/lsmctl", "/sbin/mkfs.lsmfs",
                          "/sbin/fsck.lsmfs", "/sbin/mount.lsmfs",
                          "/usr/local/share/man/man8/lsmfs.8",
                          "/usr/local/share/man/man8/lsmctl.8"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char p[2 * PATH_MAX];
        snprintf(p, sizeof p, "%s%s", dest, want[i]);
        if (access(p, R_OK) != 0)
            fail_msg("make install made no %s", want[i]);
    }
    assert_int_equal(sh("find %s -name '*bench*' -o -name nowork-fs", dest), 0);
    assert_string_equal(out, "");
    /* the installed helper runs the installed lsmfs */
    assert_int_equal(sh("grep -x LSMFS=/usr/local/bin/lsmfs %s/sbin/mount.lsmfs", dest), 0);
    assert_int_equal(sh("make -s --no-print-directory uninstall DESTDIR=%s PREFIX=/usr/local",
                        dest),
                     0);
    assert_int_equal(sh("find %s ! -type d", dest), 0);
    if (out[0] != '\0')
        fail_msg("make uninstall left:\n%s", out);
    TM_OK(tm_rmtree(dest));
}

/* tools/deps.sh (what make runs first) asks a non-root user for the test
 * packages only when tests are built: make mount needs none of them. The
 * PATH has pkg-config and fusermount3 but no setfacl, getfattr, rsync,
 * objdump. */
static void test_deps_build_vs_test(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    TM_OK(tm_mkdtemp(dir, "deps"));
    TM_OK(chmod(dir, 0755)); /* nobody runs a copy: the tree may be closed to it */
    assert_int_equal(sh("for p in pkg-config fusermount3 sh; do ln -s \"$(command -v $p)\" %s/; "
                        "done; cp tools/deps.sh %s/",
                        dir, dir),
                     0);
    assert_int_equal(sh("setpriv --reuid=65534 --regid=65534 --clear-groups env PATH=%s "
                        "sh %s/deps.sh",
                        dir, dir),
                     0);
    assert_string_equal(out, "");
    assert_int_equal(sh("setpriv --reuid=65534 --regid=65534 --clear-groups env PATH=%s "
                        "sh %s/deps.sh test",
                        dir, dir),
                     1);
    assert_non_null(strstr(out, "missing packages: acl attr rsync binutils"));
    TM_OK(tm_rmtree(dir));
}

int main(void)
{
    tm_init();
    const char *b = tm_bin("");
    snprintf(bindir, sizeof bindir, "%.*s", (int)strlen(b) - 1, b);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_mount_helper_direct),
        cmocka_unit_test(test_mount_t_lsmfs_and_fstab),
        cmocka_unit_test(test_install_uninstall),
        cmocka_unit_test(test_deps_build_vs_test),
    };
    return cmocka_run_group_tests_name("tools", tests, NULL, NULL);
}
