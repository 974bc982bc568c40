/* fault_sweep.c — one fault swept over an operation's calls; see fault_sweep.h. */
#include "fault_sweep.h"

void tu_fault_run(fault_env *fe, int stream, uint64_t index, enum fault_kind k,
                  lsm_status *(*op)(void *ctx), void *ctx, tu_faulted *out)
{
    fault_env_count_start(fe, NULL, NULL);
    fault_env_arm(fe, stream, index, k);
    out->s = op(ctx);
    out->fired = fault_env_fired(fe, &out->c, out->path, sizeof out->path);
    fault_env_count_stop(fe);
    out->cut = out->fired && k == FAULT_POWER_CUT;
    out->done = out->s == NULL;
    if (!out->fired && stream == FAULT_STREAM_MAIN)
        ASSERT_OK(out->s);
}

void tu_fault_not_claimed(const tu_faulted *f, enum fault_kind k, const char *where,
                          const char *what)
{
    if (!f->cut && f->fired && f->done && strstr(f->path, where) != NULL)
        fail_msg("%s at %s %s: %s reported success", fault_kind_name(k), fault_call_name(f->c),
                 f->path, what);
}

int tu_fault_sweep(const enum fault_kind *kinds, size_t n, uint64_t stride, uint64_t others,
                   bool (*one)(int stream, uint64_t index, enum fault_kind k, void *ctx), void *ctx)
{
    int runs = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t i = 0;
        while (one(FAULT_STREAM_MAIN, i, kinds[k], ctx))
            i += stride, runs++;
        for (uint64_t j = 0; j < others; j++, runs++)
            one(FAULT_STREAM_OTHER, j, kinds[k], ctx);
    }
    return runs;
}
