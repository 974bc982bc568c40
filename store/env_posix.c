/*
 * env_posix.c — the POSIX env behind lsm_env_default().
 *
 * The env is one static object whose function table never changes. Its only
 * mutable state is the set of files this process has locked (see lock_file):
 * flock() locks belong to open file descriptions, so they alone would not
 * stop a second handle in this process from reusing a lock it already holds
 * through the same descriptor (or after fork). That set is part of this env
 * object, guarded by its mutex, and is inherently process-wide, as the locks
 * themselves are.
 *
 * Write errors are sticky per file: after a failed write or fdatasync the
 * file's contents and what the kernel still holds dirty are unknown (Linux
 * may drop dirty pages after a failed fsync), so every later append, flush or
 * sync of that file fails too rather than claim something it cannot know.
 */
#include "env.h"
#include "lsm_malloc.h"
#include "env_posix_hook.h"
#include "mapguard.h"
#include "wal_prefill.h"
#include "wfile_direct.h"

#include "status.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define WFILE_BUF_SIZE (64 * 1024)

/* "what path" in messages, bounded. */
static lsm_status *posix_error(int err, const char *what, const char *path)
{
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "%s %s", what, path);
    return status_from_errno(err, msg);
}

/* open(2), retried across EINTR; O_CLOEXEC always. Returns the fd or -1
 * (errno set). */
static int open_retry(const char *path, int flags, mode_t mode)
{
    int fd;
    do {
        fd = open(path, flags | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

/* A file already at path, open as fd: may it be written (it is then
 * truncated)? Only a regular file of ours with no other name, so that no
 * one can have it write through a link planted beforehand (a device, as
 * /dev/full in a test, is written as it is). */
static int may_reuse(int fd, const char *path, lsm_status **s)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        *s = posix_error(errno, "fstat", path);
    else if (S_ISREG(st.st_mode) && (st.st_nlink != 1 || st.st_uid != geteuid()))
        *s = status_new(LSM_IO_ERROR,
                        "create %s: a file owned by uid %ld with %ld name(s) is there; refused",
                        path, (long)st.st_uid, (long)st.st_nlink);
    else if (S_ISREG(st.st_mode) && st.st_size > 0 && ftruncate(fd, 0) != 0)
        *s = posix_error(errno, "truncate", path);
    if (*s == NULL)
        return fd;
    close(fd);
    return -1;
}

/* Creates path for writing under the create rule of env.h: a new file is
 * ENV_FILE_MODE, a link at path is refused, an old file is emptied only
 * when may_reuse says so. Returns the fd, or -1 and *s. */
static int create_file(const char *path, int flags, lsm_status **s)
{
    *s = NULL;
    int fd = open_retry(path, flags | O_CREAT | O_EXCL | O_NOFOLLOW, ENV_FILE_MODE);
    if (fd >= 0 || errno != EEXIST) {
        if (fd < 0)
            *s = posix_error(errno, "create", path);
        return fd;
    }
    fd = open_retry(path, flags | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0) {
        *s = errno == ELOOP ? status_new(LSM_IO_ERROR, "create %s: a symbolic link is there; refused", path)
                            : posix_error(errno, "create", path);
        return -1;
    }
    return may_reuse(fd, path, s);
}

/* ------------------------------------------------------------- wfile */

/* Three modes. Normally appends collect in buf and go out with write(2).
 * preallocate() switches a WAL to one of two others:
 *  - mapped: the file is mapped (MAP_SHARED) over space reserved with
 *    fallocate and an append is a memcpy into the page cache: the bytes are
 *    in the kernel's hands at once (a crash of the process cannot lose them),
 *    with no system call per append. fdatasync covers pages dirtied through
 *    the mapping as it does written ones.
 *  - zero-filled (wal_prefill.h): appends pwrite at pos, and once the file is
 *    being synced a helper thread (the zeroer) writes zeros ahead of pos and
 *    syncs them.
 *    A later fdatasync then writes just the appended blocks: no extent to
 *    convert, no size to update (space merely fallocated still costs an
 *    extent update per sync that reaches new blocks). pwrite, because it
 *    syncs faster than a mapping of written space (docs/decisions.md).
 * In both WAL modes appends never use buf, so sync (which only flushes an
 * empty buf, then fdatasyncs) may run in one thread while another appends.
 */
struct posix_wfile {
    lsm_wfile base;
    int fd;
    _Atomic int err; /* errno of the first failed write/sync; 0 if none */
    size_t len;      /* bytes waiting in buf */
    char *path;
    char *map;         /* NULL unless mapped */
    uint64_t map_len;  /* bytes mapped from offset 0 (all reserved in the file) */
    uint64_t pos;      /* WAL modes: offset of the next append [zf's lock when zero-filled] */
    uint64_t map_step; /* how much more to reserve when the mapping is full */
    struct wal_prefill *zf; /* NULL unless zero-filled or auto */
    /* Auto mode: the appending thread switches between mapped and
     * zero-filled by how often the log is synced (see auto_tick). */
    bool auto_mode;
    uint32_t win_appends;         /* appends in this window [appender] */
    _Atomic uint32_t win_syncs;   /* syncs in this window (any thread) */
    struct sync_slots *slots; /* NULL until preallocate (then syncs may overlap) */
    wfile_direct *dio;        /* NULL unless write_through, until the first flush */
    char buf[WFILE_BUF_SIZE];
};

/* A WAL's syncs may overlap: the store runs more than one at a time, and
 * the zeroer syncs its zeros beside them. Linux reports a writeback error
 * once per open file description, so two fdatasyncs through one description
 * could split a lost page's report between them — one fails, the other
 * returns success for data that was not written. So each sync runs on a
 * description no other sync is using at that moment: one of SYNC_SLOTS
 * opened beside the appending fd. */
#define SYNC_SLOTS 3
struct sync_slots {
    int n;                              /* [const] slots opened (>= 1) */
    struct {
        pthread_mutex_t lk; /* held while a sync uses fd */
        int fd;             /* [const] */
    } slot[SYNC_SLOTS];
};

/* Writes all n bytes across EINTR and short writes: at the file offset
 * when off >= 0 (pwrite), else at the fd's position (write). Returns 0 or
 * an errno. */
int posix_write_all_at(int fd, const char *p, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t w = off >= 0 ? pwrite(fd, p, n, off) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO; /* cannot happen for regular files; do not spin */
        p += w;
        n -= (size_t)w;
        if (off >= 0)
            off += w;
    }
    return 0;
}

static lsm_status *wfile_failed(struct posix_wfile *f)
{
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "write %s (an earlier write or sync failed)", f->path);
    return status_from_errno(f->err, msg);
}

