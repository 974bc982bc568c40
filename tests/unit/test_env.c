/* test_env.c — the POSIX env (files, directories, locks, errors) and the
 * fault-injecting env (power cuts, injected errors, dead files). */
#include "fixture.h"
/* cmocka defines skip(); the sfile member is called as (ops->skip)(...). */

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_fail.h"
#include "env.h"
#include "env_posix_hook.h"
#include "fault_env.h"
#include "status.h"

/* ------------------------------------------------------------ fixtures */

/* A temporary directory and the env under test. */
struct fx {
    fault_env *fe; /* NULL when testing the POSIX env */
    lsm_env *env;
};

static struct fx *fx_new(void)
{
    struct fx *x = calloc(1, sizeof(*x));
    assert_non_null(x);
    tu_setup(NULL);
    return x;
}

static int posix_setup(void **state)
{
    struct fx *x = fx_new();
    x->env = lsm_env_default();
    *state = x;
    return 0;
}

static int fx_setup(void **state)
{
    struct fx *x = fx_new();
    x->fe = fault_env_new(lsm_env_default());
    assert_non_null(x->fe);
    x->env = fault_env_env(x->fe);
    *state = x;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *x = *state;
    if (x->fe != NULL)
        fault_env_free(x->fe);
    free(x);
    return tu_teardown(state);
}

/* ------------------------------------------------------------- helpers */

/* dir/name in a static-free caller buffer. */
static const char *in(const char *name, char *out)
{
    snprintf(out, 256, "%s/%s", tu_dir, name);
    return out;
}

/* Opens dir/name for writing (created or truncated); its path goes to path. */
static lsm_wfile *open_w(const struct fx *x, const char *name, char *path)
{
    lsm_wfile *f;
    ASSERT_OK(x->env->new_wfile(x->env, in(name, path), &f));
    return f;
}

/* The file's bytes read directly (not through an env). */
static size_t slurp(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return (size_t)-1;
    size_t n = fread(out, 1, cap, f);
    fclose(f);
    return n;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void write_file(lsm_env *env, const char *path, const char *text, bool sync)
{
    lsm_wfile *f;
    ASSERT_OK(env->new_wfile(env, path, &f));
    ASSERT_OK(f->ops->append(f, text, strlen(text)));
    if (sync)
        ASSERT_OK(f->ops->sync(f));
    ASSERT_OK(f->ops->close(f));
}

/* Entries in dir as the base filesystem has them (hidden ones included). */
static int count_entries(const char *dir)
{
    char **names;
    int n;
    ASSERT_OK(lsm_env_default()->get_children(lsm_env_default(), dir, &names, &n));
    env_free_children(names, n);
    return n;
}

/* ----------------------------------------------------------- POSIX env */

static void test_posix_write_read(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    assert_ptr_equal(env, lsm_env_default());
    /* Small appends (buffered), one larger than the buffer (straight
     * through), then small again. */
    enum { BIG = 200000 };
    char *big = malloc(BIG);
    assert_non_null(big);
    for (int i = 0; i < BIG; i++)
        big[i] = (char)(i * 7);
    char p[256];
    lsm_wfile *f = open_w(x, "data", p);
    for (int i = 0; i < 1000; i++)
        ASSERT_OK(f->ops->append(f, "0123456789", 10));
    ASSERT_OK(f->ops->append(f, big, BIG));
    ASSERT_OK(f->ops->append(f, "tail", 4));
    ASSERT_OK(f->ops->append(f, "", 0));
    /* Flush hands the bytes to the OS: visible to other readers. */
    ASSERT_OK(f->ops->flush(f));
    uint64_t size;
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 10000 + BIG + 4);
    ASSERT_OK(f->ops->sync(f));
    ASSERT_OK(f->ops->close(f));

    char *got = malloc(BIG + 20000);
    assert_int_equal(slurp(p, got, BIG + 20000), 10000 + BIG + 4);
    assert_memory_equal(got + 9990, "0123456789", 10);
    assert_memory_equal(got + 10000, big, BIG);
    assert_memory_equal(got + 10000 + BIG, "tail", 4);

    /* Sequential reads, with a skip. */
    lsm_sfile *sf;
    ASSERT_OK(env->new_sfile(env, p, &sf));
    size_t n;
    ASSERT_OK(sf->ops->read(sf, got, 10, &n));
    assert_int_equal(n, 10);
    assert_memory_equal(got, "0123456789", 10);
    ASSERT_OK((sf->ops->skip)(sf, 9990));
    ASSERT_OK(sf->ops->read(sf, got, BIG + 100, &n));
    assert_int_equal(n, BIG + 4); /* short only at end of file */
    assert_memory_equal(got, big, BIG);
    ASSERT_OK(sf->ops->read(sf, got, 10, &n));
    assert_int_equal(n, 0);
    sf->ops->close(sf);

    /* Positional reads. */
    lsm_rfile *rf;
    ASSERT_OK(env->new_rfile(env, p, &rf));
    ASSERT_OK(rf->ops->pread(rf, 10000 + 12345, got, 100, &n));
    assert_int_equal(n, 100);
    assert_memory_equal(got, big + 12345, 100);
    ASSERT_OK(rf->ops->pread(rf, size - 2, got, 100, &n));
    assert_int_equal(n, 2);
    assert_memory_equal(got, "il", 2);
    ASSERT_OK(rf->ops->pread(rf, size + 1000, got, 100, &n));
    assert_int_equal(n, 0);
    rf->ops->close(rf);

    /* Small appends wait in the 64 KiB buffer; a large one goes straight to
     * the file (through the buffer's remaining room). */
    ASSERT_OK(env->new_wfile(env, p, &f));
    ASSERT_OK(f->ops->append(f, "small", 5));
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 0);
    ASSERT_OK(f->ops->append(f, big, BIG));
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 5 + BIG);
    ASSERT_OK(f->ops->append(f, big, 65536 - 10));
    ASSERT_OK(f->ops->append(f, big, 10)); /* exactly full: still buffered */
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 5 + BIG);
    ASSERT_OK(f->ops->append(f, big, 20)); /* overflows: the full buffer goes out */
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 5 + BIG + 65536);
    ASSERT_OK(f->ops->close(f));
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 5 + BIG + 65536 + 20);

    /* new_wfile truncates. */
    write_file(env, p, "new", false);
    assert_int_equal(slurp(p, got, 100), 3);
    free(got);
    free(big);
}

