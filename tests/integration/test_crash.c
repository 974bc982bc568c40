/*
 * Crash tests: the daemon is killed with SIGKILL at random points, the
 * store is checked with fsck.lsmfs -n (which must find nothing) and
 * remounted, and everything that had returned must be there.
 *
 * The main one is the maildir delivery: 8 threads create a message
 * in tmp/, write it, fsync, close, rename it into new/ and fsync new/.  Each
 * thread records the last step that returned for every message; after the
 * crash a message may be one step further along than recorded (that step
 * was in flight), never behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "icount.h"
#include "mount.h"
#include "store_open.h"
#include "super.h"

#define ROUND_TIMEOUT_S 60
#define NTHREADS 8
#define ROUNDS 5
#define MAXSEQ 20000

static int setup(void **state)
{
    return tm_setup(state, ROUND_TIMEOUT_S, "a test_crash test", NULL);
}

/* The kernel's writeback cache: its write-back is followed by a SETATTR of
 * the file's times. */
static int setup_writeback(void **state)
{
    return tm_setup(state, ROUND_TIMEOUT_S, "a test_crash test", "writeback");
}

/* ---------------------------------------------------- maildir delivery */

/* The last step of a delivery that returned. */
enum stage {
    ST_NONE,     /* open(O_CREAT) may be in flight */
    ST_CREATED,  /* write may be in flight */
    ST_WRITTEN,  /* fsync may be in flight */
    ST_FSYNCED,  /* close or rename may be in flight */
    ST_RENAMED,  /* the directory fsync may be in flight */
    ST_DELIVERED /* the delivery returned: it must survive */
};

/* Where a message of an earlier round must be now. */
enum fate { FATE_UNSETTLED, FATE_NEW, FATE_GONE };

struct thread_log {
    atomic_int attempted; /* messages begun this round */
    _Atomic unsigned char stage[MAXSEQ];
    unsigned char fate[MAXSEQ]; /* main thread only */
};

struct maildir {
    struct tmount *m;
    struct tm_errs errs; /* failures before the kill */
    atomic_bool killed;  /* set just before the SIGKILL */
    atomic_bool stop;    /* set after it: no new deliveries */
    struct thread_log log[ROUNDS][NTHREADS];
};

struct deliverer_arg {
    struct maildir *md;
    int round, thread;
};

static size_t msg_size(int round, int thread, int seq)
{
    uint64_t h = tm_hash(&(int[3]){round, thread, seq}, 3 * sizeof(int), TM_HASH_INIT);
    return 2 * KiB + (size_t)(h % (14 * KiB + 1));
}

static uint64_t msg_seed(int round, int thread, int seq)
{
    return ((uint64_t)round << 40) | ((uint64_t)thread << 32) | (uint64_t)seq;
}

/* The message's exact bytes: a header line, then pseudo-random body. */
static size_t msg_fill(char *buf, int round, int thread, int seq)
{
    size_t size = msg_size(round, thread, seq);
    int h = snprintf(buf, size, "Message r%d t%d s%d\n", round, thread, seq);
    tm_fill(buf + h, size - (size_t)h, msg_seed(round, thread, seq), 0);
    return size;
}

static void deliver_failed(struct deliverer_arg *a, int seq, const char *op)
{
    int err = errno;
    if (atomic_load(&a->md->killed))
        return;
    tm_errs_add(&a->md->errs, "round %d thread %d message %d: %s: %s (before the kill)", a->round,
                a->thread, seq, op, tm_errname(err));
}

