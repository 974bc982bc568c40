/* store_files.c — the store's files by kind (store_files.h). */
#include "store_files.h"

#include "filename.h"
#include "status.h"

#include <stdio.h>
#include <string.h>

/* Where a file named name counts in out. */
static uint64_t *slot(store_files *out, const char *name)
{
    uint64_t number;
    enum file_type type;
    if (!parse_file_name(name, &number, &type))
        return &out->other;
    switch (type) {
    case FILE_TABLE:
        return &out->tables;
    case FILE_LOG:
        return &out->logs;
    case FILE_RESERVE:
        return &out->reserve;
    default:
        return &out->other;
    }
}

lsm_status *store_files_measure(lsm_env *env, const char *dir, store_files *out)
{
    memset(out, 0, sizeof *out);
    char **names;
    int n;
    lsm_status *s = env->get_children(env, dir, &names, &n);
    if (s != NULL)
        return s;
    for (int i = 0; i < n; i++) {
        char path[4096];
        uint64_t size;
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            continue;
        if ((s = env->file_size(env, path, &size)) == NULL)
            *slot(out, names[i]) += size;
        lsm_status_free(s);
    }
    env_free_children(names, n);
    return NULL;
}
