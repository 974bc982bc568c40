/*
 * bench_seqio — sequential write then read of one large file, in large
 * blocks of incompressible data. The write phase ends with fsync (its time
 * counts); the read phase verifies every byte. Run the phases as separate
 * processes to drop the page cache between them.
 *
 *   bench_seqio FILE [-s size] [-b block] [-p write|read|both] [-r]
 *
 *   -r  remove FILE after reading.
 *
 * Prints "RESULT seqio write_mb_s=... " / "read_mb_s=..." lines (MiB/s).
 */
#include "bench_common.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <unistd.h>

typedef struct config {
    const char *file;
    uint64_t size;
    size_t block;
    bool do_write, do_read, remove_after;
} config;

/* Block b's contents depend only on b, so a reader can regenerate them. */
static void block_data(char *buf, size_t len, uint64_t b)
{
    bench_fill(buf, len, b * 0x100000001b3ull + 17);
}

static double write_phase(const config *c, char *buf)
{
    int fd = open(c->file, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0)
        BENCH_DIE("create %s: %s", c->file, strerror(errno));
    uint64_t t0 = bench_now_ns();
    for (uint64_t off = 0, b = 0; off < c->size; off += c->block, b++) {
        size_t len = c->size - off < c->block ? (size_t)(c->size - off) : c->block;
        block_data(buf, len, b);
        for (size_t done = 0; done < len;) {
            ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(off + done));
            if (n <= 0)
                BENCH_DIE("write %s: %s", c->file, strerror(n < 0 ? errno : EIO));
            done += (size_t)n;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0)
        BENCH_DIE("fsync/close %s: %s", c->file, strerror(errno));
    return (double)(bench_now_ns() - t0) / 1e9;
}

static double read_phase(const config *c, char *buf, char *want)
{
    int fd = open(c->file, O_RDONLY);
    if (fd < 0)
        BENCH_DIE("open %s: %s", c->file, strerror(errno));
    uint64_t t0 = bench_now_ns();
    uint64_t off = 0;
    for (uint64_t b = 0;; b++) {
        size_t have = 0;
        ssize_t n = 1;
        while (have < c->block && (n = read(fd, buf + have, c->block - have)) > 0)
            have += (size_t)n;
        if (n < 0)
            BENCH_DIE("read %s: %s", c->file, strerror(errno));
        if (have == 0)
            break;
        block_data(want, have, b);
        if (memcmp(buf, want, have) != 0)
            BENCH_DIE("read %s: content differs in block %" PRIu64, c->file, b);
        off += have;
    }
    close(fd);
    if (off != c->size)
        BENCH_DIE("read %s: %" PRIu64 " bytes, expected %" PRIu64, c->file, off, c->size);
    return (double)(bench_now_ns() - t0) / 1e9;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_seqio FILE [-s size] [-b block] [-p write|read|both] [-r]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    config c = {.size = 1ull << 30, .block = 1 << 20, .do_write = true, .do_read = true};
    int opt;
    while ((opt = getopt(argc, argv, "s:b:p:r")) != -1) {
        switch (opt) {
        case 's':
            c.size = bench_parse_size(optarg);
            break;
        case 'b':
            c.block = (size_t)bench_parse_size(optarg);
            break;
        case 'p':
            c.do_write = strcmp(optarg, "read") != 0;
            c.do_read = strcmp(optarg, "write") != 0;
            break;
        case 'r':
            c.remove_after = true;
            break;
        default:
            usage();
        }
    }
    if (optind != argc - 1 || c.size == 0 || c.block == 0)
        usage();
    c.file = argv[optind];
    char *buf = malloc(c.block), *want = malloc(c.block);
    if (buf == NULL || want == NULL)
        BENCH_DIE("out of memory");
    double mib = (double)c.size / 1048576.0;
    if (c.do_write) {
        double s = write_phase(&c, buf);
        printf("seqio: wrote %.0f MiB in %.3f s: %.1f MiB/s (fsync included)\n", mib, s, mib / s);
        printf("RESULT seqio write_mb_s=%.1f\n", mib / s);
    }
    if (c.do_read) {
        double s = read_phase(&c, buf, want);
        printf("seqio: read %.0f MiB in %.3f s: %.1f MiB/s (verified)\n", mib, s, mib / s);
        printf("RESULT seqio read_mb_s=%.1f\n", mib / s);
    }
    if (c.remove_after && unlink(c.file) != 0)
        BENCH_DIE("unlink %s: %s", c.file, strerror(errno));
    free(buf);
    free(want);
    return 0;
}