/* One delivery; false when a step failed (the mount is presumably dead). */
static bool deliver(struct deliverer_arg *a, int seq, char *buf)
{
    const struct tmount *m = a->md->m;
    struct thread_log *log = &a->md->log[a->round][a->thread];
    char name[64];
    snprintf(name, sizeof name, "r%d.t%d.s%d", a->round, a->thread, seq);
    size_t size = msg_fill(buf, a->round, a->thread, seq);
    int fd = open(P("Maildir/tmp/%s", name), O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0)
        return deliver_failed(a, seq, "open"), false;
    atomic_store(&log->stage[seq], ST_CREATED);
    int rc = tm_pwrite_all(fd, buf, size, 0);
    if (rc != 0) {
        errno = -rc;
        deliver_failed(a, seq, "write");
        close(fd);
        return false;
    }
    atomic_store(&log->stage[seq], ST_WRITTEN);
    if (fsync(fd) != 0) {
        deliver_failed(a, seq, "fsync");
        close(fd);
        return false;
    }
    atomic_store(&log->stage[seq], ST_FSYNCED);
    if (close(fd) != 0)
        return deliver_failed(a, seq, "close"), false;
    if (rename(P("Maildir/tmp/%s", name), P("Maildir/new/%s", name)) != 0)
        return deliver_failed(a, seq, "rename"), false;
    atomic_store(&log->stage[seq], ST_RENAMED);
    int dfd = open(P("Maildir/new"), O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return deliver_failed(a, seq, "open new/"), false;
    if (fsync(dfd) != 0) {
        deliver_failed(a, seq, "fsync new/");
        close(dfd);
        return false;
    }
    close(dfd);
    atomic_store(&log->stage[seq], ST_DELIVERED);
    return true;
}

static void *deliverer(void *arg)
{
    struct deliverer_arg *a = arg;
    struct thread_log *log = &a->md->log[a->round][a->thread];
    char *buf = malloc(17 * KiB);
    for (int seq = 0; seq < MAXSEQ && !atomic_load(&a->md->stop); seq++) {
        atomic_store(&log->attempted, seq + 1);
        if (!deliver(a, seq, buf))
            break;
    }
    free(buf);
    return NULL;
}

/* Names in a directory, parsed: a bitmap per (round, thread). */
struct found {
    unsigned char at[ROUNDS][NTHREADS][MAXSEQ]; /* 1: tmp/, 2: new/ */
};

static void scan(const struct tmount *m, const char *sub, unsigned char bit, struct found *f)
{
    DIR *d = opendir(P("Maildir/%s", sub));
    if (!d)
        fail_msg("opendir Maildir/%s: %s", sub, tm_errname(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int r, t, s;
        char tail;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (sscanf(e->d_name, "r%d.t%d.s%d%c", &r, &t, &s, &tail) != 3 || r < 0 || r >= ROUNDS ||
            t < 0 || t >= NTHREADS || s < 0 || s >= MAXSEQ)
            fail_msg("unexpected name Maildir/%s/%s", sub, e->d_name);
        if (f->at[r][t][s] & bit)
            fail_msg("Maildir/%s/%s listed twice", sub, e->d_name);
        f->at[r][t][s] |= bit;
    }
    closedir(d);
}

/* A message file must hold exactly its bytes (full=true) or, unsynced, at
 * most its size. */
static void check_message(const struct tmount *m, const char *sub, int r, int t, int s, bool full,
                          char *buf, char *want)
{
    const char *path = P("Maildir/%s/r%d.t%d.s%d", sub, r, t, s);
    ssize_t n = tm_read_file(path, buf, 17 * KiB);
    if (n < 0)
        fail_msg("reading %s: %s", path, tm_errname((int)-n));
    size_t size = msg_fill(want, r, t, s);
    if (!full) {
        if ((size_t)n > size)
            fail_msg("%s: %zd bytes, more than the %zu written", path, n, size);
        return;
    }
    if ((size_t)n != size || memcmp(buf, want, size) != 0)
        fail_msg("%s: %zd bytes, expected its %zu bytes exactly%s", path, n, size,
                 (size_t)n == size ? " (contents differ)" : "");
}

static const char *stage_name(int st)
{
    static const char *const names[] = {"none",    "created", "written",
                                        "fsynced", "renamed", "delivered"};
    return names[st];
}

/* Check one message of the round that just crashed, then settle its fate
 * (tmp/ leftovers are removed, as a mail system would on restart). */
static void check_crashed(struct maildir *md, struct found *f, int r, int t, int s, char *buf,
                          char *want)
{
    const struct tmount *m = md->m;
    struct thread_log *log = &md->log[r][t];
    int st = atomic_load(&log->stage[s]);
    bool in_tmp = f->at[r][t][s] & 1, in_new = f->at[r][t][s] & 2;
    const char *where = in_tmp && in_new ? "in tmp/ and new/"
                        : in_tmp         ? "in tmp/"
                        : in_new         ? "in new/"
                                         : "nowhere";
    bool ok;
    switch (st) {
    case ST_NONE:
        ok = !in_new;
        break;
    case ST_CREATED:
    case ST_WRITTEN:
        ok = in_tmp && !in_new;
        break;
    case ST_FSYNCED:
        ok = in_tmp != in_new;
        break;
    default:
        ok = in_new && !in_tmp;
        break;
    }
    if (!ok)
        fail_msg("message r%d.t%d.s%d: last step returned was %s, but it is "
                 "%s",
                 r, t, s, stage_name(st), where);
    if (in_new)
        check_message(m, "new", r, t, s, true, buf, want);
    if (in_tmp) {
        check_message(m, "tmp", r, t, s, st >= ST_FSYNCED, buf, want);
        TM_OK(unlink(P("Maildir/tmp/r%d.t%d.s%d", r, t, s)));
    }
    log->fate[s] = in_new ? FATE_NEW : FATE_GONE;
}

/* Every message of rounds 0..last is where it must be, with its exact
 * contents.  If `crashed`, round `last` just crashed and its messages are
 * checked against their logged steps and settled. */
static int verify_maildir(struct maildir *md, int last, bool crashed)
{
    const struct tmount *m = md->m;
    struct found *f = calloc(1, sizeof *f);
    scan(m, "tmp", 1, f);
    scan(m, "new", 2, f);
    char *buf = malloc(17 * KiB), *want = malloc(17 * KiB);
    int delivered = 0;
    for (int r = 0; r <= last; r++) {
        for (int t = 0; t < NTHREADS; t++) {
            struct thread_log *log = &md->log[r][t];
            int n = atomic_load(&log->attempted);
            for (int s = 0; s < MAXSEQ; s++) {
                if (s >= n) {
                    if (f->at[r][t][s])
                        fail_msg("r%d.t%d.s%d exists but was never begun", r, t, s);
                    continue;
                }
                if (r == last && crashed) {
                    check_crashed(md, f, r, t, s, buf, want);
                } else if (log->fate[s] == FATE_NEW) {
                    if (f->at[r][t][s] != 2)
                        fail_msg("r%d.t%d.s%d (delivered in round %d) is "
                                 "gone from new/ by round %d",
                                 r, t, s, r, last);
                    check_message(m, "new", r, t, s, true, buf, want);
                } else if (f->at[r][t][s]) {
                    fail_msg("r%d.t%d.s%d, removed after round %d, is back", r, t, s, r);
                }
                delivered += log->fate[s] == FATE_NEW;
            }
        }
    }
    free(buf);
    free(want);
    free(f);
    return delivered;
}

static void test_maildir_crash(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("Maildir"), 0700));
    TM_OK(mkdir(P("Maildir/tmp"), 0700));
    TM_OK(mkdir(P("Maildir/new"), 0700));
    TM_OK(mkdir(P("Maildir/cur"), 0700));
    struct maildir *md = calloc(1, sizeof *md);
    assert_non_null(md);
    md->m = m;
    tm_errs_init(&md->errs);
    unsigned r = (unsigned)tm_seed();
    /* Kill points: very early, mid, late, and two anywhere. */
    static const unsigned lo[ROUNDS] = {5, 300, 1500, 5, 5};
    static const unsigned hi[ROUNDS] = {300, 1500, 4000, 4000, 4000};
    for (int round = 0; round < ROUNDS; round++) {
        tm_watchdog(ROUND_TIMEOUT_S, "a maildir crash round");
        double t0 = tm_now();
        unsigned delay = lo[round] + (unsigned)rand_r(&r) % (hi[round] - lo[round] + 1);
        atomic_store(&md->killed, false);
        atomic_store(&md->stop, false);
        pthread_t t[NTHREADS];
        struct deliverer_arg a[NTHREADS];
        for (int i = 0; i < NTHREADS; i++) {
            a[i] = (struct deliverer_arg){md, round, i};
            assert_int_equal(pthread_create(&t[i], NULL, deliverer, &a[i]), 0);
        }
        tm_sleep_ms(delay);
        atomic_store(&md->killed, true);
        int killed = tm_kill(m);
        atomic_store(&md->stop, true);
        for (int i = 0; i < NTHREADS; i++)
            pthread_join(t[i], NULL);
        if (killed != 0)
            fail_msg("round %d: the daemon was not running at the kill", round);
        tm_errs_check(&md->errs);
        int done = 0;
        for (int i = 0; i < NTHREADS; i++)
            for (int s = 0; s < atomic_load(&md->log[round][i].attempted); s++)
                done += atomic_load(&md->log[round][i].stage[s]) == ST_DELIVERED;
        char when[64];
        snprintf(when, sizeof when, "round %d (kill after %u ms)", round, delay);
        tm_crash_checked(m, when);
        int total = verify_maildir(md, round, true);
        fprintf(stderr,
                "[crash] %s: %d deliveries returned, %d messages in "
                "new/ verified, %.1f s\n",
                when, done, total, tm_now() - t0);
        if (delay >= 1000 && done == 0)
            fail_msg("%s: no delivery completed in %u ms", when, delay);
    }
    /* A clean unmount at the end leaves a clean store too. */
    tm_remount_checked(m);
    verify_maildir(md, ROUNDS - 1, false);
    free(md);
}