/* Writes n bytes to the fd, making the file fail for good on error. */
static lsm_status *wfile_write(struct posix_wfile *f, const char *p, size_t n)
{
    int err = posix_write_all_at(f->fd, p, n, -1);
    if (err == 0)
        return NULL;
    f->err = err;
    return posix_error(err, "write", f->path);
}

static lsm_status *wfile_flush_buf(struct posix_wfile *f)
{
    if (f->len == 0)
        return NULL;
    size_t n = f->len;
    f->len = 0;
    return wfile_write(f, f->buf, n);
}

static void fail_file(struct posix_wfile *f, int err);
static lsm_status *map_append(struct posix_wfile *f, const void *data, size_t n);
static lsm_status *zero_append(struct posix_wfile *f, const void *data, size_t n);
static void auto_tick(struct posix_wfile *f);

/* write_through (env.h): the file's appends go out directly (wfile_direct.h)
 * until the first flush, sync or close, which writes them all and leaves
 * the file buffered. Only before the first append, on a file in write mode. */
static void wfile_write_through(lsm_wfile *base)
{
    struct posix_wfile *f = (struct posix_wfile *)base;
    assert(f->len == 0 && f->map == NULL && f->zf == NULL && f->dio == NULL);
    f->dio = wfile_direct_start(f->fd); /* NULL: buffered, as before */
}

static lsm_status *direct_append(struct posix_wfile *f, const void *data, size_t n)
{
    int err = wfile_direct_append(f->dio, data, n);
    if (err == 0)
        return NULL;
    fail_file(f, err);
    return posix_error(err, "write", f->path);
}

/* Writes what direct_append kept and ends direct writes. */
static lsm_status *direct_end(struct posix_wfile *f)
{
    int err = wfile_direct_finish(f->dio);
    f->dio = NULL;
    if (err == 0)
        return NULL;
    fail_file(f, err);
    return posix_error(err, "write", f->path);
}

static lsm_status *wfile_append(lsm_wfile *base, const void *data, size_t n)
{
    struct posix_wfile *f = (struct posix_wfile *)base;
    if (f->err)
        return wfile_failed(f);
    if (f->auto_mode)
        auto_tick(f);
    if (f->map)
        return map_append(f, data, n);
    if (f->zf)
        return zero_append(f, data, n);
    if (f->dio)
        return direct_append(f, data, n);
    const char *p = data;
    if (n <= WFILE_BUF_SIZE - f->len) {
        memcpy(f->buf + f->len, p, n);
        f->len += n;
        return NULL;
    }
    /* Top the buffer up so it goes out as one full write, then buffer the
     * rest if it is small or write it straight through if it is large. */
    size_t fill = WFILE_BUF_SIZE - f->len;
    memcpy(f->buf + f->len, p, fill);
    f->len += fill;
    p += fill;
    n -= fill;
    lsm_status *s = wfile_flush_buf(f);
    if (s != NULL)
        return s;
    if (n < WFILE_BUF_SIZE) {
        memcpy(f->buf, p, n);
        f->len = n;
        return NULL;
    }
    return wfile_write(f, p, n);
}

static lsm_status *wfile_flush(lsm_wfile *base)
{
    struct posix_wfile *f = (struct posix_wfile *)base;
    if (f->err)
        return wfile_failed(f);
    if (f->dio)
        return direct_end(f);
    return wfile_flush_buf(f);
}

int (*env_posix_fdatasync)(int fd) = fdatasync;

