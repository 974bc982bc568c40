/*
 * aschild.c — checks in a child with other credentials (aschild.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "aschild.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

_Thread_local char tm_why[512];

/* Drops the capabilities in mask from the effective, permitted and
 * inheritable sets. */
static const char *drop_caps(unsigned long long mask)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return "capget";
    for (int i = 0; i < 2; i++) {
        uint32_t keep = ~(uint32_t)(mask >> (32 * i));
        d[i].effective &= keep;
        d[i].permitted &= keep;
        d[i].inheritable &= keep;
    }
    return syscall(SYS_capset, &h, d) == 0 ? NULL : "capset";
}

/* Takes the credentials *c (a root child keeps its capabilities across the
 * uid change only when it stays uid 0). */
static const char *become(const struct tm_cred *c)
{
    if (setgroups((size_t)c->ngroups, c->groups) || setresgid(c->gid, c->gid, c->gid) ||
        setresuid(c->uid, c->uid, c->uid))
        return "cannot take the test's credentials";
    return c->drop_caps ? drop_caps(c->drop_caps) : NULL;
}

void tm_in_child(const char *who, const char *(*run)(void *ctx), void *ctx)
{
    int pfd[2];
    TM_OK(pipe(pfd));
    pid_t pid = fork();
    TM_OK(pid);
    if (pid == 0) {
        close(pfd[0]);
        const char *err = run(ctx);
        if (err != NULL) {
            ssize_t w = write(pfd[1], err, strlen(err));
            (void)w;
        }
        _exit(err ? 1 : 0);
    }
    close(pfd[1]);
    char msg[512] = "";
    ssize_t n = read(pfd[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = 0;
    close(pfd[0]);
    int status;
    TM_OK(waitpid(pid, &status, 0));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s: %s", who, msg[0] ? msg : "child failed");
}

struct as_ctx {
    const struct tm_cred *c;
    tm_check_fn check;
    const struct tmount *m;
    void *arg;
};

static const char *as_run(void *ctx)
{
    const struct as_ctx *a = ctx;
    const char *err = become(a->c);
    return err != NULL ? err : a->check(a->m, a->arg);
}

void tm_as(const struct tm_cred *c, tm_check_fn check, const struct tmount *m, void *arg)
{
    char who[64];
    snprintf(who, sizeof who, "as uid %d (capabilities dropped %llx)", (int)c->uid, c->drop_caps);
    struct as_ctx a = {c, check, m, arg};
    tm_in_child(who, as_run, &a);
}