/* ------------------------------------------- kill -9 without any fsync */

/* "Without fsync, operations reach the WAL without sync: they survive a
 * kill -9 of the daemon."  Files are closed (close flushes what the kernel
 * may have cached) but never fsynced. */
static void test_kill_without_fsync(void **state)
{
    struct tmount *m = *state;
    TM_OK(mkdir(P("a"), 0750));
    TM_OK(mkdir(P("a/b"), 0755));
    tm_make_file(P("small"), 100, 1);
    tm_make_file(P("medium"), 100 * KiB + 1, 2);
    tm_make_file(P("large"), 3 * MiB + 3, 3);
    TM_OK(chmod(P("small"), 0600));
    TM_OK(chown(P("medium"), 1, 2));
    TM_OK(setxattr(P("small"), "user.k", "value", 5, 0));
    TM_OK(symlink("../small", P("a/sym")));
    TM_OK(link(P("medium"), P("a/medium-link")));
    TM_OK(rename(P("large"), P("a/b/large")));
    tm_make_file(P("doomed"), 5000, 4);
    TM_OK(unlink(P("doomed")));
    TM_OK(truncate(P("medium"), 50000));
    struct timespec times[2] = {{111, 222}, {333, 444}};
    TM_OK(utimensat(AT_FDCWD, P("small"), times, 0));
    TM_OK(mkdir(P("gone"), 0755));
    TM_OK(rmdir(P("gone")));
    TM_OK(mkfifo(P("a/fifo"), 0640));

    static const char *const paths[] = {"a",         "a/b",   "small",         "medium",
                                        "a/b/large", "a/sym", "a/medium-link", "a/fifo"};
    enum { NP = sizeof paths / sizeof *paths };
    struct stat before[NP];
    uint64_t sums[NP] = {0};
    for (int i = 0; i < NP; i++) {
        TM_OK(lstat(P("%s", paths[i]), &before[i]));
        if (S_ISREG(before[i].st_mode))
            sums[i] = tm_hash_file(P("%s", paths[i]));
    }
    tm_crash_checked(m, "kill without fsync");
    for (int i = 0; i < NP; i++) {
        struct stat st;
        if (lstat(P("%s", paths[i]), &st) != 0)
            fail_msg("%s lost in the crash: %s", paths[i], tm_errname(errno));
        const struct stat *b = &before[i];
        if (st.st_ino != b->st_ino || st.st_mode != b->st_mode || st.st_nlink != b->st_nlink ||
            st.st_uid != b->st_uid || st.st_gid != b->st_gid || st.st_size != b->st_size ||
            st.st_mtim.tv_sec != b->st_mtim.tv_sec || st.st_mtim.tv_nsec != b->st_mtim.tv_nsec)
            fail_msg("%s changed in the crash: ino %llu/%llu mode 0%o/0%o "
                     "nlink %llu/%llu uid %d/%d gid %d/%d size %lld/%lld "
                     "mtime %lld.%09ld/%lld.%09ld",
                     paths[i], (unsigned long long)b->st_ino, (unsigned long long)st.st_ino,
                     b->st_mode, st.st_mode, (unsigned long long)b->st_nlink,
                     (unsigned long long)st.st_nlink, (int)b->st_uid, (int)st.st_uid,
                     (int)b->st_gid, (int)st.st_gid, (long long)b->st_size, (long long)st.st_size,
                     (long long)b->st_mtim.tv_sec, b->st_mtim.tv_nsec, (long long)st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
        if (S_ISREG(st.st_mode) && tm_hash_file(P("%s", paths[i])) != sums[i])
            fail_msg("%s: contents changed in the crash", paths[i]);
    }
    char v[16];
    assert_int_equal(getxattr(P("small"), "user.k", v, sizeof v), 5);
    assert_memory_equal(v, "value", 5);
    char target[64];
    assert_int_equal(readlink(P("a/sym"), target, sizeof target), 8);
    assert_memory_equal(target, "../small", 8);
    struct stat st;
    TM_ERR(lstat(P("doomed"), &st), ENOENT);
    TM_ERR(lstat(P("large"), &st), ENOENT);
    TM_ERR(lstat(P("gone"), &st), ENOENT);
}

/* ------------------------------------ large writes kept out of the WAL */

/* Large writes are committed with defer_log: their bytes stay out of the
 * store's WAL unless something logged follows them. A kill -9 right after
 * them may lose the last ones, but only as a whole write and with the size
 * it set: the file is a prefix of what was written, never a hole or stale
 * bytes. A logged change made after them carries them into the WAL. */
static void test_large_writes_crash_as_prefix(void **state)
{
    struct tmount *m = *state;
    enum { BIG = 6 * 1024 * 1024 };
    tm_make_file(P("small"), 100, 1);
    tm_make_file(P("kept"), BIG, 2);
    TM_OK(mkdir(P("after"), 0755)); /* logged: "kept" goes into the WAL first */
    tm_make_file(P("tail"), BIG, 3); /* nothing logged after it */
    assert_true(tm_stats_counter(m, "deferred writes") >= 12);
    tm_crash_checked(m, "kill after large writes");
    tm_check_file(P("small"), 100, 1);
    tm_check_file(P("kept"), BIG, 2);
    struct stat st;
    TM_OK(stat(P("after"), &st));
    TM_OK(stat(P("tail"), &st)); /* created by a logged request */
    if (st.st_size % (1024 * 1024) != 0 || st.st_size > BIG)
        fail_msg("tail: %lld bytes after the crash, not a prefix of whole writes",
                 (long long)st.st_size);
    tm_check_file(P("tail"), (size_t)st.st_size, 3);
}

/* A large file fsynced right after it was written: the store flushes its
 * memtable rather than log the deferred bytes (they reach the disk once),
 * and the file survives a kill -9 like any fsynced one. Also with -o
 * writeback, where the kernel's SETATTR of the times after its write-back
 * must not carry the deferred bytes into the log first. */
static void test_fsynced_large_file_survives_crash(void **state)
{
    struct tmount *m = *state;
    enum { BIG = 6 * 1024 * 1024 };
    tm_make_file(P("synced"), BIG, 4);
    tm_fsync_path(P("synced"), false);
    assert_true(tm_stats_counter(m, "syncs that flushed them") >= 1);
    tm_make_file(P("unsynced"), BIG, 5);
    tm_crash_checked(m, "kill after an fsynced large file");
    tm_check_file(P("synced"), BIG, 4);
}

/* On a writeback mount, a times-only SETATTR is deferred only while the
 * inode's last change was deferred: a logged change of it through another
 * path (here link) ends that, so a utimensat after it is logged and a kill
 * -9 keeps it (before: the large write's deferral stuck to the inode, the
 * utimensat was deferred too and the kill lost it). */
static void test_times_after_logged_change_survive_kill(void **state)
{
    struct tmount *m = *state;
    tm_make_file(P("f"), 1 << 20, 6); /* closed: written back, deferred */
    TM_OK(link(P("f"), P("g")));
    struct timespec t[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000, .tv_nsec = 7}};
    TM_OK(utimensat(AT_FDCWD, P("f"), t, 0));
    tm_crash_checked(m, "kill after a utimensat");
    struct stat st;
    TM_OK(stat(P("f"), &st));
    if (st.st_mtim.tv_sec != 1000 || st.st_mtim.tv_nsec != 7)
        fail_msg("mtime %lld.%09ld after the kill, not 1000.000000007", (long long)st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec);
    tm_check_file(P("g"), 1 << 20, 6);
}