/* Makes the file fail for good with err, unless it failed already. */
static void fail_file(struct posix_wfile *f, int err)
{
    int none = 0;
    atomic_compare_exchange_strong(&f->err, &none, err);
}

/* fdatasync through a description no other sync is using (see struct
 * sync_slots), waiting for one if all are busy. Returns 0 or an errno; a
 * failure is the file's sticky error (f->err) before the slot is released:
 * the next sync on that description gets 0 for the pages whose loss was
 * reported to this one, so it must find f->err set, and it checks. */
static int datasync(struct posix_wfile *f)
{
    struct sync_slots *ss = f->slots;
    int fd = f->fd, taken = -1;
    if (ss != NULL) {
        for (int i = 0; i < ss->n && taken < 0; i++)
            if (pthread_mutex_trylock(&ss->slot[i].lk) == 0)
                taken = i;
        if (taken < 0)
            pthread_mutex_lock(&ss->slot[taken = 0].lk);
        fd = ss->slot[taken].fd;
    }
    int r;
    do {
        r = env_posix_fdatasync(fd);
    } while (r < 0 && errno == EINTR);
    int err = r < 0 ? errno : 0;
    if (err != 0)
        fail_file(f, err);
    else
        err = atomic_load(&f->err); /* a loss reported to an earlier sync */
    if (taken >= 0)
        pthread_mutex_unlock(&ss->slot[taken].lk);
    return err;
}

/* Opens the sync slots of a WAL: more descriptions of the same file. If
 * none can be opened, one slot on the appending fd serialises the syncs. */
static lsm_status *slots_open(struct posix_wfile *f)
{
    struct sync_slots *ss = lsm_calloc(1, sizeof(*ss));
    if (ss == NULL)
        return posix_error(ENOMEM, "preallocate", f->path);
    for (int i = 0; i < SYNC_SLOTS; i++) {
        int fd = open_retry(f->path, O_WRONLY, 0);
        if (fd < 0)
            break;
        ss->slot[ss->n++].fd = fd;
    }
    if (ss->n == 0)
        ss->slot[ss->n++].fd = f->fd;
    for (int i = 0; i < ss->n; i++)
        pthread_mutex_init(&ss->slot[i].lk, NULL);
    f->slots = ss;
    return NULL;
}

static void slots_close(struct posix_wfile *f)
{
    struct sync_slots *ss = f->slots;
    if (ss == NULL)
        return;
    for (int i = 0; i < ss->n; i++) {
        pthread_mutex_destroy(&ss->slot[i].lk);
        if (ss->slot[i].fd != f->fd)
            close(ss->slot[i].fd);
    }
    free(ss);
    f->slots = NULL;
}

static lsm_status *wfile_sync(lsm_wfile *base)
{
    struct posix_wfile *f = (struct posix_wfile *)base;
    lsm_status *s = wfile_flush(base);
    if (s != NULL)
        return s;
    int err = datasync(f); /* sets f->err on failure */
    if (err != 0)
        return posix_error(err, "fdatasync", f->path);
    if (f->auto_mode)
        atomic_fetch_add_explicit(&f->win_syncs, 1, memory_order_relaxed);
    if (f->zf)
        wal_prefill_after_sync(f->zf);
    return NULL;
}

/* Reserves [from, from + len) in the file (mode 0: the size grows too, so
 * later syncs need no inode update) and maps the file up to its new end.
 * Returns an errno; on failure the file is left unmapped (write mode). */
