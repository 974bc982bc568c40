/* pacing.c — the write rate compaction can sustain; see pacing.h. */
#include "pacing.h"
#include "compaction.h"

#include <assert.h>
#include <string.h>

/* A sample's weight falls as 1 / (1 + age / AGE_SECS): long enough to span
 * several compactions of each level and a few level-0 cycles, short enough
 * to follow the tree as it grows and the CPU as others take it (the
 * figures: docs/decisions.md, "Pacing's constants"). */
#define AGE_SECS 10.0

/* Past BACKLOG_SOFT bytes in levels 0-1 (on average) the rate falls
 * linearly, all of it over BACKLOG_RANGE more, to a floor of MIN_FACTOR.
 * Below the soft limit level 0 peaks at 13-17 files under sustained random
 * writes, short of the slowdown backstop (L0_SLOWDOWN). A
 * lower limit cuts in sooner and makes writes less even (docs/decisions.md,
 * "Pacing's constants"). */
#define BACKLOG_SOFT (96.0 * 1024 * 1024)
#define BACKLOG_RANGE (64.0 * 1024 * 1024)
#define MIN_FACTOR 0.1

void pacer_init(pacer *p, uint64_t min_backlog, uint64_t min_sample)
{
    memset(p, 0, sizeof(*p));
    p->min_backlog = min_backlog;
    p->min_sample = min_sample;
}

/* The weight left to what was measured at `then` when it is `now`. */
static double weight_left(uint64_t then, uint64_t now)
{
    double age = now > then ? (double)(now - then) / 1e6 : 0;
    return 1 / (1 + age / AGE_SECS);
}

void pacer_note_compaction(pacer *p, int level, uint64_t bytes, uint64_t micros, uint64_t now_us)
{
    assert(level >= 0 && level < NUM_LEVELS);
    p->sized[level] |= bytes >= p->min_sample;
    double keep = p->sampled_us[level] ? weight_left(p->sampled_us[level], now_us) : 0;
    p->secs[level] = keep * p->secs[level] + (double)micros / 1e6;
    p->bytes[level] = keep * p->bytes[level] + (double)bytes;
    p->sampled_us[level] = now_us;
}

/* Table bytes per second the compaction threads keep up with: each lane's
 * thread must pass a byte through its levels, the lanes run side by side,
 * so the busier lane sets it; 0 if nothing has been measured yet. */
static double sustainable_rate(const pacer *p)
{
    double lane_secs[COMPACTION_LANES] = {0}, secs_per_byte = 0;
    for (int l = 0; l < NUM_LEVELS; l++)
        if (p->sized[l] && p->bytes[l] > 0)
            lane_secs[compaction_lane(l)] += p->secs[l] / p->bytes[l];
    for (int lane = 0; lane < COMPACTION_LANES; lane++)
        if (lane_secs[lane] > secs_per_byte)
            secs_per_byte = lane_secs[lane];
    return secs_per_byte > 0 ? 1 / secs_per_byte : 0;
}

void pacer_update(pacer *p, uint64_t backlog, bool behind, double table_per_write,
                  uint64_t now_us)
{
    /* The average weighs the backlog that held since the last change. */
    double keep = p->backlog_us ? weight_left(p->backlog_us, now_us) : 0;
    p->backlog_avg = keep * p->backlog_avg + (1 - keep) * (double)p->backlog;
    p->backlog = backlog;
    p->backlog_us = now_us;
    double rate = sustainable_rate(p);
    if (!behind || backlog <= p->min_backlog || rate == 0 || table_per_write <= 0) {
        p->rate = 0;
        return;
    }
    double factor = 1;
    if (p->backlog_avg > BACKLOG_SOFT)
        factor = 1 - (p->backlog_avg - BACKLOG_SOFT) / BACKLOG_RANGE;
    if (factor < MIN_FACTOR)
        factor = MIN_FACTOR;
    p->rate = factor * rate / table_per_write;
}

/* The pacing clock's bounds (pacing.h): how far it may lag real time, how
 * much is charged before it is settled, how far it may run ahead. */
#define PACE_BURST_US 20000.0
#define PACE_SETTLE_US 1000.0
#define PACE_MAX_AHEAD_US 1e6
/* The rate the backstops scale down when the pacer sets none. */
#define BACKSTOP_RATE 64e6

double pacer_write_rate(const pacer *p, int l0_load, double mem_fill)
{
    double f = 0; /* 0: no slowdown, 1: stopped */
    if (l0_load >= L0_SLOWDOWN)
        f = (double)(l0_load - L0_SLOWDOWN + 1) / (double)(L0_STOP - L0_SLOWDOWN + 1);
    if (mem_fill > 0.75 && (mem_fill - 0.75) * 4 > f)
        f = (mem_fill - 0.75) * 4;
    double rate = p->rate;
    if (f > 0) {
        if (f >= 1)
            f = 0.99;
        rate = (rate > 0 ? rate : BACKSTOP_RATE) * (1 - f);
    }
    return rate;
}

void pace_clock_charge(pace_clock *c, lsm_env *env, uint64_t bytes, double rate)
{
    if (rate <= 0) {
        c->next_us = 0;
        return;
    }
    if (c->next_us == 0) /* a paced stretch begins now */
        c->next_us = c->settled_us = (double)env->now_micros(env);
    c->next_us += (double)bytes * 1e6 / rate;
}

uint64_t pace_clock_delay(pace_clock *c, lsm_env *env)
{
    if (c->next_us == 0 || c->next_us < c->settled_us + PACE_SETTLE_US)
        return 0;
    double now = (double)env->now_micros(env);
    if (c->next_us < now - PACE_BURST_US)
        c->next_us = now - PACE_BURST_US;
    if (c->next_us > now + PACE_MAX_AHEAD_US)
        c->next_us = now + PACE_MAX_AHEAD_US;
    c->settled_us = c->next_us;
    return c->next_us > now + PACE_SETTLE_US ? (uint64_t)(c->next_us - now) : 0;
}

bool pace_clock_ahead(const pace_clock *c, lsm_env *env)
{
    return c->next_us > (double)env->now_micros(env);
}
