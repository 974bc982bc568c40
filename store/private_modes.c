/*
 * private_modes.c — lsm_private_modes: a store made before the env created
 * everything private (or loosened by hand) is found, and tightened.
 * Entries are looked at without following links (a link's own mode means
 * nothing, and its target is not the store's).
 */
#include "env.h"
#include "filename.h"
#include "status.h"

#include <stdio.h>
#include <stdlib.h>

struct walk {
    lsm_env *env;
    bool fix;
    void (*report)(void *ctx, const char *path, unsigned mode);
    void *ctx;
    int loose;
};

/* One entry (at path, said as shown): reported and fixed when group or
 * others have a bit. */
static lsm_status *check_one(struct walk *w, const char *path, const char *shown)
{
    lsm_path_info pi;
    lsm_status *s = w->env->path_info(w->env, path, &pi);
    if (s != NULL || (pi.kind != LSM_PATH_FILE && pi.kind != LSM_PATH_DIR) ||
        (pi.perm & 077) == 0)
        return s;
    w->loose++;
    if (w->report != NULL)
        w->report(w->ctx, shown, pi.perm);
    return w->fix ? w->env->make_private(w->env, path) : NULL;
}

lsm_status *lsm_private_modes(lsm_env *env, const char *dir, bool fix,
                              void (*report)(void *ctx, const char *path, unsigned mode),
                              void *ctx, int *loose)
{
    struct walk w = {env ? env : lsm_env_default(), fix, report, ctx, 0};
    char **names = NULL;
    int n = 0;
    /* "dir/.": the directory a link given as dir leads to */
    char *self = path_join(dir, ".");
    lsm_status *s = self ? check_one(&w, self, dir) : status_no_memory();
    free(self);
    if (s == NULL)
        s = w.env->get_children(w.env, dir, &names, &n);
    for (int i = 0; s == NULL && i < n; i++) {
        char *p = path_join(dir, names[i]);
        s = p ? check_one(&w, p, p) : status_no_memory();
        free(p);
    }
    env_free_children(names, n);
    if (loose != NULL)
        *loose = w.loose;
    return s ? status_wrap(s, "making %s private", dir) : NULL;
}