static int map_extend(struct posix_wfile *f, uint64_t from, uint64_t len)
{
    int r;
    do {
        r = fallocate(f->fd, 0, (off_t)from, (off_t)len);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno;
    if (f->map)
        munmap(f->map, f->map_len);
    f->map = NULL;
    void *m = mmap(NULL, from + len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED)
        return errno;
    f->map = m;
    f->map_len = from + len;
    return 0;
}

/* Leaves mapped mode: later appends use write(2) at offset pos. */
static lsm_status *map_abandon(struct posix_wfile *f)
{
    if (f->map)
        munmap(f->map, f->map_len);
    f->map = NULL;
    if (lseek(f->fd, (off_t)f->pos, SEEK_SET) < 0) {
        f->err = errno;
        return posix_error(errno, "lseek", f->path);
    }
    return NULL;
}

static lsm_status *map_append(struct posix_wfile *f, const void *data, size_t n)
{
    if (f->pos + n > f->map_len) {
        /* Past the reservation: reserve another step (or fall back to
         * write(2) where the disk has no room for a reservation). Steps,
         * not doubling: a live log never holds much unused space. */
        uint64_t more = f->map_step > n ? f->map_step : n;
        if (map_extend(f, f->map_len, more) != 0) {
            lsm_status *s = map_abandon(f);
            return s ? s : wfile_append(&f->base, data, n);
        }
    }
    memcpy(f->map + f->pos, data, n);
    f->pos += n;
    return NULL;
}

/* ------------------------------------------------- zero-filled WAL mode */

static lsm_status *zero_append(struct posix_wfile *f, const void *data, size_t n)
{
    int err = wal_prefill_append(f->zf, data, n);
    if (err == 0)
        return NULL;
    f->err = err;
    return posix_error(err, "write", f->path);
}

static int prefill_write(void *ctx, const void *p, size_t n, uint64_t off)
{
    return posix_write_all_at(((struct posix_wfile *)ctx)->fd, p, n, (off_t)off);
}

static int prefill_sync(void *ctx)
{
    return datasync(ctx); /* sets f->err on failure */
}

/* Sets up zero-filling (active or, for auto mode, paused) from the file's
 * current end. */
static lsm_status *zero_fill_start(struct posix_wfile *f, uint64_t step, bool active)
{
    off_t end = lseek(f->fd, 0, SEEK_CUR);
    if (end < 0)
        return posix_error(errno, "lseek", f->path);
    struct wal_prefill_io io = {prefill_write, prefill_sync, f};
    f->zf = wal_prefill_new(&io, &f->pos, (uint64_t)end, step, active);
    return f->zf ? NULL : posix_error(ENOMEM, "preallocate", f->path);
}

/* Auto mode, from mapped to zero-filled appends: the rest of the
 * reservation is zeroed from pos on by the zeroer. [appender] */
static void auto_to_zero_fill(struct posix_wfile *f)
{
    munmap(f->map, f->map_len);
    f->map = NULL;
    wal_prefill_resume(f->zf, f->map_len);
}

/* Auto mode, from zero-filled to mapped appends (a failed mapping leaves
 * appends on pwrite, zeroing paused). [appender] */
static void auto_to_mapped(struct posix_wfile *f)
{
    uint64_t size = wal_prefill_pause(f->zf);
    /* On failure appends simply stay on pwrite (zf is still there). */
    (void)map_extend(f, size, f->map_step);
}

/* Auto mode: every AUTO_WINDOW appends, zero-fill if at least one append in
 * four was followed by a sync (its cheap syncs pay for the pwrite per
 * append), else map (no system call per append). [appender] */
#define AUTO_WINDOW 64
static void auto_tick(struct posix_wfile *f)
{
    if (++f->win_appends < AUTO_WINDOW)
        return;
    uint32_t syncs = atomic_exchange_explicit(&f->win_syncs, 0, memory_order_relaxed);
    bool sync_heavy = syncs * 4 >= f->win_appends;
    f->win_appends = 0;
    if (sync_heavy && f->map)
        auto_to_zero_fill(f);
    else if (!sync_heavy && f->map == NULL)
        auto_to_mapped(f);
}

static lsm_status *wfile_preallocate(lsm_wfile *base, uint64_t len, enum wfile_space mode)
{
    struct posix_wfile *f = (struct posix_wfile *)base;
    if (f->err)
        return wfile_failed(f);
    if (len == 0 || f->map || f->zf)
        return NULL;
    lsm_status *s = wfile_flush_buf(f);
    if (s == NULL && f->slots == NULL)
        s = slots_open(f);
    if (s)
        return s;
    if (mode != WFILE_MAPPED) {
        s = zero_fill_start(f, len, mode == WFILE_ZERO_FILL);
        if (s || mode == WFILE_ZERO_FILL)
            return s;
        f->auto_mode = true; /* and start mapped */
    }
    off_t end = lseek(f->fd, 0, SEEK_CUR);
    if (end < 0)
        return posix_error(errno, "lseek", f->path);
    f->pos = (uint64_t)end;
    f->map_step = len;
    int err = map_extend(f, (uint64_t)end, len);
    if (err == 0)
        return NULL;
    /* No reservation or no mapping: stay in write mode. The file may have
     * grown by zeros (the reader skips them); write at the data's end. */
    s = map_abandon(f);
    if (s)
        return s;
    if (err == EOPNOTSUPP || err == ENOSYS || err == ENODEV)
        return NULL;
    return posix_error(err, "preallocate", f->path);
}

/* Gives the file back its true size (pos) now that no one appends, but only
 * if it is still the size we made it: a file truncated behind our back (a
 * test's simulated power cut) is left alone. */
static lsm_status *trim_to_data(struct posix_wfile *f, uint64_t made_size)
{
    struct stat st;
    bool ours = fstat(f->fd, &st) == 0 && (uint64_t)st.st_size == made_size;
    if (f->err == 0 && ours && made_size > f->pos && ftruncate(f->fd, (off_t)f->pos) < 0)
        return posix_error(errno, "ftruncate", f->path);
    return NULL;
}

static lsm_status *wfile_close(lsm_wfile *base)
{
    struct posix_wfile *f = (struct posix_wfile *)base;
    lsm_status *s = wfile_flush(base);
    if (f->dio != NULL) { /* the file failed before: what it kept is dropped */
        wfile_direct_drop(f->dio);
        f->dio = NULL;
    }
    uint64_t made = 0;
    if (f->zf) {
        made = wal_prefill_free(f->zf);
        f->zf = NULL;
    }
    if (f->map) {
        munmap(f->map, f->map_len);
        made = f->map_len;
    }
    if (s == NULL && made > 0)
        s = trim_to_data(f, made);
    slots_close(f);
    if (close(f->fd) < 0 && s == NULL && errno != EINTR)
        s = posix_error(errno, "close", f->path);
    free(f->path);
    free(f);
    return s;
}

static const struct lsm_wfile_ops posix_wfile_ops = {
    .append = wfile_append,
    .flush = wfile_flush,
    .sync = wfile_sync,
    .preallocate = wfile_preallocate,
    .close = wfile_close,
    .write_through = wfile_write_through,
};

static lsm_status *posix_new_wfile(lsm_env *env, const char *path, lsm_wfile **out)
{
    (void)env;
    *out = NULL;
    /* Memory first: a failed create leaves no file behind. */
    struct posix_wfile *f = lsm_malloc(sizeof(*f));
    char *p = lsm_strdup(path);
    if (f == NULL || p == NULL) {
        free(f);
        free(p);
        return posix_error(ENOMEM, "open", path);
    }
    /* O_RDWR: a shared writable mapping needs a readable fd. */
    lsm_status *s;
    int fd = create_file(path, O_RDWR, &s);
    if (fd < 0) {
        free(f);
        free(p);
        return s;
    }
    f->base.ops = &posix_wfile_ops;
    f->fd = fd;
    f->err = 0;
    f->len = 0;
    f->path = p;
    f->map = NULL;
    f->map_len = 0;
    f->pos = 0;
    f->map_step = 0;
    f->zf = NULL;
    f->auto_mode = false;
    f->win_appends = 0;
    atomic_init(&f->win_syncs, 0);
    f->slots = NULL;
    f->dio = NULL;
    *out = &f->base;
    return NULL;
}

/* ------------------------------------------------------ sfile, rfile */

struct posix_rfile {
    union {
        lsm_sfile s;
        lsm_rfile r;
    } base;
    int fd;
    char *path;
    const char *map; /* [0, map_len) mapped read-only (rfile_map), or NULL */
    uint64_t map_len;
};

/* Reads until n bytes or end of file. *got < n only at end of file. */
static lsm_status *read_fully(struct posix_rfile *f, bool positional, uint64_t off, void *buf,
                              size_t n, size_t *got)
{
    char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = positional ? pread(f->fd, p + done, n - done, (off_t)(off + done))
                               : read(f->fd, p + done, n - done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return posix_error(errno, "read", f->path);
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return NULL;
}

static lsm_status *sfile_read(lsm_sfile *base, void *buf, size_t n, size_t *got)
{
    return read_fully((struct posix_rfile *)base, false, 0, buf, n, got);
}

static lsm_status *sfile_skip(lsm_sfile *base, uint64_t n)
{
    struct posix_rfile *f = (struct posix_rfile *)base;
    if (n > (uint64_t)INT64_MAX || lseek(f->fd, (off_t)n, SEEK_CUR) < 0)
        return posix_error(n > (uint64_t)INT64_MAX ? EINVAL : errno, "lseek", f->path);
    return NULL;
}

static void rfile_free(struct posix_rfile *f)
{
    if (f->map != NULL)
        munmap((void *)f->map, (size_t)f->map_len);
    close(f->fd);
    free(f->path);
    free(f);
}

static void sfile_close(lsm_sfile *base)
{
    rfile_free((struct posix_rfile *)base);
}

static lsm_status *rfile_pread(lsm_rfile *base, uint64_t off, void *buf, size_t n, size_t *got)
{
    return read_fully((struct posix_rfile *)base, true, off, buf, n, got);
}

static void rfile_close(lsm_rfile *base)
{
    rfile_free((struct posix_rfile *)base);
}

/* env.h's mapped reads: the SIGBUS guard first, then the mapping. */
static lsm_status *rfile_map(lsm_rfile *base, uint64_t size)
{
    struct posix_rfile *f = (struct posix_rfile *)base;
    if (size == 0 || size > SIZE_MAX)
        return status_new(LSM_INVALID_ARGUMENT, "map %s: size %" PRIu64, f->path, size);
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        return posix_error(errno, "fstat", f->path);
    if ((uint64_t)st.st_size < size) /* cut before we came: pread says how */
        return status_new(LSM_CORRUPTION, "map %s: %" PRIu64 " bytes, %" PRIu64 " expected",
                          f->path, (uint64_t)st.st_size, size);
    int err = mapguard_install();
    if (err != 0)
        return posix_error(err, "sigaction (SIGBUS) for", f->path);
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED)
        return posix_error(errno, "mmap", f->path);
    f->map = m;
    f->map_len = size;
    return NULL;
}

/* A copy out of the mapping, under the guard: a SIGBUS is the EIO a
 * pread would have returned. */
static lsm_status *rfile_read_point(lsm_rfile *base, uint64_t off, void *buf, size_t n,
                                    size_t *got)
{
    struct posix_rfile *f = (struct posix_rfile *)base;
    if (f->map == NULL || off > f->map_len || n > f->map_len - off)
        return read_fully(f, true, off, buf, n, got);
    *got = 0;
    if (!mapguard_copy(buf, f->map + off, n))
        return posix_error(EIO, "read", f->path);
    *got = n;
    return NULL;
}

static const struct lsm_sfile_ops posix_sfile_ops = {
    .read = sfile_read,
    .skip = sfile_skip,
    .close = sfile_close,
};

static const struct lsm_rfile_ops posix_rfile_ops = {
    .pread = rfile_pread,
    .close = rfile_close,
    .map = rfile_map,
    .read_point = rfile_read_point,
};

/* The uid owning path's directory; false (errno set) if it cannot be had. */
static bool dir_owner(const char *path, uid_t *uid)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - path) >= sizeof dir)
        return errno = ENAMETOOLONG, false;
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    struct stat st;
    if (stat(dir, &st) != 0)
        return false;
    *uid = st.st_uid;
    return true;
}