struct pread_arg {
    lsm_rfile *rf;
    const char *want;
    size_t len;
    unsigned seed;
    int bad;
};

static void *pread_worker(void *p)
{
    struct pread_arg *a = p;
    char b[512];
    for (int i = 0; i < 2000; i++) {
        a->seed = a->seed * 1103515245u + 12345u;
        size_t off = a->seed % (a->len - sizeof(b));
        size_t n;
        lsm_status *s = a->rf->ops->pread(a->rf, off, b, sizeof(b), &n);
        if (s != NULL || n != sizeof(b) || memcmp(b, a->want + off, n) != 0)
            a->bad++;
        lsm_status_free(s);
    }
    return NULL;
}

static void test_posix_pread_threads(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256];
    in("table", p);
    enum { LEN = 1 << 20 };
    char *data = malloc(LEN);
    for (int i = 0; i < LEN; i++)
        data[i] = (char)(i ^ (i >> 8));
    ASSERT_OK(env_write_file_sync(env, p, data, LEN));
    lsm_rfile *rf;
    ASSERT_OK(env->new_rfile(env, p, &rf));
    struct pread_arg args[4];
    for (int i = 0; i < 4; i++)
        args[i] = (struct pread_arg){rf, data, LEN, (unsigned)i + 1, 0};
    tu_run_threads(4, pread_worker, args, sizeof(args[0]));
    for (int i = 0; i < 4; i++)
        assert_int_equal(args[i].bad, 0);
    rf->ops->close(rf);
    free(data);
}

/* A new writable file that fails for memory leaves no file behind (each
 * failed open of a store once left an empty log that later opens replayed). */
static void test_posix_new_file_out_of_memory(void **state)
{
    struct fx *x = *state;
    char path[256];
    in("log", path);
    for (uint64_t n = 1;; n++) {
        lsm_wfile *f = NULL;
        lsm_alloc_hook_arm(LSM_ALLOC_MAIN, n);
        lsm_status *s = x->env->new_wfile(x->env, path, &f);
        lsm_alloc_hook_disarm();
        if (!lsm_alloc_hook_fired()) {
            ASSERT_OK(s);
            ASSERT_OK(f->ops->close(f));
            break;
        }
        assert_int_equal(lsm_status_code(s), LSM_NO_MEMORY);
        lsm_status_free(s);
        assert_null(f);
        if (access(path, F_OK) == 0)
            fail_msg("allocation %llu failing: %s was left behind", (unsigned long long)n, path);
    }
    assert_true(x->env->file_exists(x->env, path));
}

static void test_posix_dirs_and_names(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char a[256], b[256], sub[256], deep[256];
    in("a", a);
    in("b", b);
    in("sub", sub);
    write_file(env, a, "hello", true);
    assert_true(env->file_exists(env, a));
    assert_false(env->file_exists(env, b));
    ASSERT_OK(env->create_dir(env, sub));
    ASSERT_OK(env->create_dir(env, sub));                   /* fine if it exists */
    ASSERT_FAILS(env->create_dir(env, a), LSM_IO_ERROR, a); /* a file is there */

    char **names;
    int n;
    ASSERT_OK(env->get_children(env, tu_dir, &names, &n));
    assert_int_equal(n, 2);
    bool saw_a = false, saw_sub = false;
    for (int i = 0; i < n; i++) {
        saw_a |= strcmp(names[i], "a") == 0;
        saw_sub |= strcmp(names[i], "sub") == 0;
    }
    env_free_children(names, n);
    assert_true(saw_a && saw_sub);

    ASSERT_OK(env->rename_file(env, a, b));
    assert_false(exists(a));
    assert_true(exists(b));
    uint64_t size;
    ASSERT_OK(env->file_size(env, b, &size));
    assert_int_equal(size, 5);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    ASSERT_OK(env->remove_file(env, b));
    assert_false(exists(b));
    ASSERT_FAILS(env->remove_file(env, b), LSM_IO_ERROR, b);
    ASSERT_FAILS(env->rename_file(env, a, b), LSM_IO_ERROR, a);
    ASSERT_FAILS(env->file_size(env, b, &size), LSM_IO_ERROR, b);
    ASSERT_OK(env->remove_dir(env, sub));
    ASSERT_FAILS(env->remove_dir(env, sub), LSM_IO_ERROR, sub);
    ASSERT_FAILS(env->sync_dir(env, sub), LSM_IO_ERROR, sub);
    ASSERT_FAILS(env->get_children(env, sub, &names, &n), LSM_IO_ERROR, sub);

    /* Opening in a missing directory: an I/O error naming the path. */
    in("missing/000001.log", deep);
    lsm_wfile *wf;
    ASSERT_FAILS(env->new_wfile(env, deep, &wf), LSM_IO_ERROR, deep);
    assert_null(wf);
    lsm_sfile *sf;
    ASSERT_FAILS(env->new_sfile(env, deep, &sf), LSM_IO_ERROR, deep);
    lsm_rfile *rf;
    ASSERT_FAILS(env->new_rfile(env, deep, &rf), LSM_IO_ERROR, deep);
}

