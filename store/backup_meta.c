/* backup_meta.c — a backup's list of files and the backup directory's
 * names (see backup_meta.h). */
#include "backup_meta.h"

#include "crc32c.h"
#include "filename.h"
#include "grow.h"
#include "lsm_malloc.h"
#include "status.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_HEADER "lsmfs-backup 1\n"

/* env_read_chunks' pieces begin at multiples of 1 MiB: each at a chunk. */
_Static_assert((1u << 20) % BACKUP_CHUNK == 0, "a piece begins at a chunk");

void backup_meta_free(backup_meta *m)
{
    for (size_t i = 0; i < m->nfiles; i++) {
        free(m->files[i].name);
        free(m->files[i].chunk);
    }
    free(m->files);
    memset(m, 0, sizeof(*m));
}

bool backup_meta_add(backup_meta *m, const char *name, bool shared, uint64_t size, uint32_t crc,
                     uint32_t *chunk, size_t nchunk)
{
    backup_file *p = lsm_grow(m->files, &m->cap, m->nfiles + 1, sizeof(*p), 16);
    if (p == NULL) {
        free(chunk);
        return false;
    }
    m->files = p;
    char *copy = lsm_strdup(name);
    if (copy == NULL) {
        free(chunk);
        return false;
    }
    m->files[m->nfiles++] = (backup_file){.name = copy, .shared = shared, .size = size,
                                          .crc = crc, .chunk = chunk, .nchunk = nchunk};
    return true;
}