/* The read rule of env.h: NULL if fd (open at path) may be read. */
static lsm_status *may_read(int fd, const char *path)
{
    struct stat st;
    uid_t owner;
    if (fstat(fd, &st) != 0 || (st.st_uid != geteuid() && !dir_owner(path, &owner)))
        return posix_error(errno, "stat", path);
    if (!S_ISREG(st.st_mode))
        return status_new(LSM_IO_ERROR, "%s: not a regular file; refused", path);
    if (st.st_uid != geteuid() && st.st_uid != owner)
        return status_new(LSM_IO_ERROR,
                          "%s: owned by uid %ld, not by its directory's owner (uid %ld); "
                          "refused",
                          path, (long)st.st_uid, (long)owner);
    return NULL;
}

/* Opens path for reading under the read rule of env.h (O_NONBLOCK: a
 * planted FIFO must not hang the open; it is refused after). */
static int open_checked(const char *path, lsm_status **s)
{
    *s = NULL;
    int fd = open_retry(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0) {
        *s = errno == ELOOP ? status_new(LSM_IO_ERROR, "%s: a symbolic link; refused", path)
                            : posix_error(errno, "open", path);
        return -1;
    }
    if ((*s = may_read(fd, path)) != NULL) {
        close(fd);
        return -1;
    }
    return fd;
}