static void test_posix_small_file_helpers(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256];
    in("CURRENT", p);
    ASSERT_OK(env_write_file_sync(env, p, "MANIFEST-000005\n", 16));
    char *data;
    size_t n;
    ASSERT_OK(env_read_file(env, p, &data, &n));
    assert_int_equal(n, 16);
    assert_string_equal(data, "MANIFEST-000005\n"); /* NUL-terminated */
    free(data);
    ASSERT_OK(env_write_file_sync(env, p, "", 0));
    ASSERT_OK(env_read_file(env, p, &data, &n));
    assert_int_equal(n, 0);
    assert_string_equal(data, "");
    free(data);
    /* Larger than the read chunk. */
    enum { LEN = 100000 };
    char *big = malloc(LEN);
    for (int i = 0; i < LEN; i++)
        big[i] = (char)('a' + i % 26);
    ASSERT_OK(env_write_file_sync(env, p, big, LEN));
    ASSERT_OK(env_read_file(env, p, &data, &n));
    assert_int_equal(n, LEN);
    assert_memory_equal(data, big, LEN);
    free(data);
    free(big);
    in("nope", p);
    ASSERT_FAILS(env_read_file(env, p, &data, &n), LSM_IO_ERROR, p);
    assert_null(data);
    in("no/such/dir", p);
    ASSERT_FAILS(env_write_file_sync(env, p, "x", 1), LSM_IO_ERROR, p);
}

/* Appends far past the reservation: the mapping grows, every byte reads
 * back, and close trims the file to its data. */
static void test_posix_preallocate_grows(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256];
    lsm_wfile *f = open_w(x, "log", p);
    ASSERT_OK(f->ops->preallocate(f, 4096, WFILE_MAPPED));
    char chunk[1000];
    for (int i = 0; i < 300; i++) {
        memset(chunk, 'a' + i % 26, sizeof(chunk));
        ASSERT_OK(f->ops->append(f, chunk, sizeof(chunk)));
        if (i % 50 == 0)
            ASSERT_OK(f->ops->sync(f));
    }
    ASSERT_OK(f->ops->close(f));
    uint64_t size;
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 300 * sizeof(chunk));
    FILE *in_f = fopen(p, "r");
    assert_non_null(in_f);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(fread(chunk, 1, sizeof(chunk), in_f), sizeof(chunk));
        for (size_t j = 0; j < sizeof(chunk); j++)
            assert_int_equal(chunk[j], 'a' + i % 26);
    }
    fclose(in_f);
}

static void test_posix_preallocate(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256];
    lsm_wfile *f = open_w(x, "log", p);
    ASSERT_OK(f->ops->append(f, "abc", 3));
    ASSERT_OK(f->ops->preallocate(f, 1 << 20, WFILE_MAPPED));
    ASSERT_OK(f->ops->append(f, "def", 3));
    ASSERT_OK(f->ops->sync(f));
    /* While open, the file covers the reservation (zeros past the data, so
     * syncs need no size update); close gives it back its data size. */
    uint64_t size;
    ASSERT_OK(env->file_size(env, p, &size));
    assert_true(size >= 3 + (1 << 20)); /* reserved from the end of "abc" */
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_true((uint64_t)st.st_blocks * 512 >= (1 << 20));
    ASSERT_OK(f->ops->close(f));
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, 6);
    char got[16];
    assert_int_equal(slurp(p, got, sizeof(got)), 6);
    assert_memory_equal(got, "abcdef", 6);
}

/* The byte at offset i of what the zero-fill tests append. */
static char zf_byte(uint64_t i)
{
    return (char)('a' + (i * 7 + i / 4093) % 26);
}

static void zf_fill(char *data, uint64_t off, size_t n)
{
    for (size_t j = 0; j < n; j++)
        data[j] = zf_byte(off + j);
}

/* The whole file must be exactly `len` appended bytes. */
static void zf_check_file(const char *p, uint64_t len)
{
    FILE *in_f = fopen(p, "r");
    assert_non_null(in_f);
    char data[4096];
    uint64_t off = 0;
    size_t got;
    while ((got = fread(data, 1, sizeof(data), in_f)) > 0) {
        for (size_t j = 0; j < got; j++)
            if (data[j] != zf_byte(off + j))
                fail_msg("byte %llu is %d", (unsigned long long)(off + j), data[j]);
        off += got;
    }
    fclose(in_f);
    assert_int_equal(off, len);
}

/* Zero-filled mode: nothing is zeroed until the log is synced; then the
 * zeroer writes zeros ahead of the data, appends land over them intact, and
 * close trims the file to its data. */
static void test_posix_zero_fill(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256], data[5000];
    lsm_wfile *f = open_w(x, "log", p);
    zf_fill(data, 0, 3);
    ASSERT_OK(f->ops->append(f, data, 3));
    ASSERT_OK(f->ops->preallocate(f, 64 << 10, WFILE_ZERO_FILL));
    uint64_t off = 3, size;
    zf_fill(data, off, 1000);
    ASSERT_OK(f->ops->append(f, data, 1000));
    off += 1000;
    ASSERT_OK(env->file_size(env, p, &size));
    assert_int_equal(size, off); /* appends went out at once, no zeros yet */
    ASSERT_OK(f->ops->sync(f));
    /* The zeroer runs on its own: wait (bounded) for its zeros to appear. */
    for (int i = 0; i < 5000; i++) {
        ASSERT_OK(env->file_size(env, p, &size));
        if (size >= off + (64 << 10))
            break;
        env->sleep_micros(env, 1000);
    }
    assert_true(size >= off + (64 << 10));
    for (int i = 0; i < 40; i++) { /* 200 KB: past the zeros, several rounds */
        zf_fill(data, off, sizeof(data));
        ASSERT_OK(f->ops->append(f, data, sizeof(data)));
        off += sizeof(data);
        if (i % 3 == 0)
            ASSERT_OK(f->ops->sync(f));
    }
    ASSERT_OK(f->ops->close(f));
    zf_check_file(p, off);
}

struct zf_race {
    lsm_wfile *f;
    _Atomic bool done;
    uint64_t appended;
};

