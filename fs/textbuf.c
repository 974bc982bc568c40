/* textbuf.c — text built through lsm_malloc; see textbuf.h. */
#include "textbuf.h"

#include <errno.h>
#include <string.h>

void textbuf_init(textbuf *t)
{
    buf_init(&t->b);
    t->failed = false;
}

static void append(textbuf *t, const char *s, size_t n)
{
    if (!t->failed && !buf_append(&t->b, s, n))
        t->failed = true;
}

void textbuf_puts(textbuf *t, const char *s)
{
    append(t, s, strlen(s));
}

void textbuf_vprintf(textbuf *t, const char *fmt, va_list ap)
{
    char line[256];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    if (n < 0) {
        t->failed = true;
    } else if ((size_t)n < sizeof line) {
        append(t, line, (size_t)n);
    } else if (!t->failed && buf_reserve(&t->b, (size_t)n + 1)) { /* a long one in place */
        vsnprintf(t->b.data + t->b.len, (size_t)n + 1, fmt, again);
        t->b.len += (size_t)n;
    } else {
        t->failed = true;
    }
    va_end(again);
}

void textbuf_printf(textbuf *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    textbuf_vprintf(t, fmt, ap);
    va_end(ap);
}

static ssize_t stream_write(void *cookie, const char *data, size_t n)
{
    textbuf *t = cookie;
    append(t, data, n);
    if (t->failed) {
        errno = ENOMEM;
        return -1;
    }
    return (ssize_t)n;
}

FILE *textbuf_stream(textbuf *t)
{
    FILE *f = fopencookie(t, "w", (cookie_io_functions_t){.write = stream_write});
    if (f != NULL)
        setvbuf(f, NULL, _IONBF, 0); /* no buffer of the C library's own */
    return f;
}

char *textbuf_take(textbuf *t)
{
    append(t, "", 1);
    char *text = t->failed ? NULL : t->b.data;
    if (text == NULL)
        buf_free(&t->b);
    textbuf_init(t);
    return text;
}

void textbuf_free(textbuf *t)
{
    buf_free(&t->b);
    textbuf_init(t);
}