/* Advances a 64-bit LCG (Knuth's MMIX constants); draw from its top bits. */
static void next_rand(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
}

/* Crash after crash, every file fsynced before a kill -9 is intact after
 * it, whatever else went on: large writes kept out of the WAL, memtable
 * switches between them, late logging of them by later writes. (Recovery
 * once dropped every record after a late copy that came after the marker
 * of a newer deferred batch, fsynced files among them.) */
static void test_fsynced_files_survive_crash_cycles(void **state)
{
    struct tmount *m = *state;
    enum { CYCLES = 6, FILES = 16 };
    static const size_t sizes[] = {4096, 20000, 300 * 1024, 1u << 20, 3u << 20};
    struct kept {
        char name[32];
        size_t size;
        uint64_t seed;
    } kept[CYCLES * FILES];
    int nkept = 0;
    uint64_t rng = tm_seed();
    for (int c = 0; c < CYCLES; c++) {
        for (int i = 0; i < FILES; i++) {
            next_rand(&rng);
            struct kept *k = &kept[nkept];
            snprintf(k->name, sizeof(k->name), "c%d_%d", c, i);
            k->size = sizes[(rng >> 33) % 5];
            k->seed = (uint64_t)(c * FILES + i);
            tm_make_file(P("%s", k->name), k->size, k->seed);
            if ((rng >> 40) % 10 < 6) { /* else left to chance */
                tm_fsync_path(P("%s", k->name), false);
                tm_fsync_path(P("."), true);
                nkept++;
            }
        }
        tm_crash_checked(m, "crash cycle");
        tm_watchdog(ROUND_TIMEOUT_S, "a crash cycle");
        for (int k = 0; k < nkept; k++)
            tm_check_file(P("%s", kept[k].name), kept[k].size, kept[k].seed);
    }
}

