/* filename.c — naming and recognising the store's files; see filename.h. */
#include "filename.h"
#include "lsm_malloc.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

char *path_join(const char *dir, const char *name)
{
    return lsm_asprintf("%s/%s", dir, name);
}

void numbered_file_name(enum file_type type, uint64_t number, char out[FILE_NAME_MAX])
{
    const char *fmt = type == FILE_LOG        ? "%06" PRIu64 ".log"
                      : type == FILE_TABLE    ? "%06" PRIu64 ".ldb"
                      : type == FILE_MANIFEST ? "MANIFEST-%06" PRIu64
                                              : "%06" PRIu64 ".dbtmp";
    snprintf(out, FILE_NAME_MAX, fmt, number);
}

static char *make_name(const char *dir, enum file_type type, uint64_t number)
{
    char name[FILE_NAME_MAX];
    numbered_file_name(type, number, name);
    return path_join(dir, name);
}

char *log_file_name(const char *dir, uint64_t number)
{
    return make_name(dir, FILE_LOG, number);
}

char *table_file_name(const char *dir, uint64_t number)
{
    return make_name(dir, FILE_TABLE, number);
}

char *manifest_file_name(const char *dir, uint64_t number)
{
    return make_name(dir, FILE_MANIFEST, number);
}

char *temp_file_name(const char *dir, uint64_t number)
{
    return make_name(dir, FILE_TEMP, number);
}

char *current_file_name(const char *dir)
{
    return path_join(dir, "CURRENT");
}

char *lock_file_name(const char *dir)
{
    return path_join(dir, "LOCK");
}

char *reserve_file_name(const char *dir)
{
    return path_join(dir, "RESERVE");
}

char *reserve_new_file_name(const char *dir)
{
    return path_join(dir, "RESERVE.new");
}

/* Parses a decimal number filling all of [s, end); false if it is not below
 * MAX_FILE_NUMBER. */
static bool parse_number(const char *s, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    if (s == end)
        return false;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return v < MAX_FILE_NUMBER;
}

bool parse_file_name(const char *name, uint64_t *number, enum file_type *type)
{
    *number = 0;
    if (strcmp(name, "CURRENT") == 0) {
        *type = FILE_CURRENT;
        return true;
    }
    if (strcmp(name, "LOCK") == 0) {
        *type = FILE_LOCK;
        return true;
    }
    if (strcmp(name, "RESERVE") == 0 || strcmp(name, "RESERVE.new") == 0) {
        *type = FILE_RESERVE;
        return true;
    }
    if (strcmp(name, "LOG") == 0 || strcmp(name, "LOG.old") == 0) {
        *type = FILE_INFO_LOG;
        return true;
    }
    if (strncmp(name, "MANIFEST-", 9) == 0) {
        *type = FILE_MANIFEST;
        return parse_number(name + 9, name + strlen(name), number);
    }
    const char *dot = strchr(name, '.');
    if (dot == NULL || !parse_number(name, dot, number))
        return false;
    if (strcmp(dot, ".log") == 0)
        *type = FILE_LOG;
    else if (strcmp(dot, ".ldb") == 0)
        *type = FILE_TABLE;
    else if (strcmp(dot, ".dbtmp") == 0)
        *type = FILE_TEMP;
    else
        return false;
    return true;
}

char *parent_dir_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = memrchr(path, '/', n);
    /* "." without a slash, "/" for a name right under the root */
    const char *pdir = slash ? path : ".";
    size_t plen = slash && slash > path ? (size_t)(slash - path) : 1;
    char *parent = lsm_malloc(plen + 1);
    if (parent != NULL) {
        memcpy(parent, pdir, plen);
        parent[plen] = '\0';
    }
    return parent;
}

lsm_status *hidden_sibling_name(const char *dest, char **tmp, char **parent)
{
    *tmp = *parent = NULL;
    size_t n = strlen(dest);
    while (n > 1 && dest[n - 1] == '/')
        n--;
    const char *slash = memrchr(dest, '/', n);
    const char *base = slash ? slash + 1 : dest;
    size_t blen = n - (size_t)(base - dest);
    if (blen == 0 || (blen == 1 && base[0] == '.') || (blen == 2 && memcmp(base, "..", 2) == 0))
        return status_new(LSM_INVALID_ARGUMENT, "%s: not a directory name", dest);
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        return status_from_errno(errno, "getrandom");
    *parent = parent_dir_name(dest);
    if (*parent != NULL) {
        const char *fmt = "%s/.%.*s.tmp-%ld-%016" PRIx64;
        int len = snprintf(NULL, 0, fmt, *parent, (int)blen, base, (long)getpid(), r);
        *tmp = len < 0 ? NULL : lsm_malloc((size_t)len + 1);
        if (*tmp != NULL)
            snprintf(*tmp, (size_t)len + 1, fmt, *parent, (int)blen, base, (long)getpid(), r);
    }
    if (*tmp == NULL || *parent == NULL) {
        free(*tmp);
        free(*parent);
        *tmp = *parent = NULL;
        return status_new(LSM_NO_MEMORY, "out of memory");
    }
    return NULL;
}