static void *zf_syncer(void *arg)
{
    struct zf_race *r = arg;
    while (!atomic_load(&r->done))
        assert_null(r->f->ops->sync(r->f));
    return NULL;
}

/* Syncs from another thread while one appends, with a small zeroing step so
 * the zeroer keeps racing the appends: no zero may land on data. */
static void zf_concurrent(struct fx *x, enum wfile_space mode)
{
    char p[256], data[6000];
    struct zf_race r = {.f = open_w(x, "log", p), .appended = 0};
    atomic_init(&r.done, false);
    ASSERT_OK(r.f->ops->preallocate(r.f, 8 << 10, mode));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, zf_syncer, &r), 0);
    for (int i = 0; i < 3000; i++) {
        size_t n = 1 + (size_t)(i * 2654435761u % sizeof(data));
        zf_fill(data, r.appended, n);
        ASSERT_OK(r.f->ops->append(r.f, data, n));
        r.appended += n;
    }
    atomic_store(&r.done, true);
    pthread_join(t, NULL);
    ASSERT_OK(r.f->ops->close(r.f));
    zf_check_file(p, r.appended);
}

static void test_posix_zero_fill_concurrent(void **state)
{
    zf_concurrent(*state, WFILE_ZERO_FILL);
}

static void test_posix_auto_concurrent(void **state)
{
    zf_concurrent(*state, WFILE_AUTO);
}

/* Auto mode switches between mapped and zero-filled appends as phases of
 * synced and unsynced appends alternate; every byte survives the switches
 * and close trims the file to its data. */
static void test_posix_auto_switches(void **state)
{
    struct fx *x = *state;
    char p[256], data[3000];
    lsm_wfile *f = open_w(x, "log", p);
    ASSERT_OK(f->ops->preallocate(f, 16 << 10, WFILE_AUTO));
    uint64_t off = 0;
    for (int phase = 0; phase < 6; phase++) {
        bool synced = phase % 2 == 0;
        for (int i = 0; i < 300; i++) {
            size_t n = 1 + (size_t)((phase * 300 + i) * 2654435761u % sizeof(data));
            zf_fill(data, off, n);
            ASSERT_OK(f->ops->append(f, data, n));
            off += n;
            if (synced)
                ASSERT_OK(f->ops->sync(f));
        }
    }
    ASSERT_OK(f->ops->close(f));
    zf_check_file(p, off);
}

static void test_posix_no_space(void **state)
{
    (void)state;
    /* /dev/full fails every write with ENOSPC. */
    if (access("/dev/full", W_OK) != 0)
        fail_msg("/dev/full is not writable here; cannot test ENOSPC");
    lsm_env *env = lsm_env_default();
    lsm_wfile *f;
    ASSERT_OK(env->new_wfile(env, "/dev/full", &f));
    ASSERT_OK(f->ops->append(f, "abc", 3)); /* buffered */
    ASSERT_FAILS(f->ops->flush(f), LSM_NO_SPACE, "/dev/full");
    /* The failure sticks: nothing later may claim success. */
    ASSERT_FAILS(f->ops->append(f, "d", 1), LSM_NO_SPACE, "/dev/full");
    ASSERT_FAILS(f->ops->flush(f), LSM_NO_SPACE, "/dev/full");
    ASSERT_FAILS(f->ops->sync(f), LSM_NO_SPACE, "/dev/full");
    ASSERT_FAILS(f->ops->close(f), LSM_NO_SPACE, "/dev/full");
    /* An append larger than the buffer goes straight to the device. */
    ASSERT_OK(env->new_wfile(env, "/dev/full", &f));
    char *big = calloc(1, 1 << 20);
    ASSERT_FAILS(f->ops->append(f, big, 1 << 20), LSM_NO_SPACE, "/dev/full");
    ASSERT_FAILS(f->ops->close(f), LSM_NO_SPACE, "/dev/full");
    free(big);
}

