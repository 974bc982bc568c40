/* env.c — helpers built only on the env interface; see env.h. */
#include "env.h"

#include "coding.h"
#include "status.h"

#include <stdlib.h>

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
            s = status_new(LSM_IO_ERROR, "read %s: out of memory", path);
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
