/*
 * store_uri.h — where a store lives: a local directory (a path, as always),
 * or "rados:POOL/NAME" on a Ceph cluster (NAME may go on below, e.g.
 * "rados:spool/mail1/snapshots/monday"). Every tool takes either.
 *
 * RADOS connections are process-wide: one per pool, made on first use with
 * the options given to store_uri_option (ceph_conf=PATH, ceph_id=NAME,
 * takeover, lease_ms=N) and kept until store_uri_shutdown.
 */
#ifndef LSM_STORE_URI_H
#define LSM_STORE_URI_H

#include "lsm.h"

#include <stdbool.h>

#define STORE_URI_RADOS "rados:"

bool store_uri_is_rados(const char *loc);
/* Takes one -o option if it is a store location's ("ceph_conf=PATH",
 * "ceph_id=NAME", "takeover", "lease_ms=N"): *ours says whether it was one.
 * LSM_NO_MEMORY if it was but could not be kept (the option is then as it
 * was before: never silently dropped). Before any store_uri_resolve. */
lsm_status *store_uri_option(const char *opt, bool *ours);
/* store_uri_option for each of a comma-separated list: NULL when every one
 * was taken; else LSM_INVALID_ARGUMENT "unknown option -o OPT" for the
 * first that is not one, or LSM_NO_MEMORY. */
lsm_status *store_uri_options(const char *list);
/* The env holding loc and loc's path in it (malloc'd): for a local path
 * lsm_env_default() and the path itself; for rados:POOL/NAME the pool's
 * env (connected on first use: a clear one-line error if it cannot be)
 * and "NAME". */
lsm_status *store_uri_resolve(const char *loc, lsm_env **env, char **path);
/* Closes the RADOS connections, after every store on them is closed. */
void store_uri_shutdown(void);

#endif