static void test_posix_lock(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256], alias[256];
    in("LOCK", p);
    snprintf(alias, sizeof(alias), "%s/./LOCK", tu_dir);
    lsm_filelock *l1, *l2;
    ASSERT_OK(env->lock_file(env, p, &l1));
    assert_true(exists(p));
    /* Same process, same path or another spelling of it: busy. */
    ASSERT_FAILS(env->lock_file(env, p, &l2), LSM_BUSY, "in use");
    ASSERT_FAILS(env->lock_file(env, alias, &l2), LSM_BUSY, "this process");
    /* The lock is a real flock: another process cannot take it. (A forked
     * child inherits this env's set of held locks, so it uses flock itself.) */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(p, O_RDWR | O_CLOEXEC);
        _exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK ? 0 : 1);
    }
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    /* After unlocking, it can be taken again. */
    ASSERT_OK(env->unlock_file(env, l1));
    ASSERT_OK(env->lock_file(env, alias, &l2));
    ASSERT_OK(env->unlock_file(env, l2));
    /* Held by another process: busy. */
    int up[2], down[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Only our ends open: if the parent dies, read() sees EOF. */
        close(up[0]);
        close(down[1]);
        int fd = open(p, O_RDWR | O_CLOEXEC);
        char c = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 ? 'y' : 'n';
        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
            _exit(2);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    char c = 0;
    assert_int_equal(read(up[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    ASSERT_FAILS(env->lock_file(env, p, &l2), LSM_BUSY, "another process");
    assert_int_equal(write(down[1], "x", 1), 1);
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    close(up[0]);
    close(down[1]);
    ASSERT_OK(env->lock_file(env, p, &l2)); /* the child is gone */
    ASSERT_OK(env->unlock_file(env, l2));
    /* Locking in a missing directory is an I/O error, not busy. */
    in("missing/LOCK", p);
    ASSERT_FAILS(env->lock_file(env, p, &l2), LSM_IO_ERROR, p);
}

static void test_posix_misc(void **state)
{
    (void)state;
    lsm_env *env = lsm_env_default();
    uint64_t total, avail;
    ASSERT_OK(env->disk_free(env, "/tmp", &total, &avail));
    assert_true(total > 0 && avail <= total);
    ASSERT_FAILS(env->disk_free(env, "/no/such/dir", &total, &avail), LSM_IO_ERROR, "/no/such/dir");
    uint64_t t0 = env->now_micros(env);
    env->sleep_micros(env, 2000);
    uint64_t t1 = env->now_micros(env);
    assert_true(t1 - t0 >= 2000); /* a lower bound only: never flaky */
}

/* ----------------------------------------------------------- fault env */

static void test_fault_power_cut_data(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256], q[256], got[64];
    lsm_wfile *f = open_w(x, "log", p), *g = open_w(x, "never-synced", q);
    ASSERT_OK(env->sync_dir(env, tu_dir)); /* both names durable */
    ASSERT_OK(f->ops->append(f, "AAAA", 4));
    ASSERT_OK(f->ops->sync(f));
    ASSERT_OK(f->ops->append(f, "BBBB", 4));
    ASSERT_OK(f->ops->flush(f));
    ASSERT_OK(g->ops->append(g, "gone", 4));
    ASSERT_OK(g->ops->flush(g));
    assert_int_equal(slurp(p, got, sizeof(got)), 8); /* in the OS before the cut */
    assert_int_equal(fault_env_syncs(x->fe), 1);

    ASSERT_OK(fault_env_power_cut(x->fe));
    assert_int_equal(slurp(p, got, sizeof(got)), 4);
    assert_memory_equal(got, "AAAA", 4);
    assert_int_equal(slurp(q, got, sizeof(got)), 0); /* exists, empty */

    /* Files open at the cut are dead: everything fails, nothing is written. */
    ASSERT_FAILS(f->ops->append(f, "CCCC", 4), LSM_IO_ERROR, "power cut");
    ASSERT_FAILS(f->ops->flush(f), LSM_IO_ERROR, p);
    ASSERT_FAILS(f->ops->sync(f), LSM_IO_ERROR, p);
    ASSERT_FAILS(f->ops->preallocate(f, 100, WFILE_MAPPED), LSM_IO_ERROR, p);
    ASSERT_FAILS(f->ops->close(f), LSM_IO_ERROR, p);
    ASSERT_FAILS(g->ops->close(g), LSM_IO_ERROR, q);
    assert_int_equal(slurp(p, got, sizeof(got)), 4);
    assert_int_equal(fault_env_syncs(x->fe), 1);

    /* Until the power is back, no change is made: not even a new file. */
    ASSERT_FAILS(env->new_wfile(env, p, &f), LSM_IO_ERROR, "power cut");
    ASSERT_FAILS(env->remove_file(env, q), LSM_IO_ERROR, "power cut");
    assert_true(exists(q));
    fault_env_restart(x->fe);

    /* Life goes on with new files. */
    ASSERT_OK(env->new_wfile(env, p, &f));
    ASSERT_OK(f->ops->append(f, "new", 3));
    ASSERT_OK(f->ops->close(f));
    assert_int_equal(slurp(p, got, sizeof(got)), 3);
}

static void test_fault_power_cut_new_files(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char a[256], b[256], c[256], sub[256], s1[256];
    in("synced-data-unsynced-dir", a);
    in("synced-both", b);
    in("after-dir-sync", c);
    in("sub", sub);
    in("sub/inner", s1);
    write_file(env, a, "aaa", true);
    write_file(env, b, "bbb", true);
    ASSERT_OK(env->create_dir(env, sub));
    write_file(env, s1, "sss", true);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    write_file(env, c, "ccc", true); /* created after the sync */
    /* A sync of another directory does not help this one... */
    ASSERT_OK(env->sync_dir(env, sub));
    /* ...and the sub dir's own sync kept sub/inner. */
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    char got[16];
    assert_int_equal(slurp(a, got, sizeof(got)), 3);
    assert_int_equal(slurp(b, got, sizeof(got)), 3);
    assert_false(exists(c));
    assert_int_equal(slurp(s1, got, sizeof(got)), 3);
    assert_int_equal(fault_env_dir_syncs(x->fe), 2);

    /* An unsynced new file in an unsynced directory is gone too, even with
     * its data synced; and a path spelled with a trailing slash counts. */
    write_file(env, c, "ccc", true);
    char slash[300];
    snprintf(slash, sizeof(slash), "%s/", tu_dir);
    ASSERT_OK(env->sync_dir(env, slash));
    write_file(env, a, "rewritten", false); /* truncating an old file */
    write_file(env, c, "cc", true);
    write_file(env, c, "longer but unsynced", false); /* and a tracked one */
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_int_equal(slurp(c, got, sizeof(got)), 0);
    /* Truncation is modelled pessimistically: unsynced, so empty. */
    assert_int_equal(slurp(a, got, sizeof(got)), 0);
}

static void test_fault_power_cut_rename(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char cur[256], tmp[256], got[64];
    in("CURRENT", cur);
    in("CURRENT.tmp", tmp);
    write_file(env, cur, "old", true);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    /* The classic: write tmp, sync it, rename over CURRENT, no dir sync. */
    write_file(env, tmp, "new", true);
    ASSERT_OK(env->rename_file(env, tmp, cur));
    assert_int_equal(slurp(cur, got, sizeof(got)), 3);
    assert_memory_equal(got, "new", 3);
    assert_false(tu_has_child(env, tu_dir, "CURRENT.tmp"));
    assert_int_equal(slurp(cur, got, sizeof(got)), 3);
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_int_equal(slurp(cur, got, sizeof(got)), 3);
    assert_memory_equal(got, "old", 3);
    assert_false(exists(tmp));
    assert_int_equal(count_entries(tu_dir), 1); /* no hidden helpers left */

    /* With the directory synced, the rename sticks. */
    write_file(env, tmp, "new", true);
    ASSERT_OK(env->rename_file(env, tmp, cur));
    ASSERT_OK(env->sync_dir(env, tu_dir));
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_int_equal(slurp(cur, got, sizeof(got)), 3);
    assert_memory_equal(got, "new", 3);
    assert_false(exists(tmp));
    assert_int_equal(count_entries(tu_dir), 1);

    /* A durable file renamed to a new name, unsynced: back to the old name. */
    ASSERT_OK(env->rename_file(env, cur, tmp));
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_false(exists(tmp));
    assert_int_equal(slurp(cur, got, sizeof(got)), 3);
    assert_memory_equal(got, "new", 3);
    /* A chain of renames, unsynced, unwinds completely. */
    char third[256];
    in("third", third);
    ASSERT_OK(env->rename_file(env, cur, tmp));
    ASSERT_OK(env->rename_file(env, tmp, third));
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_false(exists(tmp));
    assert_false(exists(third));
    assert_int_equal(slurp(cur, got, sizeof(got)), 3);
}

static void test_fault_power_cut_remove(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char a[256], b[256], got[64];
    in("other", b);
    lsm_wfile *f = open_w(x, "old.log", a);
    ASSERT_OK(f->ops->append(f, "durable", 7));
    ASSERT_OK(f->ops->sync(f));
    ASSERT_OK(f->ops->append(f, "-not", 4));
    ASSERT_OK(f->ops->close(f));
    ASSERT_OK(env->sync_dir(env, tu_dir));
    ASSERT_OK(env->remove_file(env, a));
    assert_false(env->file_exists(env, a));
    assert_false(tu_has_child(env, tu_dir, "old.log"));
    assert_int_equal(count_entries(tu_dir), 1); /* the hidden copy... */
    char **names;
    int n;
    ASSERT_OK(env->get_children(env, tu_dir, &names, &n));
    assert_int_equal(n, 0); /* ...which the env never lists */
    env_free_children(names, n);
    ASSERT_FAILS(env->remove_file(env, a), LSM_IO_ERROR, a);
    /* Unsynced remove: the file comes back, with its synced data only. */
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_int_equal(slurp(a, got, sizeof(got)), 7);
    assert_memory_equal(got, "durable", 7);
    assert_int_equal(count_entries(tu_dir), 1);
    /* Synced remove: gone for good, hidden copy deleted. */
    ASSERT_OK(env->remove_file(env, a));
    ASSERT_OK(env->sync_dir(env, tu_dir));
    assert_int_equal(count_entries(tu_dir), 0);
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_false(exists(a));
    /* Remove of a never-durable file, then a re-create: both undone. */
    write_file(env, b, "one", true);
    ASSERT_OK(env->remove_file(env, b));
    write_file(env, b, "two", true);
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_false(exists(b));
    assert_int_equal(count_entries(tu_dir), 0);
}

static void test_fault_remove_dir_and_free(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char sub[256], f1[256];
    in("store", sub);
    in("store/000001.log", f1);
    ASSERT_OK(env->create_dir(env, sub));
    write_file(env, f1, "x", true);
    ASSERT_OK(env->sync_dir(env, sub));
    /* A destroy: remove every file, then the directory, with no sync. */
    ASSERT_OK(env->remove_file(env, f1));
    ASSERT_OK(env->remove_dir(env, sub));
    assert_false(exists(sub));
    /* Pending removes become real when the env is freed. */
    in("kept", f1);
    write_file(env, f1, "x", true);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    ASSERT_OK(env->remove_file(env, f1));
    fault_env_free(x->fe);
    assert_int_equal(count_entries(tu_dir), 0);
    x->fe = fault_env_new(lsm_env_default());
    x->env = fault_env_env(x->fe);
}

static void test_fault_dead_readers(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256];
    in("f", p);
    write_file(env, p, "abcdef", true);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    lsm_sfile *sf;
    lsm_rfile *rf;
    ASSERT_OK(env->new_sfile(env, p, &sf));
    ASSERT_OK(env->new_rfile(env, p, &rf));
    char b[8];
    size_t n;
    ASSERT_OK(sf->ops->read(sf, b, 2, &n));
    assert_int_equal(n, 2);
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    ASSERT_FAILS(sf->ops->read(sf, b, 2, &n), LSM_IO_ERROR, p);
    ASSERT_FAILS((sf->ops->skip)(sf, 1), LSM_IO_ERROR, p);
    ASSERT_FAILS(rf->ops->pread(rf, 0, b, 2, &n), LSM_IO_ERROR, p);
    sf->ops->close(sf);
    rf->ops->close(rf);
    /* New readers see the surviving data. */
    ASSERT_OK(env->new_rfile(env, p, &rf));
    ASSERT_OK(rf->ops->pread(rf, 0, b, 8, &n));
    assert_int_equal(n, 6);
    rf->ops->close(rf);
}

static void test_fault_inject_writes(void **state)
{
    struct fx *x = *state;
    char p[256], q[256], got[64];
    lsm_wfile *f = open_w(x, "000003.log", p), *g = open_w(x, "MANIFEST", q);
    /* Two more writes to .log files succeed, then one fails with EIO. */
    fault_env_fail(x->fe, FAULT_WRITE, ".log", EIO, 2, 1);
    ASSERT_OK(g->ops->append(g, "m", 1)); /* other paths unaffected */
    ASSERT_OK(f->ops->append(f, "1", 1));
    ASSERT_OK(f->ops->append(f, "2", 1));
    ASSERT_FAILS(f->ops->append(f, "3", 1), LSM_IO_ERROR, "injected");
    ASSERT_OK(f->ops->append(f, "4", 1)); /* the count is used up */
    assert_int_equal(slurp(p, got, sizeof(got)), 3);
    assert_memory_equal(got, "124", 3); /* the failed append wrote nothing */
    /* ENOSPC, forever until cleared; flushes count as writes. */
    fault_env_fail(x->fe, FAULT_WRITE, NULL, ENOSPC, 0, -1);
    for (int i = 0; i < 5; i++) {
        ASSERT_FAILS(f->ops->append(f, "x", 1), LSM_NO_SPACE, p);
        ASSERT_FAILS(g->ops->flush(g), LSM_NO_SPACE, q);
    }
    ASSERT_OK(f->ops->sync(f)); /* syncs are another operation */
    fault_env_clear_failures(x->fe);
    ASSERT_OK(f->ops->append(f, "5", 1));
    ASSERT_OK(f->ops->close(f));
    ASSERT_OK(g->ops->close(g));
    assert_int_equal(slurp(p, got, sizeof(got)), 4);
    assert_memory_equal(got, "1245", 4);
}

static void test_fault_inject_sync(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256], got[64];
    lsm_wfile *f = open_w(x, "log", p);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    ASSERT_OK(f->ops->append(f, "abc", 3));
    ASSERT_OK(f->ops->sync(f));
    ASSERT_OK(f->ops->append(f, "def", 3));
    fault_env_fail(x->fe, FAULT_SYNC, NULL, EIO, 0, 1);
    ASSERT_FAILS(f->ops->sync(f), LSM_IO_ERROR, "injected");
    assert_int_equal(fault_env_syncs(x->fe), 1); /* only successes count */
    /* The failed sync made nothing durable. */
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_int_equal(slurp(p, got, sizeof(got)), 3);
    lsm_status_free(f->ops->close(f));
}