/* The same with the kill in the middle of the writes: files of every size,
 * 6 in 10 fsynced (file, then directory) and noted once both returned; after
 * each kill -9 every noted file is intact. */
enum { KILL_CYCLES = 4, KILL_FILES = 4096 };

struct kill_writer {
    struct tmount *m;
    int cycle;
    uint64_t rng;
    struct kept_file {
        char name[32];
        size_t size;
        uint64_t seed;
    } kept[KILL_FILES];
    _Atomic int nkept; /* kept[0..nkept) are noted (release/acquire) */
};

/* One file: written, maybe fsynced and noted. false once the mount fails
 * (the kill). On a worker thread: no cmocka. */
static bool write_one(struct kill_writer *w, int i, char *buf)
{
    static const size_t sizes[] = {4096, 20000, 300 * 1024, 1u << 20, 3u << 20, 6u << 20};
    next_rand(&w->rng);
    int n = atomic_load_explicit(&w->nkept, memory_order_relaxed);
    if (n == KILL_FILES)
        return false;
    struct kept_file *k = &w->kept[n];
    snprintf(k->name, sizeof(k->name), "k%d_%d", w->cycle, i);
    k->size = sizes[(w->rng >> 33) % 6];
    k->seed = w->rng >> 16;
    tm_fill(buf, k->size, k->seed, 0);
    struct tmount *m = w->m;
    bool ok = tm_write_file(P("%s", k->name), buf, k->size, 0644) == 0;
    bool sync = (w->rng >> 40) % 10 < 6;
    if (ok && sync)
        ok = tm_sync_path(P("%s", k->name), false) == 0 && tm_sync_path(P("."), true) == 0;
    if (ok && sync)
        atomic_store_explicit(&w->nkept, n + 1, memory_order_release);
    return ok;
}

