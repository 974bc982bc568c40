/*
 * test_log.c — where the detached daemon's log goes (-o log=, fs/log.h):
 * a file, standard error, and standard error where there is no syslog; no
 * routine line unless -d.
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
#include <unistd.h>

static char text[1 << 16];

/* The whole of file path (at most sizeof text), "" if there is none. */
static const char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    text[n] = '\0';
    return text;
}

static bool syslog_present(void)
{
    struct stat st;
    return stat("/dev/log", &st) == 0 && S_ISSOCK(st.st_mode);
}

/* A store made in m->store. */
static void make_store(struct tmount *m)
{
    char *argv[] = {(char *)tm_bin("mkfs.lsmfs"), "-q", m->store, NULL};
    assert_int_equal(tm_run(argv, NULL, 30), 0);
}

/* `lsmfs STORE MNT -o opts` detached (no -f), its stderr appended to
 * errfile; must exit 0 with the mount in place. */
static void mount_detached(struct tmount *m, const char *opts, const char *errfile)
{
    char *argv[] = {(char *)tm_bin("lsmfs"), m->store, m->mnt, "-o", (char *)opts, NULL};
    assert_int_equal(tm_run(argv, errfile, 30), 0);
    assert_true(tm_is_mounted(m->mnt));
}

/* Something the daemon logs as an error: deleting a snapshot there is not. */
static void provoke_error(struct tmount *m)
{
    char out[4096];
    assert_int_not_equal(tm_lsmctl(out, sizeof out, "snapshot %s --delete nosuch", m->mnt), 0);
}

/* Unmounts and waits until the daemon (not our child) has written its last line. */
static void unmount(struct tmount *m)
{
    assert_int_equal(tm_umount_path(m->mnt), 0);
    tm_sleep_ms(300);
}

static void test_log_to_file(void **state)
{
    (void)state;
    struct tmount *m = tm_new_external();
    assert_non_null(m);
    make_store(m);
    char logfile[PATH_MAX + 16], errfile[PATH_MAX + 16], opt[PATH_MAX + 32];
    snprintf(logfile, sizeof logfile, "%s/the.log", m->root);
    snprintf(errfile, sizeof errfile, "%s/stderr", m->root);
    snprintf(opt, sizeof opt, "log=%s", logfile);
    mount_detached(m, opt, errfile);
    provoke_error(m);
    unmount(m);
    const char *log = slurp(logfile);
    assert_non_null(strstr(log, "mounted at"));
    assert_non_null(strstr(log, "error: no snapshot"));
    assert_string_equal(slurp(errfile), ""); /* the detached daemon said nothing there */
    tm_free(m);
}

/* A log file that cannot be opened refuses the mount, saying why. */
static void test_bad_log_file_refused(void **state)
{
    (void)state;
    struct tmount *m = tm_new_external();
    assert_non_null(m);
    make_store(m);
    char errfile[PATH_MAX + 16];
    snprintf(errfile, sizeof errfile, "%s/stderr", m->root);
    char *argv[] = {(char *)tm_bin("lsmfs"), m->store, m->mnt, "-o", "log=/nonexistent/dir/x",
                    NULL};
    assert_int_equal(tm_run(argv, errfile, 30), 1);
    assert_false(tm_is_mounted(m->mnt));
    assert_non_null(strstr(slurp(errfile), "-o log=/nonexistent/dir/x: No such file"));
    tm_free(m);
}

/* -o log=stderr, and the default where there is no syslog: the detached
 * daemon keeps the stderr it was started with (before: /dev/null, every
 * line lost). */
static void test_log_to_stderr(void **state)
{
    (void)state;
    bool default_too = !syslog_present();
    if (!default_too)
        printf("note: /dev/log exists here: the default (syslog) is not checked\n");
    for (int i = 0; i < (default_too ? 2 : 1); i++) {
        struct tmount *m = tm_new_external();
        assert_non_null(m);
        make_store(m);
        char errfile[PATH_MAX + 16];
        snprintf(errfile, sizeof errfile, "%s/stderr", m->root);
        mount_detached(m, i == 0 ? "log=stderr" : "nonempty", errfile);
        provoke_error(m);
        unmount(m);
        const char *log = slurp(errfile);
        assert_non_null(strstr(log, "mounted at"));
        assert_non_null(strstr(log, "(log: stderr)"));
        assert_non_null(strstr(log, "error: no snapshot"));
        tm_free(m);
    }
}

/* A mount that may not set its readahead window (here /sys is read-only in
 * a mount namespace of its own, as for a non-root mount, which cannot write
 * sysfs) logs no line about it (before: a warning on every mount); -d
 * shows it. */
static void test_routine_line_only_with_debug(void **state)
{
    (void)state;
    if (geteuid() != 0)
        fail_msg("needs root (a mount namespace with a read-only /sys)");
    struct tmount *m = tm_new_external();
    assert_non_null(m);
    make_store(m);
    static char script[16 * PATH_MAX];
    char errfile[PATH_MAX + 16];
    snprintf(errfile, sizeof errfile, "%s/stderr", m->root);
    const char *lsmfs = tm_bin("lsmfs");
    snprintf(script, sizeof script,
             "trap 'umount -l %s 2>/dev/null || true' EXIT; "
             "mount -o remount,bind,ro /sys; "
             "%s %s %s -o log=%s/plain.log; stat %s >/dev/null; sleep 0.3; umount %s; "
             "%s %s %s -d -o log=%s/debug.log >/dev/null 2>&1 & "
             "for i in $(seq 50); do grep -qs ' %s fuse' /proc/self/mounts && break; sleep 0.1; "
             "done; stat %s >/dev/null; sleep 0.3; umount %s; wait",
             m->mnt, lsmfs, m->store, m->mnt, m->root, m->mnt, m->mnt, lsmfs, m->store, m->mnt,
             m->root, m->mnt, m->mnt, m->mnt);
    char *argv[] = {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-ec", script,
                    NULL};
    int rc = tm_run(argv, errfile, 60);
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, slurp(errfile));
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/plain.log", m->root);
    const char *log = slurp(path);
    assert_non_null(strstr(log, "mounted at"));
    assert_null(strstr(log, "readahead"));
    snprintf(path, sizeof path, "%s/debug.log", m->root);
    assert_non_null(strstr(slurp(path), "cannot set the readahead"));
    tm_sleep_ms(300);
    tm_free(m);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_to_file),
        cmocka_unit_test(test_bad_log_file_refused),
        cmocka_unit_test(test_log_to_stderr),
        cmocka_unit_test(test_routine_line_only_with_debug),
    };
    return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