static lsm_status *open_for_read(const char *path, struct posix_rfile **out)
{
    *out = NULL;
    lsm_status *s;
    int fd = open_checked(path, &s);
    if (fd < 0)
        return s;
    struct posix_rfile *f = lsm_malloc(sizeof(*f));
    char *p = lsm_strdup(path);
    if (f == NULL || p == NULL) {
        free(f);
        free(p);
        close(fd);
        return posix_error(ENOMEM, "open", path);
    }
    f->fd = fd;
    f->path = p;
    f->map = NULL;
    f->map_len = 0;
    *out = f;
    return NULL;
}

static lsm_status *posix_new_sfile(lsm_env *env, const char *path, lsm_sfile **out)
{
    (void)env;
    struct posix_rfile *f;
    lsm_status *s = open_for_read(path, &f);
    *out = NULL;
    if (s != NULL)
        return s;
    f->base.s.ops = &posix_sfile_ops;
    *out = &f->base.s;
    return NULL;
}

/* Tables are read with pread(2), and point reads through a mapping once
 * map is called (env.h's mapped reads). A bare mapping would turn a disk
 * read error or a file cut short behind the store's back into a SIGBUS
 * that takes the whole process down (a mounted filesystem with it):
 * mapped bytes are read only by mapguard_copy, which makes that SIGBUS the
 * EIO pread returns (docs/decisions.md, "Gets read a table through a
 * guarded mapping"). */
static lsm_status *posix_new_rfile(lsm_env *env, const char *path, lsm_rfile **out)
{
    (void)env;
    struct posix_rfile *f;
    lsm_status *s = open_for_read(path, &f);
    *out = NULL;
    if (s != NULL)
        return s;
    f->base.r.ops = &posix_rfile_ops;
    *out = &f->base.r;
    return NULL;
}

/* -------------------------------------------------- directory and files */

static bool posix_file_exists(lsm_env *env, const char *path)
{
    (void)env;
    return access(path, F_OK) == 0;
}

static lsm_status *posix_get_children(lsm_env *env, const char *dir, char ***names, int *n)
{
    (void)env;
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return posix_error(errno, "opendir", dir);
    char **v = NULL;
    int count = 0, cap = 0;
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            err = errno;
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (count == cap) {
            int ncap = cap ? cap * 2 : 16;
            char **nv = lsm_realloc(v, (size_t)ncap * sizeof(*nv));
            if (nv == NULL) {
                err = ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        if ((v[count] = lsm_strdup(e->d_name)) == NULL) {
            err = ENOMEM;
            break;
        }
        count++;
    }
    closedir(d);
    if (err != 0) {
        env_free_children(v, count);
        return posix_error(err, "readdir", dir);
    }
    *names = v;
    *n = count;
    return NULL;
}

static lsm_status *posix_remove_file(lsm_env *env, const char *path)
{
    (void)env;
    return unlink(path) == 0 ? NULL : posix_error(errno, "unlink", path);
}

static lsm_status *posix_rename_file(lsm_env *env, const char *from, const char *to)
{
    (void)env;
    if (rename(from, to) == 0)
        return NULL;
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "rename %s to", from);
    return posix_error(errno, what, to);
}