static void test_fault_inject_dir_ops(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char a[256], b[256], got[16];
    in("alpha", a);
    in("beta", b);
    lsm_wfile *f;
    fault_env_fail(x->fe, FAULT_CREATE, "alpha", ENOSPC, 1, 1);
    write_file(env, b, "b", true); /* does not match */
    write_file(env, a, "a", true); /* skipped */
    ASSERT_FAILS(env->new_wfile(env, a, &f), LSM_NO_SPACE, a);
    assert_null(f);
    fault_env_fail(x->fe, FAULT_RENAME, NULL, EIO, 0, 1);
    ASSERT_FAILS(env->rename_file(env, a, b), LSM_IO_ERROR, a);
    assert_true(exists(a));
    fault_env_fail(x->fe, FAULT_SYNC_DIR, NULL, EIO, 0, 1);
    ASSERT_FAILS(env->sync_dir(env, tu_dir), LSM_IO_ERROR, tu_dir);
    assert_int_equal(fault_env_dir_syncs(x->fe), 0);
    /* The failed dir sync made nothing durable. */
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    assert_false(exists(a));
    assert_false(exists(b));
    /* Reads: sfile and rfile. */
    write_file(env, a, "data", true);
    ASSERT_OK(env->sync_dir(env, tu_dir));
    fault_env_fail(x->fe, FAULT_READ, NULL, EIO, 1, 2);
    lsm_sfile *sf;
    lsm_rfile *rf;
    size_t n;
    ASSERT_OK(env->new_sfile(env, a, &sf));
    ASSERT_OK(env->new_rfile(env, a, &rf));
    ASSERT_OK(sf->ops->read(sf, got, 2, &n));
    ASSERT_FAILS(sf->ops->read(sf, got, 2, &n), LSM_IO_ERROR, a);
    ASSERT_FAILS(rf->ops->pread(rf, 0, got, 2, &n), LSM_IO_ERROR, a);
    ASSERT_OK(rf->ops->pread(rf, 0, got, 4, &n));
    assert_int_equal(n, 4);
    sf->ops->close(sf);
    rf->ops->close(rf);
}

