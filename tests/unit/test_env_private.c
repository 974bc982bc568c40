/* test_env_private.c — the env's privacy rule (env.h): private modes
 * whatever the umask, creates that never follow or write through a planted
 * name, reads that open only the store owner's regular files; and
 * lsm_private_modes, which finds and tightens a store made looser. The
 * planted names are made by uid 65534 (a child that becomes it) where it
 * matters whose they are. */
#include "fixture.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "fault_env.h"
#include "status.h"

#define OTHER 65534

static int setup(void **state)
{
    tu_setup(state);
    assert_int_equal(chmod(tu_dir, 0755), 0); /* others may enter, as a home dir */
    return 0;
}

static char *path_of(const char *name)
{
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", tu_dir, name) > 0);
    return p;
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static void assert_text(const char *path, const char *text)
{
    char got[256] = {0};
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, got, sizeof got - 1) >= 0);
    close(fd);
    assert_string_equal(got, text);
}

/* Runs fn(arg) in a child as uid/gid 65534; fails the test if it fails. */
static void as_other(void (*fn)(const char *), const char *arg)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) || setresgid(OTHER, OTHER, OTHER) || setresuid(OTHER, OTHER, OTHER))
            _exit(2);
        fn(arg);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* 28.1: whatever the umask, the env's files are 0600 and directories 0700,
 * so uid 65534 can neither read a file nor open LOCK to flock it. */
static void other_cannot_open(const char *path)
{
    if (open(path, O_RDONLY) >= 0 || errno != EACCES)
        _exit(3);
}

static void test_private_modes_whatever_umask(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    mode_t old = umask(0);
    char *d = path_of("store"), *f = path_of("store/000001.log");
    char *lock = path_of("store/LOCK"), *n = path_of("fresh");
    ASSERT_OK(env->create_dir(env, d));
    ASSERT_OK(env->create_dir_new(env, n));
    ASSERT_OK(env_write_file_sync(env, f, "secret", 6));
    lsm_filelock *l;
    ASSERT_OK(env->lock_file(env, lock, &l));
    umask(old);
    assert_int_equal(mode_of(d), 0700);
    assert_int_equal(mode_of(n), 0700);
    assert_int_equal(mode_of(f), 0600);
    assert_int_equal(mode_of(lock), 0600);
    assert_int_equal(chmod(d, 0755), 0); /* the files' own modes alone keep 65534 out */
    as_other(other_cannot_open, f);
    as_other(other_cannot_open, lock);
    ASSERT_OK(env->unlock_file(env, l));
    free(d), free(f), free(lock), free(n);
}

/* 28.2: a create never follows a link, nor empties a file with another
 * name, nor takes a directory someone put there; the target is untouched. */
static void test_create_refuses_planted_names(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    char *victim = path_of("victim"), *lnk = path_of("link"), *hard = path_of("hard");
    char *dlink = path_of("dlink"), *sub = path_of("sub");
    write_text(victim, "root's", 0600);
    assert_int_equal(symlink(victim, lnk), 0);
    assert_int_equal(link(victim, hard), 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(symlink(sub, dlink), 0);
    lsm_wfile *w;
    ASSERT_FAILS(env->new_wfile(env, lnk, &w), LSM_IO_ERROR, "symbolic link");
    ASSERT_FAILS(env->new_wfile(env, hard, &w), LSM_IO_ERROR, "2 name(s)");
    ASSERT_FAILS(env_write_file_sync(env, lnk, "x", 1), LSM_IO_ERROR, lnk);
    lsm_filelock *l;
    ASSERT_FAILS(env->lock_file(env, lnk, &l), LSM_IO_ERROR, "symbolic link");
    ASSERT_OK(env->create_dir(env, dlink)); /* a link the caller names, as a store path */
    ASSERT_FAILS(env->create_dir_new(env, sub), LSM_INVALID_ARGUMENT, sub);
    ASSERT_FAILS(env->create_dir_new(env, dlink), LSM_INVALID_ARGUMENT, dlink);
    assert_text(victim, "root's");
    /* A file of ours with one name is reused, emptied (a torn temp file). */
    assert_int_equal(unlink(hard), 0);
    ASSERT_OK(env_write_file_sync(env, victim, "new", 3));
    assert_text(victim, "new");
    free(victim), free(lnk), free(hard), free(dlink), free(sub);
}

/* 28.3: reads open a regular file only, never through a link, owned by its
 * directory's owner (or by the reader). */
static void plant_own_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || write(fd, "theirs", 6) != 6)
        _exit(3);
    close(fd);
}

