/* sweep_writes.c — the sweeps' writes and their scan; see sweep_writes.h. */
#include "sweep_writes.h"

void sweep_value_of(const sweep_writes *sw, int i, uint32_t vlen, char *v)
{
    uint64_t st = sw->seed ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL);
    for (uint32_t j = 0; j < vlen; j += 8) {
        uint64_t x = tu_xorshift64(&st);
        memcpy(v + j, &x, vlen - j < 8 ? vlen - j : 8);
    }
}

int sweep_key_index(const sweep_writes *sw, const char *k, size_t n)
{
    char want[16];
    for (int i = 0; i < sw->max; i++) {
        sw->key_of(i, want);
        if (strlen(want) == n && memcmp(want, k, n) == 0)
            return i;
    }
    return -1;
}

/* Checks one entry of the scan; the write it is, or -1. */
static int check_entry(const sweep_scan *sc, const char *when, const char *k, size_t kn,
                       const char *v, size_t vn)
{
    bool first = sc->fail[0] == '\0';
    int i = sweep_key_index(sc->writes, k, kn);
    if (i < 0 || i >= sc->nw) {
        if (first)
            snprintf(sc->fail, sc->fail_cap, "%s: key %.*s was never written", when, (int)kn, k);
        return -1;
    }
    uint32_t vlen = *(const uint32_t *)((const char *)sc->vlen + (size_t)i * sc->stride);
    sweep_value_of(sc->writes, i, vlen, sc->scratch);
    if ((vn != vlen || memcmp(v, sc->scratch, vn) != 0) && first)
        snprintf(sc->fail, sc->fail_cap, "%s: write %d has a wrong value", when, i);
    return i;
}

lsm_status *sweep_scan_db(const sweep_scan *sc, lsm_db *db, bool verify, const char *when,
                          bool *present)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    ro.verify_checksums = verify;
    lsm_iter *it = lsm_iter_new(db, &ro);
    if (it == NULL)
        return status_new(LSM_NO_MEMORY, "out of memory (iterator)");
    for (lsm_iter_seek_first(it); lsm_iter_valid(it); lsm_iter_next(it)) {
        size_t kn, vn;
        const char *k = lsm_iter_key(it, &kn);
        const char *v = lsm_iter_value(it, &vn);
        int i = check_entry(sc, when, k, kn, v, vn);
        if (i >= 0)
            present[i] = true;
    }
    lsm_status *s = lsm_iter_status(it);
    lsm_iter_free(it);
    return s;
}