static void test_fault_sync_delay(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    char p[256];
    lsm_wfile *f = open_w(x, "slow", p);
    fault_env_set_sync_delay_us(x->fe, 20000);
    uint64_t t0 = env->now_micros(env);
    ASSERT_OK(f->ops->sync(f));
    assert_true(env->now_micros(env) - t0 >= 20000); /* a lower bound only */
    fault_env_set_sync_delay_us(x->fe, 0);
    ASSERT_OK(f->ops->close(f));
}

/* Writers append and sync their own files while the main thread cuts the
 * power: each file must end exactly at its last successful sync. */
struct cut_arg {
    lsm_wfile *f;
    uint64_t last_synced; /* written by the thread; read after join */
    uint64_t appended;
    int ops_after_death;
};

static void *cut_writer(void *p)
{
    struct cut_arg *a = p;
    char rec[100];
    for (int i = 0;; i++) {
        memset(rec, 'a' + i % 26, sizeof(rec));
        lsm_status *s = a->f->ops->append(a->f, rec, sizeof(rec));
        if (s != NULL) {
            lsm_status_free(s);
            break;
        }
        a->appended += sizeof(rec);
        if (i % 3 == 0) {
            s = a->f->ops->sync(a->f);
            if (s != NULL) {
                lsm_status_free(s);
                break;
            }
            a->last_synced = a->appended;
        }
    }
    /* Dead from now on. */
    for (int i = 0; i < 10; i++) {
        lsm_status *s = a->f->ops->append(a->f, "z", 1);
        a->ops_after_death += s == NULL;
        lsm_status_free(s);
    }
    return NULL;
}

