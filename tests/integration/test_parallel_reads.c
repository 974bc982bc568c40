/*
 * test_parallel_reads — random reads of one big file by several threads
 * reach the store side by side, not one at a time (issue 30.6: 4 random
 * readers got no more than 1).
 *
 * The daemon runs with the shim tests/shim/slowread.c preloaded: while a
 * trigger file exists, each pread of a table block takes a few milliseconds
 * longer, and the shim records the most that were ever in flight at once.
 * Counting, not timing: a loop that serves each READ in the thread that
 * read it from /dev/fuse has one in flight, two once its stall watch (a
 * request running 10 ms while no other began) handed the turn on, which a
 * loaded machine may cause; served side by side, 4 readers have 3 or 4.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mount.h"

#define TEST_TIMEOUT_S 120
#define FILE_SIZE (16u << 20)
#define READERS 4
#define READS 8
#define PIECE 4096

static int setup(void **state)
{
    return tm_setup(state, TEST_TIMEOUT_S, "a test_parallel_reads test", NULL);
}

typedef struct reader {
    const char *path;
    int id, pass;
    struct tm_errs *errs;
} reader;

/* READS pieces far apart (each in a block of its own), checked; `pass`
 * 0 warms the table cache (a table's first read also reads its index and
 * filter: several slow preads, and then the loop's stall watch would hand
 * the turn on by itself) and drops the pages it read. */
static void *read_pieces(void *arg)
{
    reader *r = arg;
    int fd = open(r->path, O_RDONLY);
    if (fd < 0) {
        tm_errs_add(r->errs, "open %s: %s", r->path, strerror(errno));
        return NULL;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM); /* one page a READ */
    char got[PIECE], want[PIECE];
    for (int i = 0; i < READS; i++) {
        uint64_t k = (uint64_t)(r->id * READS + i);
        off_t off = r->pass == 0 ? (off_t)(k * (FILE_SIZE / (READERS * READS)))
                                 : (off_t)(k * 97 % (FILE_SIZE / PIECE)) * PIECE + PIECE;
        tm_fill(want, PIECE, 1, (uint64_t)off);
        if (tm_pread_all(fd, got, PIECE, off) != PIECE || memcmp(got, want, PIECE) != 0)
            tm_errs_add(r->errs, "reader %d: bad read at %lld", r->id, (long long)off);
    }
    if (r->pass == 0)
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return NULL;
}

static void test_random_readers_reach_the_store_together(void **state)
{
    struct tmount *m = *state;
    if (m->plain)
        skip();
    tm_make_file(P("big"), FILE_SIZE, 1);
    char trigger[PATH_MAX + 16], countf[PATH_MAX + 32];
    snprintf(trigger, sizeof trigger, "%s/slow-reads", m->root);
    snprintf(countf, sizeof countf, "%s.count", trigger);
    /* A new mount: the file's pages and the store's block cache are empty,
     * its chunks in tables. */
    assert_int_equal(tm_unmount(m), 0);
    assert_int_equal(tm_mount_with_shim(m, "libslowread.so", "LSMFS_SLOWREAD", trigger), 0);
    struct tm_errs errs;
    tm_errs_init(&errs);
    reader r[READERS];
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < READERS; i++)
            r[i] = (reader){.path = P("big"), .id = i, .pass = pass, .errs = &errs};
        if (pass == 1)
            tm_touch(trigger);
        tm_run_threads(READERS, read_pieces, r, sizeof r[0]);
    }
    TM_OK(unlink(trigger));
    tm_errs_check(&errs);
    char buf[32] = "";
    assert_true(tm_read_file(countf, buf, sizeof buf - 1) > 0);
    int total = 0, most = 0;
    assert_int_equal(sscanf(buf, "%d %d", &total, &most), 2);
    printf("table reads %d, at most %d at once\n", total, most);
    assert_true(total >= READERS * READS / 2); /* the pieces were not cached */
    if (most < 3)
        fail_msg("at most %d of %d table reads at once: the readers were served one by one",
                 most, READERS);
}

int main(void)
{
    tm_init();
    const struct CMUnitTest tests[] = {
        TM_TEST(test_random_readers_reach_the_store_together, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
