/* status.c — heap-allocated error values; see status.h. */
#include "status.h"
#include "lsm_malloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lsm_status {
    int code;
    bool is_static; /* one of the preallocated statuses below: never freed */
    char msg[];
};

#define STATIC_STATUS(name, c, text)                                                               \
    static struct {                                                                                \
        int code;                                                                                  \
        bool is_static;                                                                            \
        char msg[sizeof(text)];                                                                    \
    } name = {c, true, text}

STATIC_STATUS(st_not_found, LSM_NOT_FOUND, "not found");
STATIC_STATUS(st_oom_corruption, LSM_CORRUPTION, "corruption (no memory for details)");
STATIC_STATUS(st_oom_io, LSM_IO_ERROR, "I/O error (no memory for details)");
STATIC_STATUS(st_oom_generic, LSM_NO_MEMORY, "out of memory");

static lsm_status *static_for(int code)
{
    switch (code) {
    case LSM_NOT_FOUND:
        return (lsm_status *)&st_not_found;
    case LSM_CORRUPTION:
        return (lsm_status *)&st_oom_corruption;
    case LSM_IO_ERROR:
        return (lsm_status *)&st_oom_io;
    default:
        return (lsm_status *)&st_oom_generic;
    }
}

static lsm_status *status_vnew(int code, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    lsm_status *s = lsm_malloc(sizeof(*s) + (size_t)n + 1);
    if (s == NULL)
        return static_for(code);
    s->code = code;
    s->is_static = false;
    vsnprintf(s->msg, (size_t)n + 1, fmt, ap);
    return s;
}

lsm_status *status_new(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lsm_status *s = status_vnew(code, fmt, ap);
    va_end(ap);
    return s;
}

lsm_status *status_from_errno(int err, const char *what)
{
    int code = (err == ENOSPC || err == EDQUOT) ? LSM_NO_SPACE
               : err == ENOMEM                   ? LSM_NO_MEMORY
                                                 : LSM_IO_ERROR;
    return status_new(code, "%s: %s", what, strerror(err));
}

lsm_status *status_not_found(void)
{
    return (lsm_status *)&st_not_found;
}

lsm_status *status_no_memory(void)
{
    return (lsm_status *)&st_oom_generic;
}

lsm_status *status_copy(const lsm_status *s)
{
    if (s == NULL)
        return NULL;
    if (s->is_static)
        return (lsm_status *)s;
    return status_new(s->code, "%s", s->msg);
}

void status_keep_first(lsm_status **first, lsm_status *s)
{
    if (*first == NULL)
        *first = s;
    else
        lsm_status_free(s);
}

lsm_status *status_wrap(lsm_status *s, const char *fmt, ...)
{
    if (s == NULL)
        return NULL;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    lsm_status *w = status_new(s->code, "%s: %s", prefix, s->msg);
    if (w->is_static)
        return s; /* keep the original message rather than lose it */
    lsm_status_free(s);
    return w;
}

int lsm_status_code(const lsm_status *s)
{
    return s == NULL ? LSM_OK : s->code;
}

const char *lsm_status_message(const lsm_status *s)
{
    return s == NULL ? "OK" : s->msg;
}

int lsm_status_errno(const lsm_status *s)
{
    switch (lsm_status_code(s)) {
    case LSM_OK:
        return 0;
    case LSM_NOT_FOUND:
        return ENOENT;
    case LSM_INVALID_ARGUMENT:
        return EINVAL;
    case LSM_NOT_SUPPORTED:
        return EOPNOTSUPP;
    case LSM_BUSY:
        return EBUSY;
    case LSM_NO_SPACE:
        return ENOSPC;
    case LSM_READ_ONLY:
        return EROFS;
    case LSM_NO_MEMORY:
        return ENOMEM;
    case LSM_CORRUPTION:
    case LSM_IO_ERROR:
    default:
        return EIO;
    }
}

void lsm_status_free(lsm_status *s)
{
    if (s != NULL && !s->is_static)
        free(s);
}
