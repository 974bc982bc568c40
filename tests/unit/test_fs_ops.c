/* test_fs_ops.c — which requests the request loop hands on because they
 * may wait on the disk (lsmfs_request_may_wait, fs/op_table.c), checked against
 * the code itself: this program disassembles itself (objdump -d, which it
 * requires), follows from each handler in lsmfs_ops() every function an
 * instruction names (calls, tail calls, and addresses taken, so callbacks
 * count as called), and asks which handlers can reach a store write or
 * sync. Every one of those must be reported may-wait under -o sync, and no
 * other; those that reach a sync without fs_durable (the -o sync barrier)
 * must be reported may-wait even on an idle store without -o sync, and no
 * other. */
#include "testutil.h"

#include "ops.h"

#include <linux/fuse.h>

/* ------------------------------------------------------ the call graph */

typedef struct edge {
    int from;
    char *to_name;
    int to;
} edge;

typedef struct graph {
    char **names; /* function symbols, in the order objdump lists them */
    int n, cap;
    int *by_name; /* indexes into names, sorted by name */
    edge *edges;  /* sorted by `from` once built */
    int nedges, capedges;
    int *first; /* edges of function f: first[f] .. first[f+1]-1 */
} graph;

static const graph *sort_graph;

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(sort_graph->names[*(const int *)a], sort_graph->names[*(const int *)b]);
}

static int cmp_edge_from(const void *a, const void *b)
{
    return ((const edge *)a)->from - ((const edge *)b)->from;
}

/* The index of function `name`, or -1. REQUIRES: by_name built. */
static int graph_find(const graph *g, const char *name)
{
    int lo = 0, hi = g->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(name, g->names[g->by_name[mid]]);
        if (c == 0)
            return g->by_name[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

static void add_function(graph *g, const char *name)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 1024;
        g->names = realloc(g->names, g->cap * sizeof *g->names);
        assert_non_null(g->names);
    }
    g->names[g->n++] = strdup(name);
}

static void add_edge(graph *g, const char *to)
{
    if (g->nedges == g->capedges) {
        g->capedges = g->capedges ? 2 * g->capedges : 4096;
        g->edges = realloc(g->edges, g->capedges * sizeof *g->edges);
        assert_non_null(g->edges);
    }
    g->edges[g->nedges++] = (edge){.from = g->n - 1, .to_name = strdup(to), .to = -1};
}

/* One line of `objdump -d --no-show-raw-insn`: a function's header
 * "ADDR <name>:" or an instruction "ADDR:\tMNEMONIC OPERANDS"; an
 * instruction naming a symbol's start (no "+0x" offset) is an edge (symbols
 * that are no function are dropped in graph_build). */
static void parse_line(graph *g, char *line)
{
    line[strcspn(line, "\n")] = '\0';
    size_t len = strlen(line);
    char *lt = strchr(line, '<');
    if (line[0] != ' ' && lt != NULL && len > 2 && strcmp(line + len - 2, ">:") == 0) {
        line[len - 2] = '\0';
        add_function(g, lt + 1);
        return;
    }
    if (strstr(line, ":\t") == NULL || g->n == 0)
        return;
    lt = strrchr(line, '<');
    char *gt = lt ? strchr(lt, '>') : NULL;
    if (gt == NULL)
        return;
    *gt = '\0';
    if (strstr(lt + 1, "+0x") == NULL)
        add_edge(g, lt + 1);
}

static void graph_build(graph *g)
{
    memset(g, 0, sizeof *g);
    char cmd[128]; /* this program's file: /proc/self would be objdump's */
    snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn /proc/%d/exe", (int)getpid());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[4096];
    while (fgets(line, sizeof line, p) != NULL)
        parse_line(g, line);
    if (pclose(p) != 0)
        fail_msg("objdump -d failed: this test needs binutils' objdump");
    assert_true(g->n > 100);

    g->by_name = malloc(g->n * sizeof *g->by_name);
    assert_non_null(g->by_name);
    for (int i = 0; i < g->n; i++)
        g->by_name[i] = i;
    sort_graph = g;
    qsort(g->by_name, g->n, sizeof *g->by_name, cmp_by_name);
    for (int i = 0; i < g->nedges; i++)
        g->edges[i].to = graph_find(g, g->edges[i].to_name);
    qsort(g->edges, g->nedges, sizeof *g->edges, cmp_edge_from);
    g->first = calloc(g->n + 1, sizeof *g->first);
    assert_non_null(g->first);
    for (int i = 0; i < g->nedges; i++)
        g->first[g->edges[i].from + 1]++;
    for (int f = 0; f < g->n; f++)
        g->first[f + 1] += g->first[f];
}