static lsm_status *posix_link_file(lsm_env *env, const char *from, const char *to)
{
    (void)env;
    if (link(from, to) == 0)
        return NULL;
    int err = errno;
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "link %s to", from);
    if (err == EXDEV || err == EPERM || err == EOPNOTSUPP || err == EMLINK)
        return status_new(LSM_NOT_SUPPORTED, "%s %s: %s", what, to, strerror(err));
    return posix_error(err, what, to);
}

static lsm_status *posix_create_dir(lsm_env *env, const char *path)
{
    (void)env;
    if (mkdir(path, ENV_DIR_MODE) == 0)
        return NULL;
    int err = errno;
    struct stat st;
    if (err == EEXIST && stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return NULL;
        err = ENOTDIR;
    }
    return posix_error(err, "mkdir", path);
}

static lsm_status *posix_create_dir_new(lsm_env *env, const char *path)
{
    (void)env;
    if (mkdir(path, ENV_DIR_MODE) == 0)
        return NULL;
    if (errno == EEXIST)
        return status_new(LSM_INVALID_ARGUMENT, "mkdir %s: something is there already", path);
    return posix_error(errno, "mkdir", path);
}

static lsm_status *posix_path_info(lsm_env *env, const char *path, lsm_path_info *out)
{
    (void)env;
    struct stat st;
    memset(out, 0, sizeof(*out));
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? NULL : posix_error(errno, "lstat", path);
    out->kind = S_ISREG(st.st_mode)   ? LSM_PATH_FILE
                : S_ISDIR(st.st_mode) ? LSM_PATH_DIR
                : S_ISLNK(st.st_mode) ? LSM_PATH_LINK
                                      : LSM_PATH_OTHER;
    out->perm = st.st_mode & 07777;
    out->uid = st.st_uid;
    out->mine = st.st_uid == geteuid();
    return NULL;
}

/* Through an O_PATH descriptor opened without following a link, so the
 * mode changed is that of the entry looked at, never a link's target. */
static lsm_status *posix_make_private(lsm_env *env, const char *path)
{
    (void)env;
    int fd = open_retry(path, O_PATH | O_NOFOLLOW, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return posix_error(err, "open", path);
    }
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    mode_t mode = st.st_mode & 07700;
    int r = S_ISLNK(st.st_mode) ? 0 : chmod(proc, mode);
    if (r != 0 && errno == ENOENT) /* no /proc: by name (it was no link just now) */
        r = fchmodat(AT_FDCWD, path, mode, 0);
    int err = errno;
    close(fd);
    return r == 0 ? NULL : posix_error(err, "chmod", path);
}

static lsm_status *posix_remove_dir(lsm_env *env, const char *path)
{
    (void)env;
    return rmdir(path) == 0 ? NULL : posix_error(errno, "rmdir", path);
}

static lsm_status *posix_file_size(lsm_env *env, const char *path, uint64_t *size)
{
    (void)env;
    struct stat st;
    if (stat(path, &st) < 0) {
        *size = 0;
        return posix_error(errno, "stat", path);
    }
    *size = (uint64_t)st.st_size;
    return NULL;
}

static lsm_status *posix_sync_file(lsm_env *env, const char *path)
{
    (void)env;
    int fd = open_retry(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0)
        return posix_error(errno, "open", path);
    int r = fdatasync(fd);
    int err = errno;
    close(fd);
    return r < 0 ? posix_error(err, "fdatasync", path) : NULL;
}

static lsm_status *posix_truncate_file(lsm_env *env, const char *path, uint64_t len)
{
    (void)env;
    struct stat st;
    if (stat(path, &st) < 0)
        return posix_error(errno, "stat", path);
    if ((uint64_t)st.st_size > len && truncate(path, (off_t)len) < 0)
        return posix_error(errno, "truncate", path);
    return NULL;
}

