/* table_cache.c — open tables by file number; see table_cache.h. */
#include "table_cache.h"
#include "lsm_malloc.h"

#include "coding.h"
#include "filename.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

struct table_cache {
    lsm_env *env;
    char *dir;
    cache *block_cache; /* not owned */
    cache *tables;      /* number -> sstable *, charge 1 each */
    bool mapped;        /* map each table for its point reads */
};

table_cache *table_cache_new(lsm_env *env, const char *dir, cache *block_cache, int capacity,
                             bool mapped)
{
    table_cache *tc = lsm_calloc(1, sizeof(*tc));
    if (tc == NULL)
        return NULL;
    tc->env = env;
    tc->block_cache = block_cache;
    tc->mapped = mapped;
    tc->dir = lsm_strdup(dir);
    tc->tables = cache_new(capacity > 0 ? (size_t)capacity : 0);
    if (tc->dir == NULL || tc->tables == NULL) {
        table_cache_free(tc);
        return NULL;
    }
    return tc;
}

void table_cache_free(table_cache *tc)
{
    if (tc == NULL)
        return;
    cache_free(tc->tables);
    free(tc->dir);
    free(tc);
}

static void delete_table(const char *key, size_t klen, void *value)
{
    (void)key;
    (void)klen;
    table_free(value);
}

static lsm_status *open_table(table_cache *tc, uint64_t number, uint64_t file_size, sstable **out)
{
    char *path = table_file_name(tc->dir, number);
    if (path == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory (table name)");
    lsm_status *st = NULL;
    if (file_size == 0)
        st = tc->env->file_size(tc->env, path, &file_size);
    lsm_rfile *file = NULL;
    if (st == NULL)
        st = tc->env->new_rfile(tc->env, path, &file);
    if (st == NULL && tc->mapped)
        env_try_map(file, file_size);
    if (st == NULL)
        st = table_open(file, file_size, number, tc->block_cache, out);
    free(path);
    return st;
}

/* A handle pinning table `number`, opened on a miss. */
static lsm_status *find_table(table_cache *tc, uint64_t number, uint64_t file_size,
                              cache_handle **h)
{
    char key[8];
    encode_fixed64(key, number);
    *h = cache_lookup(tc->tables, key, sizeof(key));
    if (*h != NULL)
        return NULL;
    sstable *t;
    lsm_status *st = open_table(tc, number, file_size, &t);
    if (st != NULL)
        return st;
    *h = cache_insert(tc->tables, key, sizeof(key), t, 1, delete_table);
    if (*h == NULL) {
        table_free(t);
        return status_new(LSM_NO_MEMORY, "out of memory (table cache)");
    }
    return NULL;
}

lsm_status *table_cache_get(table_cache *tc, const lsm_read_options *ro, uint64_t number,
                            uint64_t file_size, const char *ikey, size_t n, table_get_fn fn,
                            void *ctx)
{
    cache_handle *h;
    lsm_status *st = find_table(tc, number, file_size, &h);
    if (st != NULL)
        return st;
    st = table_get(cache_value(h), ro, ikey, n, fn, ctx);
    cache_release(tc->tables, h);
    return st;
}

typedef struct pin {
    cache *tables;
    cache_handle *h;
} pin;

static void unpin(void *arg)
{
    pin *p = arg;
    cache_release(p->tables, p->h);
    free(p);
}

iter *table_cache_iter(table_cache *tc, const lsm_read_options *ro, uint64_t number,
                       uint64_t file_size)
{
    cache_handle *h;
    lsm_status *st = find_table(tc, number, file_size, &h);
    if (st != NULL)
        return iter_new_empty(st);
    pin *p = lsm_malloc(sizeof(*p));
    iter *it = p ? table_iter_new(cache_value(h), ro, unpin, p) : NULL;
    if (it == NULL) {
        free(p);
        cache_release(tc->tables, h);
        return iter_new_empty(status_new(LSM_NO_MEMORY, "out of memory (table iterator)"));
    }
    p->tables = tc->tables;
    p->h = h;
    return it;
}

lsm_status *table_cache_approximate_offset(table_cache *tc, uint64_t number, uint64_t file_size,
                                           const char *ikey, size_t n, uint64_t *offset)
{
    cache_handle *h;
    lsm_status *st = find_table(tc, number, file_size, &h);
    if (st != NULL)
        return st;
    *offset = table_approximate_offset(cache_value(h), ikey, n);
    cache_release(tc->tables, h);
    return NULL;
}

void table_cache_evict(table_cache *tc, uint64_t number)
{
    char key[8];
    encode_fixed64(key, number);
    cache_erase(tc->tables, key, sizeof(key));
}