static void *kill_writer_main(void *arg)
{
    struct kill_writer *w = arg;
    char *buf = malloc(6u << 20);
    for (int i = 0; buf != NULL && write_one(w, i, buf); i++) {
    }
    free(buf);
    return NULL;
}

static void test_fsynced_files_survive_kills_mid_write(void **state)
{
    struct tmount *m = *state;
    struct kill_writer *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    w->m = m;
    w->rng = tm_seed();
    unsigned r = (unsigned)w->rng;
    for (int c = 0; c < KILL_CYCLES; c++) {
        tm_watchdog(ROUND_TIMEOUT_S, "a mid-write kill cycle");
        w->cycle = c;
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, kill_writer_main, w), 0);
        tm_sleep_ms(100 + (unsigned)rand_r(&r) % 900);
        int killed = tm_kill(m);
        pthread_join(t, NULL);
        if (killed != 0)
            fail_msg("cycle %d: the daemon was not running at the kill", c);
        tm_crash_checked(m, "a kill mid-write");
        int n = atomic_load_explicit(&w->nkept, memory_order_acquire);
        for (int k = 0; k < n; k++)
            tm_check_file(P("%s", w->kept[k].name), w->kept[k].size, w->kept[k].seed);
    }
    free(w);
}

/* ------------------------------------------- the inode count (icount.h) */

/* The inode count record in the unmounted store: whether it is current
 * and its count. */
static bool stored_icount(struct tmount *m, uint64_t *count)
{
    lsm_db *db = NULL;
    char err[512];
    schema_super sb;
    store_open_req r = {.dir = m->store, .flags = STORE_OPEN_RO, .ctx = "test"};
    if (store_open(&r, &db, &sb, err, sizeof err) != 0)
        fail_msg("opening the store: %s", err);
    bool current = false;
    int e = icount_current(db, &current, count);
    lsm_status_free(lsm_close(db));
    if (e != 0)
        fail_msg("reading the inode count: %s", tm_errname(e));
    return current;
}

/* A clean unmount leaves the count in the store (so the next mount reads
 * one key, not every inode record); after a kill -9 the remount's count
 * is still the inodes there are. */
static void test_inode_count_across_unmount_and_kill(void **state)
{
    struct tmount *m = *state;
    long long base = tm_inodes_used(m);
    TM_OK(mkdir(P("d"), 0755));
    for (int i = 0; i < 20; i++)
        tm_make_file(tm_path(m, "d/f%d", i), 100 + 300 * (size_t)i, (uint64_t)i);
    if (tm_unmount(m) != 0)
        fail_msg("unmount failed");
    uint64_t count = 0;
    assert_true(stored_icount(m, &count));
    assert_int_equal(count, base + 21);
    if (tm_mount(m) != 0)
        fail_msg("mount failed");
    assert_int_equal(tm_inodes_used(m), base + 21);
    for (int i = 0; i < 5; i++)
        TM_OK(unlink(tm_path(m, "d/f%d", i)));
    tm_make_file(P("late"), 5000, 99);
    TM_OK(mkdir(P("e"), 0755));
    if (tm_kill(m) != 0)
        fail_msg("the daemon was not running at the kill");
    assert_false(stored_icount(m, &count)); /* written after: stale */
    tm_crash_checked(m, "inode count crash");
    tm_wait_inodes(m, base + 18, 10);
    tm_remount_checked(m);
    assert_int_equal(tm_inodes_used(m), base + 18);
}

