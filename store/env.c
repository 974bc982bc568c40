/* env.c — helpers built only on the env interface; see env.h. */
#include "env.h"

#include "coding.h"
#include "crc32c.h"
#include "filename.h"
#include "lsm_malloc.h"
#include "status.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define COPY_CHUNK (1u << 20)

lsm_status *env_read_point(lsm_rfile *f, uint64_t off, void *dst, size_t n, size_t *got)
{
    if (f->ops->read_point != NULL)
        return f->ops->read_point(f, off, dst, n, got);
    return f->ops->pread(f, off, dst, n, got);
}

bool env_try_map(lsm_rfile *f, uint64_t size)
{
    if (f->ops->map == NULL)
        return false;
    lsm_status *st = f->ops->map(f, size);
    lsm_status_free(st);
    return st == NULL;
}

void env_free_children(char **names, int n)
{
    if (names == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

lsm_status *env_write_file_sync(lsm_env *env, const char *path, const void *data, size_t n)
{
    lsm_wfile *f;
    lsm_status *s = env->new_wfile(env, path, &f);
    if (s != NULL)
        return s;
    s = f->ops->append(f, data, n);
    if (s == NULL)
        s = f->ops->sync(f);
    lsm_status *cs = f->ops->close(f);
    if (s == NULL)
        return cs;
    lsm_status_free(cs);
    return s;
}

lsm_status *env_read_file(lsm_env *env, const char *path, char **data, size_t *n)
{
    enum { CHUNK = 8192 };
    lsm_sfile *f;
    *data = NULL;
    *n = 0;
    lsm_status *s = env->new_sfile(env, path, &f);
    if (s != NULL)
        return s;
    buf b;
    buf_init(&b);
    for (;;) {
        /* One spare byte so the result is always NUL-terminated, which
         * callers reading text files (CURRENT) rely on. */
        if (!buf_reserve(&b, CHUNK + 1)) {
            s = status_new(LSM_NO_MEMORY, "read %s: out of memory", path);
            break;
        }
        size_t got = 0;
        s = f->ops->read(f, b.data + b.len, CHUNK, &got);
        if (s != NULL)
            break;
        b.len += got;
        if (got < CHUNK)
            break;
    }
    f->ops->close(f);
    if (s != NULL) {
        buf_free(&b);
        return s;
    }
    b.data[b.len] = '\0';
    *data = b.data;
    *n = b.len;
    return NULL;
}

lsm_status *env_read_chunks(lsm_env *env, const char *path, uint64_t size,
                            lsm_status *(*fn)(void *ctx, const char *data, size_t n), void *ctx)
{
    lsm_rfile *in = NULL;
    lsm_status *s = env->new_rfile(env, path, &in);
    if (s != NULL)
        return s;
    char *data = lsm_malloc(COPY_CHUNK);
    if (data == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    for (uint64_t off = 0; s == NULL && off < size;) {
        size_t want = size - off < COPY_CHUNK ? (size_t)(size - off) : COPY_CHUNK, got = 0;
        s = in->ops->pread(in, off, data, want, &got);
        if (s == NULL && got != want)
            s = status_new(LSM_CORRUPTION, "%s: %" PRIu64 " bytes, %" PRIu64 " expected", path,
                           off + got, size);
        if (s == NULL)
            s = fn(ctx, data, got);
        off += got;
    }
    free(data);
    in->ops->close(in);
    return s;
}

struct copy {
    lsm_wfile *out;
    uint32_t crc;
    const env_copy_progress *progress;
};

static lsm_status *copy_chunk(void *ctx, const char *data, size_t n)
{
    struct copy *c = ctx;
    lsm_status *s = c->out->ops->append(c->out, data, n);
    c->crc = crc32c_extend(c->crc, data, n);
    if (s == NULL && c->progress != NULL && c->progress->step != NULL)
        c->progress->step(c->progress->ctx, n);
    return s;
}

lsm_status *env_copy_file(lsm_env *from, const char *src, lsm_env *to, const char *dst,
                          uint64_t size, uint32_t *crc, const env_copy_progress *progress)
{
    struct copy c = {.progress = progress};
    lsm_status *s = to->new_wfile(to, dst, &c.out);
    if (s != NULL)
        return s;
    s = env_read_chunks(from, src, size, copy_chunk, &c);
    if (s == NULL)
        s = c.out->ops->sync(c.out);
    status_keep_first(&s, c.out->ops->close(c.out));
    if (crc != NULL)
        *crc = c.crc;
    return s;
}

void env_remove_tree(lsm_env *env, const char *dir)
{
    char **names = NULL;
    int n = 0;
    lsm_status *s = env->get_children(env, dir, &names, &n);
    for (int i = 0; s == NULL && i < n; i++) {
        char *p = path_join(dir, names[i]);
        if (p != NULL) {
            lsm_status_free(env->remove_file(env, p));
            free(p);
        }
    }
    lsm_status_free(s);
    env_free_children(names, n);
    lsm_status_free(env->remove_dir(env, dir));
}

void env_remove_in(lsm_env *env, const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path)
        lsm_status_free(env->remove_file(env, path));
}

lsm_status *env_publish_dir(lsm_env *env, const char *tmp, const char *dest, const char *parent)
{
    lsm_status *s = NULL;
    if (env->file_exists(env, dest))
        s = status_new(LSM_INVALID_ARGUMENT, "%s: it exists", dest);
    if (s == NULL)
        s = env->rename_file(env, tmp, dest);
    if (s != NULL) {
        env_remove_tree(env, tmp);
        return s;
    }
    s = env->sync_dir(env, parent);
    return s ? status_wrap(s, "%s (complete, but its name may not be durable)", dest) : NULL;
}

lsm_status *env_create_dir_durable(lsm_env *env, const char *path)
{
    if (env->file_exists(env, path))
        return env->create_dir(env, path); /* refuses what is not a directory */
    char *parent = parent_dir_name(path);
    lsm_status *s = parent ? env->create_dir(env, path) : status_new(LSM_NO_MEMORY, "out of memory");
    if (s == NULL)
        s = env->sync_dir(env, parent);
    free(parent);
    return s;
}
