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
 * through each level down to the deepest holding data (which, as the tree
 * grows, passes it on too; a level not compacted yet costs what the
 * nearest measured level above it does), so
 *
 *     sustainable = 1 / (sum of those levels' costs)  table bytes per second
 *
 * is the ingest rate that keeps the compaction thread just busy. It moves
 * as the costs do — slowly, as the tree grows — and not with the sawtooth.
 *
 * How far compaction is behind is its debt: the bytes it must move to bring
 * every level within its target (pacer_debt_bytes). Writers go at
 * sustainable * pacer_debt_factor(debt), the debt averaged over a few
 * seconds: each byte written is held in proportion to the debt, its full
 * cost at compaction's pace once pacer_debt_set_bytes are owed, not at all
 * when nothing is. There is no threshold at which pacing turns on (the old
 * rule: the sustainable rate once a level was due and levels 0-1 held four
 * write buffers, unpaced below): the debt writes leave is paid by every
 * write in proportion, so late writes do not pay alone for what early ones
 * left, and the debt settles where the writes match what compaction does —
 * also where the per-level costs misjudge it (they do: they assume full
 * levels below). The debt is counted in bytes, not in seconds at those
 * costs: a CPU taken by others already slows the sustainable rate, and
 * counting it twice paced by the square of the load.
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

/* The debt factor (pacer_debt_factor): set / debt, so the time a written
 * byte is held is proportional to the debt; never below PACER_MIN_FACTOR
 * (the level-0 load and the memtables decide stops). The set point is
 * PACER_DEBT_SET_BYTES, or a PACER_DEBT_SET_SHARE-th of the tree when that
 * is more (a deep level's excess is many bytes). The figures:
 * docs/decisions.md, "Pacing by compaction debt". */
#define PACER_DEBT_SET_BYTES (64.0 * 1024 * 1024)
#define PACER_DEBT_SET_SHARE 8.0
#define PACER_MIN_FACTOR 0.25

typedef struct pacer {
    /* Per source level: seconds spent and bytes moved out by its recent
     * compactions, older ones weighing less the older they are. */
    double secs[NUM_LEVELS], bytes[NUM_LEVELS];
    uint64_t sampled_us[NUM_LEVELS]; /* when the level's last sample came */
    double debt;      /* compaction owed now, bytes (pacer_debt_bytes) */
    double debt_avg;  /* ... averaged over the last seconds */
    uint64_t debt_us; /* when debt was last set */
    double rate; /* bytes written per second allowed; 0: unpaced */
} pacer;

/* The shape of the tree: each level's table bytes and the bytes it may
 * hold before it is due (level 0's target is not used: every byte there is
 * owed a move; the last level's neither: nothing leaves it). */
typedef struct pacer_tree {
    uint64_t bytes[NUM_LEVELS];
    uint64_t target[NUM_LEVELS];
} pacer_tree;

void pacer_init(pacer *p);
/* A background compaction (a merge or a trivial move) moved `bytes` out of
 * `level` in `micros`. */
void pacer_note_compaction(pacer *p, int level, uint64_t bytes, uint64_t micros, uint64_t now_us);
/* The bytes compaction must move to bring every level of t within its
 * target: every level-0 byte, and what a level holds past its target once
 * the bytes from above arrived, level by level down. */
double pacer_debt_bytes(const pacer_tree *t);
/* The debt at which writes go at the sustainable rate, for tree t. */
double pacer_debt_set_bytes(const pacer_tree *t);
/* The factor on the sustainable rate at `debt` bytes owed against the set
 * point `set`; 0 (unpaced) when nothing is owed. */
double pacer_debt_factor(double debt, double set);
/* The tree changed to t, and a byte written becomes `table_per_write`
 * table bytes. Recomputes p->rate. */
void pacer_update(pacer *p, const pacer_tree *t, double table_per_write, uint64_t now_us);

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