static void test_read_refuses_what_is_not_the_owners(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    char *secret = path_of("secret"), *store = path_of("store");
    char *link = path_of("store/000005.ldb"), *fifo = path_of("store/000006.ldb");
    char *theirs = path_of("store/000007.ldb"), *mine = path_of("store/000008.ldb");
    write_text(secret, "root only", 0600);
    assert_int_equal(mkdir(store, 0755), 0);
    assert_int_equal(chown(store, OTHER, OTHER), 0); /* the user's store */
    assert_int_equal(symlink(secret, link), 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    write_text(mine, "root's own", 0600); /* written by the reader itself */
    as_other(plant_own_file, theirs);
    lsm_rfile *r;
    lsm_sfile *sf;
    ASSERT_FAILS(env->new_rfile(env, link, &r), LSM_IO_ERROR, "symbolic link");
    ASSERT_FAILS(env->new_sfile(env, link, &sf), LSM_IO_ERROR, link);
    ASSERT_FAILS(env->new_rfile(env, fifo, &r), LSM_IO_ERROR, "not a regular file");
    ASSERT_OK(env->new_rfile(env, theirs, &r)); /* the store owner's: fine */
    r->ops->close(r);
    ASSERT_OK(env->new_rfile(env, mine, &r));
    r->ops->close(r);
    /* The same file in a directory of root's: not the directory owner's. */
    assert_int_equal(chown(store, 0, 0), 0);
    ASSERT_FAILS(env->new_rfile(env, theirs, &r), LSM_IO_ERROR, "owned by uid 65534");
    char *data;
    size_t n;
    ASSERT_FAILS(env_read_file(env, theirs, &data, &n), LSM_IO_ERROR, theirs);
    free(secret), free(store), free(link), free(fifo), free(theirs), free(mine);
}

struct seen {
    int n;
    char last[512];
};

static void note(void *ctx, const char *path, unsigned mode)
{
    struct seen *s = ctx;
    s->n++;
    snprintf(s->last, sizeof s->last, "%s %o", path, mode);
}

/* 28.1: a store left with loose modes is reported, and changed only with fix. */
static void test_private_modes_finds_and_fixes(void **state)
{
    (void)state;
    char *store = path_of("store"), *log = path_of("store/000003.log");
    char *snaps = path_of("store/snapshots"), *ln = path_of("store/link");
    char *outside = path_of("outside");
    assert_int_equal(mkdir(store, 0755), 0);
    assert_int_equal(mkdir(snaps, 0755), 0);
    write_text(log, "x", 0644);
    write_text(outside, "y", 0644);
    assert_int_equal(symlink(outside, ln), 0);
    struct seen s = {0};
    int loose = -1;
    ASSERT_OK(lsm_private_modes(NULL, store, false, note, &s, &loose));
    assert_int_equal(loose, 3);
    assert_int_equal(s.n, 3);
    assert_int_equal(mode_of(store), 0755); /* fix false changes nothing */
    assert_int_equal(mode_of(log), 0644);
    ASSERT_OK(lsm_private_modes(NULL, store, true, NULL, NULL, &loose));
    assert_int_equal(loose, 3);
    assert_int_equal(mode_of(store), 0700);
    assert_int_equal(mode_of(snaps), 0700);
    assert_int_equal(mode_of(log), 0600);
    assert_int_equal(mode_of(outside), 0644); /* a link's target is not the store's */
    ASSERT_OK(lsm_private_modes(NULL, store, false, NULL, NULL, &loose));
    assert_int_equal(loose, 0);
    /* A store named through a link (tm_new_in's): the directory it leads to. */
    char *via = path_of("via");
    assert_int_equal(symlink(store, via), 0);
    assert_int_equal(chmod(store, 0750), 0);
    ASSERT_OK(lsm_private_modes(NULL, via, true, note, &s, &loose));
    assert_int_equal(loose, 1);
    assert_non_null(strstr(s.last, "/via 750"));
    assert_int_equal(mode_of(store), 0700);
    free(via);
    free(store), free(log), free(snaps), free(ln), free(outside);
}

/* A writable open tightens the store; a failing chmod fails the open. */
static void test_open_tightens_and_reports_failure(void **state)
{
    (void)state;
    char *store = path_of("store");
    lsm_db *db = tu_open_db(store, NULL, 0);
    ASSERT_OK(lsm_close(db));
    assert_int_equal(chmod(store, 0755), 0);
    fault_env *fe = fault_env_new(lsm_env_default());
    assert_non_null(fe);
    /* Find the chmod's index in a counted open, then fail exactly it. */
    lsm_options o;
    tu_db_options(&o, fault_env_env(fe), 0);
    o.create_if_missing = false;
    enum fault_call c = FC_COUNT;
    char where[256] = "";
    for (uint64_t i = 0; i < 64 && c != FC_CHMOD; i++) {
        assert_int_equal(chmod(store, 0755), 0);
        fault_env_count_start(fe, NULL, NULL);
        fault_env_arm(fe, FAULT_STREAM_MAIN, i, FAULT_EIO);
        lsm_db *d = NULL;
        lsm_status *s = lsm_open(&o, store, &d);
        bool fired = fault_env_fired(fe, &c, where, sizeof where);
        fault_env_count_stop(fe);
        if (fired && c == FC_CHMOD) {
            assert_non_null(s);
            assert_true(tu_mentions(s, "private"));
            assert_null(d);
        }
        lsm_status_free(s);
        if (d != NULL)
            ASSERT_OK(lsm_close(d));
    }
    assert_int_equal(c, FC_CHMOD);
    assert_int_equal(mode_of(store), 0755); /* the failed chmod changed nothing */
    fault_env_free(fe);
    db = tu_open_existing(store, false);
    ASSERT_OK(lsm_close(db));
    assert_int_equal(mode_of(store), 0700);
    free(store);
}

struct calls {
    int n;
    enum fault_call c[4096];
    char path[4096][200];
};

static void record(void *ctx, int stream, uint64_t index, enum fault_call c, const char *path)
{
    (void)index;
    struct calls *t = ctx;
    if (stream == FAULT_STREAM_MAIN && t->n < 4096) {
        t->c[t->n] = c;
        snprintf(t->path[t->n++], sizeof t->path[0], "%s", path);
    }
}

/* Each stat, chmod and directory sync a backup makes before it lists the
 * backup (the backup directory's rule, its tightening, the new directory's
 * and LOCK's entries) fails the backup when it fails, and nothing is listed. */
static void test_backup_checks_fail_cleanly(void **state)
{
    (void)state;
    char *store = path_of("store"), *bk = path_of("bk"), *list = path_of("bk/meta/1");
    lsm_db *db = tu_open_db(store, NULL, 0);
    ASSERT_OK(lsm_put(db, NULL, "k", 1, "v", 1));
    ASSERT_OK(lsm_close(db));
    fault_env *fe = fault_env_new(lsm_env_default());
    struct calls *t = calloc(1, sizeof(*t));
    assert_non_null(fe);
    assert_non_null(t);
    lsm_backup_options o;
    lsm_backup_options_init(&o);
    o.env = fault_env_env(fe);
    assert_int_equal(mkdir(bk, 0750), 0); /* a read bit for the group: tightened */
    fault_env_count_start(fe, record, t);
    ASSERT_OK(lsm_backup_store(store, bk, &o, NULL));
    fault_env_count_stop(fe);
    int failed = 0;
    for (int i = 0; i < t->n && !(t->c[i] == FC_RENAME && strstr(t->path[i], "meta/.tmp-")); i++) {
        if (t->c[i] != FC_STAT && t->c[i] != FC_CHMOD && t->c[i] != FC_SYNC_DIR)
            continue;
        tu_rmtree(bk);
        assert_int_equal(mkdir(bk, 0750), 0);
        fault_env_count_start(fe, NULL, NULL);
        fault_env_arm(fe, FAULT_STREAM_MAIN, (uint64_t)i, FAULT_EIO);
        lsm_status *s = lsm_backup_store(store, bk, &o, NULL);
        bool fired = fault_env_fired(fe, NULL, NULL, 0);
        fault_env_count_stop(fe);
        if (!fired || s == NULL)
            fail_msg("call %d (%s %s): fired %d, backup %s", i, fault_call_name(t->c[i]),
                     t->path[i], fired, s ? "failed" : "succeeded");
        lsm_status_free(s);
        struct stat st;
        assert_int_not_equal(stat(list, &st), 0);
        failed++;
    }
    assert_true(failed >= 4); /* stat, chmod, the parent's and LOCK's syncs at least */
    fault_env_free(fe);
    free(t);
    free(store), free(bk), free(list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_private_modes_whatever_umask, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_create_refuses_planted_names, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_read_refuses_what_is_not_the_owners, setup,
                                        tu_teardown),
        cmocka_unit_test_setup_teardown(test_private_modes_finds_and_fixes, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_open_tightens_and_reports_failure, setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_backup_checks_fail_cleanly, setup, tu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
