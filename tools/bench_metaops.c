/*
 * bench_metaops — N metadata operations of one kind, in a directory each of
 * them touches, for tools/bench/metaops.sh to count the FUSE requests of.
 *
 *   bench_metaops DIR OP N prepare|run
 *
 * `prepare` makes DIR/d and DIR/e and what OP needs there (files, dirs);
 * `run` does the N operations (i = 0..N-1) and nothing else. OP is one of
 * the names below; OP+stat also lstats the touched inode and stats its
 * parent directory(ies) after each operation (what `ls -l` or make would
 * ask next). Exits 1 on any failed call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define METAOPS_DIE(...)                                                                           \
    do {                                                                                           \
        fprintf(stderr, "bench_metaops: " __VA_ARGS__);                                            \
        fprintf(stderr, ": %s\n", strerror(errno));                                                \
        exit(1);                                                                                   \
    } while (0)

enum need { NEED_NONE, NEED_FILE, NEED_DIR };

typedef struct metaop {
    const char *name;
    enum need need;                            /* what prepare makes at d/a<i> */
    void (*run)(const char *a, const char *b); /* a: d/a<i>, b: d/b<i> or e/a<i> */
    int cross;                                 /* b is in e/, not d/ */
    int touched_is_b;                          /* the inode to stat afterwards is at b */
} metaop;

static void do_create(const char *a, const char *b)
{
    (void)b;
    int fd = open(a, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0 || close(fd) != 0)
        METAOPS_DIE("create %s", a);
}

static void do_mkdir(const char *a, const char *b)
{
    (void)b;
    if (mkdir(a, 0755) != 0)
        METAOPS_DIE("mkdir %s", a);
}

static void do_rmdir(const char *a, const char *b)
{
    (void)b;
    if (rmdir(a) != 0)
        METAOPS_DIE("rmdir %s", a);
}

static void do_unlink(const char *a, const char *b)
{
    (void)b;
    if (unlink(a) != 0)
        METAOPS_DIE("unlink %s", a);
}

static void do_rename(const char *a, const char *b)
{
    if (rename(a, b) != 0)
        METAOPS_DIE("rename %s", a);
}

static void do_link(const char *a, const char *b)
{
    if (link(a, b) != 0)
        METAOPS_DIE("link %s", a);
}

static void do_symlink(const char *a, const char *b)
{
    (void)b;
    if (symlink("target", a) != 0)
        METAOPS_DIE("symlink %s", a);
}

static void do_chmod(const char *a, const char *b)
{
    (void)b;
    if (chmod(a, 0600) != 0)
        METAOPS_DIE("chmod %s", a);
}

static void do_truncate(const char *a, const char *b)
{
    (void)b;
    if (truncate(a, 1000) != 0)
        METAOPS_DIE("truncate %s", a);
}

/* open, write 100 bytes, close: the stat of "write+stat" is the point. */
static void do_write(const char *a, const char *b)
{
    (void)b;
    char buf[100];
    memset(buf, 'x', sizeof buf);
    int fd = open(a, O_WRONLY);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf || close(fd) != 0)
        METAOPS_DIE("write %s", a);
}

static const metaop ops[] = {
    {"create", NEED_NONE, do_create, 0, 0},         {"mkdir", NEED_NONE, do_mkdir, 0, 0},
    {"symlink", NEED_NONE, do_symlink, 0, 0},       {"link", NEED_FILE, do_link, 0, 1},
    {"unlink", NEED_FILE, do_unlink, 0, 0},         {"rmdir", NEED_DIR, do_rmdir, 0, 0},
    {"rename", NEED_FILE, do_rename, 0, 1},         {"rename-xdir", NEED_FILE, do_rename, 1, 1},
    {"rename-dir-xdir", NEED_DIR, do_rename, 1, 1}, {"chmod", NEED_FILE, do_chmod, 0, 0},
    {"truncate", NEED_FILE, do_truncate, 0, 0},     {"write", NEED_FILE, do_write, 0, 0},
};

static void stat_after(const char *dir, const metaop *op, const char *a, const char *b)
{
    struct stat st;
    char d[4096], e[4096];
    snprintf(d, sizeof d, "%s/d", dir);
    snprintf(e, sizeof e, "%s/e", dir);
    const char *t = op->touched_is_b ? b : a;
    /* Gone after unlink/rmdir: a failure there is the expected ENOENT. */
    if (lstat(t, &st) != 0 && errno != ENOENT)
        METAOPS_DIE("lstat %s", t);
    if (stat(d, &st) != 0 || (op->cross && stat(e, &st) != 0))
        METAOPS_DIE("stat %s", d);
}

static void names(const char *dir, const metaop *op, long i, char *a, char *b, size_t len)
{
    snprintf(a, len, "%s/d/a%ld", dir, i);
    snprintf(b, len, "%s/%c/b%ld", dir, op->cross ? 'e' : 'd', i);
}

static void prepare(const char *dir, const metaop *op, long n)
{
    char p[4096], b[4096];
    snprintf(p, sizeof p, "%s/d", dir);
    if (mkdir(p, 0755) != 0)
        METAOPS_DIE("mkdir %s", p);
    snprintf(p, sizeof p, "%s/e", dir);
    if (mkdir(p, 0755) != 0)
        METAOPS_DIE("mkdir %s", p);
    for (long i = 0; i < n && op->need != NEED_NONE; i++) {
        names(dir, op, i, p, b, sizeof p);
        if (op->need == NEED_FILE)
            do_create(p, b);
        else
            do_mkdir(p, b);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_metaops DIR OP[+stat] N prepare|run\n");
        return 2;
    }
    const char *dir = argv[1];
    char opname[64];
    snprintf(opname, sizeof opname, "%s", argv[2]);
    char *plus = strstr(opname, "+stat");
    if (plus != NULL)
        *plus = '\0';
    long n = atol(argv[3]);
    const metaop *op = NULL;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (strcmp(ops[k].name, opname) == 0)
            op = &ops[k];
    if (op == NULL || n <= 0) {
        fprintf(stderr, "bench_metaops: unknown op %s or bad N\n", argv[2]);
        return 2;
    }
    if (strcmp(argv[4], "prepare") == 0) {
        prepare(dir, op, n);
        return 0;
    }
    char a[4096], b[4096];
    for (long i = 0; i < n; i++) {
        names(dir, op, i, a, b, sizeof a);
        op->run(a, b);
        if (plus != NULL)
            stat_after(dir, op, a, b);
    }
    return 0;
}