static void test_fault_power_cut_concurrent(void **state)
{
    struct fx *x = *state;
    lsm_env *env = x->env;
    enum { T = 4 };
    pthread_t th[T];
    struct cut_arg args[T];
    char paths[T][256];
    for (int i = 0; i < T; i++) {
        char name[16];
        snprintf(name, sizeof(name), "w%d", i);
        in(name, paths[i]);
        memset(&args[i], 0, sizeof(args[i]));
        ASSERT_OK(env->new_wfile(env, paths[i], &args[i].f));
    }
    ASSERT_OK(env->sync_dir(env, tu_dir));
    for (int i = 0; i < T; i++)
        assert_int_equal(pthread_create(&th[i], NULL, cut_writer, &args[i]), 0);
    /* Let them run until each has synced something (10 s at most). */
    for (int spins = 0; spins < 100000; spins++) {
        if (fault_env_syncs(x->fe) >= 4 * T)
            break;
        env->sleep_micros(env, 100);
    }
    uint64_t synced = fault_env_syncs(x->fe);
    ASSERT_OK(fault_env_power_cut(x->fe));
    fault_env_restart(x->fe);
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].ops_after_death, 0);
        struct stat st;
        assert_int_equal(stat(paths[i], &st), 0);
        assert_int_equal((uint64_t)st.st_size, args[i].last_synced);
        lsm_status_free(args[i].f->ops->close(args[i].f));
        assert_int_equal(stat(paths[i], &st), 0);
        assert_int_equal((uint64_t)st.st_size, args[i].last_synced);
    }
    assert_true(synced >= 4 * T); /* the cut came after real work, not before */
}

/* fdatasync as Linux reports a page it failed to write back: EIO once to
 * each open file description, 0 after that. The first sync through each
 * description waits for `release` (so the test can line syncs up). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool reported[1024]; /* by fd */
    bool release;
    int calls;
} lossy = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {false}, false, 0};

static int lossy_fdatasync(int fd)
{
    assert_true(fd >= 0 && fd < 1024);
    pthread_mutex_lock(&lossy.mu);
    lossy.calls++;
    pthread_cond_broadcast(&lossy.cv);
    bool report = !lossy.reported[fd];
    lossy.reported[fd] = true;
    while (report && !lossy.release)
        pthread_cond_wait(&lossy.cv, &lossy.mu);
    pthread_mutex_unlock(&lossy.mu);
    if (!report)
        return 0;
    errno = EIO;
    return -1;
}

static void lossy_wait_calls(int n)
{
    pthread_mutex_lock(&lossy.mu);
    while (lossy.calls < n)
        pthread_cond_wait(&lossy.cv, &lossy.mu);
    pthread_mutex_unlock(&lossy.mu);
}

struct sync_call {
    lsm_wfile *f;
    lsm_status *s;
};

static void *sync_thread(void *p)
{
    struct sync_call *c = p;
    c->s = c->f->ops->sync(c->f);
    return NULL;
}

/* fsyncgate on the sync slots: a WAL's overlapping syncs each use a
 * description of their own, but when every slot is busy a sync waits for
 * one, and the description it gets may have reported the lost page to the
 * sync before it already. That sync's fdatasync then returns 0: it must
 * still fail, from the error the earlier one recorded (before it let the
 * slot go). Here sync A fails on slot 0 while C and D hold the other two,
 * and B, started before A failed, gets slot 0 after it. */
static void test_posix_sync_slot_keeps_error(void **state)
{
    struct fx *x = *state;
    char p[256];
    lsm_wfile *f = open_w(x, "log", p);
    ASSERT_OK(f->ops->preallocate(f, 1 << 20, WFILE_MAPPED));
    ASSERT_OK(f->ops->append(f, "lost", 4));
    env_posix_fdatasync = lossy_fdatasync;
    struct sync_call c[4] = {{f, NULL}, {f, NULL}, {f, NULL}, {f, NULL}};
    pthread_t t[4];
    for (int i = 0; i < 3; i++) { /* A, C, D: one slot each, all waiting */
        assert_int_equal(pthread_create(&t[i], NULL, sync_thread, &c[i]), 0);
        lossy_wait_calls(i + 1);
    }
    assert_int_equal(pthread_create(&t[3], NULL, sync_thread, &c[3]), 0); /* B */
    usleep(100000); /* B waits for a slot (if it is late, it fails anyway) */
    pthread_mutex_lock(&lossy.mu);
    lossy.release = true;
    pthread_cond_broadcast(&lossy.cv);
    pthread_mutex_unlock(&lossy.mu);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    env_posix_fdatasync = fdatasync;
    assert_int_equal(lossy.calls, 4);
    for (int i = 0; i < 4; i++) {
        if (c[i].s == NULL)
            fail_msg("sync %d reported success after the page was lost", i);
        assert_int_equal(lsm_status_code(c[i].s), LSM_IO_ERROR);
        lsm_status_free(c[i].s);
    }
    lsm_status_free(f->ops->close(f));
}

/* A test of the POSIX env, or of the fault env, in a fresh directory. */
#define POSIX_TEST(fn) cmocka_unit_test_setup_teardown(fn, posix_setup, fx_teardown)
#define FAULT_TEST(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        POSIX_TEST(test_posix_sync_slot_keeps_error),
        POSIX_TEST(test_posix_write_read),          POSIX_TEST(test_posix_pread_threads),
        POSIX_TEST(test_posix_dirs_and_names),      POSIX_TEST(test_posix_small_file_helpers),
        POSIX_TEST(test_posix_new_file_out_of_memory),
        POSIX_TEST(test_posix_preallocate),         POSIX_TEST(test_posix_preallocate_grows),
        POSIX_TEST(test_posix_zero_fill),           POSIX_TEST(test_posix_zero_fill_concurrent),
        POSIX_TEST(test_posix_auto_concurrent),     POSIX_TEST(test_posix_auto_switches),
        cmocka_unit_test(test_posix_no_space),      POSIX_TEST(test_posix_lock),
        cmocka_unit_test(test_posix_misc),          FAULT_TEST(test_fault_power_cut_data),
        FAULT_TEST(test_fault_power_cut_new_files), FAULT_TEST(test_fault_power_cut_rename),
        FAULT_TEST(test_fault_power_cut_remove),    FAULT_TEST(test_fault_remove_dir_and_free),
        FAULT_TEST(test_fault_dead_readers),        FAULT_TEST(test_fault_inject_writes),
        FAULT_TEST(test_fault_inject_sync),         FAULT_TEST(test_fault_inject_dir_ops),
        FAULT_TEST(test_fault_sync_delay),          FAULT_TEST(test_fault_power_cut_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
