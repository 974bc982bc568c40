/* pacing.c — the write rate compaction can sustain; see pacing.h. */
#include "pacing.h"

#include <assert.h>
#include <string.h>

/* A cost sample's weight falls as 1 / (1 + age / AGE_SECS): long enough to
 * span several compactions of each level and a few level-0 cycles, short
 * enough to follow the tree as it grows and the CPU as others take it (the
 * figures: docs/decisions.md, "Pacing's constants"). */
#define AGE_SECS 10.0
/* The debt is averaged as cost samples age, over DEBT_AGE_SECS: a flush's
 * step or a compaction's install moves the rate little. */
#define DEBT_AGE_SECS 3.0

void pacer_init(pacer *p)
{
    memset(p, 0, sizeof(*p));
}

/* The weight left to what was measured at `then` when it is `now`, for
 * samples that age over age_secs. */
static double weight_left(uint64_t then, uint64_t now, double age_secs)
{
    double age = now > then ? (double)(now - then) / 1e6 : 0;
    return 1 / (1 + age / age_secs);
}

void pacer_note_compaction(pacer *p, int level, uint64_t bytes, uint64_t micros, uint64_t now_us)
{
    assert(level >= 0 && level < NUM_LEVELS);
    double keep = p->sampled_us[level] ? weight_left(p->sampled_us[level], now_us, AGE_SECS) : 0;
    p->secs[level] = keep * p->secs[level] + (double)micros / 1e6;
    p->bytes[level] = keep * p->bytes[level] + (double)bytes;
    p->sampled_us[level] = now_us;
}

/* Seconds per byte moved out of `level`: as measured, else (not compacted
 * yet) the nearest measured level's above it — a level past its target owes
 * its moves before its first compaction tells what they cost; 0 if no level
 * at or above it was measured. */
static double level_cost(const pacer *p, int level)
{
    for (int l = level; l >= 0; l--)
        if (p->bytes[l] > 0)
            return p->secs[l] / p->bytes[l];
    return 0;
}

/* The deepest level a written byte moves out of: the deepest holding bytes
 * (as the tree grows, it too passes them on), or the one above the last. */
static int deepest_moved(const pacer_tree *t)
{
    int d = NUM_LEVELS - 1;
    while (d > 0 && t->bytes[d] == 0)
        d--;
    return d < NUM_LEVELS - 1 ? d : d - 1;
}

/* Table bytes per second the compaction thread keeps up with (a byte
 * written passes through levels 0 to deepest_moved); 0 if not measured. */
static double sustainable_rate(const pacer *p, const pacer_tree *t)
{
    double secs_per_byte = 0;
    for (int l = 0; l <= deepest_moved(t); l++)
        secs_per_byte += level_cost(p, l);
    return secs_per_byte > 0 ? 1 / secs_per_byte : 0;
}

double pacer_debt_bytes(const pacer_tree *t)
{
    double moving = 0, owed = 0; /* bytes leaving the level above; in all */
    for (int l = 0; l < NUM_LEVELS - 1; l++) {
        double held = (double)t->bytes[l] + moving;
        moving = l == 0 ? held : held > (double)t->target[l] ? held - (double)t->target[l] : 0;
        owed += moving;
    }
    return owed;
}

double pacer_debt_set_bytes(const pacer_tree *t)
{
    double tree = 0;
    for (int l = 0; l < NUM_LEVELS; l++)
        tree += (double)t->bytes[l];
    return tree / PACER_DEBT_SET_SHARE > PACER_DEBT_SET_BYTES ? tree / PACER_DEBT_SET_SHARE
                                                                : PACER_DEBT_SET_BYTES;
}

double pacer_debt_factor(double debt, double set)
{
    if (debt <= 0)
        return 0;
    double f = set / debt;
    return f < PACER_MIN_FACTOR ? PACER_MIN_FACTOR : f;
}

void pacer_update(pacer *p, const pacer_tree *t, double table_per_write, uint64_t now_us)
{
    /* The average weighs the debt that held since the last change. */
    double keep = p->debt_us ? weight_left(p->debt_us, now_us, DEBT_AGE_SECS) : 0;
    p->debt_avg = keep * p->debt_avg + (1 - keep) * p->debt;
    p->debt = pacer_debt_bytes(t);
    p->debt_us = now_us;
    double rate = sustainable_rate(p, t);
    double f = pacer_debt_factor(p->debt_avg, pacer_debt_set_bytes(t));
    p->rate = rate > 0 && table_per_write > 0 ? f * rate / table_per_write : 0;
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
