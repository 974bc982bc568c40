/*
 * log.c — the daemon's log: syslog, standard error or a file (see log.h).
 */
#include "log.h"
#include "fuse_api.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define SYSLOG_SOCKET "/dev/log"

enum log_kind { TO_SYSLOG, TO_STDERR, TO_FILE, TO_NOWHERE };

/* Set once by log_open, before any thread exists; read-only afterwards. */
static enum log_kind kind = TO_STDERR;
static int log_fd = 2;
static bool log_debug;
static const char *where = "stderr";

/* Whether standard error is a pipe: a detached daemon holding it open
 * would keep a reader such as `out=$(lsmfs ...)` waiting till it exits. */
static bool stderr_is_pipe(void)
{
    struct stat st;
    return fstat(2, &st) == 0 && S_ISFIFO(st.st_mode);
}

static bool syslog_present(void)
{
    struct stat st;
    return stat(SYSLOG_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode);
}

int log_open(const char *spec, bool foreground, bool debug, char *err, size_t errlen)
{
    log_debug = debug;
    if (spec == NULL && !foreground && !syslog_present() && stderr_is_pipe()) {
        kind = TO_NOWHERE;
        where = "nowhere (no syslog, and standard error is a pipe: give -o log=FILE)";
        return 0;
    }
    if (spec == NULL)
        spec = !foreground && syslog_present() ? "syslog" : "stderr";
    if (strcmp(spec, "syslog") == 0) {
        kind = TO_SYSLOG;
        where = "syslog";
        return 0;
    }
    if (strcmp(spec, "stderr") == 0) {
        kind = TO_STDERR;
        where = "stderr";
        return 0;
    }
    int fd = open(spec, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "-o log=%s: %s (give syslog, stderr or a file to append to)", spec,
                 strerror(e));
        return e;
    }
    kind = TO_FILE;
    log_fd = fd;
    where = spec;
    return 0;
}

static const char *level_name(enum fuse_log_level level)
{
    static const char *const names[] = {"emerg", "alert", "crit",   "error",
                                        "warning", "notice", "info", "debug"};
    return (unsigned)level < sizeof names / sizeof names[0] ? names[level] : "?";
}

/* One line, one write(2): lines of several threads never interleave. */
static void write_line(enum fuse_log_level level, const char *msg)
{
    char stamp[32], line[2048];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    size_t len = strlen(msg);
    int n = snprintf(line, sizeof line, "%s lsmfs[%d] %s: %s%s", stamp, (int)getpid(),
                     level_name(level), msg, len > 0 && msg[len - 1] == '\n' ? "" : "\n");
    if (n < 0)
        return;
    size_t out = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (write(log_fd, line, out) < 0)
        return; /* nowhere left to say it */
}

static void logger(enum fuse_log_level level, const char *fmt, va_list ap)
{
    if (level >= FUSE_LOG_INFO && !log_debug)
        return;
    char msg[1536];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* The fs's lines begin "lsmfs: "; the log names the daemon already. */
    const char *m = strncmp(msg, "lsmfs: ", 7) == 0 ? msg + 7 : msg;
    if (kind == TO_SYSLOG)
        syslog((int)level, "%s", m);
    else if (kind != TO_NOWHERE)
        write_line(level, m);
}

void log_start(void)
{
    if (kind == TO_SYSLOG)
        openlog("lsmfs", LOG_PID, LOG_DAEMON);
    fuse_set_log_func(logger);
}

bool log_to_stderr(void)
{
    return kind == TO_STDERR;
}

const char *log_where(void)
{
    return where;
}