static void graph_free(graph *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->names[i]);
    for (int i = 0; i < g->nedges; i++)
        free(g->edges[i].to_name);
    free(g->names);
    free(g->by_name);
    free(g->edges);
    free(g->first);
}

/* Whether function `from` reaches one of `targets` without passing through
 * `avoid` (NULL: none). On true, `path` holds the chain of calls. */
static bool reaches(const graph *g, const char *from, const char *const *targets, int ntargets,
                    const char *avoid, char *path, size_t cap)
{
    int start = graph_find(g, from);
    if (start < 0)
        fail_msg("no function %s in the disassembly", from);
    int skip = avoid ? graph_find(g, avoid) : -1;
    int *parent = malloc(g->n * sizeof *parent);
    int *queue = malloc(g->n * sizeof *queue);
    assert_non_null(parent);
    assert_non_null(queue);
    for (int i = 0; i < g->n; i++)
        parent[i] = -2;
    parent[start] = -1;
    int head = 0, tail = 0, found = -1;
    queue[tail++] = start;
    while (head < tail && found < 0) {
        int f = queue[head++];
        for (int e = g->first[f]; e < g->first[f + 1] && found < 0; e++) {
            int t = g->edges[e].to;
            if (t < 0 || t == skip || parent[t] != -2)
                continue;
            parent[t] = f;
            queue[tail++] = t;
            for (int k = 0; k < ntargets; k++)
                if (strcmp(g->names[t], targets[k]) == 0)
                    found = t;
        }
    }
    int chain[64], len = 0;
    for (int f = found; f >= 0 && len < 64; f = parent[f])
        chain[len++] = f;
    path[0] = '\0';
    for (size_t used = 0; len > 0; len--) {
        int w = snprintf(path + used, cap - used, "%s%s", g->names[chain[len - 1]],
                         len > 1 ? " -> " : "");
        if (w < 0 || (size_t)w >= cap - used)
            break; /* cut short */
        used += (size_t)w;
    }
    free(parent);
    free(queue);
    return found >= 0;
}

/* --------------------------------------------------- the handlers */

typedef struct handler {
    uint32_t opcode;
    const char *opname;
    const char *fn;  /* the symbol name of the handler */
    bool registered; /* lsmfs_ops() holds this handler for this field */
} handler;

typedef void (*any_fn)(void);

/* Each field of struct fuse_lowlevel_ops lsmfs sets, the opcodes libfuse
 * dispatches to it, and lsmfs's handler for it. */
#define H(opc, field, f)                                                                           \
    {                                                                                              \
        opc, #opc, #f, (any_fn)ops->field == (any_fn)f                                             \
    }
static int lsmfs_handlers(handler *out)
{
    const struct fuse_lowlevel_ops *ops = lsmfs_ops();
    const handler h[] = {
        /* op_init is op_table.c's own (static) */
        {FUSE_INIT, "FUSE_INIT", "op_init", ops->init != NULL},
        H(FUSE_LOOKUP, lookup, op_lookup),
        H(FUSE_FORGET, forget, op_forget),
        H(FUSE_BATCH_FORGET, forget_multi, op_forget_multi),
        H(FUSE_GETATTR, getattr, op_getattr),
        H(FUSE_SETATTR, setattr, op_setattr),
        H(FUSE_READLINK, readlink, op_readlink),
        H(FUSE_MKNOD, mknod, op_mknod),
        H(FUSE_MKDIR, mkdir, op_mkdir),
        H(FUSE_UNLINK, unlink, op_unlink),
        H(FUSE_RMDIR, rmdir, op_rmdir),
        H(FUSE_SYMLINK, symlink, op_symlink),
        H(FUSE_RENAME, rename, op_rename),
        H(FUSE_RENAME2, rename, op_rename),
        H(FUSE_LINK, link, op_link),
        H(FUSE_OPEN, open, op_open),
        H(FUSE_READ, read, op_read),
        H(FUSE_WRITE, write, op_write),
        H(FUSE_FLUSH, flush, op_flush),
        H(FUSE_RELEASE, release, op_release),
        H(FUSE_FSYNC, fsync, op_fsync),
        H(FUSE_OPENDIR, opendir, op_opendir),
        H(FUSE_READDIR, readdir, op_readdir),
        H(FUSE_READDIRPLUS, readdirplus, op_readdirplus),
        H(FUSE_RELEASEDIR, releasedir, op_releasedir),
        H(FUSE_FSYNCDIR, fsyncdir, op_fsyncdir),
        H(FUSE_STATFS, statfs, op_statfs),
        H(FUSE_SETXATTR, setxattr, op_setxattr),
        H(FUSE_GETXATTR, getxattr, op_getxattr),
        H(FUSE_LISTXATTR, listxattr, op_listxattr),
        H(FUSE_REMOVEXATTR, removexattr, op_removexattr),
        H(FUSE_CREATE, create, op_create),
        H(FUSE_FALLOCATE, fallocate, op_fallocate),
        H(FUSE_LSEEK, lseek, op_lseek),
        H(FUSE_IOCTL, ioctl, op_ioctl),
    };
    memcpy(out, h, sizeof h);
    return (int)(sizeof h / sizeof h[0]);
}
#undef H

