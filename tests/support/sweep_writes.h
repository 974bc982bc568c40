/*
 * sweep_writes.h — what the two sweeps (test_io_sweep: every env call
 * failed; test_oom_sweep: every allocation failed) share about their
 * workload's writes: write i's key and value depend on i (and the sweep's
 * seed) only, so a store can be checked key by key against what the
 * workload was told.
 */
#ifndef LSMFS_SWEEP_WRITES_H
#define LSMFS_SWEEP_WRITES_H

#include "testutil.h"

typedef struct sweep_writes {
    uint64_t seed;
    void (*key_of)(int i, char *k); /* write i's key, a string of < 16 bytes */
    int max;                        /* writes a run may make */
} sweep_writes;

/* Write i's value: vlen bytes into v. */
void sweep_value_of(const sweep_writes *sw, int i, uint32_t vlen, char *v);
/* The write whose key is k (key_of inverted); -1 if k is no key of ours. */
int sweep_key_index(const sweep_writes *sw, const char *k, size_t n);

/* A scan of a store against the writes made so far. */
typedef struct sweep_scan {
    const sweep_writes *writes;
    int nw;               /* writes made */
    const uint32_t *vlen; /* write 0's value length; write i's is `stride` bytes on */
    size_t stride;
    char *fail; /* the first rule broken goes here, unless it holds one ("") */
    size_t fail_cap;
    char *scratch; /* room for the largest value */
} sweep_scan;

/* The scan of a sweep's run r: a struct with nw, w[i].vlen, fail[] and
 * scratch. */
#define SWEEP_SCAN_OF(writes, r)                                                                   \
    {                                                                                              \
        (writes), (r)->nw, &(r)->w[0].vlen, sizeof(r)->w[0], (r)->fail, sizeof(r)->fail,           \
            (r)->scratch                                                                           \
    }

/* Scans db (checksums verified if verify): every key in it must be one of
 * the writes made, with its value (else sc->fail says so, naming `when`);
 * present[i] is set for each write it holds. Returns the iterator's status
 * (an error ends the scan early). */
lsm_status *sweep_scan_db(const sweep_scan *sc, lsm_db *db, bool verify, const char *when,
                          bool *present);

#endif
