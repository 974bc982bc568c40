/*
 * fsck.c — fsck.lsmfs: check (and with -y repair) an unmounted lsmfs store.
 *
 *   fsck.lsmfs [-n|-y] [-v] DIR
 *
 * Exit codes as fsck(8): 0 clean, 1 errors corrected, 4 errors left
 * uncorrected, 8 operational error (cannot open the store, not lsmfs, ...),
 * 16 usage error.
 * The checks themselves are fs/fsck.c.
 */
#include "fsck.h"
#include "lsm.h"
#include "lsmfs_version.h"
#include "store_uri.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: fsck.lsmfs [-n|-y] [-v] [-o ceph_conf=PATH,ceph_id=NAME] "
                 "DIR|rados:POOL/NAME\n"
                 "  -n   check only, change nothing (the default)\n"
                 "  -y   repair every problem found (-a and -p are synonyms)\n"
                 "  -v   verbose\n"
                 "  -o   for a store on Ceph: ceph.conf and client name\n");
}

static void say_loose(void *ctx, const char *path, unsigned mode)
{
    printf("%s: mode %04o, open to others (the store is its owner's only: %s)\n", path, mode,
           *(bool *)ctx ? "made private" : "the next mount or -y makes it private");
}

/* The store's own modes (lsm_private_modes); -y's writable open fixes
 * them. The number of loose ones, or -1 (said) if they cannot be read. */
static int loose_modes(const char *dir, bool repair)
{
    int loose = 0;
    lsm_status *s = lsm_private_modes(NULL, dir, false, say_loose, &repair, &loose);
    if (s != NULL) {
        fprintf(stderr, "fsck.lsmfs: %s\n", lsm_status_message(s));
        lsm_status_free(s);
        return -1;
    }
    return loose;
}

int main(int argc, char **argv)
{
    version_help_or_exit(argc, argv, "fsck.lsmfs", usage);
    fsck_options o = {.out = stdout};
    int c;
    bool no = false;
    while ((c = getopt(argc, argv, "nyapfvCo:h")) != -1) {
        switch (c) {
        case 'n':
            no = true;
            break;
        case 'y':
        case 'a':
        case 'p':
            o.repair = true;
            break;
        case 'f':
        case 'C':
            break; /* fsck(8) passes these; we always check fully */
        case 'v':
            o.verbose = true;
            break;
        case 'o': {
            lsm_status *bad = store_uri_options(optarg);
            if (bad != NULL) {
                fprintf(stderr, "fsck.lsmfs: %s\n", lsm_status_message(bad));
                lsm_status_free(bad);
                return FSCK_OPERATIONAL;
            }
            break;
        }
        case 'h':
            usage(stdout);
            return FSCK_CLEAN;
        default:
            usage(stderr);
            return FSCK_USAGE;
        }
    }
    if (optind != argc - 1 || (no && o.repair)) {
        usage(stderr);
        return FSCK_USAGE;
    }
    const char *dir = argv[optind];
    o.progress = isatty(2);
    fsck_result r;
    int loose = store_uri_is_rados(dir) ? 0 : loose_modes(dir, o.repair);
    int rc = loose < 0 ? FSCK_OPERATIONAL : fsck_store(dir, &o, &r);
    store_uri_shutdown();
    if (rc == FSCK_OPERATIONAL)
        return rc;
    if (loose > 0 && rc == FSCK_CLEAN)
        rc = o.repair ? FSCK_FIXED : FSCK_UNFIXED;
    printf("%s: %zu inodes, %zu entries, %d problem%s%s\n", dir, r.inodes, r.entries, r.problems,
           r.problems == 1 ? "" : "s",
           r.problems == 0 ? ""
           : o.repair      ? " (repaired)"
                           : " (not repaired: run with -y)");
    return rc;
}