/* ------------------------------------------------- orphans and crashes */

/* Files unlinked while open when the daemon dies are reclaimed by the
 * next mount: a large one and a small inline one (whose record the unlink
 * left with its link count: the orphan mark alone says it has no name). */
static void test_orphan_reclaimed(void **state)
{
    struct tmount *m = *state;
    long long base = tm_inodes_used(m);
    tm_make_file(P("orphan"), 8 * MiB, 9);
    tm_make_file(P("small"), 700, 11);
    tm_make_file(P("kept"), 1000, 10);
    int fd = open(P("orphan"), O_RDONLY);
    TM_OK(fd);
    int sfd = open(P("small"), O_RDONLY);
    TM_OK(sfd);
    TM_OK(unlink(P("orphan")));
    TM_OK(unlink(P("small")));
    char c;
    assert_int_equal(pread(fd, &c, 1, 4 * MiB), 1);
    struct stat sst;
    TM_OK(fstat(sfd, &sst));
    assert_int_equal(sst.st_nlink, 0);
    assert_int_equal(pread(sfd, &c, 1, 600), 1);
    if (tm_kill(m) != 0)
        fail_msg("the daemon was not running at the kill");
    close(fd);
    close(sfd);
    tm_crash_checked(m, "orphan crash");
    struct stat st;
    TM_ERR(lstat(P("orphan"), &st), ENOENT);
    TM_OK(lstat(P("kept"), &st));
    /* One inode (kept) beyond the start, once the orphans are reclaimed,
     * which may happen in the background. */
    tm_wait_inodes(m, base + 1, 10);
    tm_remount_checked(m);
}

/* Small files unlinked (so freed in batches by the reclaimer once the
 * kernel lets go of them) when the daemon dies: mid-way through the
 * unlinks, or right after the last one (orphans still gathering for their
 * batch). After the remount (fsck clean) every file whose unlink returned is
 * gone, every file not reached is whole, and the inodes in use are exactly
 * those left: nothing leaks. */
enum { BATCH_FILES = 1500 };

struct unlinker {
    const struct tmount *m;
    atomic_int done; /* unlinks that returned */
};

static void *unlink_all(void *arg)
{
    struct unlinker *u = arg;
    const struct tmount *m = u->m;
    for (int i = 0; i < BATCH_FILES; i++) {
        if (unlink(P("b/f%d", i)) != 0)
            break;
        atomic_store(&u->done, i + 1);
    }
    return NULL;
}

static void check_after_batch_crash(struct tmount *m, long long base, int done)
{
    int left = 0;
    for (int i = 0; i < BATCH_FILES; i++) {
        struct stat st;
        int r = lstat(P("b/f%d", i), &st);
        if (i < done && r == 0)
            fail_msg("b/f%d came back after the crash (its unlink had returned)", i);
        if (i > done && r != 0)
            fail_msg("b/f%d is gone after the crash (never unlinked)", i);
        if (r == 0) {
            tm_check_file(P("b/f%d", i), 1000, (uint64_t)i);
            left++;
        }
    }
    tm_wait_inodes(m, base + left, 10);
}

static void test_orphan_batches_crash(void **state)
{
    struct tmount *m = *state;
    unsigned r = (unsigned)tm_seed() ^ 0xba7c4;
    TM_OK(mkdir(P("b"), 0755));
    long long base = tm_inodes_used(m);
    for (int round = 0; round < 2; round++) {
        tm_watchdog(ROUND_TIMEOUT_S, "an orphan batch crash round");
        for (int i = 0; i < BATCH_FILES; i++)
            tm_make_file(P("b/f%d", i), 1000, (uint64_t)i);
        struct unlinker u = {.m = m};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, unlink_all, &u), 0);
        if (round == 0)
            tm_sleep_ms(5 + (unsigned)rand_r(&r) % 30);
        else
            pthread_join(t, NULL);
        int killed = tm_kill(m);
        if (round == 0)
            pthread_join(t, NULL);
        if (killed != 0)
            fail_msg("the daemon was not running at the kill");
        int done = atomic_load(&u.done);
        tm_crash_checked(m, "orphan batch crash");
        check_after_batch_crash(m, base, done);
        for (int i = done; i < BATCH_FILES; i++)
            unlink(P("b/f%d", i));
    }
    tm_remount_checked(m);
    tm_wait_inodes(m, base, 10);
}

/* "Inode numbers are never reused, crash or not": the newest inodes are
 * freed just before the crash, so an allocator that restarts from the
 * largest live number would hand them out again. */