static bool put_fmt(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool put_fmt(buf *b, const char *fmt, ...)
{
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof line && buf_append(b, line, (size_t)n);
}

static bool encode_file(const backup_file *f, buf *b)
{
    bool ok = put_fmt(b, "file %c ", f->shared ? 'S' : 'P') &&
              buf_append(b, f->name, strlen(f->name)) &&
              put_fmt(b, " %" PRIu64 " %08x", f->size, f->crc);
    for (size_t i = 0; ok && i < f->nchunk; i++)
        ok = put_fmt(b, " %08x", f->chunk[i]);
    return ok && buf_append(b, "\n", 1);
}

bool backup_meta_encode(const backup_meta *m, buf *b)
{
    bool ok = buf_append(b, META_HEADER, strlen(META_HEADER)) &&
              put_fmt(b, "id %" PRIu64 "\nseq %" PRIu64 "\ntime %" PRId64 "\ncopied %" PRIu64 "\n",
                      m->id, m->seq, m->time, m->copied);
    for (size_t i = 0; ok && i < m->nfiles; i++)
        ok = encode_file(&m->files[i], b);
    return ok && put_fmt(b, "end %08x\n", crc32c(b->data, b->len));
}

/* ------------------------------------------------------------ parsing */

/* A number of the list: decimal (base 10) or hex (16), the whole token. */
static bool parse_u64(const char *tok, int base, uint64_t *v)
{
    if (tok == NULL || *tok == '\0' || *tok == '-' || *tok == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(tok, &end, base);
    *v = x;
    return errno == 0 && *end == '\0';
}

static bool parse_crc(const char *tok, uint32_t *crc)
{
    uint64_t v;
    if (!parse_u64(tok, 16, &v) || v > UINT32_MAX || strlen(tok) != 8)
        return false;
    *crc = (uint32_t)v;
    return true;
}

/* What a list's parse found: out of memory is not damage. */
enum parsed { PARSED, DAMAGED, NO_MEMORY };

/* "S|P NAME SIZE CRC CHUNKS..." (after "file "), tokens cut at spaces. */
static enum parsed parse_file_line(char *rest, backup_meta *m)
{
    char *save = NULL;
    char *kind = strtok_r(rest, " ", &save), *name = strtok_r(NULL, " ", &save);
    uint64_t size;
    uint32_t crc;
    if (kind == NULL || name == NULL || strlen(kind) != 1 || (*kind != 'S' && *kind != 'P') ||
        !parse_u64(strtok_r(NULL, " ", &save), 10, &size) ||
        !parse_crc(strtok_r(NULL, " ", &save), &crc) || strchr(name, '/') != NULL ||
        name[0] == '.')
        return DAMAGED;
    uint64_t number;
    enum file_type type;
    bool table = parse_file_name(name, &number, &type) && type == FILE_TABLE;
    if (table != (*kind == 'S'))
        return DAMAGED;
    uint64_t want64 = (size + BACKUP_CHUNK - 1) / BACKUP_CHUNK;
    /* Each chunk CRC takes 9 bytes of the line: no allocation for more. */
    if (save == NULL || want64 > strlen(save) / 9 + 1)
        return DAMAGED;
    size_t want = (size_t)want64;
    uint32_t *chunk = lsm_malloc((want ? want : 1) * sizeof(*chunk));
    if (chunk == NULL)
        return NO_MEMORY;
    size_t n = 0;
    for (char *t; (t = strtok_r(NULL, " ", &save)) != NULL; n++)
        if (n >= want || !parse_crc(t, &chunk[n])) {
            free(chunk);
            return DAMAGED;
        }
    if (n != want) {
        free(chunk);
        return DAMAGED;
    }
    return backup_meta_add(m, name, *kind == 'S', size, crc, chunk, n) ? PARSED : NO_MEMORY;
}

static enum parsed parse_line(char *line, backup_meta *m)
{
    uint64_t v;
    if (strncmp(line, "file ", 5) == 0)
        return parse_file_line(line + 5, m);
    if (strncmp(line, "id ", 3) == 0 && parse_u64(line + 3, 10, &v))
        return m->id = v, PARSED;
    if (strncmp(line, "seq ", 4) == 0 && parse_u64(line + 4, 10, &v))
        return m->seq = v, PARSED;
    if (strncmp(line, "copied ", 7) == 0 && parse_u64(line + 7, 10, &v))
        return m->copied = v, PARSED;
    if (strncmp(line, "time ", 5) == 0 && parse_u64(line + 5, 10, &v) && v <= INT64_MAX)
        return m->time = (int64_t)v, PARSED;
    return DAMAGED;
}

/* The text up to "end CRC\n" is whole (its CRC matches) and nothing follows. */
static bool text_whole(char *data, size_t n, size_t *body)
{
    if (n < strlen(META_HEADER) || memcmp(data, META_HEADER, strlen(META_HEADER)) != 0)
        return false;
    const size_t tail = strlen("end 01234567\n");
    if (n < tail + strlen(META_HEADER) || data[n - 1] != '\n' ||
        memcmp(data + n - tail, "end ", 4) != 0)
        return false;
    data[n - 1] = '\0';
    uint32_t crc;
    if (!parse_crc(data + n - tail + 4, &crc) || crc != crc32c(data, n - tail))
        return false;
    *body = n - tail;
    return true;
}

static enum parsed parse_meta(char *data, size_t n, backup_meta *m)
{
    size_t body;
    if (memchr(data, '\0', n) != NULL || !text_whole(data, n, &body))
        return DAMAGED;
    data[body] = '\0';
    char *save = NULL;
    char *line = strtok_r(data + strlen(META_HEADER), "\n", &save);
    enum parsed p = PARSED;
    for (; p == PARSED && line != NULL; line = strtok_r(NULL, "\n", &save))
        p = parse_line(line, m);
    return p;
}

lsm_status *backup_meta_read(lsm_env *env, const char *dir, uint64_t id, backup_meta *m)
{
    memset(m, 0, sizeof(*m));
    char name[24];
    snprintf(name, sizeof name, "%" PRIu64, id);
    char *path = backup_path(dir, "meta", name);
    if (path == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    char *data = NULL;
    size_t n = 0;
    lsm_status *s = env_read_file(env, path, &data, &n);
    enum parsed p = s == NULL ? parse_meta(data, n, m) : PARSED;
    if (s == NULL && p == PARSED && m->id != id)
        p = DAMAGED;
    if (p != PARSED)
        backup_meta_free(m);
    if (p == NO_MEMORY)
        s = status_new(LSM_NO_MEMORY, "reading %s: out of memory", path);
    else if (p == DAMAGED)
        s = status_new(LSM_CORRUPTION, "%s: damaged (not a whole list of backup %" PRIu64 ")",
                       path, id);
    free(data);
    free(path);
    return s;
}

/* ------------------------------------------------------------- names */

char *backup_path(const char *dir, const char *sub, const char *name)
{
    return name ? lsm_asprintf("%s/%s/%s", dir, sub, name) : path_join(dir, sub);
}

char *backup_file_rel(const backup_file *f, uint64_t id)
{
    uint64_t number = 0;
    enum file_type type;
    if (f->shared && parse_file_name(f->name, &number, &type))
        return lsm_asprintf("shared/%06" PRIu64 "_%08x_%" PRIu64 ".ldb", number, f->crc, f->size);
    return lsm_asprintf("private/%" PRIu64 "/%s", id, f->name);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

lsm_status *backup_ids(lsm_env *env, const char *dir, const char *sub, uint64_t **ids,
                       size_t *n)
{
    *ids = NULL;
    *n = 0;
    char *path = backup_path(dir, sub, NULL);
    if (path == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    char **names = NULL;
    int nn = 0;
    lsm_status *s = NULL;
    if (env->file_exists(env, path))
        s = env->get_children(env, path, &names, &nn);
    free(path);
    if (s == NULL && nn > 0 && (*ids = lsm_malloc((size_t)nn * sizeof(**ids))) == NULL)
        s = status_new(LSM_NO_MEMORY, "out of memory");
    for (int i = 0; s == NULL && i < nn; i++) {
        uint64_t v;
        if (names[i][0] != '0' && parse_u64(names[i], 10, &v))
            (*ids)[(*n)++] = v;
    }
    env_free_children(names, nn);
    if (*ids != NULL)
        qsort(*ids, *n, sizeof(**ids), cmp_u64);
    return s;
}

/* ------------------------------------------------------------ hashing */

struct hash {
    uint32_t crc, *chunk;
    uint64_t off;
};

/* Pieces begin at multiples of 1 MiB, so at a chunk's start. */
static lsm_status *hash_chunk(void *ctx, const char *data, size_t n)
{
    struct hash *h = ctx;
    for (size_t i = 0; i < n; i += BACKUP_CHUNK) {
        size_t k = n - i < BACKUP_CHUNK ? n - i : BACKUP_CHUNK;
        h->chunk[(h->off + i) / BACKUP_CHUNK] = crc32c(data + i, k);
    }
    h->crc = crc32c_extend(h->crc, data, n);
    h->off += n;
    return NULL;
}

lsm_status *backup_hash_file(lsm_env *env, const char *path, uint64_t size, uint32_t *crc,
                             uint32_t **chunk, size_t *nchunk)
{
    *nchunk = (size_t)((size + BACKUP_CHUNK - 1) / BACKUP_CHUNK);
    *chunk = lsm_malloc((*nchunk ? *nchunk : 1) * sizeof(**chunk));
    if (*chunk == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory");
    struct hash h = {.chunk = *chunk};
    lsm_status *s = env_read_chunks(env, path, size, hash_chunk, &h);
    *crc = h.crc;
    if (s != NULL) {
        free(*chunk);
        *chunk = NULL;
    }
    return s;
}
