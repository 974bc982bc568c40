/*
 * pacing.h — the write rate compaction can sustain.
 *
 * LevelDB lets writers run at full speed until level 0 piles up, then
 * delays each write by 1 ms and finally stops them: fast stretches, then
 * stalls. Pacing by the level-0 file count alone cannot be smooth either,
 * because that count is a sawtooth: it climbs a file per flush and drops by
 * ten when level 0 is compacted.
 *
 * The pacer measures instead what compaction costs: for each level, the
 * seconds (wall clock, so a CPU shared with writers and others counts) the
 * compaction thread spends per byte it moves out of that level, over the
 * last ten seconds or so of that level's compactions. A byte written passes
 * through each of those levels in turn, each lane's thread (compaction.h)
 * through its own levels, the lanes side by side, so
 *
 *     table bytes per second = 1 / max over lanes (sum of its levels' costs)
 *
 * is the ingest rate that keeps the busier compaction thread just busy. It moves
 * as the costs do — slowly, as the tree grows — and not with the sawtooth.
 * Should the backlog (the bytes in levels 0 and 1, which compaction drains
 * first) grow past a soft limit all the same (the estimate ran ahead, or
 * other work took the CPU), the rate is cut in proportion to the excess.
 * While compaction has nothing to do or the backlog is small, nothing is
 * paced.
 *
 * Writers are held to that rate by the pacing clock (pace_clock below).
 *
 * Not thread-safe: the db mutex guards a pacer and its clock (db_impl.h).
 */
#ifndef LSM_PACING_H
#define LSM_PACING_H

#include "env.h"
#include "version_edit.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct pacer {
    /* Per source level: seconds spent and bytes moved out by its recent
     * compactions, older ones weighing less the older they are. */
    double secs[NUM_LEVELS], bytes[NUM_LEVELS];
    uint64_t sampled_us[NUM_LEVELS]; /* when the level's last sample came */
    bool sized[NUM_LEVELS];          /* a sample of min_sample bytes or more came */
    uint64_t backlog;                /* bytes in levels 0-1 now */
    double backlog_avg;              /* ... averaged over the last seconds */
    uint64_t backlog_us;             /* when backlog was last set */
    uint64_t min_backlog;            /* no pacing at or below this */
    uint64_t min_sample;             /* see pacer_init */
    double rate; /* bytes written per second allowed; 0: unpaced */
} pacer;

/* No pacing while levels 0-1 hold at most min_backlog bytes. A level's
 * cost counts once one of its compactions moved min_sample bytes or more:
 * a smaller one's time is mostly fixed costs (a new table, its sync, the
 * MANIFEST), and alone it would make every byte look dear. */
void pacer_init(pacer *p, uint64_t min_backlog, uint64_t min_sample);
/* A background compaction moved `bytes` out of `level` in `micros`. */
void pacer_note_compaction(pacer *p, int level, uint64_t bytes, uint64_t micros, uint64_t now_us);
/* The tree changed: levels 0-1 now hold `backlog` bytes, `behind` says
 * whether any level needs compaction, and a byte written becomes
 * `table_per_write` table bytes. Recomputes p->rate. */
void pacer_update(pacer *p, uint64_t backlog, bool behind, double table_per_write,
                  uint64_t now_us);

/* Level-0 load (version.h, l0_load) at which writers are slowed on top of
 * the pacer's rate (pacer_write_rate), and at which they wait for room
 * (db_write.c). */
#define L0_SLOWDOWN 20
#define L0_STOP 24

/* Bytes per second writers may go: p's rate, scaled down further —
 * linearly to a trickle at the stop point — while level 0's load is
 * L0_SLOWDOWN or more or the memtables fill (mem_fill: their bytes over
 * max_memtable_bytes) past 3/4. Those two are backstops: with the pacer's
 * rate right they are not reached. 0: unpaced. */
double pacer_write_rate(const pacer *p, int l0_load, double mem_fill);

/* The pacing clock. Writers are paced by a rate rather than by delays per
 * write: each group's bytes are charged at the rate to the clock (next_us),
 * and the leader sleeps while the clock runs ahead of real time. A window
 * of writes then takes max(its own time, its bytes / rate): a steady rate
 * gives steady windows, whatever the writer's own speed does. The clock
 * lags real time by at most 20 ms (slow writes earn no credit beyond that)
 * and runs at most 1 s ahead of it (no estimate, however wrong, may hold a
 * write longer). Charges are settled against real time once per 1 ms of
 * them, not at every write: reading the clock per write costs the writer
 * CPU. */
typedef struct pace_clock {
    double next_us;    /* when the next paced write may begin; 0: unpaced */
    double settled_us; /* next_us when last checked against the time */
} pace_clock;

/* Charges `bytes` written at `rate` (pacer_write_rate; 0 stops pacing). */
void pace_clock_charge(pace_clock *c, lsm_env *env, uint64_t bytes, double rate);
/* Settles the clock against real time once enough was charged to it:
 * returns how long the writer sleeps (0: none). */
uint64_t pace_clock_delay(pace_clock *c, lsm_env *env);
/* Whether the clock runs ahead of real time (a write now would be paced). */
bool pace_clock_ahead(const pace_clock *c, lsm_env *env);

#endif