static void test_inode_numbers_after_crash(void **state)
{
    struct tmount *m = *state;
    enum { N = 100 };
    ino_t old[N];
    for (int i = 0; i < N; i++) {
        int fd = open(P("f%d", i), O_WRONLY | O_CREAT | O_EXCL, 0644);
        TM_OK(fd);
        struct stat st;
        TM_OK(fstat(fd, &st));
        close(fd);
        old[i] = st.st_ino;
    }
    for (int i = N / 2; i < N; i++)
        TM_OK(unlink(P("f%d", i)));
    tm_crash_checked(m, "inode numbers crash");
    for (int i = 0; i < N; i++) {
        int fd = open(P("g%d", i), O_WRONLY | O_CREAT | O_EXCL, 0644);
        TM_OK(fd);
        struct stat st;
        TM_OK(fstat(fd, &st));
        close(fd);
        for (int j = 0; j < N; j++)
            if (st.st_ino == old[j])
                fail_msg("after the crash, g%d got inode %llu, which f%d had "
                         "(%s before the crash)",
                         i, (unsigned long long)st.st_ino, j, j < N / 2 ? "still live" : "freed");
    }
}

/* Big writes and truncates racing a crash: fsck must find no chunk past a
 * file's end, and every file must read back whole. */
struct churn_arg {
    const struct tmount *m;
    int id;
    atomic_bool *stop;
};

static void *churner(void *arg)
{
    struct churn_arg *a = arg;
    const struct tmount *m = a->m;
    unsigned r = (unsigned)tm_seed() + (unsigned)a->id * 7u;
    char *buf = malloc(MiB);
    tm_fill(buf, MiB, (uint64_t)a->id, 0);
    int fd = open(P("churn%d", a->id), O_RDWR | O_CREAT, 0644);
    while (fd >= 0 && !atomic_load(a->stop)) {
        off_t off = (off_t)((unsigned)rand_r(&r) % (24 * MiB));
        size_t len = 1 + (unsigned)rand_r(&r) % MiB;
        if ((unsigned)rand_r(&r) % 4 == 0) {
            if (ftruncate(fd, off) != 0)
                break;
        } else if (tm_pwrite_all(fd, buf, len, off) != 0) {
            break;
        }
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

static void test_crash_during_churn(void **state)
{
    struct tmount *m = *state;
    unsigned r = (unsigned)tm_seed() ^ 0xc0ffee;
    for (int round = 0; round < 2; round++) {
        tm_watchdog(ROUND_TIMEOUT_S, "a churn crash round");
        atomic_bool stop = false;
        pthread_t t[4];
        struct churn_arg a[4];
        for (int i = 0; i < 4; i++) {
            a[i] = (struct churn_arg){m, i, &stop};
            assert_int_equal(pthread_create(&t[i], NULL, churner, &a[i]), 0);
        }
        tm_sleep_ms(200 + (unsigned)rand_r(&r) % 2000);
        int killed = tm_kill(m);
        atomic_store(&stop, true);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        if (killed != 0)
            fail_msg("the daemon was not running at the kill");
        tm_crash_checked(m, "churn crash");
        for (int i = 0; i < 4; i++) {
            const char *path = P("churn%d", i);
            struct stat st;
            TM_OK(lstat(path, &st));
            int fd = open(path, O_RDONLY);
            TM_OK(fd);
            static char buf[MiB];
            off_t off = 0;
            ssize_t n;
            while ((n = tm_pread_all(fd, buf, sizeof buf, off)) > 0)
                off += n;
            close(fd);
            if (n < 0)
                fail_msg("%s: read at %lld: %s", path, (long long)off, tm_errname((int)-n));
            assert_int_equal(off, st.st_size);
        }
    }
}

int main(void)
{
    tm_init();
    umask(0);
    const struct CMUnitTest tests[] = {
        TM_TEST(test_maildir_crash, setup),      TM_TEST(test_kill_without_fsync, setup),
        TM_TEST(test_large_writes_crash_as_prefix, setup),
        TM_TEST(test_fsynced_large_file_survives_crash, setup),
        TM_TEST(test_fsynced_large_file_survives_crash, setup_writeback),
        TM_TEST(test_times_after_logged_change_survive_kill, setup_writeback),
        TM_TEST(test_fsynced_files_survive_crash_cycles, setup),
        TM_TEST(test_fsynced_files_survive_kills_mid_write, setup),
        TM_TEST(test_orphan_reclaimed, setup),   TM_TEST(test_inode_numbers_after_crash, setup),
        TM_TEST(test_inode_count_across_unmount_and_kill, setup),
        TM_TEST(test_crash_during_churn, setup), TM_TEST(test_orphan_batches_crash, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
