/*
 * log.h — where the daemon's log goes (-o log=syslog|stderr|FILE) and what
 * goes there. Every fs line is written through libfuse's fuse_log(), whose
 * log function this module installs.
 *
 * Default: syslog when there is one (/dev/log), else standard error (a
 * container has no syslog; the detached daemon then keeps the stderr it was
 * started with, unless that is a pipe, which it would hold open for a
 * reader waiting on it: then nowhere, and the mount says so); in the
 * foreground (-f), standard error. Routine lines,
 * which say nothing an admin acts on, are logged at FUSE_LOG_INFO or
 * FUSE_LOG_DEBUG and dropped unless -d.
 */
#ifndef FS_LOG_H
#define FS_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* Picks the log for spec ("syslog", "stderr", a file path; NULL: the
 * default above) and opens a file now (appending, created 0640), so a bad
 * path refuses the mount. Nothing is logged through it before log_start.
 * 0, or an errno with the reason in err. */
int log_open(const char *spec, bool foreground, bool debug, char *err, size_t errlen);

/* Installs the log as libfuse's log function. */
void log_start(void);

/* Whether the log is standard error: the daemon keeps fd 2 when it detaches. */
bool log_to_stderr(void);

/* What the log is, for the mount's first line: "syslog", "stderr" or the path. */
const char *log_where(void);

#endif
