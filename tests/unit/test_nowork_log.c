/* test_nowork_log.c — nowork-fs's durable-mode log: the ring of zeros it
 * starts as, appends in place and across the ring's end, shared syncs, and
 * the errors of a bad path or size. */
#include "fixture.h"

#include "../../tools/nowork_log.h"

#include <fcntl.h>
#include <unistd.h>

#define RING 8192

typedef struct fixture {
    char path[300];
    nw_log *log;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    tu_setup(state);
    tu_path(f->path, sizeof(f->path), "log");
    assert_int_equal(nw_log_open(f->path, RING, &f->log), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nw_log_close(f->log);
    free(f);
    return tu_teardown(state);
}

/* The whole file as it is now. */
static char *slurp(const fixture *f, size_t *n)
{
    int fd = open(f->path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *bytes = malloc((size_t)st.st_size + 1);
    assert_int_equal(pread(fd, bytes, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    *n = (size_t)st.st_size;
    return bytes;
}

static void assert_bytes(const char *bytes, size_t from, size_t to, char c)
{
    for (size_t i = from; i < to; i++)
        if (bytes[i] != c)
            fail_msg("byte %zu is %d, want %d", i, bytes[i], c);
}

static void test_starts_as_a_ring_of_zeros(void **state)
{
    fixture *f = *state;
    size_t n;
    char *bytes = slurp(f, &n);
    assert_int_equal(n, RING);
    assert_bytes(bytes, 0, RING, 0);
    free(bytes);
}

static void test_appends_follow_each_other(void **state)
{
    fixture *f = *state;
    assert_int_equal(nw_log_append(f->log, "aaaa", 4), 0);
    assert_int_equal(nw_log_append(f->log, "bb", 2), 0);
    assert_int_equal(nw_log_sync(f->log), 0);
    size_t n;
    char *bytes = slurp(f, &n);
    assert_int_equal(n, RING);
    assert_memory_equal(bytes, "aaaabb", 6);
    assert_bytes(bytes, 6, RING, 0);
    free(bytes);
}

static void test_wraps_around_the_ring(void **state)
{
    fixture *f = *state;
    char a[6000], b[4000];
    memset(a, 'a', sizeof(a));
    memset(b, 'b', sizeof(b));
    assert_int_equal(nw_log_append(f->log, a, sizeof(a)), 0);
    assert_int_equal(nw_log_append(f->log, b, sizeof(b)), 0);
    size_t n;
    char *bytes = slurp(f, &n);
    assert_int_equal(n, RING); /* never grows */
    size_t wrapped = sizeof(a) + sizeof(b) - RING;
    assert_bytes(bytes, 0, wrapped, 'b');
    assert_bytes(bytes, wrapped, sizeof(a), 'a');
    assert_bytes(bytes, sizeof(a), RING, 'b');
    free(bytes);
}

static void test_zero_records_overwrite(void **state)
{
    fixture *f = *state;
    char a[RING];
    memset(a, 'a', sizeof(a));
    assert_int_equal(nw_log_append(f->log, a, sizeof(a)), 0);
    assert_int_equal(nw_log_append(f->log, NULL, 5000), 0); /* more than one piece */
    size_t n;
    char *bytes = slurp(f, &n);
    assert_bytes(bytes, 0, 5000, 0);
    assert_bytes(bytes, 5000, RING, 'a');
    free(bytes);
}

static void test_sync_with_nothing_new(void **state)
{
    fixture *f = *state;
    assert_int_equal(nw_log_sync(f->log), 0);
    assert_int_equal(nw_log_append(f->log, "x", 1), 0);
    assert_int_equal(nw_log_sync(f->log), 0);
    assert_int_equal(nw_log_sync(f->log), 0);
}

typedef struct worker {
    nw_log *log;
    int failures;
} worker;

static void *append_and_sync(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 200; i++)
        w->failures += nw_log_append(w->log, "0123456789", 10) != 0 || nw_log_sync(w->log) != 0;
    return NULL;
}

static void test_concurrent_appends_and_syncs(void **state)
{
    fixture *f = *state;
    worker w[4];
    for (int i = 0; i < 4; i++)
        w[i] = (worker){.log = f->log, .failures = 0};
    tu_run_threads(4, append_and_sync, w, sizeof(w[0]));
    for (int i = 0; i < 4; i++)
        assert_int_equal(w[i].failures, 0);
}

static void test_bad_path_and_size(void **state)
{
    (void)state;
    nw_log *l = (nw_log *)1;
    char path[400];
    snprintf(path, sizeof(path), "%s/no/such/dir/log", tu_dir);
    assert_int_equal(nw_log_open(path, RING, &l), ENOENT);
    assert_null(l);
    snprintf(path, sizeof(path), "%s/small", tu_dir);
    assert_int_equal(nw_log_open(path, 100, &l), EINVAL);
    assert_null(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_starts_as_a_ring_of_zeros, setup, teardown),
        cmocka_unit_test_setup_teardown(test_appends_follow_each_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wraps_around_the_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_records_overwrite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_with_nothing_new, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_appends_and_syncs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_path_and_size, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