static lsm_status *posix_sync_dir(lsm_env *env, const char *path)
{
    (void)env;
    int fd = open_retry(path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return posix_error(errno, "open directory", path);
    int r;
    do {
        r = fsync(fd);
    } while (r < 0 && errno == EINTR);
    int err = errno;
    close(fd);
    return r == 0 ? NULL : posix_error(err, "fsync directory", path);
}

static lsm_status *posix_disk_free(lsm_env *env, const char *path, uint64_t *total, uint64_t *avail)
{
    (void)env;
    struct statvfs sv;
    if (statvfs(path, &sv) < 0) {
        *total = *avail = 0;
        return posix_error(errno, "statvfs", path);
    }
    *total = (uint64_t)sv.f_blocks * sv.f_frsize;
    *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    return NULL;
}

static uint64_t posix_now_micros(lsm_env *env)
{
    (void)env;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void posix_sleep_micros(lsm_env *env, uint64_t us)
{
    (void)env;
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* --------------------------------------------------------------- locks */

/* A held lock. Identified by device and inode, not by spelling, so that
 * "dir/LOCK" and "./dir/LOCK" are the same lock. */
struct lsm_filelock {
    int fd;
    dev_t dev;
    ino_t ino;
    char *path;
    struct lsm_filelock *next;
};

static lsm_status *posix_lock_file(lsm_env *env, const char *path, lsm_filelock **out);
static lsm_status *posix_unlock_file(lsm_env *env, lsm_filelock *lock);
static lsm_status *posix_lock_file_shared(lsm_env *env, const char *path, lsm_filelock **out);

static struct posix_env {
    lsm_env env; /* first: lsm_env_default() hands out &env */
    pthread_mutex_t mu;
    struct lsm_filelock *locks; /* GUARDED_BY(mu): every lock held via this env */
} posix_env = {
    .env =
        {
            .new_wfile = posix_new_wfile,
            .new_sfile = posix_new_sfile,
            .new_rfile = posix_new_rfile,
            .file_exists = posix_file_exists,
            .get_children = posix_get_children,
            .remove_file = posix_remove_file,
            .rename_file = posix_rename_file,
            .link_file = posix_link_file,
            .create_dir = posix_create_dir,
            .create_dir_new = posix_create_dir_new,
            .path_info = posix_path_info,
            .make_private = posix_make_private,
            .remove_dir = posix_remove_dir,
            .file_size = posix_file_size,
            .sync_file = posix_sync_file,
            .truncate_file = posix_truncate_file,
            .sync_dir = posix_sync_dir,
            .lock_file = posix_lock_file,
            .unlock_file = posix_unlock_file,
            .lock_file_shared = posix_lock_file_shared,
            .disk_free = posix_disk_free,
            .now_micros = posix_now_micros,
            .sleep_micros = posix_sleep_micros,
        },
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .locks = NULL,
};

lsm_env *lsm_env_default(void)
{
    return &posix_env.env;
}

/* REQUIRES: posix_env.mu held. */
static bool lock_held(dev_t dev, ino_t ino)
{
    for (struct lsm_filelock *l = posix_env.locks; l != NULL; l = l->next)
        if (l->dev == dev && l->ino == ino)
            return true;
    return false;
}

static lsm_status *busy(const char *path, const char *who)
{
    return status_new(LSM_BUSY, "lock %s: the store is in use (%s)", path, who);
}

/* REQUIRES: posix_env.mu held. Takes the flock and records the lock. */
static lsm_status *lock_locked(int fd, const char *path, const struct stat *st, int op,
                               lsm_filelock **out)
{
    if (lock_held(st->st_dev, st->st_ino))
        return busy(path, "already locked by this process");
    int r;
    do {
        r = flock(fd, op | LOCK_NB);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno == EWOULDBLOCK ? busy(path, "locked by another process: is it mounted?")
                                    : posix_error(errno, "flock", path);
    struct lsm_filelock *l = lsm_malloc(sizeof(*l));
    char *p = lsm_strdup(path);
    if (l == NULL || p == NULL) {
        free(l);
        free(p);
        flock(fd, LOCK_UN);
        return posix_error(ENOMEM, "lock", path);
    }
    *l = (struct lsm_filelock){fd, st->st_dev, st->st_ino, p, posix_env.locks};
    posix_env.locks = l;
    *out = l;
    return NULL;
}

/* Opens path with flags and takes the flock op on it. */
static lsm_status *take_lock(const char *path, int flags, int op, lsm_filelock **out)
{
    *out = NULL;
    int fd = open_retry(path, flags | O_NOFOLLOW, ENV_FILE_MODE);
    if (fd < 0)
        return errno == ELOOP ? status_new(LSM_IO_ERROR, "lock %s: a symbolic link; refused", path)
                              : posix_error(errno, "open", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        return posix_error(err, "fstat", path);
    }
    pthread_mutex_lock(&posix_env.mu);
    lsm_status *s = lock_locked(fd, path, &st, op, out);
    pthread_mutex_unlock(&posix_env.mu);
    if (s != NULL)
        close(fd);
    return s;
}

static lsm_status *posix_lock_file(lsm_env *env, const char *path, lsm_filelock **out)
{
    (void)env;
    return take_lock(path, O_RDWR | O_CREAT, LOCK_EX, out);
}

static lsm_status *posix_lock_file_shared(lsm_env *env, const char *path, lsm_filelock **out)
{
    (void)env;
    *out = NULL;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return NULL; /* no one holds it: a writer would have created it */
    return take_lock(path, O_RDONLY, LOCK_SH, out);
}

static lsm_status *posix_unlock_file(lsm_env *env, lsm_filelock *lock)
{
    (void)env;
    if (lock == NULL)
        return NULL;
    pthread_mutex_lock(&posix_env.mu);
    struct lsm_filelock **pp = &posix_env.locks;
    while (*pp != NULL && *pp != lock)
        pp = &(*pp)->next;
    assert(*pp == lock); /* a lock not taken through this env */
    if (*pp == lock)
        *pp = lock->next;
    /* Unlock before leaving the mutex so no one sees the file unlisted
     * while the flock is still held. */
    lsm_status *s = NULL;
    if (flock(lock->fd, LOCK_UN) < 0)
        s = posix_error(errno, "unlock", lock->path);
    pthread_mutex_unlock(&posix_env.mu);
    close(lock->fd);
    free(lock->path);
    free(lock);
    return s;
}
