/*
 * textbuf.h — text built in memory, every byte through lsm_malloc.h (over
 * coding.h's buf), so an allocation test can fail each one: the stats
 * xattrs and the live check's report. An append that runs out of memory
 * marks the text failed (sticky): the caller checks once, at textbuf_take.
 */
#ifndef FS_TEXTBUF_H
#define FS_TEXTBUF_H

#include "coding.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct textbuf {
    buf b;
    bool failed; /* an append ran out of memory */
} textbuf;

void textbuf_init(textbuf *t);
/* Appends s / the formatted text (dropped, and t failed, when out of memory). */
void textbuf_puts(textbuf *t, const char *s);
void textbuf_printf(textbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void textbuf_vprintf(textbuf *t, const char *fmt, va_list ap);
/* A write-only, unbuffered stream appending to t, for code that writes to a
 * FILE (fsck's report); NULL when out of memory. fclose it before
 * textbuf_take. Its FILE is the C library's own allocation. */
FILE *textbuf_stream(textbuf *t);
/* The text, NUL-terminated, the caller's to free(); NULL when an append
 * failed or out of memory. t is left empty (textbuf_init). */
char *textbuf_take(textbuf *t);
void textbuf_free(textbuf *t);

#endif