/* Every handler lsmfs registers is one the list above names: counting the
 * set fields of the table (all of them function pointers) finds a new one. */
static void test_every_handler_listed(void **state)
{
    (void)state;
    handler h[64];
    int n = lsmfs_handlers(h);
    int listed = 0;
    for (int i = 0; i < n; i++) {
        if (!h[i].registered)
            fail_msg("%s: lsmfs_ops() does not hold %s", h[i].opname, h[i].fn);
        listed += h[i].opcode != FUSE_RENAME2; /* one field, two opcodes */
    }
    const struct fuse_lowlevel_ops *ops = lsmfs_ops();
    int set = 0;
    for (size_t off = 0; off + sizeof(any_fn) <= sizeof *ops; off += sizeof(any_fn)) {
        any_fn f;
        memcpy(&f, (const char *)ops + off, sizeof f);
        set += f != NULL;
    }
    assert_int_equal(set, listed);
}

/* A checkpoint flushes the memtable and syncs every file it makes. */
static const char *const store_calls[] = {"lsm_write", "lsm_write_seq", "lsm_sync",
                                          "lsm_sync_upto", "lsm_checkpoint_ex"};
static const char *const store_syncs[] = {"lsm_sync", "lsm_sync_upto", "lsm_checkpoint_ex"};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static bool may_wait(lsmfs *fs, uint32_t opcode)
{
    ops_state st = {.fs = fs};
    struct fuse_in_header in = {.len = sizeof in, .opcode = opcode};
    return lsmfs_request_may_wait(&st, &in, sizeof in);
}

/* Checks may_wait(fs, op) for every handler against whether it reaches one
 * of `targets` (not through `avoid`). */
static void check_against_code(lsmfs *fs, const char *const *targets, int ntargets,
                               const char *avoid)
{
    graph g;
    graph_build(&g);
    handler h[64];
    int n = lsmfs_handlers(h);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        bool reach = reaches(&g, h[i].fn, targets, ntargets, avoid, path, sizeof path);
        bool said = may_wait(fs, h[i].opcode);
        if (reach && !said)
            print_error("%s can wait on the disk (%s) but is not reported so\n", h[i].opname, path);
        if (!reach && said)
            print_error("%s is reported may-wait but %s reaches no store call\n", h[i].opname,
                        h[i].fn);
        wrong += reach != said;
    }
    graph_free(&g);
    assert_int_equal(wrong, 0);
}

/* Under -o sync every change waits for a sync: every handler that can
 * write or sync the store is handed on, and no other. */
static void test_sync_all_hands_on_every_store_call(void **state)
{
    (void)state;
    lsmfs fs = {.cfg = {.sync_all = true}};
    check_against_code(&fs, store_calls, NELEM(store_calls), NULL);
}

/* On an idle store without -o sync only the requests that sync whatever
 * the mount options (fsync, fsyncdir, a snapshot: not through fs_durable) are. */
static void test_idle_store_hands_on_syncs_only(void **state)
{
    (void)state;
    char dir[256];
    tu_mkdtemp(dir, sizeof dir, "fsops");
    lsmfs fs = {.db = tu_open_db(dir, NULL, 0)};
    assert_false(lsm_write_may_wait(fs.db));
    check_against_code(&fs, store_syncs, NELEM(store_syncs), "fs_durable");
    ASSERT_OK(lsm_close(fs.db));
    tu_rmtree(dir);
}

/* The bug this table had: a FORGET of an unlinked file's last reference
 * commits its deletion (op_forget_refs -> op_free_orphan -> fs_commit when
 * the reclaimer cannot take it), so it may wait like any other commit. */
static void test_forget_may_wait(void **state)
{
    (void)state;
    lsmfs fs = {.cfg = {.sync_all = true}};
    assert_true(may_wait(&fs, FUSE_FORGET));
    assert_true(may_wait(&fs, FUSE_BATCH_FORGET));
    assert_false(may_wait(&fs, FUSE_GETATTR));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_handler_listed),
        cmocka_unit_test(test_forget_may_wait),
        cmocka_unit_test(test_sync_all_hands_on_every_store_call),
        cmocka_unit_test(test_idle_store_hands_on_syncs_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
