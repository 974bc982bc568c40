/*
 * lsmctl_stats.h — `lsmctl stats DIR|MNT --json | --prometheus | --watch`:
 * the counters of a live mount (its root's user.lsmfs.metrics attribute,
 * "name value" lines, fs/stats.h) or of a store no one has open (its
 * "lsm.metrics" property), as JSON, as Prometheus text, or as per-second
 * rates.
 */
#ifndef LSMCTL_STATS_H
#define LSMCTL_STATS_H

#include <stdint.h>

/* Reads the metrics of a store directory no one has open: a malloc'd
 * "name value" text, or NULL after saying why. */
typedef char *(*lsmctl_store_metrics_fn)(const char *dir);

/* argv: DIR|MNT and the flags after it (--json, --prometheus, --watch[=SEC],
 * --count=N). Returns the exit status (0, 1 failed, 2 usage). */
int lsmctl_stats_formatted(int argc, char **argv, lsmctl_store_metrics_fn store_metrics);

/* The value of metric name in a "name value" text, 0 when absent. */
uint64_t lsmctl_metric(const char *text, const char *name);

#endif
